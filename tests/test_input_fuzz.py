"""Hostile values in every field of a workload, and in a Hugging Face config, through the API (Hypothesis).

Each example takes one of the example workloads (``fixtures/workloads``), puts one hostile value —
malformed, huge, NaN, infinite, negative, unicode, a NUL byte, a wrong type — at one of its fields (or at a
key of an ``hf_config``), and sends it to ``POST /api/v1/estimate`` and ``POST /api/v1/workloads/``.
The answer is never a 5xx: a 200 (the value was acceptable there) or a 400 whose body names the field
(the field itself, one inside it, or the section an all-fields rule reports on). Nothing invalid is stored.
JSON has no NaN or infinity: a body carrying them is refused as malformed JSON, with the reason.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.documents import with_value

pytestmark = [pytest.mark.django_db, pytest.mark.slow]  # Hypothesis: a few hundred requests

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = {p.stem: json.loads(p.read_text()) for p in sorted((ROOT / "fixtures" / "workloads").glob("*.json"))}
#: A Llama-shaped config the importer accepts, whose keys get the hostile values.
HF_CONFIG = {
    "model_type": "llama",
    "hidden_size": 2048,
    "intermediate_size": 8192,
    "num_hidden_layers": 16,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "vocab_size": 128256,
    "max_position_embeddings": 131072,
    "tie_word_embeddings": True,
    "rope_theta": 500000.0,
}

HOSTILE = st.one_of(
    st.sampled_from([math.nan, math.inf, -math.inf]),
    st.integers(min_value=-(10**40), max_value=-1),
    st.integers(min_value=10**15, max_value=10**40),
    st.sampled_from(["", "\x00", "a\x00b", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 ‮ﷺ", "x" * 100_000, "1e309", "-0"]),
    st.sampled_from([None, True, False, [], {}, [1, 2, 3], {"nested": {"deeper": [None]}}]),
    st.floats(allow_nan=False, allow_infinity=False, min_value=-1e300, max_value=1e300),
    st.text(max_size=40),
)


def _paths(value: Any, prefix: str = "") -> list[str]:
    """Every dotted path to a field of ``value`` (objects' keys; lists are leaves)."""
    if not isinstance(value, dict):
        return [prefix] if prefix else []
    out = [prefix] if prefix else []
    for key, inner in value.items():
        out += _paths(inner, f"{prefix}.{key}" if prefix else key)
    return out


def _names(field: str, errors: dict[str, Any]) -> bool:
    """The 400's keys name ``field``: the field, one inside it, or a section that holds it."""
    return any(key == field or key.startswith(field + ".") or field.startswith(key + ".") for key in errors)


def _post(api: Any, url: str, document: dict[str, Any]) -> Any:
    body = json.dumps(document, allow_nan=True)
    return api.generic("POST", url, body, content_type="application/json")


def _stored(api: Any) -> int:
    return api.get("/api/v1/workloads/").json()["count"]


def _check(api: Any, document: dict[str, Any], field: str, value: Any) -> None:
    non_finite = isinstance(value, float) and not math.isfinite(value)
    for url in ("/api/v1/estimate", "/api/v1/workloads/"):
        before = _stored(api)
        response = _post(api, url, document)
        assert response.status_code in (200, 201, 400), (url, field, value, response.status_code, response.content)
        if response.status_code != 400:
            continue
        assert _stored(api) == before  # nothing refused is kept
        errors = response.json()
        if non_finite:
            assert "JSON" in json.dumps(errors), errors  # refused as malformed JSON, with the reason
        else:
            assert _names(field, errors), (field, errors)


SETTINGS = settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@SETTINGS
@given(data=st.data(), value=HOSTILE)
def test_a_hostile_value_in_any_workload_field_is_a_400_naming_it(api, data, value) -> None:
    name = data.draw(st.sampled_from(sorted(EXAMPLES)), label="example")
    example = EXAMPLES[name]
    field = data.draw(st.sampled_from(_paths(example)), label="field")
    _check(api, with_value(example, field, value), field, value)


@SETTINGS
@given(data=st.data(), value=HOSTILE)
def test_a_hostile_value_in_any_hf_config_key_is_a_400_naming_the_config(api, data, value) -> None:
    key = data.draw(st.sampled_from([*sorted(HF_CONFIG), "head_dim", "num_experts", "rope_scaling"]), label="key")
    config = {**HF_CONFIG, key: value}
    document = {
        "name": "fuzzed-config",
        "task": "inference",
        "model": {"hf_config": config},
        "inference": {"max_input_tokens": 512, "max_output_tokens": 64, "concurrent_sessions": 1},
    }
    _check(api, document, "model.hf_config", value)
