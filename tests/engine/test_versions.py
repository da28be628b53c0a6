"""Releases other than the profiled ones (issue 17 item 4): a transformers release read gets its own generate rules,
one between two releases read the older one's with a range spanning both, one outside the releases read a refusal
naming runtime.engine_version; vLLM likewise (budgets/engine/profiles/transformers.py, budgets/engine/vllm.py)."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from budgets.engine import Workload, estimate
from budgets.engine import vllm as vllm_mod
from budgets.engine.components import kv_cache as kv
from budgets.engine.profiles.transformers import version_rules

GIB = 2**30
H100_T = int(79.18 * GIB)


def _generate(
    version: str | None, preset: str = "llama-2-7b", b: int = 64, attention: str = "eager", **extra: dict
) -> Workload:
    runtime = {"attention": attention, "cuda_version": "11.8"} | ({"engine_version": version} if version else {})
    precision = extra.pop("precision", {"weights": "fp16", "compute": "fp16"})
    inference = {
        "engine": "transformers",
        "kv_cache_layout": "dynamic",
        "max_input_tokens": 256,
        "max_output_tokens": 512,
        "concurrent_sessions": b,
    } | extra.pop("inference", {})
    return Workload.model_validate(
        {"task": "inference", "model": {"preset": preset}, "precision": precision, "inference": inference}
        | {"runtime": runtime}
    )


def _allocated(w: Workload) -> dict[str, int]:
    view: dict[str, int] = estimate(w).as_contract()["per_device"]["views"]["framework_allocated"]
    return view


def test_a_435_range_contains_the_published_peak_and_the_5_profile_did_not() -> None:
    """optimum-benchmark f75d9f9, examples/running-llamas/artifacts/Llama-7b/full_report.csv: Llama-2-7b fp16,
    transformers 4.35.2, batch 64 × 256 + 512 tokens, generate.max_memory_allocated 65,112 MB (1e6 B)."""
    measured = 65_112 * 10**6
    old = _allocated(_generate("4.35.2"))
    assert old["low"] <= measured <= old["high"]
    assert abs(old["bytes"] - measured) / measured < 0.01
    assert _allocated(_generate("5.24.0"))["high"] < measured  # the profile every release got before


def test_435_holds_the_previous_steps_whole_cache_at_the_last_decode_step() -> None:
    """generate keeps the legacy tuple of L − 2 positions while the model cats the one of L − 1 (4.35.2
    models/llama/modeling_llama.py:382-385, generation/utils.py:2521, 2567)."""
    w = _generate("4.35.2")
    per_token = kv.kv_bytes_per_token(w.spec, 1, 0, w.spec.num_layers, "fp16")
    longest = 256 + 512
    assert estimate(w).per_device.component("kv_cache").bytes == 64 * per_token * ((longest - 1) + (longest - 2))


def test_435_budgets_every_prompt_positions_logits_and_the_rotary_tables() -> None:
    """A long prompt's prefill (SDPA: no score matrix above the head): 4.35 computes fp16 logits for every position
    and upcasts them (modeling_llama.py:1052-1053), kept through the first decode forward; every layer holds cos/sin
    tables of 4,096 positions (:125-135)."""
    long_prompt = {"max_input_tokens": 8000, "max_output_tokens": 16}
    old, new = (estimate(_generate(v, b=1, attention="sdpa", inference=long_prompt)) for v in ("4.35.2", "5.24.0"))
    logits = 8000 * 32_000 * (2 + 4)
    assert "first decode" in {p.name for p in old.per_device.phases}
    assert new.per_device.component("activations").bytes < logits < old.per_device.component("activations").bytes
    tables = 32 * 2 * 4096 * 128 * 2
    assert old.per_device.component("workspace").bytes - new.per_device.component("workspace").bytes == tables


def test_435_gptq_budgets_autogptqs_exllama_buffers() -> None:
    """auto-gptq v0.5.1: exllama keeps temp_dq of the largest matrix (11,008 × 4,096 fp16) and a one-row temp_state
    without act-order (modeling/_utils.py:306-335); exllama v2's scratch, the high end, adds 11,008 × 2048 × 8 × 4 B
    (nn_modules/qlinear/qlinear_exllamav2.py:160-167)."""
    gptq = {"weights": "int4", "compute": "fp16"}
    old, new = (
        estimate(_generate(v, b=1, precision=gptq)).per_device.component("workspace") for v in ("4.35.2", "5.24")
    )
    tables = 32 * 2 * 4096 * 128 * 2
    assert old.bytes - new.bytes == tables + 11_008 * 4096 * 2 + 11_008 * 2
    v2 = 11_008 * 4096 * 2 + 128 + 11_008 * 2048 * 8 * 4 + 128
    assert old.high - new.high == tables + v2


def test_the_assumptions_name_the_profile_and_the_rules_read() -> None:
    read = estimate(_generate("4.35.0")).assumptions
    assert any(a.startswith("implementation profile transformers 4.35 for transformers 4.35.0") for a in read)
    line = next(a for a in read if a.startswith("transformers 4.35.0: generate's rules as read from 4.35.2"))
    assert "legacy tuple cache" in line and "modeling_llama.py:382-385" in line
    between = estimate(_generate("4.38.2")).assumptions
    assert any("4.38.2 was not read: expected by 4.36.0's rules, the range widened to 4.41.2's" in a for a in between)


def test_a_release_between_two_reads_spans_both() -> None:
    """4.50 lies between 4.46.0 and 5.0.0: expected by 4.46's rules; its ends reach the least and the most of both."""
    mid, older, newer = (_allocated(_generate(v, b=8)) for v in ("4.50.0", "4.46.0", "5.0.0"))
    assert mid["bytes"] == older["bytes"]
    assert mid["low"] <= min(older["low"], newer["low"]) and mid["high"] >= max(older["high"], newer["high"])


