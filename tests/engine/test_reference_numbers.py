"""Published reference numbers the engine must reproduce exactly."""

from __future__ import annotations

import pytest

from budgets.engine import Workload, estimate, load_presets
from budgets.engine.components.kv_cache import kv_bytes_per_token

GB = 10**9


def _zero_workload(stage: int, gradients: str = "fp16") -> Workload:
    return Workload.model_validate(
        {
            "name": f"zero-{stage}",
            "task": "training",
            "model": {
                "architecture": {
                    "num_layers": 48,
                    "hidden_size": 3584,
                    "num_attention_heads": 28,
                    "intermediate_size": 14336,
                    "vocab_size": 50304,
                },
                "parameter_count": 7_500_000_000,
            },
            "precision": {
                "weights": "fp16",
                "compute": "fp16",
                "gradients": gradients,
                "master_weights": "fp32",
            },
            "training": {"micro_batch_size": 1, "sequence_length": 1024, "optimizer": "adamw"},
            "parallelism": {"data": 64, "zero_stage": stage},
        }
    )


def _model_states(w: Workload) -> int:
    pd = estimate(w).per_device
    return sum(pd.component(n).bytes for n in ("weights", "gradients", "optimizer_state"))


@pytest.mark.parametrize(
    ("stage", "expected"),
    [(0, 120 * GB), (1, 31_406_250_000), (2, 16_640_625_000), (3, 1_875_000_000)],
)
def test_zero_paper_model_states(stage, expected):
    # Rajbhandari et al. (arXiv:1910.02054) §5: Ψ = 7.5B, N_d = 64 → 120 / 31.4 / 16.6 / 1.875 GB
    assert _model_states(_zero_workload(stage)) == expected


def test_zero_stage0_with_fp32_gradients_is_18_bytes_per_param():
    assert _model_states(_zero_workload(0, gradients="fp32")) == 135 * GB


def test_zero3_gathered_layers_are_workspace_not_weights():
    pd = estimate(_zero_workload(3)).per_device
    assert pd.component("workspace").bytes > 0
    assert pd.component("weights").bytes == 7_500_000_000 * 2 // 64


@pytest.mark.parametrize(
    ("preset", "precision", "per_token"),
    [
        ("llama-3.1-8b", "bf16", 131_072),
        ("opt-13b", "fp16", 819_200),
        ("llama-2-7b", "fp16", 524_288),
        ("llama-2-70b", "bf16", 327_680),
        ("mistral-7b-v0.1", "bf16", 131_072),
    ],
)
def test_kv_bytes_per_token(preset, precision, per_token):
    spec = load_presets()[preset].spec
    assert kv_bytes_per_token(spec, spec.num_kv_heads, spec.num_layers, precision) == per_token


def test_serving_reports_kv_per_token_and_pool():
    w = Workload.model_validate(
        {
            "task": "inference",
            "model": {"preset": "llama-3.1-8b"},
            "inference": {"engine": "vllm", "max_input_tokens": 4000, "max_output_tokens": 96},
        }
    )
    # vLLM multiplies the cudaMemGetInfo total (79.18 GiB on an H100 80GB, llm-d), not the marketed 80 GB
    # (74.5 GiB) this test used to pass; the pool is then the llm-d figure for this model (51.38 GiB)
    b = estimate(w, device_memory_bytes=int(79.18 * 2**30))
    assert b.serving is not None and b.serving.kv_bytes_per_token == 131_072
    assert b.serving.kv_pool_bytes and b.serving.max_concurrent_sessions_at_max_request >= 1
    assert b.serving.kv_pool_bytes / 2**30 == pytest.approx(51.38, abs=0.1) and b.serving.starts
    no_mem = estimate(w)
    assert no_mem.serving.kv_pool_bytes is None
    assert no_mem.serving.kv_bytes_needed == 131_072 * 4096


def test_tensor_parallel_replicates_kv_heads_beyond_their_count():
    base = {
        "task": "inference",
        "model": {"preset": "llama-3.1-70b"},
        "inference": {"engine": "vllm", "max_input_tokens": 1000, "max_output_tokens": 24},
    }
    per_tok = {}
    for t in (1, 8, 16, 64):
        w = Workload.model_validate({**base, "parallelism": {"tensor": t}})
        per_tok[t] = estimate(w).serving.kv_bytes_per_token
    assert per_tok[1] == 327_680 and per_tok[8] == 327_680 // 8
    assert per_tok[16] == per_tok[8] == per_tok[64]  # one KV head per device, replicated
