"""catalog.compat.check_configuration: one reason a person can act on per failed rule. Pure: no database.

The devices are the catalog's own (fixtures), so these tests also check the data the rules read.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from budgets.engine import Workload
from catalog.compat import Facts, Reason, Requirements, check_configuration
from catalog.units import version_key
from tests.catalog.compat_facts import device_facts, records, tables

WORKLOADS = Path(__file__).resolve().parents[2] / "fixtures" / "workloads"
R570 = "570.195.03"


def _needs(**changes: object) -> Requirements:
    """A bf16 vLLM workload on CUDA 12.4, changed where a test says so."""
    base = Requirements(
        device="cuda",
        precisions=(("weights", "bf16"), ("compute", "bf16"), ("kv_cache", "bf16")),
        cuda_version="12.4",
        engine="vllm",
        engine_version="0.11.0",
    )
    return dataclasses.replace(base, **changes)


def _rules(reasons: list[Reason]) -> list[str]:
    return [reason.rule for reason in reasons]


def test_a_bf16_workload_runs_on_an_h100_with_a_current_driver() -> None:
    assert check_configuration(_needs(), device_facts("h100-sxm-80gb", R570)) == []


def test_fp8_weights_are_unsupported_on_an_a100_outside_vllm_with_a_reason_naming_fp8() -> None:
    reasons = check_configuration(
        _needs(precisions=(("weights", "fp8"), ("compute", "bf16")), engine="transformers"),
        device_facts("a100-80gb-sxm4", R570),
    )
    assert _rules(reasons) == ["precision"]
    assert "fp8 (weights) is not native on NVIDIA A100 80GB SXM4" in reasons[0].message
    assert "8.9" in reasons[0].message and "fp8" in reasons[0].action
    assert check_configuration(_needs(precisions=(("weights", "fp8"),)), device_facts("h100-sxm-80gb", R570)) == []


def test_fp8_weights_run_weight_only_under_vllm_from_ampere_on() -> None:
    """vLLM's FP8 Marlin path (is_fp8_marlin_supported: CC ≥ 8.0); not before Ampere, not for FP8 compute."""
    weights_only = (("weights", "fp8"), ("compute", "bf16"))
    assert (
        check_configuration(_needs(precisions=weights_only, engine="vllm"), device_facts("a100-80gb-sxm4", R570)) == []
    )
    before_ampere = check_configuration(_needs(precisions=weights_only, engine="vllm"), device_facts("t4", R570))
    assert any("fp8 (weights)" in r.message for r in before_ampere)
    fp8_compute = (("weights", "fp8"), ("compute", "fp8"))
    reasons = check_configuration(_needs(precisions=fp8_compute, engine="vllm"), device_facts("a100-80gb-sxm4", R570))
    assert _rules(reasons) == ["precision"]


def test_fp8_runs_on_cdna3_as_fnuz() -> None:
    assert check_configuration(_needs(precisions=(("weights", "fp8"),)), device_facts("mi300x", "6.4.1")) == []


@pytest.mark.parametrize("device", ["v100-sxm2-16gb", "t4"])
def test_bf16_is_unsupported_before_ampere(device: str) -> None:
    reasons = check_configuration(_needs(engine="transformers"), device_facts(device, R570))
    assert _rules(reasons) == ["precision"]
    assert reasons[0].message.startswith("bf16 (weights, compute, kv_cache) is not native")
    assert "use fp16" in reasons[0].action
    fp16 = _needs(engine="transformers", precisions=(("weights", "fp16"),))
    assert check_configuration(fp16, device_facts(device, R570)) == []


@pytest.mark.parametrize(
    ("driver", "supported"),
    [("535.247.01", False), ("565.57.01", False), ("570.26", True), ("570.195.03", True), ("580.95.05", True)],
)
def test_a_cuda_12_8_workload_needs_driver_570_26(driver: str, supported: bool) -> None:
    reasons = check_configuration(_needs(cuda_version="12.8"), device_facts("h100-sxm-80gb", driver))
    assert _rules(reasons) == ([] if supported else ["driver"])


def test_the_driver_reason_says_what_it_supports_and_what_to_install() -> None:
    (reason,) = check_configuration(_needs(cuda_version="12.8"), device_facts("h100-sxm-80gb", "535.247.01"))
    assert reason.message == "driver 535.247.01 supports CUDA ≤ 12.2; this workload needs 12.8"
    assert reason.action.startswith("upgrade the driver to ≥ 570.26")


def test_every_catalog_host_below_570_26_is_unsupported_for_cuda_12_8() -> None:
    needs = _needs(cuda_version="12.8", precisions=(("weights", "fp16"),), engine="transformers")
    nvidia = [c for c in records("configurations.json") if c["driver_version"] and not c["slug"].startswith("mi")]
    checked = 0
    for row in nvidia:
        facts = device_facts(row["accelerator"], row["driver_version"])
        if not facts.is_nvidia_gpu:
            continue
        old = version_key(row["driver_version"]) < version_key("570.26")
        assert ("driver" in _rules(check_configuration(needs, facts))) is old, row["slug"]
        checked += 1
    assert checked > 50


@pytest.mark.parametrize("device", ["b200", "rtx-5090", "rtx-pro-6000-blackwell"])
def test_blackwell_needs_cuda_12_8(device: str) -> None:
    old = check_configuration(_needs(cuda_version="12.4"), device_facts(device, R570))
    assert "cuda_arch" in _rules(old)
    reason = next(r for r in old if r.rule == "cuda_arch")
    assert "needs CUDA ≥ 12.8" in reason.message and reason.action == "set runtime.cuda_version to ≥ 12.8"
    assert check_configuration(_needs(cuda_version="12.8"), device_facts(device, R570)) == []


