"""The SGLang serving path (budgets/engine/sglang.py): against SGLang 0.5.10.post1's own worked defaults and published
start-up reports (benchmarks/sglang_published/records.json), its properties, and its input errors."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from budgets.engine import Workload, estimate, sglang, validation_errors

GIB = 2**30
H100_T = int(79.18 * GIB)  # cudaMemGetInfo total on an H100 80GB HBM3 (llm-d)
H200_T = int(139.81 * GIB)
H100 = "NVIDIA H100 80GB HBM3"


def _workload(preset: str = "llama-3.1-8b", ctx: int = 8192, **extra) -> Workload:
    inference = {"engine": "sglang", "max_input_tokens": ctx - 1, "max_output_tokens": 1, "max_model_len": ctx}
    inference.update(extra.pop("inference", {}))
    return Workload.model_validate({"task": "inference", "model": {"preset": preset}, "inference": inference, **extra})


def _plan(w: Workload, t: int = H100_T, name: str | None = H100):
    plan = estimate(w, device_memory_bytes=t, device_name=name).serving
    assert plan is not None
    return plan


# --- SGLang's own defaults (server_args.py:1165-1334) -----------------------------------------------


def test_default_fraction_worked_examples():
    # 512 + 8192·1.5 + 256·2 + 128 + 58·8 = 13,904 MiB → (81559 − 13904)/81559 = 0.830 (H100 80GB, TP1)
    assert sglang.default_mem_fraction_static(81559, 1, 1, 8192, 256) == (0.830, 13904)
    # TP8: +896 MiB, and cuda_graph_max_bs 512 at TP ≥ 4 (+512): 15,312 MiB → 0.812 (RULE.md's 0.819 kept bs 256)
    assert sglang.default_mem_fraction_static(81559, 8, 1, 8192, 256)[0] == 0.819
    assert sglang.default_mem_fraction_static(81559, 8, 1, 8192, 512) == (0.812, 15312)
    # H200 TP8 DeepSeek (MLA: +1.5 GiB piecewise term): 16,384 MiB → 0.886
    assert sglang.default_mem_fraction_static(143771, 8, 1, 8192, 512, mla=True) == (0.886, 16384)
    # L40S TP1 without the piecewise term: the 0.851 printed by sgl-project/sglang PR #13023
    assert sglang.default_mem_fraction_static(46068, 1, 1, 4096, 32, piecewise_graphs=False)[0] == 0.851
    assert sglang.default_mem_fraction_static(None)[0] == 0.88


def test_chunk_and_graph_batch_by_gpu_class():
    assert sglang.chunked_prefill_and_graph_bs(16 * 1024, 1) == (2048, 8)
    assert sglang.chunked_prefill_and_graph_bs(24564, 4) == (2048, 80)
    assert sglang.chunked_prefill_and_graph_bs(46068, 1) == (4096, 32)
    assert sglang.chunked_prefill_and_graph_bs(81559, 8) == (8192, 512)
    assert sglang.chunked_prefill_and_graph_bs(183359, 1) == (16384, 512)
    assert len(sglang.piecewise_cuda_graph_tokens(8192)) == 58
    assert len(sglang.piecewise_cuda_graph_tokens(2048)) == 42


def test_the_budget_names_the_release_and_its_defaults():
    b = estimate(_workload(), device_memory_bytes=H100_T, device_name=H100)
    line = next(a for a in b.assumptions if a.startswith("SGLang 0.5.10.post1"))
    assert "mem_fraction_static 0.830 (SGLang's default" in line
    assert "chunked_prefill_size 8192" in line and "cuda_graph_max_bs 256" in line


# --- published start-up reports ---------------------------------------------------------------


def test_qwen3_235b_fp8_tp4_h100_pool():
    # vllm-project/vllm#21348: "KV Cache is allocated. #tokens: 367404, K size: 8.23 GB, V size: 8.23 GB"
    w = _workload(
        "qwen3-235b-a22b",
        40960,
        precision={"weights": "fp8"},
        parallelism={"tensor": 4},
        inference={"gpu_memory_utilization": 0.93},
    )
    plan = _plan(w)
    assert plan.kv_bytes_per_token == 94 * 1 * 128 * 2 * 2  # 4 KV heads over TP4: one per rank
    assert abs(plan.kv_pool_bytes / GIB - 16.46) <= 1.0 and plan.starts


def test_llama3_8b_tp2_h200_pool():
    # sgl-project/sglang PR #7873: "memory pool(kv cache) 110GB" at --mem-fraction-static 0.85, TP2
    w = _workload(parallelism={"tensor": 2}, inference={"gpu_memory_utilization": 0.85})
    plan = _plan(w, H200_T, "NVIDIA H200")
    assert plan.kv_pool_bytes / GIB == pytest.approx(110, rel=0.03)


def test_qwen3_30b_a3b_default_fraction_by_release():
    # sgl-project/sglang#11970, sglang==0.5.3.post3, default arguments, one unnamed GPU: "Load weight begin. avail
    # mem=94.69 GB" and "self.max_total_num_tokens=270331". 0.5.3's default fraction reserves nothing for piecewise
    # CUDA graphs (none before 0.5.10 unless enabled); budgeted by 0.5.10.post1's, which does, the pool is ~2 % short
    from budgets.engine.components import runtime as rt

    context, _ = rt.cuda_context("cuda", None, None)
    t = int(94.69 * GIB) + context.bytes

    def tokens(version: str) -> int | None:
        w = _workload("qwen3-30b-a3b", 40960, runtime={"engine_version": version})
        return _plan(w, t, None).kv_pool_tokens

    assert tokens("0.5.3.post3") == pytest.approx(270331, rel=0.005)
    assert (tokens("0.5.10.post1") or 0) < 270331 * 0.985


def test_piecewise_graphs_on_by_default_from_0_5_10():
    spec = _workload().spec
    # sgl-project/sglang PR #13023 (November 2025, after 0.5.5), L40S, defaults: "mem_fraction_static=0.851"
    l40s = sglang.server_defaults(spec, int(44.5 * GIB), "NVIDIA L40S", 1, 1, version="0.5.5")
    assert (l40s.mem_fraction_static, l40s.piecewise_graphs) == (0.851, False)
    assert sglang.server_defaults(spec, H100_T, H100, 1, 1, version="0.5.9").piecewise_graphs is False
    assert sglang.server_defaults(spec, H100_T, H100, 1, 1, version="0.5.10").piecewise_graphs is True
    assert sglang.server_defaults(spec, H100_T, H100, 1, 1).piecewise_graphs is True  # 0.5.10.post1, the profile
    b = estimate(_workload(runtime={"engine_version": "0.5.9"}), device_memory_bytes=H100_T, device_name=H100)
    assert any("without piecewise CUDA graphs" in a and "piecewise CUDA graphs off" in a for a in b.assumptions)


# --- properties ---------------------------------------------------------------------------------


def test_pool_grows_with_the_fraction():
    pools = [_plan(_workload(inference={"gpu_memory_utilization": f})).kv_pool_tokens for f in (0.7, 0.8, 0.9)]
    assert pools[0] < pools[1] < pools[2]


def test_mla_cell_not_split_by_tensor_degree_mha_is():
    w = _workload()
    one = sglang.cell(w.spec, 1, 0, w.spec.num_layers, "bf16", "bf16")
    two = sglang.cell(w.spec, 2, 0, w.spec.num_layers, "bf16", "bf16")
    sixteen = sglang.cell(w.spec, 16, 0, w.spec.num_layers, "bf16", "bf16")
    assert one.bytes_per_token == 2 * two.bytes_per_token
    assert sixteen.bytes_per_token == one.bytes_per_token // 8  # ≥ 1 KV head per rank
    mla = Workload.model_validate(
        {"model": {"hf_config": _config("deepseek-v3")}, "inference": {"engine": "sglang"}}
    ).spec
    c1 = sglang.cell(mla, 1, 0, mla.num_layers, "bf16", "bf16")
    c8 = sglang.cell(mla, 8, 0, mla.num_layers, "bf16", "bf16")
    assert c1.kind == "mla" and c1.bytes_per_token == c8.bytes_per_token == (512 + 64) * 61 * 2


def test_fp8_kv_halves_the_cell_and_doubles_the_tokens():
    bf16 = _plan(_workload())
    fp8 = _plan(_workload(precision={"kv_cache": "fp8"}))
    assert fp8.kv_bytes_per_token * 2 == bf16.kv_bytes_per_token
    assert fp8.kv_pool_tokens == pytest.approx(2 * bf16.kv_pool_tokens, abs=2)


def test_sliding_windows_only_for_sglangs_hybrid_swa_models():
    gemma = _workload("gemma-3-27b").spec  # Gemma 3: every layer in full (disable_hybrid_swa_memory)
    c = sglang.cell(gemma, 1, 0, gemma.num_layers, "bf16", "bf16")
    assert c.swa_layers == 0 and c.full_layers == gemma.num_layers
    oss = Workload.model_validate({"model": {"hf_config": _config("gpt-oss-20b")}, "inference": {"engine": "sglang"}})
    c = sglang.cell(oss.spec, 1, 0, oss.spec.num_layers, "bf16", "bf16")
    assert c.kind == "hybrid-swa" and c.swa_layers and c.full_layers
    plan = _plan(oss)
    assert plan.starts and plan.kv_pool_tokens > 0


def test_hybrid_linear_models_share_the_pool_with_the_state():
    w = Workload.model_validate(
        {"model": {"hf_config": _config("qwen3-next-80b-a3b")}, "inference": {"engine": "sglang"}}
    )
    c = sglang.cell(w.spec, 4, 0, w.spec.num_layers, "bf16", "bf16")
    assert c.kind == "hybrid-linear" and c.mamba_bytes_per_request > 0
    assert c.full_layers < w.spec.num_layers


def test_starts_with_a_pool_shorter_than_the_context_but_not_with_none():
    # SGLang starts when the pool holds ≥ 7 tokens (tp_worker.py:301-308), not one request of context length
    w = _workload("qwen3-32b", 40960, inference={"gpu_memory_utilization": 0.80})
    plan = _plan(w)
    assert plan.starts and 0 < plan.kv_pool_tokens < 40960
    refused = _plan(_workload("qwen3-32b", 40960, inference={"gpu_memory_utilization": 0.7}))
    assert not refused.starts and "Not enough memory" in refused.reason


def test_without_a_device_the_budget_reports_the_need():
    plan = estimate(_workload()).serving
    assert plan.kv_pool_bytes is None and plan.kv_bytes_needed == 131072 * 8192


def test_vllm_budget_unchanged_by_sglang():
    w = Workload.model_validate(
        {"model": {"preset": "llama-3.1-8b"}, "inference": {"max_input_tokens": 15999, "max_output_tokens": 1}}
    )
    plan = estimate(w, device_memory_bytes=H100_T, device_name=H100).serving
    assert plan.profile == "0.11" and plan.kv_pool_bytes / GIB == pytest.approx(51.38, abs=0.1)


# --- schema -------------------------------------------------------------------------------------


def test_engine_sglang_is_accepted_and_keeps_its_fraction_open():
    w = _workload()
    assert w.inference.engine == "sglang" and w.inference.gpu_memory_utilization is None
    assert w.runtime.engine_version == "0.5.10.post1"


def _errors(payload: dict) -> dict[str, list[str]]:
    with pytest.raises(ValidationError) as exc:
        Workload.model_validate({"model": {"preset": "llama-3.1-8b"}, **payload})
    return validation_errors(exc.value)


def test_bad_values_name_their_field():
    errs = _errors({"inference": {"engine": "sglang", "gpu_memory_utilization": 1.5}})
    assert list(errs) == ["inference.gpu_memory_utilization"]
    errs = _errors({"inference": {"engine": "sglang", "cuda_graph_max_bs": 0}})
    assert list(errs) == ["inference.cuda_graph_max_bs"]


def test_an_unprofiled_release_is_refused_naming_the_field():
    errs = _errors({"inference": {"engine": "sglang"}, "runtime": {"engine_version": "0.4.6"}})
    assert any("runtime.engine_version '0.4.6'" in m for ms in errs.values() for m in ms)
    near = _workload(runtime={"engine_version": "0.5.9"})
    b = estimate(near, device_memory_bytes=H100_T, device_name=H100)
    assert any("'0.5.9' has no profile of its own" in a for a in b.assumptions)


def _config(config_id: str) -> dict:
    from benchmarks.gpu_published.__main__ import hf_config

    return hf_config(config_id)


def test_a_stored_workload_budgets_as_the_posted_one() -> None:
    """A workload is stored as its validated dump, every field written; validating that dump again gives the same
    SGLang budget (the page size was SGLang's 1 in both, not vLLM's block of 16 once the field is written)."""
    from budgets.engine import Workload, estimate

    posted = Workload.model_validate(
        {
            "name": "stored",
            "model": {"preset": "llama-3.1-8b"},
            "inference": {
                "engine": "sglang",
                "max_input_tokens": 4000,
                "max_output_tokens": 100,
                "concurrent_sessions": 3,
            },
        }
    )
    stored = Workload.model_validate(posted.model_dump(mode="json", exclude_none=False))
    assert stored.inference is not None and stored.inference.kv_block_tokens == 1
    device = (80 * 2**30, "NVIDIA H100 80GB HBM3", (9, 0))
    a, b = estimate(posted, *device), estimate(stored, *device)
    assert a.serving is not None and b.serving is not None
    assert (a.serving.kv_pool_tokens, a.per_device.total_bytes) == (b.serving.kv_pool_tokens, b.per_device.total_bytes)
