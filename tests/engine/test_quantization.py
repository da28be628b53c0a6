"""Quantized checkpoint bytes (`budgets.engine.models.quantization`) against published checkpoint sizes, the
storage layouts of the libraries that write them, every config error, and properties (hypothesis).

Published sizes (bytes unless said; GB = 10^9 B, GiB = 2^30 B):

- gpt-oss-20b, https://huggingface.co/openai/gpt-oss-20b/blob/main/model.safetensors.index.json:
  `{"metadata": {"total_size": 13761264768}, "weight_map": {...}}` (quoted verbatim, with the repository's
  config.json, in public copies of the repository's files found through the code index).
- gpt-oss-120b, https://huggingface.co/openai/gpt-oss-120b: a public test of a deployment asserts
  `self.assertEqual(weights["tensor_bytes"], 65248815744)` for the 15 safetensors files of openai/gpt-oss-120b,
  another calls `parseHfConfig('openai/gpt-oss-120b', gptOss, 65248815744)`; https://fitmygpu.com/models/gpt-oss-120b:
  "OpenAI's GPT-OSS model card lists a 60.8 GiB checkpoint for gpt-oss-120b".
- Llama-3.1-8B-Instruct NVFP4, https://huggingface.co/nvidia/Llama-3.1-8B-Instruct-FP4: a public size-checker test
  lists "Zmierzone rozmiary plików (bajty)" (measured file sizes, bytes) "... nvidia/Llama-3.1-8B-Instruct-FP4"
  with `NVFP4:  6027861376` -- file sizes, so the safetensors JSON headers are included.
- Llama-3.1-8B-Instruct AWQ INT4, https://huggingface.co/hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4:
  ≈5.73 GB (the figure of the task brief, not re-read here), and
  https://n-shot.com/running-llama-3-1-efficiently-a-practical-guide-to-4%e2%80%91bit-quantization-on-consumer-gpus:
  "AWQ and AutoRound-sym ... compress the model to a lean 5.7 GB".
- FP8 checkpoints, as the Hugging Face API counts their safetensors elements (a public model list copies
  `safetensors.total`): https://huggingface.co/Qwen/Qwen3-8B-FP8 `"paramsBillions": 8.191159296` and
  https://huggingface.co/Qwen/Qwen3-8B-Base `"paramsBillions": 8.19073536`;
  https://huggingface.co/RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8 `"paramsBillions": 8.030261696` and
  meta-llama/Llama-3.1-8B `8,030,261,248` (shared/data/model_presets.json). The element counts fix the bytes
  once the dtypes are known: FP8 weights 1 byte, weight_scale_inv float32 (vLLM fp8_utils.py:814-818), every other
  tensor bfloat16; compressed-tensors scales take the module dtype, bf16 (initialize.py:215).
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from budgets.engine.models import quantization as q
from budgets.engine.models.quantization import (
    AwqScheme,
    BitsAndBytesScheme,
    CompressedTensorsScheme,
    Fp8Scheme,
    GptqScheme,
    ModelOptScheme,
    Mxfp4Scheme,
    QuantizationConfigError,
    WeightGroup,
    checkpoint_bytes,
    quantized_weight_bytes,
    read_quantization,
)

# ---------------------------------------------------------------------------------------------------------
# Weight groups of the architectures, from their config numbers
# ---------------------------------------------------------------------------------------------------------


def llama_groups(
    layers=32, hidden=4096, inter=14336, vocab=128256, heads=32, kv_heads=8, head_dim=128, qk_norm=False, tie=False
):
    """Llama/Qwen3: embed, 7 Linears per layer, 2 norms (+ q/k norms for Qwen3), final norm, lm_head."""
    ls = tuple(range(layers))
    linears = [
        ("self_attn.q_proj", "attention", (heads * head_dim, hidden)),
        ("self_attn.k_proj", "attention", (kv_heads * head_dim, hidden)),
        ("self_attn.v_proj", "attention", (kv_heads * head_dim, hidden)),
        ("self_attn.o_proj", "attention", (hidden, heads * head_dim)),
        ("mlp.gate_proj", "mlp", (inter, hidden)),
        ("mlp.up_proj", "mlp", (inter, hidden)),
        ("mlp.down_proj", "mlp", (hidden, inter)),
    ]
    groups = [WeightGroup("model.embed_tokens", "embedding", (vocab, hidden), linear=False)]
    groups += [WeightGroup(f"model.layers.{{layer}}.{n}", r, s, ls) for n, r, s in linears]
    groups += [
        WeightGroup("model.layers.{layer}.input_layernorm", "norm", (hidden,), ls, linear=False),
        WeightGroup("model.layers.{layer}.post_attention_layernorm", "norm", (hidden,), ls, linear=False),
    ]
    if qk_norm:
        groups += [
            WeightGroup("model.layers.{layer}.self_attn.q_norm", "norm", (head_dim,), ls, linear=False),
            WeightGroup("model.layers.{layer}.self_attn.k_norm", "norm", (head_dim,), ls, linear=False),
        ]
    groups.append(WeightGroup("model.norm", "norm", (hidden,), linear=False))
    if not tie:
        groups.append(WeightGroup("lm_head", "lm_head", (vocab, hidden)))
    return groups


def qwen3_8b_groups():
    return llama_groups(layers=36, hidden=4096, inter=12288, vocab=151936, qk_norm=True)


def gpt_oss_groups(layers, experts, hidden=2880, inter=2880, vocab=201088, heads=64, kv_heads=8, head_dim=64):
    """gpt-oss: q/k/v/o with biases, sinks, router with bias, experts' fused gate_up (2·inter × hidden) and
    down with biases (stored as one 3-D tensor per layer: per_layer = experts), two norms, final norm."""
    ls = tuple(range(layers))
    p = "model.layers.{layer}"
    q_out, kv_out = heads * head_dim, kv_heads * head_dim
    return [
        WeightGroup("model.embed_tokens", "embedding", (vocab, hidden), linear=False),
        WeightGroup(f"{p}.self_attn.q_proj", "attention", (q_out, hidden), ls),
        WeightGroup(f"{p}.self_attn.k_proj", "attention", (kv_out, hidden), ls),
        WeightGroup(f"{p}.self_attn.v_proj", "attention", (kv_out, hidden), ls),
        WeightGroup(f"{p}.self_attn.o_proj", "attention", (hidden, q_out), ls),
        WeightGroup(f"{p}.self_attn.q_proj.bias", "attention", (q_out,), ls, linear=False),
        WeightGroup(f"{p}.self_attn.k_proj.bias", "attention", (kv_out,), ls, linear=False),
        WeightGroup(f"{p}.self_attn.v_proj.bias", "attention", (kv_out,), ls, linear=False),
        WeightGroup(f"{p}.self_attn.o_proj.bias", "attention", (hidden,), ls, linear=False),
        WeightGroup(f"{p}.self_attn.sinks", "attention", (heads,), ls, linear=False),
        WeightGroup(f"{p}.mlp.router", "router", (experts, hidden), ls),
        WeightGroup(f"{p}.mlp.router.bias", "router", (experts,), ls, linear=False),
        WeightGroup(f"{p}.mlp.experts.gate_up_proj", "expert", (2 * inter, hidden), ls, per_layer=experts),
        WeightGroup(f"{p}.mlp.experts.gate_up_proj_bias", "expert", (2 * inter,), ls, experts, linear=False),
        WeightGroup(f"{p}.mlp.experts.down_proj", "expert", (hidden, inter), ls, per_layer=experts),
        WeightGroup(f"{p}.mlp.experts.down_proj_bias", "expert", (hidden,), ls, experts, linear=False),
        WeightGroup(f"{p}.input_layernorm", "norm", (hidden,), ls, linear=False),
        WeightGroup(f"{p}.post_attention_layernorm", "norm", (hidden,), ls, linear=False),
        WeightGroup("model.norm", "norm", (hidden,), linear=False),
        WeightGroup("lm_head", "lm_head", (vocab, hidden)),
    ]


# config.json quantization_config of openai/gpt-oss-20b and -120b (the same in both)
GPT_OSS_MXFP4 = {
    "modules_to_not_convert": [
        "model.layers.*.self_attn",
        "model.layers.*.mlp.router",
        "model.embed_tokens",
        "lm_head",
    ],
    "quant_method": "mxfp4",
}
AWQ_GEMM = {"quant_method": "awq", "bits": 4, "group_size": 128, "version": "gemm", "zero_point": True}
QWEN3_FP8 = {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8", "weight_block_size": [128, 128]}
CT_FP8_STATIC = {  # neuralmagic/RedHatAI Meta-Llama-3.1-8B-Instruct-FP8: per-tensor weights, static per-tensor input
    "quant_method": "compressed-tensors",
    "format": "float-quantized",
    "config_groups": {
        "group_0": {
            "targets": ["Linear"],
            "weights": {"num_bits": 8, "type": "float", "strategy": "tensor", "symmetric": True, "dynamic": False},
            "input_activations": {"num_bits": 8, "type": "float", "strategy": "tensor", "dynamic": False},
        }
    },
    "ignore": ["lm_head"],
}
MODELOPT_NVFP4 = {  # hf_quant_config.json of nvidia/Llama-3.1-8B-Instruct-FP4
    "producer": {"name": "modelopt"},
    "quantization": {
        "quant_algo": "NVFP4",
        "kv_cache_quant_algo": "FP8",
        "group_size": 16,
        "exclude_modules": ["lm_head"],
    },
}
CT_NVFP4 = {
    "quant_method": "compressed-tensors",
    "format": "nvfp4-pack-quantized",
    "config_groups": {
        "group_0": {
            "targets": ["Linear"],
            "weights": {"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16},
            "input_activations": {
                "num_bits": 4,
                "type": "float",
                "strategy": "tensor_group",
                "group_size": 16,
                "dynamic": "local",
            },
        }
    },
    "ignore": ["lm_head"],
}
CT_W4A16 = {
    "quant_method": "compressed-tensors",
    "format": "pack-quantized",
    "config_groups": {
        "group_0": {
            "targets": ["Linear"],
            "weights": {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128, "symmetric": True},
        }
    },
    "ignore": ["lm_head"],
}
GPTQ_4 = {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False, "sym": True}
BNB_NF4 = {"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4"}
BNB_8 = {"quant_method": "bitsandbytes", "load_in_8bit": True}
MODELOPT_FP8 = {"quant_method": "modelopt", "quant_algo": "FP8", "exclude_modules": ["lm_head"]}


def _ct_weights(**weights: Any) -> dict[str, Any]:
    """CT_W4A16 with one Linear config group whose weights are `weights`."""
    return _ct_weights_raw(weights)


def _ct_weights_raw(weights: Any) -> dict[str, Any]:
    return {**CT_W4A16, "config_groups": {"g": {"targets": ["Linear"], "weights": weights}}}


def hf_params_to_bytes(published_total, published_base_total, quantized_elements, scale_bytes):
    """Bytes of an FP8 checkpoint from the Hub's element counts: the quantized weights are 1 byte each, the
    extra elements over the unquantized base model are the scales, everything else is bf16."""
    scales = published_total - published_base_total
    return 2 * (published_total - quantized_elements - scales) + quantized_elements + scale_bytes * scales


# ---------------------------------------------------------------------------------------------------------
# Published sizes
# ---------------------------------------------------------------------------------------------------------

PUBLISHED = {
    # name: (groups, config, published bytes, exact-or-tolerance note)
    "gpt-oss-20b MXFP4": (lambda: gpt_oss_groups(24, 32), GPT_OSS_MXFP4, 13_761_264_768),
    "gpt-oss-120b MXFP4": (lambda: gpt_oss_groups(36, 128), GPT_OSS_MXFP4, 65_248_815_744),
    "Llama-3.1-8B NVFP4 (ModelOpt)": (llama_groups, MODELOPT_NVFP4, 6_027_861_376),
    "Llama-3.1-8B AWQ INT4": (llama_groups, AWQ_GEMM, 5_730_000_000),
    "Qwen3-8B FP8 block 128x128": (
        qwen3_8b_groups,
        QWEN3_FP8,
        hf_params_to_bytes(8_191_159_296, 8_190_735_360, 6_945_767_424, 4),
    ),
    "Llama-3.1-8B FP8 per-tensor (compressed-tensors)": (
        llama_groups,
        CT_FP8_STATIC,
        hf_params_to_bytes(8_030_261_696, 8_030_261_248, 6_979_321_856, 2),
    ),
}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_within_two_percent_of_published_size(name):
    groups, config, published = PUBLISHED[name]
    got = quantized_weight_bytes(groups(), config).total_bytes
    error = (got - published) / published
    print(f"{name}: computed {got} B, published {published} B, error {error:+.4%}")
    assert abs(error) < 0.02


def test_gpt_oss_is_exact():
    # the safetensors index sums tensor bytes only, and gpt-oss stores nothing but these tensors
    assert quantized_weight_bytes(gpt_oss_groups(24, 32), GPT_OSS_MXFP4).total_bytes == 13_761_264_768
    r = quantized_weight_bytes(gpt_oss_groups(36, 128), GPT_OSS_MXFP4)
    assert r.total_bytes == 65_248_815_744
    assert abs(r.total_bytes / 2**30 - 60.8) < 0.05  # "60.8 GiB" of the model card
    # experts are the only quantized tensors: 36 layers × 128 experts × (5760 + 2880) × 2880 elements
    assert r.quantized_elements == 36 * 128 * (5760 + 2880) * 2880
    assert "attention" in dict(r.by_role) and dict(r.by_role)["router"] == 36 * (128 * 2880 + 128) * 2


def test_fp8_element_counts_match_the_hub_exactly():
    # the Hub counts 423,936 scale elements more than Qwen3-8B-Base: one per 128×128 block of every Linear
    assert (
        quantized_weight_bytes(qwen3_8b_groups(), QWEN3_FP8).total_bytes == PUBLISHED["Qwen3-8B FP8 block 128x128"][2]
    )
    # RedHatAI's per-tensor FP8: 448 = 224 Linears × (weight_scale + input_scale)
    got = quantized_weight_bytes(llama_groups(), CT_FP8_STATIC).total_bytes
    assert got == PUBLISHED["Llama-3.1-8B FP8 per-tensor (compressed-tensors)"][2]


def test_nvfp4_gap_is_the_safetensors_headers():
    # measured file bytes include each file's JSON header (~150 B per tensor name, dtype, shape, offsets)
    got = quantized_weight_bytes(llama_groups(), MODELOPT_NVFP4).total_bytes
    tensors = 1 + 32 * (7 * 4 + 2 + 2) + 1 + 1  # embed, per layer 7×(weight, 3 scales) + 2 norms + k/v scales, ...
    assert 0 < 6_027_861_376 - got < 200 * tensors


def test_awq_matches_the_autoawq_layout():
    r = quantized_weight_bytes(llama_groups(), AWQ_GEMM)
    linear = 6_979_321_856
    # qweight 4 bits + qzeros 4 bits per 128 + fp16 scale per 128, embeddings/lm_head/norms in fp16
    assert r.total_bytes == linear // 2 + linear // 128 // 2 + linear // 128 * 2 + 2 * (2 * 128256 * 4096 + 65 * 4096)
    assert r.total_bytes == 5_727_854_592
    assert any("lm_head ×1" in a for a in r.assumptions)


# ---------------------------------------------------------------------------------------------------------
# Layouts, one Linear at a time, against the libraries' tensor shapes
# ---------------------------------------------------------------------------------------------------------


def one(config, out_f=4096, in_f=4096, role="mlp", name="model.layers.{layer}.mlp.down_proj", **kw):
    groups = [WeightGroup(name, role, (out_f, in_f), (0,), **kw)]
    return quantized_weight_bytes(groups, config)


def test_awq_gemv_layout_pads_the_zero_width():
    cfg = {**AWQ_GEMM, "version": "gemv", "group_size": 64}
    # gemv.py: qweight (out, in/8), width = ceil(ceil(in/64)/8 / 2)·2 = 8 for in=4096, scales (out, width·8)
    assert one(cfg).total_bytes == 4096 * 512 * 4 + 4096 * 8 * 4 + 4096 * 64 * 2


def test_gptq_layouts_by_bits_and_group():
    for bits in (2, 3, 4, 8):
        cfg = {**GPTQ_4, "bits": bits}
        expected = (4096 // 32 * bits * 4096 + 32 * (4096 // 32 * bits) + 4096) * 4 + 32 * 4096 * 2
        assert one(cfg).total_bytes == expected
    per_channel = one({**GPTQ_4, "group_size": -1}).total_bytes
    assert per_channel == (512 * 4096 + 1 * 512 + 4096) * 4 + 4096 * 2


def test_gptq_lm_head_dynamic_and_block_modules():
    groups = llama_groups(layers=4)
    base = quantized_weight_bytes(groups, GPTQ_4)
    with_head = quantized_weight_bytes(groups, {**GPTQ_4, "lm_head": True})
    assert with_head.total_bytes < base.total_bytes
    skip = quantized_weight_bytes(groups, {**GPTQ_4, "dynamic": {r"-:.*\.mlp\..*": {}}})
    assert skip.quantized_elements == 4 * (2 * 4096 * 4096 + 2 * 1024 * 4096)  # attention only
    eight = quantized_weight_bytes(groups, {**GPTQ_4, "dynamic": {r"+:model\.layers\.[0-1]\..*": {"bits": 8}}})
    assert eight.total_bytes > base.total_bytes
    only_attn = quantized_weight_bytes(groups, {**GPTQ_4, "modules_in_block_to_quantize": [["self_attn.q_proj"]]})
    assert only_attn.quantized_elements == 4 * 4096 * 4096
    router = quantized_weight_bytes([WeightGroup("model.layers.{layer}.mlp.gate", "router", (8, 4096), (0,))], GPTQ_4)
    assert router.quantized_elements == 0


def test_fp8_per_tensor_static_and_marlin_note():
    cfg = {"quant_method": "fp8", "activation_scheme": "static"}
    r = one(cfg)
    assert r.total_bytes == 4096 * 4096 + 2 * 4
    assert any("Marlin" in a and "8.9" in a for a in r.assumptions)
    block = one({**QWEN3_FP8}, out_f=1000, in_f=300)
    assert block.total_bytes == 1000 * 300 + 8 * 3 * 4  # ceil(1000/128) × ceil(300/128) fp32 scales


def test_fp8_keeps_lm_head_and_routers():
    groups = [
        WeightGroup("lm_head", "lm_head", (32000, 4096)),
        WeightGroup("model.layers.{layer}.mlp.gate", "router", (8, 4096), (0, 1)),
    ]
    assert quantized_weight_bytes(groups, QWEN3_FP8).quantized_elements == 0


def test_compressed_tensors_pack_quantized():
    sym = one(CT_W4A16)
    # weight_packed (out, in/8) int32, weight_shape int64[2], bf16 scale per 128
    assert sym.total_bytes == 4096 * 512 * 4 + 16 + 4096 * 32 * 2
    asym_cfg = {**CT_W4A16, "config_groups": {"g": {**CT_W4A16["config_groups"]["group_0"]}}}
    asym_cfg["config_groups"]["g"]["weights"] = {**asym_cfg["config_groups"]["g"]["weights"], "symmetric": False}
    # zero points packed along the output dim: (out/8, in/128) int32 (pack_quantized.py:77-86)
    assert one(asym_cfg).total_bytes == sym.total_bytes + 512 * 32 * 4
    act = {**CT_W4A16, "config_groups": {"g": {**CT_W4A16["config_groups"]["group_0"]}}}
    act["config_groups"]["g"]["weights"] = {**act["config_groups"]["g"]["weights"], "actorder": "group"}
    assert one(act).total_bytes == sym.total_bytes + 4096 * 4  # weight_g_idx int32


def test_compressed_tensors_nvfp4_and_int8_channel():
    # fp4 packed 2/byte, fp8 scale per 16, fp32 weight_global_scale, fp32 input_global_scale
    assert one(CT_NVFP4).total_bytes == 4096 * 2048 + 4096 * 256 + 4 + 4
    w8a8 = {
        "quant_method": "compressed-tensors",
        "format": "int-quantized",
        "config_groups": {
            "g": {
                "targets": ["Linear"],
                "weights": {"num_bits": 8, "strategy": "channel"},
                "input_activations": {"num_bits": 8, "strategy": "token", "dynamic": True},
            }
        },
    }
    assert one(w8a8).total_bytes == 4096 * 4096 + 4096 * 2


def test_compressed_tensors_targets_and_ignore():
    groups = [
        WeightGroup("model.layers.{layer}.mlp.gate", "router", (64, 2048), tuple(range(8))),
        WeightGroup("model.layers.{layer}.mlp.experts.{expert}.down_proj", "expert", (2048, 768), tuple(range(8)), 64),
        WeightGroup("lm_head", "lm_head", (1000, 2048)),
    ]
    base = quantized_weight_bytes(groups, {**CT_W4A16, "ignore": []})
    assert base.quantized_elements == 8 * 64 * 2048 + 8 * 64 * 2048 * 768 + 1000 * 2048  # "Linear" takes lm_head too
    ign = quantized_weight_bytes(groups, {**CT_W4A16, "ignore": ["lm_head", "re:.*mlp.gate$"]})
    assert ign.quantized_elements == 8 * 64 * 2048 * 768
    layers_regex = quantized_weight_bytes(groups, {**CT_W4A16, "ignore": ["re:model.layers.[0-3]\\.mlp\\.experts.*"]})
    assert layers_regex.quantized_elements == base.quantized_elements - 4 * 64 * 2048 * 768
    experts_exact = quantized_weight_bytes(
        groups, {**CT_W4A16, "ignore": ["model.layers.5.mlp.experts.7.down_proj", "model.layers.5.mlp.experts.70.x"]}
    )
    assert experts_exact.quantized_elements == base.quantized_elements - 2048 * 768
    assert any("matched no weight group" in a for a in experts_exact.assumptions)


def test_modelopt_fp8_and_exclusions():
    r = one(MODELOPT_FP8)
    assert r.total_bytes == 4096 * 4096 + 8 and r.method == "modelopt-fp8"
    groups = llama_groups(layers=2)
    nv = {
        "quant_method": "modelopt",
        "quant_algo": "NVFP4",
        "group_size": 16,
        "exclude_modules": ["lm_head", "model.layers.1.mlp*"],
    }
    r = quantized_weight_bytes(groups, nv)
    assert r.method == "modelopt-nvfp4"
    assert r.quantized_elements == 2 * 4 * 4096 * 4096 // 1 - 2 * 2 * (4096 * 4096 - 1024 * 4096) + 3 * 14336 * 4096


def test_bitsandbytes_layouts():
    nf4 = one(BNB_NF4).total_bytes
    meta = len('{"quant_type": "nf4", "blocksize": 64, "dtype": "bfloat16", "shape": [4096, 4096]}')
    assert nf4 == 4096 * 4096 // 2 + 4096 * 4096 // 64 * 4 + 16 * 4 + meta
    dq = one({**BNB_NF4, "bnb_4bit_use_double_quant": True}).total_bytes
    assert dq < nf4
    assert one(BNB_8).total_bytes == 4096 * 4096 + 4096 * 4 + 1
    groups = llama_groups(layers=1)
    default = quantized_weight_bytes(groups, BNB_8)
    listed = quantized_weight_bytes(groups, {**BNB_8, "llm_int8_skip_modules": ["mlp"]})
    # a given skip list replaces transformers' default (lm_head) skip: lm_head quantized, MLPs not
    assert listed.quantized_elements == default.quantized_elements - 3 * 14336 * 4096 + 128256 * 4096


def test_mxfp4_only_experts_and_default_lm_head():
    groups = gpt_oss_groups(2, 4)
    r = quantized_weight_bytes(groups, {"quant_method": "mxfp4"})
    assert r.quantized_elements == 2 * 4 * (5760 + 2880) * 2880
    skip = quantized_weight_bytes(groups, {"quant_method": "mxfp4", "modules_to_not_convert": ["model.layers.1.mlp"]})
    assert skip.quantized_elements == r.quantized_elements // 2


def test_kv_cache_scales():
    kv = {**CT_FP8_STATIC, "kv_cache_scheme": {"num_bits": 8, "type": "float", "strategy": "tensor"}}
    a = quantized_weight_bytes(llama_groups(layers=3), CT_FP8_STATIC).total_bytes
    b = quantized_weight_bytes(llama_groups(layers=3), kv).total_bytes
    assert b - a == 3 * 2 * 2


def test_unquantized_bytes_prices_the_rest():
    groups = [WeightGroup("model.norm", "norm", (4096,), linear=False)]
    assert quantized_weight_bytes(groups, AWQ_GEMM, unquantized_bytes=4.0).total_bytes == 4096 * 4
    assert quantized_weight_bytes(groups, AWQ_GEMM).by_role == (("norm", 8192),)


def test_read_quantization_types():
    assert isinstance(read_quantization(AWQ_GEMM), AwqScheme)
    assert isinstance(read_quantization(GPTQ_4), GptqScheme)
    assert isinstance(read_quantization(QWEN3_FP8), Fp8Scheme)
    assert isinstance(read_quantization(CT_W4A16), CompressedTensorsScheme)
    assert isinstance(read_quantization(MODELOPT_NVFP4), ModelOptScheme)
    assert isinstance(read_quantization(GPT_OSS_MXFP4), Mxfp4Scheme)
    scheme = read_quantization({"load_in_4bit": True})  # no quant_method: transformers' BitsAndBytesConfig
    assert isinstance(scheme, BitsAndBytesScheme) and scheme.quant_type == "fp4" and scheme.blocksize == 64
    assert (
        read_quantization({"quant_method": "awq", "w_bit": 4, "q_group_size": 64, "zero_point": True}).group_size == 64
    )
    assert read_quantization(GPT_OSS_MXFP4).modules_to_not_convert[0] == "lm_head"


# ---------------------------------------------------------------------------------------------------------
# Name matching expands only what a pattern can tell apart
# ---------------------------------------------------------------------------------------------------------


def count_classify_calls(monkeypatch):
    calls = []
    real = q._plan

    def wrapped(scheme, per_element):
        plan = real(scheme, per_element)
        inner = plan.classify

        def classify(g, name, budget):
            calls.append(name)
            return inner(g, name, budget)

        plan.classify = classify
        return plan

    monkeypatch.setattr(q, "_plan", wrapped)
    return calls


MOE = [WeightGroup("model.layers.{layer}.mlp.experts.{expert}.down_proj", "expert", (2048, 768), tuple(range(61)), 256)]


def test_no_index_expansion_without_index_patterns(monkeypatch):
    calls = count_classify_calls(monkeypatch)
    r = quantized_weight_bytes(MOE, {**CT_W4A16, "ignore": ["lm_head", "re:.*mlp\\.gate$"]})
    assert len(calls) == 1 and r.quantized_elements == 61 * 256 * 2048 * 768


def test_length_only_patterns_expand_per_digit_count(monkeypatch):
    calls = count_classify_calls(monkeypatch)
    quantized_weight_bytes(MOE, {**CT_W4A16, "ignore": ["re:.*mlp.gate$"]})  # bare "." stands for one character
    assert len(calls) == 2 * 3  # layer indices of 1 and 2 digits × expert indices of 1, 2 and 3 digits


def test_digit_patterns_expand_every_index(monkeypatch):
    calls = count_classify_calls(monkeypatch)
    r = quantized_weight_bytes(MOE, {**CT_W4A16, "ignore": ["re:model\\.layers\\.1[0-9]\\.mlp\\.experts\\.25[0-5]\\."]})
    assert len(calls) == 61 * 256
    assert r.quantized_elements == (61 * 256 - 10 * 6) * 2048 * 768


def test_match_budget_is_enforced(monkeypatch):
    monkeypatch.setattr(q, "MAX_MATCH_CALLS", 1000)
    with pytest.raises(QuantizationConfigError, match="quantization_config"):
        quantized_weight_bytes(MOE, {**CT_W4A16, "ignore": ["re:.*experts\\.1\\."]})


def brute_force(groups, config):
    """The same groups split into one group per tensor with its indices written out."""
    single = []
    for g in groups:
        for layer in g.layers or (None,):
            for e in range(g.per_layer if "{expert}" in g.name else 1):
                name = g.name.replace("{layer}", str(layer)).replace("{expert}", str(e))
                per = 1 if "{expert}" in g.name else g.per_layer
                single.append(WeightGroup(name, g.role, g.shape, () if layer is None else (layer,), per, g.linear))
    return quantized_weight_bytes(single, config)


PATTERN_PARTS = st.lists(
    st.sampled_from(
        [".*", "model", "\\.", ".", "layers", "1", "2", "[0-3]", "experts", "mlp", "down_proj", "\\d", "$"]
    ),
    min_size=1,
    max_size=6,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(parts=PATTERN_PARTS, exact_layer=st.integers(0, 11), exact_expert=st.integers(0, 11))
def test_expansion_agrees_with_brute_force(parts, exact_layer, exact_expert):
    pattern = "".join(parts)
    try:
        read_quantization({**CT_W4A16, "ignore": [f"re:{pattern}"]})
    except QuantizationConfigError:  # not a regex, or more repeats than the backtracking guard allows
        return
    groups = [
        WeightGroup("model.layers.{layer}.mlp.experts.{expert}.down_proj", "expert", (256, 128), tuple(range(12)), 12),
        WeightGroup("model.layers.{layer}.self_attn.q_proj", "attention", (128, 128), (0, 3, 10, 11)),
    ]
    exact = f"model.layers.{exact_layer}.mlp.experts.{exact_expert}.down_proj"
    config = {**CT_W4A16, "ignore": [f"re:{pattern}", exact]}
    assert quantized_weight_bytes(groups, config).total_bytes == brute_force(groups, config).total_bytes
    dyn = {**GPTQ_4, "dynamic": {f"-:{pattern}": {}}}
    assert quantized_weight_bytes(groups, dyn).total_bytes == brute_force(groups, dyn).total_bytes


# ---------------------------------------------------------------------------------------------------------
# Properties
# ---------------------------------------------------------------------------------------------------------

SHAPES = st.tuples(st.sampled_from([128, 256, 1024, 4096]), st.sampled_from([128, 512, 2048, 4096]))


@settings(max_examples=40, deadline=None)
@given(shape=SHAPES, layers=st.integers(1, 6))
def test_bytes_grow_with_bits(shape, layers):
    groups = [WeightGroup("model.layers.{layer}.mlp.up_proj", "mlp", shape, tuple(range(layers)))]
    gptq = [quantized_weight_bytes(groups, {**GPTQ_4, "bits": b}).total_bytes for b in (2, 3, 4, 8)]
    assert gptq == sorted(gptq) and len(set(gptq)) == 4
    ct = []
    for b in (2, 4, 8):
        cfg = {
            **CT_W4A16,
            "config_groups": {
                "g": {"targets": ["Linear"], "weights": {"num_bits": b, "strategy": "group", "group_size": 128}}
            },
        }
        ct.append(quantized_weight_bytes(groups, cfg).total_bytes)
    assert ct == sorted(ct)
    assert one(BNB_NF4, *shape).total_bytes < one(BNB_8, *shape).total_bytes


IGNORABLE = [
    ("ct", CT_W4A16, "ignore", lambda n: n),
    ("awq", AWQ_GEMM, "modules_to_not_convert", lambda n: n),
    ("fp8", QWEN3_FP8, "ignored_layers", lambda n: n),
    ("modelopt", MODELOPT_FP8, "exclude_modules", lambda n: n),
    ("bnb4", BNB_NF4, "llm_int8_skip_modules", lambda n: n),
    ("bnb8", BNB_8, "llm_int8_skip_modules", lambda n: n),
    ("nvfp4", CT_NVFP4, "ignore", lambda n: n),
]


@pytest.mark.parametrize("label,config,key,spell", IGNORABLE, ids=[i[0] for i in IGNORABLE])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(picks=st.sets(st.integers(0, 13), max_size=6))
def test_ignoring_modules_never_saves_bytes(label, config, key, spell, picks):
    groups = llama_groups(layers=2, hidden=512, inter=1024, vocab=1000, heads=8, kv_heads=2, head_dim=64)
    names = [g.name.replace("{layer}", str(i)) for g in groups if g.linear and g.layers for i in (0, 1)]
    base = dict(config)
    base[key] = list(config.get(key) or ["lm_head"])
    before = quantized_weight_bytes(groups, base).total_bytes
    more = {**base, key: base[key] + [spell(names[i]) for i in sorted(picks)]}
    after = quantized_weight_bytes(groups, more).total_bytes
    assert after >= before
    if picks:
        assert after > before


@settings(max_examples=30, deadline=None)
@given(groups_n=st.integers(1, 4), layers=st.integers(1, 5), per_layer=st.integers(1, 4))
def test_parts_add_up(groups_n, layers, per_layer):
    groups = [
        WeightGroup(f"model.layers.{{layer}}.m{i}", "mlp", (256, 256), tuple(range(layers)), per_layer)
        for i in range(groups_n)
    ] + [WeightGroup("model.norm", "norm", (256,), linear=False)]
    for cfg in (AWQ_GEMM, GPTQ_4, QWEN3_FP8, CT_W4A16, CT_NVFP4, MODELOPT_NVFP4, BNB_NF4):
        r = quantized_weight_bytes(groups, cfg)
        assert r.total_bytes == sum(b for _, b in r.by_role)
        assert r.quantized_elements + r.unquantized_elements == sum(g.elements for g in groups)
        assert r.by_role == tuple(sorted(r.by_role))


# ---------------------------------------------------------------------------------------------------------
# Every error names its field
# ---------------------------------------------------------------------------------------------------------

BAD_CONFIGS = [
    ("not-an-object", ["awq"], "quantization_config must be an object"),
    ("no-method", {"bits": 4}, "quantization_config.quant_method is missing"),
    ("unknown-method", {"quant_method": "hqq"}, "quantization_config.quant_method must be one of"),
    ("awq-bits", {**AWQ_GEMM, "bits": 3}, "quantization_config.bits must be one of 4"),
    ("awq-group-zero", {**AWQ_GEMM, "group_size": 0}, "quantization_config.group_size must be -1"),
    ("awq-group-huge", {**AWQ_GEMM, "group_size": 1 << 30}, "quantization_config.group_size must be -1"),
    ("awq-group-bool", {**AWQ_GEMM, "group_size": True}, "quantization_config.group_size must be -1"),
    ("awq-version", {**AWQ_GEMM, "version": "marlin"}, "quantization_config.version must be one of"),
    ("awq-gemv-group", {**AWQ_GEMM, "version": "gemv", "group_size": 48}, "quantization_config.group_size must be 32"),
    ("awq-zero-point", {**AWQ_GEMM, "zero_point": "yes"}, "quantization_config.zero_point must be true or false"),
    ("awq-not-convert", {**AWQ_GEMM, "modules_to_not_convert": "lm_head"}, "modules_to_not_convert must be a list"),
    ("awq-not-convert-item", {**AWQ_GEMM, "modules_to_not_convert": [""]}, "modules_to_not_convert[0] must be"),
    ("awq-not-convert-long", {**AWQ_GEMM, "modules_to_not_convert": ["x"] * 10_001}, "at most 10000 entries"),
    ("gptq-bits", {**GPTQ_4, "bits": 5}, "quantization_config.bits must be one of 2, 3, 4, 8"),
    ("gptq-bits-missing", {"quant_method": "gptq", "group_size": 128}, "quantization_config.bits must be an integer"),
    ("gptq-group", {**GPTQ_4, "group_size": -2}, "quantization_config.group_size must be -1"),
    ("gptq-desc-act", {**GPTQ_4, "desc_act": 1}, "quantization_config.desc_act must be true or false"),
    ("gptq-lm-head", {**GPTQ_4, "lm_head": "no"}, "quantization_config.lm_head must be true or false"),
    ("gptq-format", {**GPTQ_4, "checkpoint_format": "marlin"}, "quantization_config.checkpoint_format must be one of"),
    ("gptq-dynamic", {**GPTQ_4, "dynamic": []}, "quantization_config.dynamic must be an object"),
    ("gptq-dynamic-value", {**GPTQ_4, "dynamic": {"-:x": 8}}, "quantization_config.dynamic['-:x'] must be an object"),
    ("gptq-dynamic-bits", {**GPTQ_4, "dynamic": {"+:x": {"bits": 6}}}, "dynamic['+:x'].bits must be one of"),
    ("gptq-dynamic-regex", {**GPTQ_4, "dynamic": {"-:(": {}}}, "is not a valid regular expression"),
    ("gptq-dynamic-redos", {**GPTQ_4, "dynamic": {"-:(a+)+$": {}}}, "must not repeat a group"),
    ("gptq-dynamic-backref", {**GPTQ_4, "dynamic": {"-:(a)\\1": {}}}, "must not use back-references"),
    ("gptq-dynamic-stars", {**GPTQ_4, "dynamic": {"-:.*a.*b.*c.*d": {}}}, "at most 3 unbounded repeats"),
    ("gptq-modules", {**GPTQ_4, "modules_in_block_to_quantize": [[1]]}, "modules_in_block_to_quantize[0] must be"),
    ("fp8-scheme", {**QWEN3_FP8, "activation_scheme": "per-token"}, "quantization_config.activation_scheme must be"),
    ("fp8-block-shape", {**QWEN3_FP8, "weight_block_size": [128]}, "quantization_config.weight_block_size must be"),
    ("fp8-block-zero", {**QWEN3_FP8, "weight_block_size": [0, 128]}, "quantization_config.weight_block_size[0] must"),
    ("fp8-block-static", {**QWEN3_FP8, "activation_scheme": "static"}, "activation_scheme must be 'dynamic'"),
    ("fp8-ignored", {**QWEN3_FP8, "ignored_layers": [3]}, "quantization_config.ignored_layers[0] must be"),
    ("ct-format", {**CT_W4A16, "format": "marlin-24"}, "quantization_config.format must be one of"),
    ("ct-groups", {**CT_W4A16, "config_groups": {}}, "quantization_config.config_groups must be a non-empty object"),
    ("ct-group-preset", {**CT_W4A16, "config_groups": {"W4A16": ["Linear"]}}, "config_groups.W4A16 must be an object"),
    ("ct-targets", {**CT_W4A16, "config_groups": {"g": {"targets": []}}}, "config_groups.g.targets must list"),
    ("ct-targets-type", {**CT_W4A16, "config_groups": {"g": {"targets": "Linear"}}}, "config_groups.g.targets must be"),
    ("ct-target-regex", {**CT_W4A16, "config_groups": {"g": {"targets": ["re:("]}}}, "config_groups.g.targets[0] is"),
    (
        "ct-num-bits",
        _ct_weights(num_bits=0),
        "config_groups.g.weights.num_bits must be an integer from 1 to 32",
    ),
    (
        "ct-type",
        _ct_weights(type="posit"),
        "config_groups.g.weights.type must be one of",
    ),
    (
        "ct-strategy",
        _ct_weights(strategy="row"),
        "config_groups.g.weights.strategy must be one of",
    ),
    (
        "ct-group-size",
        _ct_weights(strategy="group"),
        "config_groups.g.weights.group_size must be a positive integer",
    ),
    (
        "ct-block",
        {
            **CT_W4A16,
            "format": "float-quantized",
            "config_groups": {
                "g": {
                    "targets": ["Linear"],
                    "weights": {"type": "float", "strategy": "block", "block_structure": [128]},
                }
            },
        },
        "weights.block_structure must be two",
    ),
    (
        "ct-dynamic",
        _ct_weights(dynamic="always"),
        "config_groups.g.weights.dynamic must be true, false or 'local'",
    ),
    (
        "ct-actorder",
        _ct_weights(actorder="group"),
        "config_groups.g.weights.actorder requires strategy 'group'",
    ),
    (
        "ct-symmetric",
        _ct_weights(symmetric=0),
        "config_groups.g.weights.symmetric must be true or false",
    ),
    (
        "ct-args",
        _ct_weights_raw(4),
        "config_groups.g.weights must be an object",
    ),
    (
        "ct-pack-float",
        _ct_weights(type="float"),
        "config_groups.g.weights.type must be 'int' for format 'pack-quantized'",
    ),
    (
        "ct-nvfp4-args",
        {**CT_NVFP4, "config_groups": {"g": {"targets": ["Linear"], "weights": {"num_bits": 4}}}},
        "config_groups.g.weights must be float, num_bits 4",
    ),
    (
        "ct-float-bits",
        {
            **CT_W4A16,
            "format": "float-quantized",
            "config_groups": {"g": {"targets": ["Linear"], "weights": {"type": "float", "num_bits": 4}}},
        },
        "config_groups.g.weights must be float with num_bits 8",
    ),
    ("ct-mixed-format", {**CT_W4A16, "format": "mixed-precision"}, "config_groups.group_0.format is required"),
    ("ct-ignore", {**CT_W4A16, "ignore": "lm_head"}, "quantization_config.ignore must be a list"),
    ("ct-ignore-regex", {**CT_W4A16, "ignore": ["re:[a-"]}, "quantization_config.ignore[0] is not a valid regular"),
    ("ct-sparse", {**CT_W4A16, "sparsity_config": {"format": "sparse-24-bitmask"}}, "sparsity_config.format must be"),
    ("ct-kv", {**CT_W4A16, "kv_cache_scheme": {"num_bits": 99}}, "kv_cache_scheme.num_bits must be an integer"),
    ("modelopt-algo", {"quant_method": "modelopt", "quant_algo": "W4A8_AWQ"}, "quantization_config.quant_algo must be"),
    ("modelopt-nested", {"quantization": {"quant_algo": "INT8"}}, "quantization_config.quantization.quant_algo must"),
    ("modelopt-nested-type", {"quant_method": "modelopt", "quantization": "NVFP4"}, "quantization must be an object"),
    ("modelopt-group", {**MODELOPT_FP8, "group_size": 0}, "quantization_config.group_size must be an integer from 1"),
    ("modelopt-kv", {**MODELOPT_FP8, "kv_cache_quant_algo": 8}, "quantization_config.kv_cache_quant_algo must be"),
    ("modelopt-exclude", {**MODELOPT_FP8, "exclude_modules": "lm_head"}, "quantization_config.exclude_modules must be"),
    (
        "modelopt-exclude-regex",
        {"quant_method": "modelopt", "quant_algo": "NVFP4", "exclude_modules": ["a*[b"]},
        "quantization_config.exclude_modules[0] is not a valid regular expression",
    ),
    (
        "mxfp4-list",
        {"quant_method": "mxfp4", "modules_to_not_convert": {"a": 1}},
        "modules_to_not_convert must be a list",
    ),
    (
        "mxfp4-regex",
        {"quant_method": "mxfp4", "modules_to_not_convert": ["model.(layers"]},
        "modules_to_not_convert[0]",
    ),
    ("mxfp4-dequantize", {"quant_method": "mxfp4", "dequantize": True}, "quantization_config.dequantize must be false"),
    ("bnb-neither", {"quant_method": "bitsandbytes"}, "quantization_config.load_in_4bit or load_in_8bit must be true"),
    ("bnb-both", {**BNB_8, "load_in_4bit": True}, "quantization_config.load_in_4bit or load_in_8bit"),
    ("bnb-type", {**BNB_NF4, "bnb_4bit_quant_type": "int4"}, "quantization_config.bnb_4bit_quant_type must be one of"),
    ("bnb-blocksize", {**BNB_NF4, "bnb_4bit_blocksize": 100}, "quantization_config.bnb_4bit_blocksize must be one of"),
    ("bnb-storage", {**BNB_NF4, "bnb_4bit_quant_storage": "int4"}, "quantization_config.bnb_4bit_quant_storage must"),
    ("bnb-dq", {**BNB_NF4, "bnb_4bit_use_double_quant": "true"}, "bnb_4bit_use_double_quant must be true or false"),
    ("bnb-skip", {**BNB_8, "llm_int8_skip_modules": [None]}, "quantization_config.llm_int8_skip_modules[0] must be"),
]


@pytest.mark.parametrize("label,config,message", BAD_CONFIGS, ids=[b[0] for b in BAD_CONFIGS])
def test_config_errors_name_the_field(label, config, message):
    with pytest.raises(QuantizationConfigError) as exc:
        read_quantization(config)
    assert message in str(exc.value)
    with pytest.raises(QuantizationConfigError):
        quantized_weight_bytes(llama_groups(layers=1), config)


BAD_GROUPS = [
    ("not-a-group", ["lm_head"], "groups[0] must be a WeightGroup"),
    ("empty-name", [WeightGroup("", "mlp", (4, 4))], "groups[0].name must be 1 to 256"),
    ("role", [WeightGroup("x", "ffn", (4, 4))], "groups[0].role must be one of"),
    ("zero-dim", [WeightGroup("x", "mlp", (0, 4))], "groups[0].shape must be at most 8 dimensions"),
    ("linear-1d", [WeightGroup("x", "mlp", (4,))], "groups[0].shape must be (out_features, in_features)"),
    ("layers-dup", [WeightGroup("x.{layer}", "mlp", (4, 4), (1, 1))], "groups[0].layers must be at most"),
    ("layers-neg", [WeightGroup("x.{layer}", "mlp", (4, 4), (-1,))], "groups[0].layers must be at most"),
    ("per-layer", [WeightGroup("x", "mlp", (4, 4), (), 0)], "groups[0].per_layer must be an integer from 1"),
    ("layer-template", [WeightGroup("x.{layer}", "mlp", (4, 4))], "groups[0].name has '{layer}' but layers is empty"),
]


@pytest.mark.parametrize("label,groups,message", BAD_GROUPS, ids=[b[0] for b in BAD_GROUPS])
def test_group_errors_name_the_group(label, groups, message):
    with pytest.raises(ValueError) as exc:
        quantized_weight_bytes(groups, AWQ_GEMM)
    assert message in str(exc.value)


@pytest.mark.parametrize("value", [0, -1.0, 9, True, "2"])
def test_unquantized_bytes_is_bounded(value):
    with pytest.raises(ValueError, match="unquantized_bytes must be a number in"):
        quantized_weight_bytes(llama_groups(layers=1), AWQ_GEMM, unquantized_bytes=value)


# ---------------------------------------------------------------------------------------------------------
# checkpoint_bytes
# ---------------------------------------------------------------------------------------------------------


def test_checkpoint_total_size():
    s = checkpoint_bytes({"total_size": 13_761_264_768})
    assert s.total_bytes == 13_761_264_768 and s.source == "total_size" and s.by_dtype == ()


def test_checkpoint_tensors_by_dtype():
    s = checkpoint_bytes(
        {
            "tensors": [
                {"name": "model.layers.0.mlp.experts.gate_up_proj_blocks", "dtype": "U8", "shape": [32, 5760, 90, 16]},
                {"name": "model.layers.0.mlp.experts.gate_up_proj_scales", "dtype": "U8", "shape": [32, 5760, 90]},
                {"name": "model.layers.0.mlp.experts.gate_up_proj_bias", "dtype": "BF16", "shape": [32, 5760]},
                {"name": "w", "dtype": "F4", "shape": [3, 2]},
                {"name": "s", "dtype": "F32", "shape": []},
                {"name": "z", "dtype": "F8_E4M3", "shape": [0, 7]},
            ]
        }
    )
    u8 = 32 * 5760 * 90 * 16 + 32 * 5760 * 90
    assert s.by_dtype == (("BF16", 32 * 5760 * 2), ("F32", 4), ("F4", 3), ("F8_E4M3", 0), ("U8", u8))
    assert s.total_bytes == sum(b for _, b in s.by_dtype) and s.tensors == 6


BAD_SUMMARIES = [
    ("not-object", [1], "checkpoint must be an object"),
    ("neither", {}, "checkpoint must give exactly one of total_size or tensors"),
    ("both", {"total_size": 1, "tensors": []}, "checkpoint must give exactly one of"),
    ("total-neg", {"total_size": -1}, "checkpoint.total_size must be an integer from 0 to"),
    ("total-huge", {"total_size": 10**15}, "checkpoint.total_size must be an integer from 0 to"),
    ("total-float", {"total_size": 1.5}, "checkpoint.total_size must be an integer"),
    ("tensors-type", {"tensors": {"a": 1}}, "checkpoint.tensors must be a list"),
    ("tensor-type", {"tensors": [3]}, "checkpoint.tensors[0] must be an object"),
    ("tensor-name", {"tensors": [{"dtype": "BF16", "shape": [1]}]}, "checkpoint.tensors[0].name must be"),
    (
        "tensor-dtype",
        {"tensors": [{"name": "a", "dtype": "bf16", "shape": [1]}]},
        "checkpoint.tensors[0].dtype must be",
    ),
    ("tensor-shape", {"tensors": [{"name": "a", "dtype": "BF16", "shape": 4}]}, "checkpoint.tensors[0].shape must be"),
    ("tensor-dim", {"tensors": [{"name": "a", "dtype": "BF16", "shape": [1, -2]}]}, "checkpoint.tensors[0].shape[1]"),
    ("tensor-dim-huge", {"tensors": [{"name": "a", "dtype": "BF16", "shape": [1 << 40]}]}, "tensors[0].shape[0] must"),
    ("tensor-f4-odd", {"tensors": [{"name": "a", "dtype": "F4", "shape": [3]}]}, "not a whole number of bytes"),
    ("tensors-total", {"tensors": [{"name": "a", "dtype": "F64", "shape": [1 << 39, 1 << 8]}]}, "more than"),
]


@pytest.mark.parametrize("label,summary,message", BAD_SUMMARIES, ids=[b[0] for b in BAD_SUMMARIES])
def test_checkpoint_errors_name_the_field(label, summary, message):
    with pytest.raises(QuantizationConfigError) as exc:
        checkpoint_bytes(summary)
    assert message in str(exc.value)


def test_checkpoint_tensor_count_is_bounded(monkeypatch):
    monkeypatch.setattr(q, "MAX_TENSORS", 3)
    with pytest.raises(QuantizationConfigError, match=r"checkpoint\.tensors may hold at most 3"):
        checkpoint_bytes({"tensors": [{"name": "a", "dtype": "U8", "shape": [1]}] * 4})


@settings(max_examples=50, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(sorted(q.SAFETENSORS_DTYPE_BITS)), st.lists(st.integers(0, 64), max_size=3)),
        max_size=8,
    )
)
def test_checkpoint_bytes_sum_the_tensors(tensors):
    rows = [{"name": f"t{i}", "dtype": d, "shape": s} for i, (d, s) in enumerate(tensors)]
    if any(math.prod(s) * q.SAFETENSORS_DTYPE_BITS[d] % 8 for d, s in tensors):
        with pytest.raises(QuantizationConfigError):
            checkpoint_bytes({"tensors": rows})
        return
    s = checkpoint_bytes({"tensors": rows})
    assert s.total_bytes == sum(math.prod(sh) * q.SAFETENSORS_DTYPE_BITS[d] // 8 for d, sh in tensors)
