"""Hostile config.json values reach no loop or product before their bounds: each is a 400 naming the field, fast.

The first ones are the issue's (a qwen2_moe / gemma3_text config with 10^12 layers held a web worker until gunicorn
killed it; `n_head: 0`, `partial_rotary_factor: 1e308` and a list for `sliding_window` were 500s; negative sizes gave
negative parameter counts); the rest reach the per-layer reader, the quantization reader and the checkpoint summary.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from budgets.engine.models.presets import load_presets
from tests.documents import with_value

pytestmark = pytest.mark.django_db

CONFIGS = Path(__file__).resolve().parents[1] / "engine" / "data" / "hf_configs"
SECONDS = 10  # a guard against a hang, not a speed target: these answer in milliseconds


def _real(record_id: str) -> dict[str, Any]:
    return dict(json.loads((CONFIGS / f"{record_id}.json").read_text())["config"])


QWEN2_MOE = {
    "model_type": "qwen2_moe",
    "hidden_size": 256,
    "num_hidden_layers": 4,
    "num_attention_heads": 8,
    "intermediate_size": 512,
    "moe_intermediate_size": 128,
    "num_experts": 4,
    "num_experts_per_tok": 2,
    "vocab_size": 1000,
}
PRESETS = load_presets()
GEMMA3 = dict(PRESETS["gemma-3-1b"].config)  # gemma3_text
GPT2 = dict(PRESETS["gpt2"].config)
PHI3 = dict(PRESETS["phi-3-mini-4k"].config)
MISTRAL = dict(PRESETS["mistral-7b-v0.1"].config)


def _finite(config: dict[str, Any]) -> dict[str, Any]:
    """The config without its non-finite floats (Nemotron-H's time_step_limit [0.0, Infinity]): JSON has no
    Infinity, so a client sends such a config without them."""
    return {k: v for k, v in config.items() if "Infinity" not in json.dumps(v)}


CASES: list[tuple[str, dict[str, Any], str]] = [
    ("qwen2_moe 10^12 layers", {**QWEN2_MOE, "num_hidden_layers": 10**12}, "num_hidden_layers"),
    ("gemma3_text 10^12 layers", {**GEMMA3, "num_hidden_layers": 10**12}, "num_hidden_layers"),
    ("gpt2 n_head 0", {**GPT2, "n_head": 0}, "n_head"),
    ("phi3 partial_rotary_factor 1e308", {**PHI3, "partial_rotary_factor": 1e308}, "partial_rotary_factor"),
    ("mistral sliding_window list", {**MISTRAL, "sliding_window": [4096]}, "sliding_window"),
    ("negative intermediate_size", {**MISTRAL, "intermediate_size": -11008}, "intermediate_size"),
    ("negative vocab_size", {**GPT2, "vocab_size": -5}, "vocab_size"),
    ("qwen2_moe mlp_only_layers of strings", {**QWEN2_MOE, "mlp_only_layers": ["0"]}, "mlp_only_layers"),
    ("gemma3 sliding_window_pattern 0", {**GEMMA3, "sliding_window_pattern": 0}, "sliding_window_pattern"),
    ("deepseek_v3 kv_lora_rank 10^12", with_value(_real("deepseek-v3"), "kv_lora_rank", 10**12), "kv_lora_rank"),
    ("gpt_oss 10^9 experts", with_value(_real("gpt-oss-20b"), "num_local_experts", 10**9), "num_local_experts"),
    ("gpt_oss layer_types unknown kind", with_value(_real("gpt-oss-20b"), "layer_types", ["warp"] * 24), "layer_types"),
    (
        "qwen3_next 10^12 linear heads",
        with_value(_real("qwen3-next-80b-a3b"), "linear_num_value_heads", 10**12),
        "linear_num_value_heads",
    ),
    (
        "nemotron_h pattern of other letters",
        with_value(_finite(_real("nemotron-h-56b")), "hybrid_override_pattern", "X" * 118),
        "hybrid_override_pattern",
    ),
    (
        "nemotron-nas ffn_mult 1e308",
        with_value(
            _real("llama-3.3-nemotron-super-49b-v1"),
            "block_configs",
            [{"attention": {"no_op": True}, "ffn": {"ffn_mult": 1e308}}] * 80,
        ),
        "ffn_mult",
    ),
    ("llama4 text_config a list", with_value(_real("llama-4-scout"), "text_config", [1, 2]), "text_config"),
    (
        "quantization group_size 0",
        with_value(_real("qwen3-32b-fp8"), "quantization_config", {"quant_method": "awq", "bits": 4, "group_size": 0}),
        "group_size",
    ),
]


@pytest.fixture
def deadline() -> Iterator[None]:
    def _fail(*_: Any) -> None:
        raise TimeoutError(f"no answer within {SECONDS} s: a loop ran before a bound")

    previous = signal.signal(signal.SIGALRM, _fail)
    signal.alarm(SECONDS)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize(("label", "config", "field"), CASES, ids=[c[0] for c in CASES])
def test_a_hostile_config_is_a_400_naming_the_field(api, deadline, label: str, config: dict, field: str) -> None:
    response = api.post("/api/v1/estimate", {"task": "inference", "model": {"hf_config": config}}, format="json")
    assert response.status_code == 400, (label, response.content[:500])
    assert field in json.dumps(response.json()), (label, response.json())


@pytest.mark.parametrize(
    ("checkpoint", "field"),
    [({"total_size": -1}, "total_size"), ({"total_size": 10**30}, "total_size"), ({"tensors": "all"}, "tensors")],
)
def test_a_hostile_checkpoint_summary_is_a_400_naming_the_field(api, deadline, checkpoint: dict, field: str) -> None:
    model = {"preset": "llama-3.1-8b", "checkpoint": checkpoint}
    response = api.post("/api/v1/estimate", {"task": "inference", "model": model}, format="json")
    assert response.status_code == 400
    assert field in json.dumps(response.json())