def test_a_model_without_a_cache_object_keeps_the_legacy_tuple() -> None:
    """From 4.42 generate keeps one DynamicCache for the models that support it (4.46.0 generation/utils.py:1767);
    gpt2 did not in 4.46.0 (profiles/transformers_releases.json)."""
    assert not version_rules("4.46.0", "llama")[1].previous_cache
    assert version_rules("4.46.0", "gpt2")[1].previous_cache
    assert not version_rules("5.0.0", "gpt2")[1].previous_cache


@pytest.mark.parametrize(
    ("version", "layout", "why"),
    [
        ("6.0.0", "dynamic", "newer than the newest release read"),
        ("5.25.0", "dynamic", "newer than the newest release read"),
        ("4.33.0", "dynamic", "before 4.34 were not read"),
        ("4.40.0", "contiguous", "kv_cache_layout 'contiguous'"),
    ],
)
def test_transformers_releases_outside_the_reads_are_refused(version: str, layout: str, why: str) -> None:
    with pytest.raises(ValidationError, match=f"runtime.engine_version '{version}'") as error:
        _generate(version, inference={"kv_cache_layout": layout})
    assert why in str(error.value)


def test_the_524_budget_is_unchanged() -> None:
    """The default release and 5.24.0 give the same budget, and it is the one before releases were read (figures
    printed at 828001a for this workload)."""
    default, pinned = (
        estimate(_generate(v, preset="llama-3.1-8b", b=3, precision={"weights": "bf16", "compute": "bf16"}))
        for v in (None, "5.24.0")
    )
    assert json.dumps(default.as_contract()["per_device"]) == json.dumps(pinned.as_contract()["per_device"])
    pd = default.per_device
    assert (pd.total_low_bytes, pd.total_bytes, pd.total_high_bytes) == PINNED_524


# llama-3.1-8b, bf16, eager, CUDA 11.8, batch 3 × 256 + 512, dynamic cache: the budget at 828001a (before this change)
PINNED_524 = (16_677_125_800, 17_044_817_592, 18_086_205_096)


@pytest.mark.parametrize("version", ["0.3.3", "0.34.0"])
def test_vllm_releases_outside_the_reads_are_refused(version: str) -> None:
    with pytest.raises(ValidationError, match=f"runtime.engine_version '{version}'.*release read here"):
        Workload.model_validate(
            {"task": "inference", "model": {"preset": "llama-3.1-8b"}, "runtime": {"engine_version": version}}
        )


def test_an_unread_vllm_release_says_what_is_not_known() -> None:
    w = Workload.model_validate(
        {"task": "inference", "model": {"preset": "llama-3.1-8b"}, "runtime": {"engine_version": "0.12.0"}}
    )
    lines = estimate(w, device_memory_bytes=H100_T).assumptions
    assert any(
        "vLLM 0.12 was not read (read on either side: 0.11 and 0.15): budgeted by the 0.11 profile" in a for a in lines
    )


def test_vllm_before_092_charges_the_cuda_context_to_the_pool() -> None:
    """V1 to 0.9.1 (vllm-0.8.5/v1/worker/gpu_worker.py:165-212): the pool is the context smaller than 0.10's."""
    pools = []
    for version in ("0.8.5", "0.10.1.1"):
        w = Workload.model_validate(
            {"task": "inference", "model": {"preset": "llama-3.1-8b"}, "runtime": {"engine_version": version}}
        )
        plan = estimate(w, device_memory_bytes=H100_T).serving
        assert plan is not None and plan.kv_pool_bytes is not None
        pools.append(plan.kv_pool_bytes)
    assert pools[1] - pools[0] == vllm_mod.CUDA_CONTEXT_BYTES
