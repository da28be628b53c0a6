"""What the engine's budget must do, checked through the public API only (`Workload`, `estimate`, `Budget`).

Properties hold over generated small model shapes (hypothesis); the few fixed mechanisms are lower
bounds from a cited source line, not byte pins of the engine's internals, so a transformers upgrade that
moves a small buffer changes the measured cases (test_measured_cases.py), not these tests.
Sources quoted as `file:line` are transformers 5.24.0 / torch 2.13.0, the versions the benchmark measured.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from budgets.engine import Workload, estimate, load_presets, model_weight_bytes

BYTES = {"fp32": 4, "bf16": 2}
EXAMPLES = settings(max_examples=25, deadline=None)


@st.composite
def dense_configs(draw) -> dict:
    """A small decoder-only config.json: GQA from MHA to MQA, tied or untied head."""
    kv_heads = draw(st.sampled_from([1, 2, 4]))
    heads = kv_heads * draw(st.sampled_from([1, 2, 4]))
    head_dim = draw(st.sampled_from([16, 32, 64]))
    return {
        "model_type": draw(st.sampled_from(["llama", "qwen2", "mistral", "qwen3"])),
        "num_hidden_layers": draw(st.integers(1, 3)),
        "hidden_size": heads * head_dim,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "head_dim": head_dim,
        "intermediate_size": draw(st.integers(8, 96)) * 8,
        "vocab_size": draw(st.integers(64, 4096)),
        "tie_word_embeddings": draw(st.booleans()),
        "sliding_window": None,
    }


def generate(cfg: dict, *, b=2, s=64, n=8, layout="dynamic", precision="bf16", **runtime) -> Workload:
    """A transformers `generate` run: b sessions of s prompt tokens and n new tokens."""
    return Workload.model_validate(
        {
            "task": "inference",
            "model": {"hf_config": dict(cfg)},
            "precision": {"weights": precision, "compute": precision, "kv_cache": precision},
            "inference": {
                "max_input_tokens": s,
                "max_output_tokens": n,
                "concurrent_sessions": b,
                "engine": runtime.pop("engine", "transformers"),
                "kv_cache_layout": layout,
            },
            "runtime": {"device": "cpu", "attention": "sdpa", **runtime},
        }
    )


def train(cfg: dict, *, b=2, s=64, precision="fp32", optimizer="sgd", ckpt="none", **extra) -> Workload:
    """A full fine-tune step; `extra` may hold `parallelism`, `runtime` and `master_weights`."""
    return Workload.model_validate(
        {
            "task": "training",
            "model": {"hf_config": dict(cfg)},
            "precision": {
                "weights": precision,
                "compute": precision,
                "gradients": precision,
                "master_weights": extra.get("master_weights"),
            },
            "training": {
                "micro_batch_size": b,
                "sequence_length": s,
                "optimizer": optimizer,
                "activation_checkpointing": ckpt,
                "method": "full",
            },
            "parallelism": extra.get("parallelism", {}),
            "runtime": {"device": "cpu", "attention": "sdpa", **extra.get("runtime", {})},
        }
    )


def part(w: Workload, name: str) -> int:
    return estimate(w).per_device.component(name).bytes


def phase(budget, name: str) -> int:
    return next(p.bytes for p in budget.per_device.phases if p.name == name)


def kv_per_token(cfg: dict, precision: str) -> int:
    # K and V, every layer, kv heads × head dim (PagedAttention, arXiv:2309.06180 §3; DOMAIN.md §2)
    return 2 * cfg["num_hidden_layers"] * cfg["num_key_value_heads"] * cfg["head_dim"] * BYTES[precision]


# --- invariants of every budget ------------------------------------------------------------------


def assert_consistent(budget) -> None:
    pd = budget.per_device
    for c in pd.components:
        assert 0 <= c.low <= c.bytes <= c.high, c
    assert 0 <= pd.total_low_bytes <= pd.total_bytes <= pd.total_high_bytes
    # the peak is the largest phase plus the allocator's slack, and the budget names that phase
    largest = max(pd.phases, key=lambda p: p.bytes)
    assert pd.peak_phase == largest.name
    assert pd.total_bytes == largest.bytes + pd.component("fragmentation").bytes
    views = budget.as_contract()["per_device"]["views"]
    if budget.device == "cuda":
        # max_memory_allocated ≤ max_memory_reserved ≤ what NVML shows for the process
        for key in ("low", "bytes", "high"):
            assert views["framework_allocated"][key] <= views["framework_reserved"][key]
            assert views["framework_reserved"][key] <= views["device_used"][key]
        assert views["device_used"]["bytes"] == pd.total_bytes


@EXAMPLES
@given(
    dense_configs(),
    st.sampled_from(["dynamic", "contiguous"]),
    st.sampled_from(["cpu", "cuda"]),
    st.sampled_from(["eager", "sdpa"]),
)
def test_generate_budgets_are_consistent(cfg, layout, device, attention):
    assert_consistent(estimate(generate(cfg, layout=layout, device=device, attention=attention)))


@EXAMPLES
@given(dense_configs(), st.sampled_from(["none", "full"]), st.sampled_from(["cpu", "cuda"]))
def test_training_budgets_are_consistent(cfg, ckpt, device):
    assert_consistent(estimate(train(cfg, optimizer="adamw", ckpt=ckpt, runtime={"device": device})))


# --- more work never needs less memory -----------------------------------------------------------


@EXAMPLES
@given(
    dense_configs(),
    st.integers(1, 8),
    st.integers(1, 256),
    st.integers(1, 64),
    st.sampled_from(["dynamic", "contiguous"]),
)
def test_generate_grows_with_sessions_prompt_and_output(cfg, b, s, n, layout):
    base = estimate(generate(cfg, b=b, s=s, n=n, layout=layout)).per_device
    for more in ({"b": b + 1, "s": s, "n": n}, {"b": b, "s": s + 1, "n": n}, {"b": b, "s": s, "n": n + 1}):
        other = estimate(generate(cfg, layout=layout, **more)).per_device
        assert other.total_bytes >= base.total_bytes
        assert other.component("kv_cache").bytes > base.component("kv_cache").bytes


@EXAMPLES
@given(dense_configs(), st.integers(1, 4), st.integers(8, 256))
def test_training_grows_with_batch_and_sequence(cfg, b, s):
    base = estimate(train(cfg, b=b, s=s)).per_device
    for other in (estimate(train(cfg, b=b + 1, s=s)), estimate(train(cfg, b=b, s=s + 8))):
        assert other.per_device.total_bytes >= base.total_bytes
        assert other.per_device.component("activations").bytes > base.component("activations").bytes


# --- what each setting changes ---------------------------------------------------------------------


@EXAMPLES
@given(dense_configs(), st.integers(2, 4), st.integers(64, 512))
def test_checkpointing_lowers_activations(cfg, layers, s):
    # from two layers on: with one, the recomputed layer is all that was saved, plus its checkpointed input
    cfg = {**cfg, "num_hidden_layers": layers}
    acts = {m: part(train(cfg, s=s, ckpt=m), "activations") for m in ("none", "selective", "full")}
    assert acts["full"] < acts["none"]
    assert acts["full"] <= acts["selective"] <= acts["none"]


@EXAMPLES
@given(dense_configs())
def test_fp32_doubles_weights_and_kv_and_needs_more(cfg):
    bf16, fp32 = estimate(generate(cfg)).per_device, estimate(generate(cfg, precision="fp32")).per_device
    assert fp32.component("weights").bytes == 2 * bf16.component("weights").bytes
    assert fp32.component("kv_cache").bytes == 2 * bf16.component("kv_cache").bytes
    assert fp32.total_bytes > bf16.total_bytes


@EXAMPLES
@given(dense_configs(), st.sampled_from(["dynamic", "contiguous"]))
def test_gqa_kv_is_smaller_than_mha_by_the_head_ratio(cfg, layout):
    mha = {**cfg, "num_key_value_heads": cfg["num_attention_heads"]}
    ratio = cfg["num_attention_heads"] // cfg["num_key_value_heads"]
    assert part(generate(mha, layout=layout), "kv_cache") == ratio * part(generate(cfg, layout=layout), "kv_cache")


@EXAMPLES
@given(dense_configs())
def test_a_tied_head_is_counted_once(cfg):
    untied, tied = {**cfg, "tie_word_embeddings": False}, {**cfg, "tie_word_embeddings": True}
    head = cfg["vocab_size"] * cfg["hidden_size"] * BYTES["bf16"]  # lm_head.weight: [vocab, hidden]
    assert part(generate(untied), "weights") - part(generate(tied), "weights") == head


@EXAMPLES
@given(dense_configs(), st.integers(1, 4), st.integers(1, 128), st.integers(1, 32))
def test_static_cache_is_preallocated_for_the_whole_request(cfg, b, s, n):
    per_token = kv_per_token(cfg, "bf16")
    static = estimate(generate(cfg, b=b, s=s, n=n, layout="contiguous"))
    # transformers sizes its StaticCache to max_length − 1: the last token is never fed back
    # (generation/utils.py:2963 `max_cache_length = generation_config.max_length - 1`)
    assert static.per_device.component("kv_cache").bytes == per_token * b * (s + n - 1)
    generic = generate(cfg, b=b, s=s, n=n, layout="contiguous", engine="generic")
    assert part(generic, "kv_cache") == per_token * b * (s + n)
    # a dynamic cache reaches the same length by torch.cat (cache_utils.py:136), copying while it grows
    dynamic = estimate(generate(cfg, b=b, s=s, n=n, layout="dynamic"))
    assert dynamic.per_device.component("kv_cache").bytes >= per_token * b * (s + n - 1)
    # ... but holds only the prompt at prefill, where the static cache already holds everything
    assert phase(static, "prefill") >= phase(dynamic, "prefill")


MOE = {
    "model_type": "mixtral",
    "num_hidden_layers": 2,
    "hidden_size": 256,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "head_dim": 32,
    "intermediate_size": 384,
    "vocab_size": 1000,
}


@settings(max_examples=15, deadline=None)
@given(st.sampled_from([2, 4, 8]), st.sampled_from([1, 2]), st.integers(1, 4))
def test_moe_weights_scale_with_experts_and_activations_with_top_k(experts, top_k, b):
    s = 128

    def moe(e: int, k: int) -> dict:
        return {**MOE, "num_local_experts": e, "num_experts_per_tok": k}

    few = estimate(generate(moe(experts, top_k), b=b, s=s))
    more = estimate(generate(moe(2 * experts, top_k), b=b, s=s))
    # every expert is resident: w1, w2, w3 ([I, h] each) and one router row per expert and layer
    per_expert = (3 * MOE["hidden_size"] * MOE["intermediate_size"] + MOE["hidden_size"]) * BYTES["bf16"]
    added = more.per_device.component("weights").bytes - few.per_device.component("weights").bytes
    assert added == MOE["num_hidden_layers"] * experts * per_expert
    # activations follow the routed rows, not the experts: only the router's [tokens, E] logits grow
    tokens = b * s
    grown = more.per_device.component("activations").bytes - few.per_device.component("activations").bytes
    assert 0 <= grown <= tokens * experts * 4
    wider = estimate(generate(moe(2 * experts, 2 * top_k), b=b, s=s)).per_device.component("activations").bytes
    # all tokens × k routed rows pass the experts at once: k more rows each hold at least their gate and
    # up outputs ([rows, I] each) while `act(gate) * up` runs
    extra_rows = tokens * top_k
    assert wider - more.per_device.component("activations").bytes >= extra_rows * 2 * MOE["intermediate_size"] * 2


@settings(max_examples=20, deadline=None)
@given(
    dense_configs(),
    st.sampled_from([2, 4, 8, 16]),
    st.sampled_from(["adamw", "sgd_momentum", "sgd"]),
)
def test_zero_stages_shard_model_states_by_the_data_parallel_degree(cfg, n, optimizer):
    # untied: a tied embedding's dense gradient is a transient beside the sharded gradients
    cfg = {**cfg, "tie_word_embeddings": False}

    def states(zero: int, data: int) -> dict[str, int]:
        w = train(
            cfg,
            precision="bf16",
            optimizer=optimizer,
            master_weights="fp32",
            parallelism={"data": data, "zero_stage": zero},
            runtime={"device": "cuda"},
        )
        pd = estimate(w).per_device
        return {c: pd.component(c).bytes for c in ("weights", "gradients", "optimizer_state")}

    whole = states(0, 1)
    sharded_from = {"optimizer_state": 1, "gradients": 2, "weights": 3}  # ZeRO, arXiv:1910.02054 §5
    for zero in (1, 2, 3):
        got = states(zero, n)
        for component, stage in sharded_from.items():
            expected = whole[component] / n if zero >= stage else whole[component]
            assert abs(got[component] - expected) <= n, (zero, component)


# --- mechanisms, as lower bounds from the source line that causes them ---------------------------

LLAMA = {
    "model_type": "llama",
    "num_hidden_layers": 4,
    "hidden_size": 384,
    "num_attention_heads": 6,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "intermediate_size": 1024,
    "vocab_size": 32000,
    "tie_word_embeddings": False,
}


def test_eager_attention_holds_the_scores_and_their_fp32_softmax():
    # eager_attention_forward: `softmax(attn_weights, dim=-1, dtype=torch.float32)` over [b, heads, s, k]
    # scores (models/llama/modeling_llama.py:197): the bf16 scores and the fp32 probabilities coexist
    b, s, n = 4, 512, 8
    eager = estimate(generate(LLAMA, b=b, s=s, n=n, attention="eager")).per_device.component("activations")
    sdpa = estimate(generate(LLAMA, b=b, s=s, n=n)).per_device.component("activations")
    assert eager.bytes - sdpa.bytes >= b * 6 * s * s * (2 + 4)


def test_many_sessions_peak_at_sampling_over_fp32_logits():
    # `next_token_logits = outputs.logits[:, -1].to(copy=True, dtype=torch.float32)` (generation/utils.py:3248),
    # after the last forward, over the final cache: many sessions × a large vocabulary peak there
    b, s, n = 32, 64, 192
    budget = estimate(generate(LLAMA, b=b, s=s, n=n))
    pd = budget.per_device
    assert pd.peak_phase == "sample"
    final_kv = kv_per_token(LLAMA, "bf16") * b * (s + n - 1)
    logits = b * LLAMA["vocab_size"] * (2 + 4)  # bf16 last-position logits and their fp32 copy
    assert phase(budget, "sample") >= pd.component("weights").bytes + final_kv + logits


def test_full_fine_tune_gradients_match_the_weights():
    # one gradient per trainable parameter, in the parameter dtype (no master copy, fp32)
    pd = estimate(train(LLAMA)).per_device
    assert pd.component("gradients").bytes == pd.component("weights").bytes


def test_adamw_keeps_two_states_per_parameter():
    # torch/optim/adam.py:178-182: exp_avg and exp_avg_sq = zeros_like(p); the fp32 `step` scalars per
    # parameter tensor only widen the range above that
    pd = estimate(train(LLAMA, optimizer="adamw")).per_device
    opt, weights = pd.component("optimizer_state"), pd.component("weights").bytes
    assert opt.low == 2 * weights <= opt.bytes <= opt.high <= 2 * weights * 1.01


def test_cpu_training_range_is_not_a_point():
    pd = estimate(train(LLAMA, b=1, s=64, optimizer="adamw")).per_device
    assert pd.total_low_bytes < pd.total_bytes < pd.total_high_bytes


def test_a_fused_qkv_output_stays_alive_through_attention():
    # Phi3Attention binds `qkv = self.qkv_proj(hidden_states)`; a Llama layer keeps only its projections
    phi3 = {**LLAMA, "model_type": "phi3", "num_key_value_heads": 6}
    llama = {**LLAMA, "num_key_value_heads": 6}
    fused = estimate(generate(phi3, b=8, s=512, attention="eager"))
    split = estimate(generate(llama, b=8, s=512, attention="eager"))
    assert fused.per_device.component("weights").bytes == split.per_device.component("weights").bytes
    assert phase(fused, "prefill") > phase(split, "prefill")


def test_final_logit_softcapping_keeps_its_tanh_output_for_backward():
    gemma2 = {
        **LLAMA,
        "model_type": "gemma2",
        "sliding_window": 64,
        "layer_types": ["sliding_attention", "full_attention"] * 2,
    }
    b, s = 2, 256
    capped = estimate(train(gemma2, b=b, s=s, ckpt="full", runtime={"attention": "eager"})).per_device
    plain_cfg = {**gemma2, "final_logit_softcapping": None}
    plain = estimate(train(plain_cfg, b=b, s=s, ckpt="full", runtime={"attention": "eager"})).per_device
    # `logits = torch.tanh(logits / cap) * cap` saves one more fp32 [b, s, vocab] tensor for backward
    assert capped.total_bytes - plain.total_bytes >= b * s * LLAMA["vocab_size"] * 4


def test_sliding_layers_keep_the_whole_prompt_after_a_dynamic_prefill():
    # DynamicSlidingWindowLayer.update returns the full concatenation (cache_utils.py:242) and keeps a view
    # of it, so the prompt's whole storage lives until the next step, window or not
    gemma2 = {**LLAMA, "model_type": "gemma2", "sliding_window": 64, "layer_types": ["sliding_attention"] * 4}
    b, s = 2, 512
    kv = part(generate(gemma2, b=b, s=s, n=2, precision="fp32", attention="eager"), "kv_cache")
    assert kv >= kv_per_token(gemma2, "fp32") * b * s


def test_a_shared_expert_adds_its_activations():
    qwen2_moe = {
        **LLAMA,
        "model_type": "qwen2_moe",
        "num_experts": 12,
        "num_experts_per_tok": 3,
        "moe_intermediate_size": 160,
        "shared_expert_intermediate_size": 640,
    }
    without = {**qwen2_moe, "shared_expert_intermediate_size": 0}
    tokens = 2 * 320
    # the shared expert's gate, up and act(gate)·up are [tokens, 640] each, saved for backward
    assert part(train(qwen2_moe, b=2, s=320), "activations") - part(train(without, b=2, s=320), "activations") >= (
        3 * tokens * 640 * 4
    )


@pytest.mark.parametrize("precision", ["bf16", "fp8", "int4", "nf4"])
def test_no_plan_needs_less_than_its_share_of_the_model_weights(precision: str) -> None:
    """``model_weight_bytes`` is a floor the recommender's plan search relies on to skip plans unbudgeted:
    whatever the split, the busiest device needs at least the model's weights over the devices that share
    a copy — the budget's total, and vLLM's need of its pool share."""
    checked = 0
    for preset_id, preset in load_presets().items():
        spec = preset.spec
        tensors = [t for t in (1, 2, 4, 8) if spec.num_attention_heads % t == 0 and spec.num_kv_heads % t == 0]
        for tensor in tensors:
            for pipeline in [p for p in (1, 2, 3, 4) if p <= spec.num_layers]:
                for task, engine in (("inference", "vllm"), ("inference", "transformers"), ("training", None)):
                    body: dict = {
                        "name": "floor",
                        "task": task,
                        "model": {"preset": preset_id},
                        "precision": {"weights": precision},
                        "parallelism": {"tensor": tensor, "pipeline": pipeline},
                    }
                    if task == "training":
                        body["training"] = {"method": "qlora" if precision == "nf4" else "lora"}
                        body["parallelism"] |= {"data": 4, "zero_stage": 3}
                    elif precision == "nf4":
                        continue  # nf4 is a training (QLoRA) storage format here
                    else:
                        body["inference"] = {"engine": engine, "max_input_tokens": 512, "max_output_tokens": 64}
                    w = Workload.model_validate(body)
                    floor = model_weight_bytes(w) // (tensor * pipeline * (4 if task == "training" else 1))
                    budget = estimate(w, device_memory_bytes=80 * 2**30)
                    assert budget.per_device.total_bytes >= floor, (preset_id, tensor, pipeline, task)
                    serving = budget.serving
                    if serving is not None and serving.need_bytes is not None and serving.starts:
                        assert serving.need_bytes >= floor, (preset_id, tensor, pipeline, "vllm need")
                    checked += 1
    assert checked > 500
