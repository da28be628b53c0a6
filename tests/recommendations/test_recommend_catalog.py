"""The issue's done-when over the real catalog in the database (``loadcatalog``), through ``views_data``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from budgets.engine.schema import Workload
from catalog.models import Configuration
from catalog.units import version_key
from catalog.usable import UsableBasis
from recommendations.recommend import recommend
from recommendations.views_data import configuration_views
from tests.recommendations.catalog_views import llama70b

pytestmark = pytest.mark.django_db
DATA = Path(__file__).parents[1] / "engine" / "data" / "hf_configs"


def _by_slug(workload) -> dict:
    return {e.configuration["slug"]: e for e in recommend(workload, configuration_views())}


def test_llama_70b_on_vllm_fits_four_h100s_and_two_h200s_with_tensor_parallel(catalog) -> None:
    entries = _by_slug(llama70b())
    for slug in ("h100-sxm-80gb-x1-r550", "h200-nvl-141gb-x1-r570"):
        assert entries[slug].verdict == "does_not_fit", slug
        assert any(r.rule == "vllm" for r in entries[slug].reasons), slug
    for slug, tensor in (("h100-sxm-80gb-x4-r550", 4), ("h200-nvl-141gb-x2-r570", 2)):
        entry = entries[slug]
        assert entry.verdict == "fits", slug
        assert (entry.plan.tensor, entry.plan.pipeline) == (tensor, 1), slug
        assert entry.headroom_bytes >= entry.margin.bytes
    h100 = entries["h100-sxm-80gb-x4-r550"]
    assert (h100.usable_bytes, h100.usable_basis) == (85_029_615_043, UsableBasis.OBSERVED)  # 79.19 GiB, as CUDA says
    assert entries["h200-nvl-141gb-x2-r570"].usable_basis == UsableBasis.DERIVED
    assert h100.configuration["id"] == Configuration.objects.get(slug="h100-sxm-80gb-x4-r550").pk


def test_fp8_weights_run_weight_only_on_a100s_under_vllm_but_not_under_transformers(catalog) -> None:
    """vLLM dequantizes FP8 weights in its Marlin kernels on Ampere (is_fp8_marlin_supported: CC ≥ 8.0); an FP8
    compute dtype, or another engine, still needs FP8 tensor cores."""
    vllm = _by_slug(llama70b(precision={"weights": "fp8"}))
    a100s = [e for slug, e in vllm.items() if slug.startswith("a100-")]
    assert a100s
    for entry in a100s:
        assert not any(r.rule == "precision" for r in entry.reasons)
    for workload in (
        llama70b(precision={"weights": "fp8", "compute": "fp8"}),
        llama70b(precision={"weights": "fp8"}, inference={"engine": "transformers", "kv_cache_layout": "dynamic"}),
    ):
        for slug, entry in _by_slug(workload).items():
            if slug.startswith("a100-"):
                assert entry.verdict == "unsupported"
                assert any(r.rule == "precision" and "fp8" in r.message for r in entry.reasons)


def test_cuda_12_8_marks_every_host_with_a_driver_older_than_570_26_unsupported(catalog) -> None:
    entries = _by_slug(llama70b(runtime={"cuda_version": "12.8"}))
    nvidia = Configuration.objects.filter(accelerator__architecture__vendor__slug="nvidia")
    drivers = dict(nvidia.values_list("slug", "driver_version"))
    old = {slug for slug, driver in drivers.items() if version_key(driver) < version_key("570.26")}
    assert old and old != set(drivers)
    for slug in drivers:
        driver_reasons = [r for r in entries[slug].reasons if r.rule == "driver"]
        if slug in old:
            assert entries[slug].verdict == "unsupported", slug
            assert driver_reasons and "570.26" in driver_reasons[0].action, slug
        else:
            assert not driver_reasons, slug
    assert entries["h200-sxm-141gb-x8-r570"].verdict == "fits"


def test_the_views_take_a_fixed_number_of_queries(catalog) -> None:
    with CaptureQueriesContext(connection) as few:
        configuration_views(Configuration.objects.filter(slug__startswith="h100-"))
    with CaptureQueriesContext(connection) as many:
        views = configuration_views()
    assert len(views) == Configuration.objects.count()
    assert len(many) == len(few)


def test_gpt_oss_120b_fits_one_h100_at_a_published_context(catalog) -> None:
    """gpt-oss-120b (MXFP4) at max_model_len 98,304 with the published run's settings (util 0.96, max_num_seqs 6;
    blog.huikang.dev 2025-12-28): one H100 80GB serves it; vLLM's default max_num_seqs (1,024 sampler rows over a
    201,088 vocabulary) leaves too little for one request."""
    config = json.loads((DATA / "gpt-oss-120b.json").read_text())["config"]
    inference = {"max_input_tokens": 90_000, "max_output_tokens": 8_304, "max_model_len": 98_304}
    published = Workload.model_validate(
        {
            "task": "inference",
            "model": {"hf_config": config},
            "inference": {**inference, "gpu_memory_utilization": 0.96, "max_num_seqs": 6},
        }
    )
    entry = _by_slug(published)["h100-sxm-80gb-x1-r550"]
    assert entry.verdict == "fits", [r.message for r in entry.reasons]
    default = Workload.model_validate({"task": "inference", "model": {"hf_config": config}, "inference": inference})
    assert _by_slug(default)["h100-sxm-80gb-x1-r550"].verdict == "does_not_fit"
