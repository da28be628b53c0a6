from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from budgets.engine import Workload, estimate, render_table
from budgets.engine.budget import COMPONENT_NAMES

CONTRACT_COMPONENTS = set(COMPONENT_NAMES)


def _check_invariants(budget):
    pd = budget.per_device
    for c in pd.components:
        assert isinstance(c.bytes, int) and isinstance(c.low, int) and isinstance(c.high, int)
        assert 0 <= c.low <= c.bytes <= c.high, c
    assert 0 <= pd.total_low_bytes <= pd.total_bytes <= pd.total_high_bytes


def test_examples_estimate_and_render(example_workloads):
    for name, payload in example_workloads.items():
        # T as vLLM reads it on an H100 80GB (cudaMemGetInfo total, 79.18 GiB), not the marketed 80e9 B
        b = estimate(Workload.model_validate(payload), device_memory_bytes=int(79.18 * 2**30))
        _check_invariants(b)
        assert name and render_table(b).count("\n") > 10


def test_contract_shape(example_workloads):
    b = estimate(Workload.model_validate(example_workloads["vllm-llama-3.1-8b-chat"]))
    c = b.as_contract()
    assert {"workload", "device", "devices", "per_device", "host", "assumptions", "calibration"} <= set(c)
    assert set(c["per_device"]["components"]) == CONTRACT_COMPONENTS
    for comp in c["per_device"]["components"].values():
        assert set(comp) == {"bytes", "low", "high", "note"}
    assert set(c["per_device"]["total"]) == {"bytes", "low", "high"}
    assert set(c["host"]) == {"ram_bytes", "disk_bytes"}
    assert c["calibration"] is None and c["workload"] == "support-chat-8b"
    json.dumps(c)  # serializable


def test_cpu_device_has_no_runtime_or_fragmentation(example_workloads):
    for name in ("cpu-gpt2-generate", "cpu-qwen2.5-0.5b-train"):
        pd = estimate(Workload.model_validate(example_workloads[name])).per_device
        for comp in ("runtime", "fragmentation", "workspace"):
            if comp == "workspace" and "train" in name:
                continue  # the foreach optimizer buffer is a real host tensor
            assert pd.component(comp).bytes == 0


def test_peak_is_a_phase_not_a_sum(example_workloads):
    pd = estimate(Workload.model_validate(example_workloads["cpu-qwen2.5-0.5b-train"])).per_device
    assert pd.total_bytes == max(p.bytes for p in pd.phases)
    assert pd.total_bytes < sum(c.bytes for c in pd.components)
    assert pd.peak_phase in {p.name for p in pd.phases}


def test_custom_sums_components(example_workloads):
    b = estimate(Workload.model_validate(example_workloads["custom-rendering"]))
    pd = b.per_device
    assert pd.component("weights").bytes == 15_000_000_000
    assert pd.component("activations").bytes == 3 * 530_000_000
    assert pd.component("workspace").bytes == 800_000_000


def _inference(sessions: int, inp: int, out: int, engine: str, layout: str, attention: str, device: str) -> Workload:
    return Workload.model_validate(
        {
            "task": "inference",
            "model": {"preset": "qwen2.5-0.5b"},
            "inference": {
                "max_input_tokens": inp,
                "max_output_tokens": out,
                "concurrent_sessions": sessions,
                "engine": engine,
                "kv_cache_layout": layout,
            },
            "runtime": {"attention": attention, "device": device},
        }
    )


engines = st.sampled_from(
    [
        ("vllm", "paged"),
        ("transformers", "dynamic"),
        ("generic", "contiguous"),
        ("transformers", "contiguous"),
        ("generic", "paged"),
    ]
)


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 256),
    st.integers(1, 32768),
    st.integers(1, 4096),
    engines,
    st.sampled_from(["eager", "sdpa", "flash"]),
    st.sampled_from(["cuda", "cpu"]),
)
def test_more_sessions_or_longer_requests_never_need_less(sessions, inp, out, engine, attention, device):
    eng, layout = engine
    base = estimate(_inference(sessions, inp, out, eng, layout, attention, device)).per_device
    _check_invariants(estimate(_inference(sessions, inp, out, eng, layout, attention, device)))
    more = estimate(_inference(sessions + 1, inp, out, eng, layout, attention, device)).per_device
    longer_in = estimate(_inference(sessions, inp + 1, out, eng, layout, attention, device)).per_device
    longer_out = estimate(_inference(sessions, inp, out + 1, eng, layout, attention, device)).per_device
    for other in (more, longer_in, longer_out):
        assert other.total_bytes >= base.total_bytes
        assert other.component("kv_cache").bytes >= base.component("kv_cache").bytes


def _training(data: int, zero: int, tensor: int, optimizer: str, ckpt: str) -> Workload:
    return Workload.model_validate(
        {
            "task": "training",
            "model": {"preset": "llama-3.2-1b"},
            "precision": {"weights": "bf16", "master_weights": "fp32"},
            "training": {
                "micro_batch_size": 1,
                "sequence_length": 1024,
                "optimizer": optimizer,
                "activation_checkpointing": ckpt,
            },
            "parallelism": {"data": data, "zero_stage": zero, "tensor": tensor},
        }
    )


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from([1, 2, 4, 8, 64]),
    st.integers(0, 2),
    st.sampled_from([1, 2, 4]),
    st.sampled_from(["adamw", "adamw_8bit", "sgd", "sgd_momentum", "adafactor", "lion"]),
    st.sampled_from(["none", "selective", "full"]),
)
def test_sharding_never_raises_model_states(data, zero, tensor, optimizer, ckpt):
    def states(w):
        pd = estimate(w).per_device
        _check_invariants(estimate(w))
        return sum(pd.component(n).bytes for n in ("weights", "gradients", "optimizer_state"))

    base = states(_training(data, zero, tensor, optimizer, ckpt))
    assert states(_training(data, zero + 1, tensor, optimizer, ckpt)) <= base
    assert states(_training(data * 2, zero, tensor, optimizer, ckpt)) <= base
    assert states(_training(data, zero, tensor * 2, optimizer, ckpt)) <= base


def test_checkpointing_reduces_activations():
    acts = {
        m: estimate(_training(1, 0, 1, "adamw", m)).per_device.component("activations").bytes
        for m in ("none", "selective", "full")
    }
    assert acts["full"] < acts["selective"] < acts["none"]


def test_eager_attention_materializes_scores():
    sdpa = estimate(_inference(8, 4096, 16, "transformers", "dynamic", "sdpa", "cpu")).per_device
    eager = estimate(_inference(8, 4096, 16, "transformers", "dynamic", "eager", "cpu")).per_device
    assert eager.component("activations").bytes > sdpa.component("activations").bytes + 8 * 14 * 4096 * 4096 * 2
