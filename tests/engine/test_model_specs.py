from __future__ import annotations

import pytest

from budgets.engine import (
    SUPPORTED_MODEL_TYPES,
    UnsupportedModelError,
    from_hf_config,
    load_presets,
    parameter_count,
)

PRESETS = load_presets()


def test_presets_cover_the_families():
    assert len(PRESETS) >= 25
    for needed in (
        "llama-2-7b",
        "llama-3.1-8b",
        "llama-3.2-1b",
        "llama-3.3-70b",
        "mistral-7b-v0.1",
        "mixtral-8x7b",
        "mixtral-8x22b",
        "qwen2.5-0.5b",
        "qwen2.5-72b",
        "qwen3-8b",
        "qwen3-30b-a3b",
        "gemma-2-9b",
        "gemma-3-27b",
        "phi-3-mini-4k",
        "phi-4",
        "gpt2",
        "gpt2-xl",
        "opt-13b",
    ):
        assert needed in PRESETS


@pytest.mark.parametrize("preset_id", sorted(PRESETS))
def test_parameter_count_is_exact(preset_id):
    """The presets' counts are their language models' (the Gemma 3 ones say "text part"); a multimodal preset's
    towers are counted on top (tests/engine/test_model_towers.py checks them against transformers)."""
    preset = PRESETS[preset_id]
    spec = from_hf_config(preset.config)
    assert parameter_count(spec).total - spec.tower_params == preset.parameter_count


def test_breakdown_adds_up():
    pc = parameter_count(PRESETS["llama-3.1-8b"].spec)
    assert pc.embedding == 128256 * 4096 == pc.lm_head
    assert pc.embedding + pc.lm_head + pc.layers_total + pc.final_norm == pc.total


def test_tied_head_counted_once():
    tied = parameter_count(PRESETS["llama-3.2-1b"].spec)
    assert tied.lm_head == 0 and tied.total == 1_235_814_400


def test_unknown_model_type_without_core_fields_names_them_and_suggests_no_family():
    with pytest.raises(UnsupportedModelError) as exc:
        from_hf_config({"model_type": "mamba", "hidden_size": 8})
    msg = str(exc.value)
    assert "mamba" in msg
    for field in ("num_hidden_layers", "num_attention_heads", "vocab_size"):
        assert field in msg
    assert "did you mean" not in msg
    assert not any(f"'{t}'" in msg for t in SUPPORTED_MODEL_TYPES)


def test_head_dim_from_config_not_hidden_over_heads():
    spec = PRESETS["qwen3-0.6b"].spec
    assert spec.head_dim == 128 and spec.hidden_size // spec.num_attention_heads == 64


def test_gemma3_multimodal_config_uses_text_part():
    spec = PRESETS["gemma-3-4b"].spec
    assert spec.model_type == "gemma3" and spec.vocab_size == 262208 and spec.num_sliding_layers > 0


def test_small_configs_of_every_type_build():
    cfgs = [
        {
            "model_type": "gpt_neox",
            "hidden_size": 256,
            "num_hidden_layers": 3,
            "num_attention_heads": 8,
            "intermediate_size": 1024,
            "vocab_size": 1000,
        },
        {
            "model_type": "qwen2_moe",
            "hidden_size": 256,
            "num_hidden_layers": 4,
            "num_attention_heads": 8,
            "num_key_value_heads": 2,
            "intermediate_size": 512,
            "moe_intermediate_size": 128,
            "shared_expert_intermediate_size": 384,
            "num_experts": 6,
            "num_experts_per_tok": 2,
            "decoder_sparse_step": 2,
            "mlp_only_layers": [0],
            "vocab_size": 1000,
        },
        {
            "model_type": "gemma",
            "hidden_size": 256,
            "num_hidden_layers": 3,
            "num_attention_heads": 4,
            "num_key_value_heads": 1,
            "head_dim": 64,
            "intermediate_size": 1024,
            "vocab_size": 1000,
        },
        {
            "model_type": "opt",
            "hidden_size": 256,
            "num_hidden_layers": 3,
            "num_attention_heads": 4,
            "ffn_dim": 1024,
            "vocab_size": 1000,
            "word_embed_proj_dim": 128,
            "max_position_embeddings": 512,
        },
    ]
    # counts verified against transformers 5.24 on the meta device
    expected = [2_881_792, 3_730_688, 3_108_608, 2_694_912]
    assert [parameter_count(from_hf_config(c)).total for c in cfgs] == expected
