"""The per-kind views of a model's layers (components/layer_views.py) and the spec hash the engine's caches key on."""

from __future__ import annotations

import pickle
from dataclasses import replace

from benchmarks.accuracy.cases import ROUND10_CONFIGS
from budgets.engine.components.layer_views import views
from budgets.engine.models.hf_config import from_hf_config
from budgets.engine.models.spec import from_architecture


def test_a_dense_first_layer_and_moe_layers_are_two_views_covering_every_layer():
    spec = from_hf_config(ROUND10_CONFIGS["glm4_moe_lite"])
    vs = views(spec, 0, spec.num_layers)
    assert sum(v.count for v in vs) == spec.num_layers
    assert {v.mlp.kind for v in vs} == {"dense", "moe"}
    dense = next(v for v in vs if v.mlp.kind == "dense")
    assert (dense.first, dense.last) == (0, 1) and dense.spec.num_experts == 1


def test_a_hybrid_model_has_a_view_per_mixer_kind_and_a_stage_sees_only_its_layers():
    spec = from_hf_config(ROUND10_CONFIGS["jamba"])
    kinds = {v.mixer.kind for v in views(spec, 0, spec.num_layers)}
    assert kinds == {"mamba", "full"}
    first = views(spec, 0, 1)
    assert len(first) == 1 and first[0].count == 1


def test_the_spec_hash_is_computed_once_recomputed_by_replace_and_after_unpickling():
    a = from_architecture(num_layers=2, hidden_size=64, num_attention_heads=4, intermediate_size=128, vocab_size=100)
    b = replace(a, num_layers=3)
    assert hash(a) != hash(b) and hash(replace(b, num_layers=2)) == hash(a)
    c = pickle.loads(pickle.dumps(a))
    assert c == a and hash(c) == hash(a)
