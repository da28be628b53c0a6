"""Multimodal towers and Gemma 4's layers, against transformers 5.24.0's meta-device counts.

The records in tests/engine/data/hf_configs carry transformers' count of everything under vision*/visual/
multi_modal_projector/embed_vision/audio* (`tower_parameter_count`) beside the whole model's; the class-default
figures below were counted the same way (`AutoModelForImageTextToText.from_config(<Type>Config(...))` on the meta
device, transformers 5.24.0, torch 2.13).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from budgets.engine.models.hf_config import UnsupportedModelError, from_hf_config
from budgets.engine.models.hf_towers import count_towers
from budgets.engine.models.parameters import parameter_count

DATA = Path(__file__).parent / "data" / "hf_configs"
RECORDS = {p.stem: json.loads(p.read_text()) for p in sorted(DATA.glob("*.json"))}
MULTIMODAL = sorted(k for k, r in RECORDS.items() if r["transformers"].get("tower_parameter_count"))


def test_every_multimodal_family_has_a_record() -> None:
    types = {RECORDS[k]["config"]["model_type"] for k in MULTIMODAL}
    assert types == set(DEFAULT_TOWERS)


@pytest.mark.parametrize("record_id", MULTIMODAL)
def test_towers_equal_transformers_meta_count(record_id: str) -> None:
    record = RECORDS[record_id]
    spec = from_hf_config(record["config"])
    counted = record["transformers"]
    assert spec.tower_params == counted["tower_parameter_count"]
    assert f"{spec.tower_params:,} parameters" in spec.towers
    assert parameter_count(spec).total == counted["parameter_count"]


# --- the configuration classes' defaults ---------------------------------------------------------------------

# transformers 5.24.0: the tower of `<Type>Config()` (no vision_config: the class defaults, Mistral 3 its init_kwargs,
# configuration_mistral3.py:74-88) and of `<Type>Config(vision_config={})` (the vision class's defaults)
DEFAULT_TOWERS = {
    "mllama": (867_749_395, 867_749_395),
    "llama4": (455_178_240, 455_178_240),
    "qwen2_5_vl": (3_083_025_152, 3_083_025_152),
    "qwen3_vl": (566_949_104, 566_949_104),
    "qwen3_vl_moe": (566_949_104, 566_949_104),
    "qwen3_5": (453_650_672, 453_650_672),
    "qwen3_5_moe": (453_650_672, 453_650_672),
    "mistral3": (438_958_080, 439_142_400),  # init_kwargs: patch 14; PixtralVisionConfig: patch 16
    "gemma3": (94_654_464, 94_654_464),  # SiglipVisionConfig: 12 × 768, with the attention-pooling head
    "gemma4": (None, 169_134_080),  # optional vision_config: no tower unless one is given
}


@pytest.mark.parametrize("model_type", sorted(DEFAULT_TOWERS))
def test_class_defaults_as_transformers_builds_them(model_type: str) -> None:
    absent, empty = DEFAULT_TOWERS[model_type]
    towers = count_towers({"model_type": model_type}, model_type)
    assert (towers.params if towers else None) == absent
    towers = count_towers({"model_type": model_type, "vision_config": {}}, model_type)
    assert towers is not None and towers.params == empty


def test_text_only_model_types_have_no_towers() -> None:
    assert count_towers({"model_type": "llama"}, "llama") is None
    assert from_hf_config(RECORDS["qwen3-32b-fp8"]["config"]).tower_params == 0


def _wrapper(vision: dict[str, Any], text_hidden: int | None = None, **top: Any) -> dict[str, Any]:
    """A multimodal wrapper config: its vision_config, a text_config of that width, and top-level keys."""
    text = {"text_config": {"hidden_size": text_hidden}} if text_hidden else {}
    return {"vision_config": vision, **text, **top}


# small configs counted by transformers 5.24.0 on the meta device: (model_type, config, tower parameters)
SMALL_TOWERS: list[tuple[str, dict[str, Any], int]] = [
    ("mllama", _wrapper(dict(hidden_size=64, num_attention_heads=4, num_hidden_layers=3, num_global_layers=2,
        intermediate_size=96, vision_output_dim=320, image_size=56, max_num_tiles=2,
        supported_aspect_ratios=[[1, 1], [1, 2], [2, 1]]), 128), 235_303),
    ("llama4", _wrapper(dict(hidden_size=64, num_attention_heads=4, num_hidden_layers=2, intermediate_size=96,
        vision_output_dim=200, image_size=56, patch_size=8, projector_input_dim=48, projector_output_dim=40,
        num_channels=4), 96), 104_000),
    ("qwen2_5_vl", _wrapper(dict(depth=3, hidden_size=64, intermediate_size=100, num_heads=4, out_hidden_size=77,
        spatial_merge_size=3, patch_size=7, temporal_patch_size=3, in_channels=2)), 504_357),
    ("qwen3_vl", _wrapper(dict(depth=3, hidden_size=64, intermediate_size=100, num_heads=4, out_hidden_size=77,
        spatial_merge_size=3, patch_size=7, num_position_embeddings=100, deepstack_visual_indexes=[0, 2])),
        1_247_635),
    ("qwen3_5", _wrapper(dict(depth=3, hidden_size=64, out_hidden_size=50)), 2_041_122),
    ("mistral3", {**_wrapper(dict(model_type="pixtral", hidden_size=64, intermediate_size=96, num_hidden_layers=2,
        num_attention_heads=4, patch_size=7), spatial_merge_size=3, multimodal_projector_bias=True,
        vision_feature_layer=[-1, -2, -3]), "text_config": {"model_type": "mistral", "hidden_size": 80}}, 138_208),
    ("mistral3", {"vision_config": {"hidden_size": 64}, "text_config": {"model_type": "mistral"}}, 36_375_680),
    ("gemma3", _wrapper(dict(model_type="siglip_vision_model", hidden_size=64, intermediate_size=96,
        num_hidden_layers=2, num_attention_heads=4, image_size=112, patch_size=14, vision_use_head=False), 128),
        108_864),
    ("gemma4", _wrapper(dict(hidden_size=96, num_attention_heads=4, num_key_value_heads=2, head_dim=20,
        patch_size=10, position_embedding_size=100, num_hidden_layers=2, intermediate_size=50),
        audio_config=dict(hidden_size=96, num_attention_heads=5, subsampling_conv_channels=[30, 7],
        conv_kernel_size=3, output_proj_dims=70, num_hidden_layers=2)), 963_825),
    ("gemma4", {"audio_config": {}}, 308_363_552),  # Gemma4AudioConfig's defaults + embed_audio into 2304
]  # fmt: skip


@pytest.mark.parametrize(("model_type", "config", "expected"), SMALL_TOWERS)
def test_small_towers_equal_transformers(model_type: str, config: dict[str, Any], expected: int) -> None:
    towers = count_towers({"model_type": model_type, **config}, model_type)
    assert towers is not None and towers.params == expected


# --- a bad field is an error that names it ---------------------------------------------------------------------


def _with(record_id: str, path: tuple[str, ...], value: Any) -> dict[str, Any]:
    config = copy.deepcopy(RECORDS[record_id]["config"])
    node = config
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return config


@pytest.mark.parametrize("value", [-1, 0, 10**9, [1152], "1152", 1152.5, True])
@pytest.mark.parametrize("record_id", MULTIMODAL)
def test_a_bad_vision_hidden_size_is_refused_by_name(record_id: str, value: Any) -> None:
    with pytest.raises(UnsupportedModelError, match=r"hf_config\.vision_config 'hidden_size'"):
        from_hf_config(_with(record_id, ("vision_config", "hidden_size"), value))


@pytest.mark.parametrize(
    ("record_id", "key", "value"),
    [
        ("qwen3-vl-8b-instruct", "depth", 10**6),
        ("qwen3-vl-8b-instruct", "patch_size", [16, 16]),
        ("qwen3-vl-8b-instruct", "deepstack_visual_indexes", 3),
        ("qwen2.5-vl-7b-instruct", "spatial_merge_size", -2),
        ("llama-3.2-90b-vision-instruct", "supported_aspect_ratios", "all"),
        ("llama-3.2-90b-vision-instruct", "attention_heads", 0),
        ("llama-4-scout", "image_size", 10**7),
        ("mistral-small-3.1-24b-instruct-2503", "num_hidden_layers", 5000),
        ("gemma-4-26b-a4b", "position_embedding_size", 2**40),
        ("gemma-4-26b-a4b", "num_key_value_heads", {"n": 16}),
    ],
)
def test_a_bad_vision_field_is_refused_by_name(record_id: str, key: str, value: Any) -> None:
    with pytest.raises(UnsupportedModelError, match=rf"hf_config\.vision_config '{key}'"):
        from_hf_config(_with(record_id, ("vision_config", key), value))


def test_a_bad_sub_config_is_refused_by_name() -> None:
    with pytest.raises(UnsupportedModelError, match="hf_config 'vision_config' must be an object"):
        from_hf_config(_with("qwen3-vl-8b-instruct", ("vision_config",), [1, 2]))
    with pytest.raises(UnsupportedModelError, match=r"hf_config\.vision_config 'model_type' = 'clip_vision_model'"):
        from_hf_config(
            _with("mistral-small-3.1-24b-instruct-2503", ("vision_config", "model_type"), "clip_vision_model")
        )
    with pytest.raises(UnsupportedModelError, match="'vision_feature_layer'"):
        from_hf_config(_with("mistral-small-3.1-24b-instruct-2503", ("vision_feature_layer",), "last"))
    with pytest.raises(UnsupportedModelError, match=r"hf_config\.audio_config 'subsampling_conv_channels'"):
        from_hf_config(_with("gemma-4-26b-a4b", ("audio_config",), {"subsampling_conv_channels": [128]}))


# --- Gemma 4's language model ------------------------------------------------------------------------------------


def test_gemma4_layers_carry_their_own_attention_geometry() -> None:
    """gemma-4-26b-a4b: 25 sliding layers of 8 KV heads × 256 (window 1024) and 5 full layers of 2 KV heads × 512
    whose keys serve as values (attention_k_eq_v: no v_proj). transformers' cache.update and vLLM's Attention (it
    loads the k_proj weights into both the K and V slots of qkv_proj) both keep K and V, so a full layer caches
    2 × 2 × 512 elements per token and a sliding one 2 × 8 × 256."""
    spec = from_hf_config(RECORDS["gemma-4-26b-a4b"]["config"])
    layers = [run for run in spec.layer_runs for _ in range(run.count)]
    full = [i for i, run in enumerate(layers) if run.mixer.kind == "full"]
    assert full == [5, 11, 17, 23, 29]
    for i, run in enumerate(layers):
        m = run.mixer
        if i in full:
            assert (m.kv_heads, m.head_dim, m.window, m.kv_elements_per_token()) == (2, 512, 0, 2 * 2 * 512)
        else:
            assert (m.kind, m.kv_heads, m.head_dim, m.window, m.kv_elements_per_token()) == (
                "sliding", 8, 256, 1024, 2 * 8 * 256,
            )  # fmt: skip
        # the dense GeGLU MLP (2112) beside the 128-expert MoE (top 8, 704 wide) in every layer
        assert (run.mlp.kind, run.mlp.experts, run.mlp.experts_per_token) == ("moe", 128, 8)
        assert (run.mlp.intermediate, run.mlp.shared_intermediate) == (704, 2112)
    names = {g.name for g in spec.weight_groups}
    assert "model.layers.{layer}.self_attn.v_proj" in names  # the sliding layers'
    assert sum(1 for g in spec.weight_groups if g.name.endswith("self_attn.v_proj")) == 25
    assert {"model.layers.{layer}.router.proj", "model.layers.{layer}.router.per_expert_scale"} <= names


def test_gemma4_text_defaults_with_per_layer_embeddings() -> None:
    """Gemma4TextConfig() (a saved one: per_layer_config instead of global_head_dim) counted by transformers 5.24.0:
    30 layers of 2304, per-layer embeddings 256 wide (a 262144 × 7680 table), no MoE."""
    per_layer = {f"{i:02d}": {"head_dim": 512} for i in (5, 11, 17, 23, 29)}
    spec = from_hf_config({"model_type": "gemma4_text", "per_layer_config": per_layer})
    assert parameter_count(spec).total == 5_077_177_856
    assert from_hf_config({"model_type": "gemma4_text"}) == spec  # global_head_dim 512 by default
    with pytest.raises(UnsupportedModelError, match="'per_layer_config' key '30'"):
        from_hf_config({"model_type": "gemma4_text", "per_layer_config": {"30": {"head_dim": 512}}})
