"""How far the generic layer model's parameter count is from transformers' for the families that have rules.

    python -m benchmarks.model_landscape.generic_reader

Each collected config (tests/engine/data/hf_configs) is read twice: with its family's rules and as an unknown
model_type (the generic reader: standard fields only). The printed max |error| of the generic reading is the
band the engine puts around a generic model's weights (budgets/engine/estimate.py GENERIC_WEIGHTS_BAND).
"""

from __future__ import annotations

import json
from pathlib import Path

from budgets.engine.models.hf_config import UnsupportedModelError, from_hf_config
from budgets.engine.models.hf_defaults import MULTIMODAL_TEXT
from budgets.engine.models.parameters import parameter_count

DATA = Path(__file__).resolve().parents[2] / "tests" / "engine" / "data" / "hf_configs"


def main() -> int:
    errors: list[float] = []
    print(f"{'config':40s} {'rules':>16s} {'generic':>16s} {'error':>8s}")
    for path in sorted(DATA.glob("*.json")):
        record = json.loads(path.read_text())
        config = dict(record["config"])
        text = config.get("text_config")
        if isinstance(text, dict):
            config = {**text, "tie_word_embeddings": config.get("tie_word_embeddings", text.get("tie_word_embeddings"))}
        elif config.get("model_type") in MULTIMODAL_TEXT:
            config = {k: v for k, v in config.items() if k != "vision_config"}
        try:
            ruled = from_hf_config(record["config"])
            generic = from_hf_config({**config, "model_type": "unknown_family"})
        except UnsupportedModelError as exc:
            print(f"{record['id']:40s} not read: {exc}")
            continue
        a = parameter_count(ruled).total - ruled.tower_params
        b = parameter_count(generic).total
        error = (b - a) / a
        errors.append(abs(error))
        print(f"{record['id']:40s} {a:16,} {b:16,} {error:+8.2%}")
    median = sorted(errors)[len(errors) // 2]
    print(f"generic reader: {len(errors)} configs, max |error| {max(errors):.2%}, median {median:.2%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
