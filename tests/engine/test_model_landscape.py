"""The model landscape: real configs of the families people deploy, read per layer.

Parameter counts are checked against transformers 5.24.0's meta-device count of the same config, stored beside
each config in tests/engine/data/hf_configs (re-counted by `python -m benchmarks.model_landscape.count_parameters
--check`, which needs the bench extras); KV and state per token and per sequence against vLLM's `KVCacheSpec`s
(vllm-0.11.0/v1/kv_cache_interface.py, model_executor/layers/mamba/mamba_utils.py), worked by hand from the
config numbers in each test.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from budgets.engine import estimate
from budgets.engine.components import kv_cache as kv
from budgets.engine.models.hf_config import UnsupportedModelError, from_hf_config
from budgets.engine.models.parameters import parameter_count, weight_groups
from budgets.engine.models.presets import load_presets
from budgets.engine.schema import Workload
from budgets.engine.vllm import CacheLayout

DATA = Path(__file__).parent / "data" / "hf_configs"
RECORDS = {p.stem: json.loads(p.read_text()) for p in sorted(DATA.glob("*.json"))}
# every collected config is read; a family added here before its rules exist is listed, with the reason
NOT_YET: set[str] = set()
GIB = 2**30


def _spec(record_id: str):
    return from_hf_config(RECORDS[record_id]["config"])


@pytest.mark.parametrize("record_id", sorted(set(RECORDS) - NOT_YET))
def test_parameters_equal_transformers_meta_count(record_id: str) -> None:
    record = RECORDS[record_id]
    spec = from_hf_config(record["config"])
    counted = record["transformers"]
    expected = counted.get("text_parameter_count") or counted["parameter_count"]
    assert parameter_count(spec).total - spec.tower_params == expected
    # the weight groups quantization prices add up to the same parameters
    assert sum(g.elements for g in weight_groups(spec)) == parameter_count(spec).total


def test_the_collection_covers_the_families() -> None:
    types = {r["model_type"] for r in RECORDS.values()}
    for needed in (
        "deepseek_v3",
        "deepseek_v32",
        "kimi_k2",
        "kimi_linear",
        "glm4_moe",
        "glm4_moe_lite",
        "gpt_oss",
        "granite",
        "olmo2",
        "smollm3",
        "minimax_m2",
        "mimo",
        "nemotron-nas",
        "mllama",
        "llama4",
        "qwen2_5_vl",
        "qwen3_vl",
        "qwen3_next",
        "qwen3_5",
        "qwen3_5_moe",
        "mistral3",
        "nemotron_h",
        "jamba",
    ):
        assert needed in types


@pytest.mark.parametrize("record_id", sorted(set(RECORDS) - NOT_YET))
def test_every_collected_config_is_budgeted_under_vllm(record_id: str) -> None:
    w = Workload.model_validate({"task": "inference", "model": {"hf_config": RECORDS[record_id]["config"]}})
    budget = estimate(w, device_memory_bytes=int(139.81 * GIB))
    assert budget.per_device.total_bytes > 0
    assert budget.serving is not None and budget.serving.kv_bytes_per_token >= 0


# --- KV and state per kind, against vLLM's KVCacheSpec (v0.11.0) -------------------------------------------


def test_full_attention_llama_3_1_8b() -> None:
    """FullAttentionSpec.page_size_bytes = 2 × block × kv_heads × head_size × dtype (kv_cache_interface.py:63-66):
    32 layers × 2 × 8 × 128 × 2 B = 131,072 B/token."""
    spec = load_presets()["llama-3.1-8b"].spec
    assert kv.kv_bytes_per_token(spec, 1, 0, 32, "bf16") == 131_072
    assert kv.kv_bytes_per_token(spec, 8, 0, 32, "bf16") == 131_072 // 8
    assert kv.kv_bytes_per_token(spec, 16, 0, 32, "bf16") == 131_072 // 8  # max(1, 8 // 16) heads, replicated


def test_mla_deepseek_v3_latent_is_not_split_by_tensor_degree() -> None:
    """MLAAttentionSpec: one latent of kv_lora_rank + qk_rope_head_dim per token (kv_cache_interface.py:146-153,
    attention/layer mla.py:96-101: head_size 576, one KV head): 61 × 576 × 2 B = 70,272 B/token, at any TP."""
    spec = _spec("deepseek-v3")
    assert {r.mixer.kind for r in spec.layer_runs} == {"mla"}
    for tensor in (1, 8, 16):
        assert kv.kv_bytes_per_token(spec, tensor, 0, 61, "bf16") == 70_272
    assert kv.kv_bytes_per_token(spec, 1, 0, 61, "fp8") == 35_136


def test_mla_deepseek_v32_adds_the_indexer_key() -> None:
    """V3.2's indexer caches index_head_dim (128) more per token and layer (deepseek_v2.py:770-775 keeps 128 fp8
    values + a 4 B scale = 132 B; at the cache dtype here: 128 elements)."""
    spec = _spec("deepseek-v3.2")
    assert kv.kv_bytes_per_token(spec, 1, 0, 61, "bf16") == 61 * (576 + 128) * 2


def test_sliding_window_gpt_oss_120b_pool_per_request() -> None:
    """SlidingWindowSpec.max_memory_usage_bytes: (cdiv(min(window − 1 + max_num_batched_tokens, tokens), block)
    + 1) pages (kv_cache_interface.py:192-214); full layers every block. gpt-oss-120b: 18 full + 18 sliding (128)
    layers, 8 KV heads × 64: 2,048 B/token/layer. One request of 131,072 tokens, mnbt 8,192, block 16:
    18 × 8,192 × 32,768 + 18 × (cdiv(8,319, 16) + 1) × 32,768 = 4,831,838,208 + 307,298,304 B."""
    spec = _spec("gpt-oss-120b")
    kinds = {r.mixer.kind: 0 for r in spec.layer_runs}
    for r in spec.layer_runs:
        kinds[r.mixer.kind] += r.count
    assert kinds == {"sliding": 18, "full": 18}
    cache = CacheLayout(spec, 1, 0, 36, "bf16", 16, 8192)
    assert cache.request_bytes(131_072) == 4_831_838_208 + 307_298_304
    # the pool's reported tokens count every layer as one attention page (kv_cache_utils.py:1080-1087)
    assert cache.page_bytes_per_token == 36 * 2048
    # transformers keeps at most the window on the sliding layers
    assert kv.kv_cache_bytes(spec, 1, 0, 36, "bf16", "contiguous", 1000, 1) == (18 * 1000 + 18 * 128) * 2048


def test_chunked_llama_4_scout_is_cached_as_full_attention_by_vllm() -> None:
    """Llama 4: 36 chunked (8,192) + 12 global layers; vLLM 0.11 turns the hybrid allocator off for chunked local
    attention (config/__init__.py:519-529), so every layer keeps every block: 48 × 2 × 8 × 128 × 2 = 196,608 B."""
    spec = _spec("llama-4-scout")
    counts = {"chunked": 0, "full": 0}
    for r in spec.layer_runs:
        counts[r.mixer.kind] += r.count
    assert counts == {"chunked": 36, "full": 12}
    assert kv.kv_bytes_per_token(spec, 1, 0, 48, "bf16") == 196_608
    assert kv.kv_bytes_per_token(spec, 4, 0, 48, "bf16") == 49_152
    cache = CacheLayout(spec, 1, 0, 48, "bf16", 16, 8192)
    assert cache.uniform and cache.request_bytes(100_000) == 196_608 * 100_000
    # transformers' cache keeps a chunk on the chunked layers
    assert kv.kv_cache_bytes(spec, 1, 0, 48, "bf16", "contiguous", 10_000, 1) == 4096 * (12 * 10_000 + 36 * 8192)


def test_linear_attention_qwen3_next_state_per_sequence() -> None:
    """Gated DeltaNet (mamba_utils.py gated_delta_net_state_shape): conv (kernel − 1) × (2·16·128 + 32·128) and
    temporal 32 × 128 × 128 per layer: 1,097,728 B in bf16; 36 such layers = 39,518,208 B per sequence; the 12
    full-attention layers (2 KV heads × 256): 24,576 B/token."""
    spec = _spec("qwen3-next-80b-a3b")
    assert kv.state_bytes_per_sequence(spec, 1, 0, 48, "bf16") == 39_518_208
    assert kv.kv_bytes_per_token(spec, 1, 0, 48, "bf16") == 24_576
    assert kv.kv_bytes_per_token(spec, 2, 0, 48, "bf16") == 12_288  # max(1, 2 // 2)
    assert kv.state_bytes_per_sequence(spec, 2, 0, 48, "bf16") == 39_518_208 // 2


def test_mamba2_nemotron_h_56b_state_per_sequence() -> None:
    """Mamba2 (mamba_utils.py mamba2_state_shape): conv (kernel − 1) × (inner + 2·groups·state) = 3 × 20,480, SSM
    heads × head_dim × state = 256 × 64 × 256: 8,511,488 B per layer in bf16, 54 Mamba layers = 459,620,352 B."""
    spec = _spec("nemotron-h-56b")
    layers = spec.num_layers
    assert kv.state_bytes_per_sequence(spec, 1, 0, layers, "bf16") == 54 * 8_511_488
    attention = sum(r.count for r in spec.layer_runs if r.mixer.kind == "full")
    assert attention == 10
    assert kv.kv_bytes_per_token(spec, 1, 0, layers, "bf16") == 10 * 2 * 8 * 128 * 2


def test_mamba1_jamba_state_per_sequence() -> None:
    """Mamba1 (mamba_utils.py mamba1_state_shape): conv (kernel − 1) × inner = 3 × 8,192, SSM inner × state =
    8,192 × 16: 311,296 B per layer in bf16; 28 Mamba layers = 8,716,288 B; 4 attention layers."""
    spec = _spec("ai21-jamba-1.5-mini")
    assert kv.state_bytes_per_sequence(spec, 1, 0, 32, "bf16") == 28 * 311_296
    assert kv.kv_bytes_per_token(spec, 1, 0, 32, "bf16") == 4 * 2 * 8 * 128 * 2


def test_cross_attention_layers_cache_nothing_per_token() -> None:
    spec = _spec("llama-3.2-90b-vision-instruct")
    cross = sum(r.count for r in spec.layer_runs if r.mixer.kind == "cross")
    assert cross == 20
    assert kv.kv_bytes_per_token(spec, 1, 0, spec.num_layers, "bf16") == (100 - 20) * 2 * 8 * 128 * 2


def test_nas_layers_without_attention_cache_nothing() -> None:
    spec = _spec("llama-3.3-nemotron-super-49b-v1")
    attention = [r for r in spec.layer_runs if r.mixer.kind == "full"]
    assert sum(r.count for r in attention) == 49
    per_token = sum(r.count * 2 * r.mixer.kv_heads * 128 * 2 for r in attention)
    assert kv.kv_bytes_per_token(spec, 1, 0, spec.num_layers, "bf16") == per_token


# --- what the reader refuses, and how it reads what it does not know ------------------------------------------


def test_an_unknown_model_type_with_standard_fields_is_read_generically_and_says_so() -> None:
    config = {**RECORDS["granite-3.3-8b-instruct"]["config"], "model_type": "my_new_family"}
    w = Workload.model_validate({"task": "inference", "model": {"hf_config": config}})
    budget = estimate(w)
    assert any("no rules of its own" in a and "±10%" in a for a in budget.assumptions)
    weights = budget.per_device.component("weights")
    assert weights.low < weights.bytes < weights.high


def test_a_relabelled_config_is_not_silently_read_as_another_family() -> None:
    """Llama-4-Scout relabelled `llama` was budgeted as 6.7 B: a config's fields decide, and a wrapper without its
    text_config is refused rather than read as the class defaults."""
    with pytest.raises(UnsupportedModelError, match="text_config"):
        from_hf_config({"model_type": "gemma3", "vision_config": {}})
    scout = RECORDS["llama-4-scout"]["config"]["text_config"]
    relabelled = from_hf_config({**scout, "model_type": "llama4_text"})
    assert parameter_count(relabelled).total == RECORDS["llama-4-scout"]["transformers"]["text_parameter_count"]


# --- checkpoints: quantized weights against published file sizes ----------------------------------------------


@pytest.mark.parametrize("record_id", ["gpt-oss-20b", "gpt-oss-120b", "qwen3-32b-fp8"])
def test_quantized_checkpoint_weights_equal_the_published_total_size(record_id: str) -> None:
    """The safetensors total of each checkpoint, as its record quotes it (MXFP4: bf16 attention, embeddings and
    router, fp4 experts with an e8m0 scale per 32: exact; FP8 block: fp8 Linears with a scale per 128 × 128 block,
    priced fp32 as DeepSeek stores it — Qwen3-32B-FP8 stores them bf16, 3.8 MB less: +0.011 %)."""
    record = RECORDS[record_id]
    w = Workload.model_validate({"task": "inference", "model": {"hf_config": record["config"]}})
    published = record["checkpoint"]["total_size"]
    assert abs(w.model.weights_bytes - published) / published < 0.0002
    assert w.precision.weights == {"gpt-oss-20b": "mxfp4", "gpt-oss-120b": "mxfp4"}.get(record_id, "fp8")
    assert any("quantization_config" in a for a in estimate(w).assumptions)


def test_a_checkpoint_summary_wins_and_a_contradiction_is_named() -> None:
    config = RECORDS["qwen3-32b-fp8"]["config"]
    exact = Workload.model_validate(
        {"task": "inference", "model": {"hf_config": config, "checkpoint": {"total_size": 34_322_434_048}}}
    )
    assert exact.model.weights_bytes == 34_322_434_048
    assert not any("contradicts" in a for a in estimate(exact).assumptions)
    bf16_sized = Workload.model_validate(
        {"task": "inference", "model": {"hf_config": config, "checkpoint": {"total_size": 65_524_246_528}}}
    )
    assert bf16_sized.model.weights_bytes == 65_524_246_528
    assert any("contradicts quantization_config" in a for a in estimate(bf16_sized).assumptions)


def test_a_tensor_list_gives_exact_weights_for_any_architecture() -> None:
    tensors = [
        {"name": "model.embed_tokens.weight", "dtype": "BF16", "shape": [1000, 64]},
        {"name": "model.layers.0.mlp.experts.gate_up_proj_blocks", "dtype": "U8", "shape": [4, 128, 2, 16]},
        {"name": "model.layers.0.mlp.experts.gate_up_proj_scales", "dtype": "U8", "shape": [4, 128, 2]},
    ]
    w = Workload.model_validate(
        {
            "task": "inference",
            "model": {"preset": "llama-3.2-1b", "checkpoint": {"tensors": tensors}},
        }
    )
    assert w.model.weights_bytes == 1000 * 64 * 2 + 4 * 128 * 2 * 16 + 4 * 128 * 2


# --- gpt-oss-120b on one 80 GB GPU, against published vLLM start-ups -----------------------------------------


def _gpt_oss_120b(device: str, memory_gib: float, version: str, **inference) -> object:
    config = RECORDS["gpt-oss-120b"]["config"]
    inference = {"max_input_tokens": inference["max_model_len"] - 1024, "max_output_tokens": 1024, **inference}
    w = Workload.model_validate(
        {
            "task": "inference",
            "model": {"hf_config": config},
            "inference": inference,
            "runtime": {"engine_version": version},
        }
    )
    return estimate(w, device_memory_bytes=int(memory_gib * GIB), device_name=device)


def _within(ours: float, published: float) -> bool:
    return abs(ours - published) <= max(1.0, 0.03 * abs(published))


def test_gpt_oss_120b_weights_are_vllms_marlin_layout() -> None:
    """ "Model loading took 65.9651 GiB" (vllm#23278 on H100, 0.10.1; blog.huikang.dev 2025-12-28, 0.11.2): the
    MXFP4 experts padded as Marlin lays them out, 5.13 GiB over the checkpoint's 60.77 GiB."""
    budget = _gpt_oss_120b("NVIDIA H100 80GB HBM3", 79.18, "0.11.0", max_model_len=98_304, max_num_seqs=6)
    weights = budget.per_device.component("weights")
    assert abs(weights.bytes / GIB - 65.9651) / 65.9651 < 0.002
    assert weights.low / GIB == pytest.approx(65_248_815_744 / GIB, abs=0.1)  # Triton's layout: no padding


def test_gpt_oss_120b_pool_matches_the_published_start_ups() -> None:
    """Two published 0.11 start-ups: "Available KV cache memory: 8.99 GiB" (huikang: util 0.96, max_model_len 98,304,
    max_num_seqs 6, max_num_batched_tokens 2,048 — an A100-80GB-class GPU) and "1.71 GiB" on an H100 at util 0.95
    with max_num_batched_tokens 1,024 and the default max_model_len 131,072, which then refused to start
    (vllm#27508)."""
    kaggle = _gpt_oss_120b(
        "NVIDIA A100-SXM4-80GB", 79.15, "0.11.2", max_model_len=98_304, gpu_memory_utilization=0.96, max_num_seqs=6
    )
    assert kaggle.serving.starts
    assert _within(kaggle.serving.available_kv_bytes / GIB, 8.99)
    h100 = _gpt_oss_120b(
        "NVIDIA H100 80GB HBM3",
        79.18,
        "0.11.0",
        max_model_len=131_072,
        gpu_memory_utilization=0.95,
        max_num_batched_tokens=1024,
    )
    assert _within(h100.serving.available_kv_bytes / GIB, 1.71)
    assert not h100.serving.starts and "will not start" in h100.serving.reason


def test_gpt_oss_120b_serves_98k_tokens_on_one_h100_with_the_published_settings() -> None:
    budget = _gpt_oss_120b(
        "NVIDIA H100 80GB HBM3", 79.18, "0.11.0", max_model_len=98_304, gpu_memory_utilization=0.96, max_num_seqs=6
    )
    assert budget.serving.starts and budget.serving.max_concurrent_sessions_at_max_request >= 1


def test_a_hybrid_raises_the_attention_block_until_a_page_holds_a_state() -> None:
    """vllm-0.11.0/model_executor/models/config.py:345-394: Qwen3-Next at TP2 — attention 1,024 B per token per layer,
    a Gated-DeltaNet state of 548,864 B per layer — runs blocks of 16 × cdiv(548,864, 16 × 1,024) = 544 tokens,
    each state padded to 544 × 1,024 B (the 0.10.2 H200 log: "Setting attention block size to 544 tokens")."""
    spec = _spec("qwen3-next-80b-a3b")
    cache = CacheLayout(spec, 2, 0, 48, "bf16", 16, 8192)
    assert cache.block_tokens == 544
    assert cache.page_bytes_per_token == 48 * 1024
    one = cache.request_bytes(262_144)
    assert one == 12 * math.ceil(262_144 / 544) * 544 * 1024 + 36 * 544 * 1024


CLASS_DEFAULTS = {p.stem: json.loads(p.read_text()) for p in sorted((DATA.parent / "hf_class_defaults").glob("*.json"))}


@pytest.mark.parametrize("model_type", sorted(CLASS_DEFAULTS))
def test_families_without_a_collected_config_equal_transformers_on_their_class_defaults(model_type: str) -> None:
    """granitemoehybrid, falcon_h1 and cohere: no verbatim config.json of a published checkpoint was found, so the
    configuration class's own defaults (dumped with transformers 5.24.0) stand in, with its meta-device count."""
    record = CLASS_DEFAULTS[model_type]
    spec = from_hf_config(record["config"])
    assert parameter_count(spec).total == record["transformers"]["parameter_count"]
    w = Workload.model_validate({"task": "inference", "model": {"hf_config": record["config"]}})
    assert estimate(w, device_memory_bytes=int(139.81 * GIB)).per_device.total_bytes > 0


def test_the_architecture_comes_from_the_catalogs_compute_capability_not_the_name() -> None:
    """A name the patterns do not know, with the catalog's compute capability: the Hopper context and cuBLAS
    workspaces apply; and on compute capability 10 vLLM keeps MXFP4 experts in FlashInfer's layout."""
    w = Workload.model_validate(
        {"task": "inference", "model": {"preset": "llama-3.1-8b"}, "inference": {"engine": "transformers"}}
    )
    by_name = estimate(w, device_name="Acme Accelerator 9000")
    by_fact = estimate(w, device_name="Acme Accelerator 9000", compute_capability=(9, 0))
    assert "hopper" not in by_name.per_device.component("runtime").note
    assert "hopper" in by_fact.per_device.component("runtime").note
    config = RECORDS["gpt-oss-120b"]["config"]
    oss = Workload.model_validate({"task": "inference", "model": {"hf_config": config}})
    b200 = estimate(oss, device_memory_bytes=int(178 * GIB), compute_capability=(10, 0))
    h100 = estimate(oss, device_memory_bytes=int(79.18 * GIB), compute_capability=(9, 0))
    assert "FlashInfer" in b200.per_device.component("weights").note
    assert "Marlin" in h100.per_device.component("weights").note
    assert b200.per_device.component("weights").bytes > h100.per_device.component("weights").bytes


@pytest.mark.parametrize(("record_id", "layers"), [("mimo-7b-base", 1), ("deepseek-v3", 1), ("kimi-k2-instruct", 0)])
def test_the_budget_names_the_mtp_layers_it_does_not_count(record_id: str, layers: int) -> None:
    config = RECORDS[record_id]["config"]
    budget = estimate(Workload.model_validate({"task": "inference", "model": {"hf_config": config}}))
    named = [a for a in budget.assumptions if "multi-token-prediction" in a]
    assert len(named) == (1 if layers else 0)
    if layers:
        assert f"the checkpoint's {layers} multi-token-prediction layer(s)" in named[0]
        assert "vLLM's main model skips their weights" in named[0]
