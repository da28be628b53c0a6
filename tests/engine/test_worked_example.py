"""The worked example of budgets/engine/WORKED_EXAMPLE.md, computed by hand from the model's config.json.

Llama-3.1-8B in bf16, transformers `generate` with SDPA and the default dynamic cache, 4 sessions of an
8,192-token prompt and 1,024 new tokens each, on one H100 80GB. Every number below is plain arithmetic
on the config values, with its source; the engine's per-device components must agree with it (weights
and KV cache exactly; activations within 1 % of their largest term). The CUDA terms (context, cuBLAS,
allocator slack) are re-sourced per architecture in budgets/engine/CUDA_TERMS.md: checked present,
positive and explained, not pinned to a byte value.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from budgets.engine import Workload, estimate

# config.json of meta-llama/Meta-Llama-3.1-8B, verbatim in fixtures/model_presets.json ("llama-3.1-8b"),
# read from github.com/ai-dynamo/aiconfigurator @ 095f58a51c4ca8e61b66ec108d86f223f8d559ce :
# aic-core/src/aiconfigurator_core/model_configs/meta-llama--Meta-Llama-3.1-8B_config.json
CONFIG = {
    "hidden_size": 4096,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "intermediate_size": 14336,
    "vocab_size": 128256,
    "tie_word_embeddings": False,
}
H = CONFIG["hidden_size"]
L = CONFIG["num_hidden_layers"]
HEADS = CONFIG["num_attention_heads"]
KV_HEADS = CONFIG["num_key_value_heads"]
HEAD_DIM = H // HEADS  # 128: LlamaConfig's default head_dim = hidden_size // num_attention_heads
INTER = CONFIG["intermediate_size"]
V = CONFIG["vocab_size"]
BF16 = 2  # bytes

SESSIONS, PROMPT, NEW = 4, 8192, 1024
# the name and the total CUDA reports for an H100 80GB (79.19 GiB): fixtures/catalog/accelerators.json
# "h100-sxm-80gb", from the vLLM 0.19.0 profiler log in llm-d-incubation/llm-d-planner @ d3121e0
# (accuracy/results/v0.19.0/logs/meta-llama-llama-3-1-8b---h100-80gb--tp1pp1dp1--8192.log)
H100_NAME = "NVIDIA H100 80GB HBM3"
H100_USABLE_BYTES = 85_029_615_043

WORKLOAD = {
    "name": "worked-example-llama-3.1-8b-generate",
    "task": "inference",
    "model": {"preset": "llama-3.1-8b"},
    "precision": {"weights": "bf16", "compute": "bf16", "kv_cache": "bf16"},
    "inference": {
        "engine": "transformers",
        "max_input_tokens": PROMPT,
        "max_output_tokens": NEW,
        "concurrent_sessions": SESSIONS,
        "kv_cache_layout": "dynamic",
    },
    "runtime": {"device": "cuda", "attention": "sdpa", "cuda_version": "12.4"},
}


@pytest.fixture(scope="module")
def budget():
    return estimate(Workload.model_validate(WORKLOAD), device_name=H100_NAME)


def test_the_preset_holds_the_cited_config():
    fixture = Path(__file__).resolve().parents[2] / "fixtures" / "model_presets.json"
    presets = json.loads(fixture.read_text())["presets"]
    config = next(p["config"] for p in presets if p["id"] == "llama-3.1-8b")
    assert {k: config[k] for k in CONFIG} == CONFIG


def parameters() -> int:
    # LlamaForCausalLM (models/llama/modeling_llama.py, transformers 5.24.0): per layer q, k, v, o projections
    # (no biases: attention_bias false), gate/up/down (mlp_bias false) and two RMSNorm weights
    attention = H * HEADS * HEAD_DIM + 2 * H * KV_HEADS * HEAD_DIM + HEADS * HEAD_DIM * H
    layer = attention + 3 * H * INTER + 2 * H
    embedding = V * H  # embed_tokens
    head = V * H  # lm_head, untied
    return embedding + L * layer + H + head  # + the final norm


def test_parameters_match_the_published_count():
    # the Hugging Face API's count for meta-llama/Llama-3.1-8B (fixtures/model_presets.json
    # "parameter_count"; the model card rounds it to "8B")
    assert parameters() == 8_030_261_248


def test_weights(budget):
    assert budget.per_device.component("weights").bytes == parameters() * BF16 == 16_060_522_496


KV_PER_TOKEN = 2 * L * KV_HEADS * HEAD_DIM * BF16  # K and V of every layer (PagedAttention §3; DOMAIN.md §2)


def test_kv_cache(budget):
    assert KV_PER_TOKEN == 131_072  # 128 KiB per token, DOMAIN.md §2
    # generate feeds back every token but the last: prompt + new − 1 positions per session
    # (generation/utils.py:2963 `max_cache_length = generation_config.max_length - 1`)
    positions = PROMPT + NEW - 1
    final = KV_PER_TOKEN * positions * SESSIONS
    # DynamicLayer.update: `self.keys = torch.cat([self.keys, key_states], dim=-2)` (cache_utils.py:136)
    # allocates the grown K of one layer while the old one is alive
    growing = KV_HEADS * HEAD_DIM * BF16 * positions * SESSIONS
    assert budget.per_device.component("kv_cache").bytes == final + growing == 4_906_803_200


def largest_activation_term() -> int:
    tokens = SESSIONS * PROMPT  # the prefill runs every prompt at once
    hidden = tokens * H * BF16
    # at the MLP's multiply, LlamaMLP.forward `down_proj(act_fn(gate_proj(x)) * up_proj(x))` (modeling_llama.py:164)
    # holds act(gate), up and their product, [tokens, intermediate] each ...
    mlp = 3 * tokens * INTER * BF16
    # ... beside the model's inputs_embeds (:372), the decoder loop's layer input (:394), the post-attention
    # residual (:311) and its normed copy (:312)
    return 4 * hidden + mlp


def test_activations_are_the_prefill_mlp_instant(budget):
    assert largest_activation_term() == 3_892_314_112
    activations = budget.per_device.component("activations").bytes
    # the rest are model-level tensors: RoPE cos/sin tables and the int64 token ids (< 1 %)
    assert largest_activation_term() <= activations <= 1.01 * largest_activation_term()


def test_the_peak_is_the_prefill(budget):
    pd = budget.per_device
    prefill = next(p.bytes for p in pd.phases if p.name == "prefill")
    prefill_kv = KV_PER_TOKEN * PROMPT * SESSIONS  # the prompt's K and V, all layers
    tensors = pd.component("weights").bytes + prefill_kv + pd.component("activations").bytes
    fixed = sum(pd.component(c).bytes for c in ("workspace", "runtime"))
    assert pd.peak_phase == "prefill"
    assert prefill == tensors + fixed
    assert pd.total_bytes == prefill + pd.component("fragmentation").bytes


@pytest.mark.parametrize("term", ["runtime", "workspace", "fragmentation"])
def test_cuda_terms_are_present_and_explained(budget, term):
    c = budget.per_device.component(term)
    assert 0 <= c.low <= c.bytes <= c.high and c.bytes > 0
    assert c.note.strip()  # where the figure comes from


def test_it_fits_an_h100_80gb_at_the_high_end(budget):
    assert budget.per_device.total_high_bytes < H100_USABLE_BYTES
