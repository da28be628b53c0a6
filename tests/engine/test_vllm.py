"""The vLLM serving path against published start-up reports, its properties and its input errors.

Published figures: llm-d/llm-d-benchmark config_explorer/empirical-vllm-memory-results.md (H100, T = 79.18 GiB,
vLLM 0.11), LMCache/LMCache#1739 (A100-40GB, vLLM 0.10.2), vLLM #10517 and #10360 (V0 0.6.4) and llm-d-planner
PR #205 (H100, vLLM 0.15-0.19); see benchmarks/gpu_published/records.json.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from budgets.engine import Workload, estimate, validation_errors
from budgets.engine import vllm as vllm_mod

GIB = 2**30
H100_T = int(79.18 * GIB)  # cudaMemGetInfo total vLLM printed on H100 80GB HBM3 (llm-d)


def _workload(preset: str = "llama-3.1-8b", mml: int = 16000, **extra) -> Workload:
    inference = {"max_input_tokens": mml - 1, "max_output_tokens": 1, "max_model_len": mml}
    inference.update(extra.pop("inference", {}))
    return Workload.model_validate({"task": "inference", "model": {"preset": preset}, "inference": inference, **extra})


def _errors(payload: dict) -> dict[str, list[str]]:
    with pytest.raises(ValidationError) as exc:
        Workload.model_validate({"task": "inference", "model": {"preset": "llama-3.1-8b"}, **payload})
    return validation_errors(exc.value)


# --- published numbers -------------------------------------------------------------------------


def test_llama_8b_on_h100_matches_llm_d():
    # llm-d: weights 14.99, activation peak 4.76, non-torch 0.13, "Available KV cache memory: 51.38 GiB"
    b = estimate(_workload(), device_memory_bytes=H100_T, device_name="NVIDIA H100 80GB HBM3")
    assert b.per_device.component("weights").bytes / GIB == pytest.approx(14.99, abs=0.01)
    assert b.per_device.component("activations").bytes / GIB == pytest.approx(4.76, abs=0.05)
    s = b.serving
    assert s is not None and s.starts is True and s.reason is None and s.shortfall_bytes is None
    assert s.kv_pool_bytes / GIB == pytest.approx(51.38, abs=0.1)
    assert (s.max_num_batched_tokens, s.max_num_seqs, s.profile) == (8192, 1024, "0.11")
    assert s.kv_pool_tokens == s.kv_pool_bytes // (131_072 * 16) * 16
    assert s.max_concurrency == round(s.kv_pool_tokens / 16 / 1000, 2)  # ceil(16000 / 16) blocks a request
    assert any(a.startswith("vLLM 0.11 profile:") for a in b.assumptions)


def test_llama_70b_fp8_on_one_h100_does_not_start_and_tp2_does():
    one = estimate(_workload("llama-3.3-70b", precision={"weights": "fp8"}), device_memory_bytes=H100_T).serving
    assert one is not None and one.starts is False and one.kv_pool_bytes == 0
    assert "will not start" in (one.reason or "") and one.shortfall_bytes and one.shortfall_bytes > GIB
    assert one.available_kv_bytes / GIB == pytest.approx(-1.44, abs=0.3)  # llm-d: -1.44 GiB
    two = _workload("llama-3.3-70b", precision={"weights": "fp8"}, parallelism={"tensor": 2})
    plan = estimate(two, device_memory_bytes=H100_T).serving
    assert plan is not None and plan.starts is True
    assert plan.kv_pool_bytes / GIB == pytest.approx(32.0, abs=0.5)  # llm-d TP2: 32.0 GiB


def test_qwen3_32b_starts_at_16k_but_not_at_32k():
    # llm-d: 4.45 GiB at max-model-len 16000; "No KV cache room" at 32000 (one request needs 7.8 GiB)
    short = estimate(_workload("qwen3-32b", 16000), device_memory_bytes=H100_T).serving
    long = estimate(_workload("qwen3-32b", 32000), device_memory_bytes=H100_T).serving
    assert short.starts is True and short.kv_pool_bytes / GIB == pytest.approx(4.45, abs=0.2)
    assert long.starts is False and "max_model_len 32000" in long.reason
    assert long.shortfall_bytes == 2000 * 16 * 262_144 - long.available_kv_bytes


def test_a100_40gb_uses_the_small_gpu_defaults():
    # LMCache#1739, vLLM 0.10.2: 6.51 GiB, 42,656 tokens, 1.30x for 32,768-token requests
    w = _workload("qwen3-14b", 32768, runtime={"engine_version": "0.10.2"})
    s = estimate(w, device_memory_bytes=int(39.38 * GIB), device_name="NVIDIA A100-SXM4-40GB").serving
    assert (s.max_num_batched_tokens, s.max_num_seqs) == (2048, 256)
    assert s.kv_pool_tokens == pytest.approx(42_656, rel=0.03)
    assert s.max_concurrency == pytest.approx(1.30, abs=0.05)


# --- versions and defaults ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("version", "t_gib", "name", "expected"),
    [
        ("0.11.0", 79.18, "NVIDIA H100 80GB HBM3", (8192, 1024)),
        ("0.11.0", 79.15, "NVIDIA A100-SXM4-80GB", (2048, 256)),  # 0.10+: A100s are in the small class
        ("0.8.5", 79.15, "NVIDIA A100-SXM4-80GB", (8192, 1024)),  # 0.8.5: T alone decides
        ("0.11.0", 44.39, "NVIDIA L40S", (2048, 256)),
        ("0.33.0", 178.0, "NVIDIA B200", (16384, 1024)),
        ("0.21.0", 178.0, "NVIDIA B200", (8192, 1024)),
    ],
)
def test_scheduler_defaults_follow_version_and_gpu_class(version, t_gib, name, expected):
    assert vllm_mod.scheduler_defaults(version, int(t_gib * GIB), name, 16000) == expected


def test_utilization_default_and_graph_deduction_follow_the_version():
    assert _workload().inference.gpu_memory_utilization == 0.9
    assert _workload().runtime.engine_version == "0.11.0"
    new = _workload(runtime={"engine_version": "0.21.0"})
    assert new.inference.gpu_memory_utilization == 0.92
    given_util = _workload(runtime={"engine_version": "0.21.0"}, inference={"gpu_memory_utilization": 0.9})
    assert given_util.inference.gpu_memory_utilization == 0.9
    old = estimate(_workload(runtime={"engine_version": "0.20.0"}), device_memory_bytes=H100_T).serving
    graphs = estimate(given_util, device_memory_bytes=H100_T).serving
    assert old.kv_pool_bytes - graphs.kv_pool_bytes == vllm_mod.CUDA_GRAPH_ESTIMATE_BYTES
    assert graphs.profile == "0.21"


def test_explicit_scheduler_knobs_change_the_profiled_peak():
    small = _workload(inference={"max_num_seqs": 256, "max_num_batched_tokens": 2048})
    b_small = estimate(small, device_memory_bytes=H100_T)
    b_default = estimate(_workload(), device_memory_bytes=H100_T)
    assert b_small.serving.max_num_seqs == 256
    assert b_small.per_device.component("activations").bytes < b_default.per_device.component("activations").bytes
    assert b_small.serving.kv_pool_bytes > b_default.serving.kv_pool_bytes


def test_without_device_memory_there_is_no_pool_but_the_needed_t_is_stated():
    b = estimate(_workload())
    s = b.serving
    assert s is not None and s.kv_pool_bytes is None and s.starts is None and s.max_concurrency is None
    assert "vLLM needs T ≥" in b.per_device.component("kv_cache").note
    serving = b.as_contract()["serving"]
    assert {"kv_pool_tokens", "max_concurrency", "starts", "reason", "shortfall_bytes", "profile"} <= set(serving)


def test_pipeline_stages_report_the_smallest_pool():
    w = _workload("llama-3.1-70b", 8192, parallelism={"pipeline": 2, "tensor": 2})
    b = estimate(w, device_memory_bytes=H100_T)
    # the last stage also runs the sampler (≈ 4.7 GiB), so its pool is the smaller one
    assert b.serving is not None and b.serving.starts is True
    first_only = estimate(_workload("llama-3.1-70b", 8192, parallelism={"tensor": 2}), device_memory_bytes=H100_T)
    assert b.serving.kv_bytes_per_token * 2 == first_only.serving.kv_bytes_per_token


# --- V0 (vLLM before 0.8) and the 0.17 sampler ------------------------------------------------

RTX3090_T = int(23.58 * GIB)  # "total_gpu_memory=23.58GiB" (vLLM #10517, 0.6.4)


def _v0(version: str, mml: int, preset: str = "llama-3.1-8b", **extra) -> Workload:
    return _workload(preset, mml, runtime={"engine_version": version}, **extra)


@pytest.mark.parametrize(
    ("version", "profile", "v0"),
    [
        ("0.4.2", "0.4", True),
        ("0.6.3", "0.4", True),
        ("0.6.4.post1", "0.6.4", True),
        ("0.6.5", "0.6.5", True),
        ("0.7.2", "0.6.5", True),
        ("0.8.5", "0.8", False),  # V1 to 0.9.1 charges the CUDA context as well
        ("0.10.1.1", "0.10", False),
        ("0.17.0", "0.17", False),
        ("0.19.0", "0.18", False),
    ],
)
def test_the_release_selects_its_profile(version, profile, v0):
    chosen = vllm_mod.profile_for(version)
    assert (chosen.name, chosen.v0) == (profile, v0)
    plan = estimate(_v0(version, 8192), device_memory_bytes=H100_T, device_name="NVIDIA H100 80GB HBM3").serving
    assert plan.profile == profile


@pytest.mark.parametrize(
    ("version", "mml", "expected"),
    [
        ("0.6.4", 20000, (20000, 256)),  # no chunked prefill: the profile run covers max_model_len
        ("0.6.4", 1000, (2048, 256)),  # ... but at least 2048 tokens
        ("0.6.4", 40000, (512, 256)),  # chunked prefill on by default above 32,768 tokens
        ("0.6.5", 40000, (2048, 256)),
        ("0.4.2", 40000, (40000, 256)),  # 0.4 has no chunked-prefill default
    ],
)
def test_v0_scheduler_defaults_follow_max_model_len(version, mml, expected):
    assert vllm_mod.scheduler_defaults(version, H100_T, "NVIDIA H100 80GB HBM3", mml) == expected


def test_v0_pool_shrinks_with_max_model_len_and_v1_pool_does_not():
    v0 = [estimate(_v0("0.6.4", mml), device_memory_bytes=RTX3090_T).serving for mml in (8000, 20000, 29000)]
    assert v0[0].kv_pool_bytes > v0[1].kv_pool_bytes > v0[2].kv_pool_bytes
    v1 = [estimate(_v0("0.11.0", mml), device_memory_bytes=H100_T).serving for mml in (8000, 29000)]
    assert v1[0].kv_pool_bytes == v1[1].kv_pool_bytes


def test_v0_6_4_charges_the_cuda_context_and_0_6_5_does_not():
    charged = estimate(_v0("0.6.4", 8192), device_memory_bytes=H100_T).serving
    not_charged = estimate(_v0("0.6.5", 8192), device_memory_bytes=H100_T).serving
    assert not_charged.kv_pool_bytes - charged.kv_pool_bytes == vllm_mod.CUDA_CONTEXT_BYTES


def test_v0_rtx3090_matches_vllm_10517():
    # vLLM #10517, Llama-3.1-8B-Instruct on an RTX 3090, 0.6.4: "kv_cache_size=3.81GiB" at max-model-len 20000;
    # at 29000 "kv_cache_size=2.89GiB" and "The model's max seq len (29000) is larger than the maximum number of
    # tokens that can be stored in KV cache (23648)"
    fits = estimate(_v0("0.6.4", 20000), device_memory_bytes=RTX3090_T).serving
    assert fits.starts is True and fits.kv_pool_bytes / GIB == pytest.approx(3.81, abs=0.5)
    refused = estimate(_v0("0.6.4", 29000), device_memory_bytes=RTX3090_T).serving
    assert refused.starts is False and refused.available_kv_bytes / GIB == pytest.approx(2.89, abs=0.5)
    assert "max_model_len 29000" in refused.reason
    assert refused.shortfall_bytes == 1813 * 16 * 131_072 - refused.available_kv_bytes  # ceil(29000 / 16) blocks


def test_v0_a6000_awq_matches_vllm_10360():
    # vLLM #10360, Qwen2.5-32B-Instruct-AWQ on an RTX A6000, 0.6.4.post1: "total_gpu_memory=47.54GiB",
    # "kv_cache_size=22.74GiB" at --max-model-len 4096
    w = _v0("0.6.4.post1", 4096, "qwen2.5-32b", precision={"weights": "int4", "compute": "fp16", "kv_cache": "fp16"})
    plan = estimate(w, device_memory_bytes=int(47.54 * GIB), device_name="NVIDIA RTX A6000").serving
    assert plan.starts is True and plan.kv_pool_bytes / GIB == pytest.approx(22.74, abs=0.7)


def test_the_0_17_sampler_frees_about_three_gib_of_the_profile_peak():
    # llm-d-planner PR #205, Qwen3-14B on H100 at util 0.95, max_model_len 8192: KV 41.94 GiB at v0.16.0 and
    # 45.23 GiB at v0.18.0 (activation 5.64 → 2.23 GiB from v0.17.0)
    def plan(version):
        w = _v0(version, 8192, "qwen3-14b", inference={"gpu_memory_utilization": 0.95})
        return estimate(w, device_memory_bytes=int(79.19 * GIB), device_name="NVIDIA H100 80GB HBM3")

    old, new = plan("0.16.0"), plan("0.18.0")
    assert old.serving.kv_pool_bytes / GIB == pytest.approx(41.94, abs=0.3)
    assert new.serving.kv_pool_bytes / GIB == pytest.approx(45.23, abs=0.3)
    drop = old.per_device.component("activations").bytes - new.per_device.component("activations").bytes
    assert drop / GIB == pytest.approx(5.64 - 2.23, abs=0.3)


# --- properties --------------------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(t_gib=st.floats(16, 200), extra_gib=st.floats(0, 64))
def test_more_device_memory_never_shrinks_the_pool(t_gib, extra_gib):
    # at fixed scheduler settings; with vLLM's defaults the pool drops once where the GPU class changes (below)
    w = _workload(inference={"max_num_seqs": 1024, "max_num_batched_tokens": 8192})
    small = estimate(w, device_memory_bytes=int(t_gib * GIB), device_name="NVIDIA H100").serving
    large = estimate(w, device_memory_bytes=int((t_gib + extra_gib) * GIB), device_name="NVIDIA H100").serving
    assert large.kv_pool_bytes >= small.kv_pool_bytes
    assert large.kv_pool_tokens >= small.kv_pool_tokens


def test_default_settings_step_up_at_the_70_gib_class_boundary():
    # vLLM's own defaults: B/S rise from 2048/256 to 8192/1024 at T ≥ 70 GiB, so the sampler's profile peak
    # grows by ~3.5 GiB and a 70 GiB GPU gets a smaller pool than a 69.9 GiB one (arg_utils.py:1595-1624)
    below = estimate(_workload(), device_memory_bytes=int(69.9 * GIB), device_name="NVIDIA H100").serving
    above = estimate(_workload(), device_memory_bytes=70 * GIB, device_name="NVIDIA H100").serving
    assert (below.max_num_seqs, above.max_num_seqs) == (256, 1024)
    assert above.kv_pool_bytes < below.kv_pool_bytes


@settings(max_examples=40, deadline=None)
@given(mml=st.integers(1024, 200_000), more=st.integers(0, 100_000))
def test_longer_max_model_len_never_raises_concurrency(mml, more):
    short = estimate(_workload(mml=mml), device_memory_bytes=H100_T).serving
    long = estimate(_workload(mml=mml + more), device_memory_bytes=H100_T).serving
    assert long.max_concurrency <= short.max_concurrency
    assert short.starts or not long.starts


@pytest.mark.parametrize("preset", ["llama-3.1-8b", "qwen3-32b", "mixtral-8x7b"])
def test_tensor_parallel_2_halves_kv_bytes_per_token_on_a_rank(preset):
    one = estimate(_workload(preset)).serving
    two = estimate(_workload(preset, parallelism={"tensor": 2})).serving
    assert two.kv_bytes_per_token * 2 == one.kv_bytes_per_token


def test_moe_profile_forward_is_split_by_tensor_degree():
    spec = _workload("mixtral-8x7b").spec
    f1, _ = vllm_mod.profile_activations(spec, 1, 8192, 1024, 2, True, "0.11.0")
    f2, _ = vllm_mod.profile_activations(spec, 2, 8192, 1024, 2, True, "0.11.0")
    assert f2 < f1


# --- input errors (400-style: the field and what is allowed) ----------------------------------


def test_max_model_len_below_the_longest_request_names_the_field():
    errs = _errors({"inference": {"max_input_tokens": 4000, "max_output_tokens": 96, "max_model_len": 2048}})
    assert "inference.max_model_len" in errs
    assert "at least max_input_tokens + max_output_tokens (4096)" in errs["inference.max_model_len"][0]


@pytest.mark.parametrize("value", ["latest", "v", "0", "0.11.0-final"])
def test_bad_engine_version_names_the_field_and_the_format(value):
    errs = _errors({"runtime": {"engine_version": value}})
    assert "runtime.engine_version" in errs and "allowed" in errs["runtime.engine_version"][0]


@pytest.mark.parametrize("value", ["0.11.0", "0.10.1.1", "0.6.4.post1", "0.12.0rc1", "v0.11", "0.7.3.dev233+gad5a35c2"])
def test_release_numbers_are_accepted(value):
    assert _workload(runtime={"engine_version": value}).runtime.engine_version == value


@pytest.mark.parametrize(
    ("field", "value", "allowed"),
    [("max_num_seqs", 0, "≥ 1"), ("max_num_batched_tokens", 0, "≥ 1"), ("gpu_memory_utilization", 1.5, "≤ 1")],
)
def test_scheduler_fields_out_of_range_name_the_field(field, value, allowed):
    errs = _errors({"inference": {field: value}})
    assert f"inference.{field}" in errs and allowed in errs[f"inference.{field}"][0]


def test_batched_tokens_below_max_num_seqs_is_refused():
    errs = _errors({"inference": {"max_num_seqs": 512, "max_num_batched_tokens": 256}})
    assert "at least max_num_seqs (512)" in errs["inference.max_num_batched_tokens"][0]


def test_the_need_is_what_the_sessions_use_whatever_the_device_holds() -> None:
    # vLLM preallocates u·T, so its device total grows with T; what the workload needs of that share (weights,
    # profile-run peak, non-torch, graphs, and the KV its sessions fill) does not, and grows by exactly the
    # KV bytes of one more session's tokens
    def serving(sessions: int, device_gib: float) -> dict:
        w = Workload.model_validate(
            {
                "task": "inference",
                "model": {"preset": "llama-3.1-8b"},
                "precision": {"weights": "bf16"},
                "inference": {"engine": "vllm", "max_input_tokens": 4096, "max_output_tokens": 512,
                              "concurrent_sessions": sessions, "max_num_seqs": 256, "max_num_batched_tokens": 8192},
            }
        )  # fmt: skip
        return estimate(w, device_memory_bytes=int(device_gib * 2**30)).as_contract()["serving"]

    small, large, more = serving(8, 79.19), serving(8, 139.8), serving(9, 79.19)
    assert small["need_bytes"] == large["need_bytes"]
    assert small["kv_pool_bytes"] < large["kv_pool_bytes"]
    assert more["need_bytes"] - small["need_bytes"] == small["kv_bytes_per_token"] * (4096 + 512)


@pytest.mark.parametrize(
    ("pasted", "release", "profile", "pre"),
    [
        ("0.11.0rc1", (0, 11, 0), "0.11", True),
        ("0.7.3.dev233+gad5a35c2", (0, 7, 3), "0.6.5", True),
        ("v0.10.1.1", (0, 10, 1, 1), "0.10", False),
        ("0.10.1.1+cu128", (0, 10, 1, 1), "0.10", False),
    ],
)
def test_pasted_version_strings_map_to_a_release_and_the_answer_says_so(pasted, release, profile, pre) -> None:
    from budgets.engine import estimate
    from budgets.engine.schema import Workload
    from budgets.engine.vllm import parse_version, profile_for, release_note

    assert parse_version(pasted) == release
    assert profile_for(pasted).name == profile
    note = release_note(pasted)
    assert f"the {profile} profile applies" in note and (("pre-release" in note) == pre)
    w = Workload.model_validate(
        {"task": "inference", "model": {"preset": "llama-3.1-8b"}, "runtime": {"engine_version": pasted}}
    )
    assert any(note in a for a in estimate(w, device_memory_bytes=80 * 2**30).assumptions)


@pytest.mark.parametrize("bad", ["latest", "0.11.0; rm -rf /", "11", "0.11.0+" + "x" * 65])
def test_a_version_that_is_not_a_release_is_refused(bad) -> None:
    from pydantic import ValidationError

    from budgets.engine.schema import Workload

    with pytest.raises(ValidationError, match="engine_version"):
        Workload.model_validate(
            {"task": "inference", "model": {"preset": "llama-3.1-8b"}, "runtime": {"engine_version": bad}}
        )