def test_no_wheel_for_the_workloads_cuda_includes_blackwell() -> None:
    reasons = check_configuration(_needs(cuda_version="12.4"), device_facts("b200", R570))
    wheels = next(r for r in reasons if r.rule == "wheels")
    assert "compute capability 10.0" in wheels.message and "cu128" in wheels.action


def test_cuda_13_dropped_volta_from_the_wheels_and_the_toolkit() -> None:
    reasons = check_configuration(
        _needs(cuda_version="13.0", engine="transformers", precisions=()), device_facts("v100-sxm2-32gb", "580.95.05")
    )
    assert _rules(reasons) == ["cuda_arch", "wheels"]


@pytest.mark.parametrize(
    ("device", "ok"), [("h100-sxm-80gb", True), ("h200-sxm-141gb", True), ("a100-80gb-sxm4", False),
                       ("l40s", False), ("b200", False), ("mi300x", False)],
)  # fmt: skip
def test_flash_attention_3_runs_only_on_hopper(device: str, ok: bool) -> None:
    reasons = check_configuration(_needs(cuda_version="12.8", flash_attention=3), device_facts(device, R570))
    assert ("flash_attention" not in _rules(reasons)) is ok
    if not ok:
        assert "FlashAttention-3" in next(r for r in reasons if r.rule == "flash_attention").message


@pytest.mark.parametrize(("device", "ok"), [("t4", False), ("a10", True), ("l4", True), ("mi250x", True)])
def test_flash_attention_2_needs_ampere_or_a_rocm_backend(device: str, ok: bool) -> None:
    needs = _needs(flash_attention=2, precisions=(("weights", "fp16"),))
    assert ("flash_attention" not in _rules(check_configuration(needs, device_facts(device, R570)))) is ok


@pytest.mark.parametrize(("release", "ok"), [("0.11.0", True), ("0.14.1", True), ("0.15.0", False), (None, False)])
def test_vllm_on_volta_only_up_to_0_14(release: str | None, ok: bool) -> None:
    needs = _needs(engine_version=release, precisions=(("weights", "fp16"),))
    reasons = check_configuration(needs, device_facts("v100-sxm2-16gb", "535.247.01"))
    assert ("vllm" not in _rules(reasons)) is ok


def test_a_cuda_workload_needs_a_gpu_and_the_host_its_images_are_built_for() -> None:
    toolkits, wheels = tables()
    cpu = Facts(label="c7i.8xlarge (CPU only)", toolkits=toolkits, wheels=wheels)
    assert _rules(check_configuration(_needs(), cpu)) == ["device"]
    arm = check_configuration(_needs(cpu_architecture="x86_64"), device_facts("gh200", R570, host="aarch64"))
    assert "host" in _rules(arm)
    assert check_configuration(_needs(device="cpu", cuda_version=None, engine="transformers"), cpu) == []


def test_an_unreadable_driver_is_a_reason_not_an_exception() -> None:
    (reason,) = check_configuration(_needs(), device_facts("h100-sxm-80gb", "banana"))
    assert reason.rule == "driver" and "'banana' is not a driver version" in reason.message


def _workload(name: str) -> Workload:
    return Workload.model_validate(json.loads((WORKLOADS / name).read_text()))


def test_requirements_from_a_workload() -> None:
    workload = _workload("vllm-llama-3.1-8b-chat.json")
    needs = Requirements.from_workload(workload)
    spec = workload.precision
    assert needs.precisions == (("weights", spec.weights), ("compute", spec.compute), ("kv_cache", spec.kv_cache))
    assert needs.engine == "vllm" and needs.cuda_version == workload.runtime.cuda_version
    assert needs.flash_attention == (2 if workload.runtime.attention == "flash" else None)
    custom = Requirements.from_workload(_workload("custom-rendering.json"))
    assert custom.precisions == () and custom.engine == "generic"
    assert Requirements.from_workload(_workload("train-llama-3.1-8b-lora.json")).engine == "transformers"


def test_a_flash_attention_workload_asks_for_fa2() -> None:
    workload = _workload("vllm-llama-3.1-8b-chat.json")
    flash = workload.model_copy(update={"runtime": workload.runtime.model_copy(update={"attention": "flash"})})
    assert Requirements.from_workload(flash).flash_attention == 2


@pytest.mark.parametrize("device", ["b200", "rtx-5090", "rtx-pro-6000-blackwell"])
def test_a_workload_naming_no_cuda_is_judged_with_the_newest_its_driver_runs(device: str) -> None:
    """Issue 16, first hour, item 3: without runtime.cuda_version a silent 12.4 made every Blackwell GPU
    unsupported; now the newest CUDA the driver fully runs is assumed, and `assumed_cuda` says which."""
    from catalog.compat import assumed_cuda

    needs = _needs(cuda_version=None)
    facts = device_facts(device, R570)
    assert check_configuration(needs, facts) == []
    assumed = assumed_cuda(needs, facts)
    assert assumed is not None and version_key(assumed) >= version_key("12.8")
    assert assumed_cuda(_needs(cuda_version="12.4"), facts) is None  # a stated version is the one judged
    old_driver = device_facts("h100-sxm-80gb", "535.104.05")
    assert version_key(assumed_cuda(needs, old_driver) or "0") < version_key("12.3")  # what 535 runs: 12.2
