"""Parameter counts of the published model configs in tests/engine/data/hf_configs, as transformers builds them.

    python -m benchmarks.model_landscape.count_parameters [--check] [ID ...]

Every file there holds one real `config.json` (under "config") and what transformers made of it (under
"transformers": the class, the version, "parameter_count" and "text_parameter_count"). This script rebuilds
each model on the meta device (no weights, no memory), counts `model.parameters()` (tied tensors once) and
prints id, class and count. With --check it exits 1 when a count differs from the stored one.

A record may name "config_overrides" under "transformers": keys replaced in the config before it is built, for
model types transformers lacks (kimi_k2 and mimo are built as deepseek_v3 and qwen2). A record whose class is
null (remote-code-only architectures such as nemotron-nas) is listed and skipped.

Needs torch and transformers (the `bench` extra); the engine never imports this.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path
from typing import Any

DATA_DIR = Path(__file__).resolve().parents[2] / "tests" / "engine" / "data" / "hf_configs"


def load_records(data_dir: Path = DATA_DIR) -> list[dict[str, Any]]:
    records = []
    for path in sorted(data_dir.glob("*.json")):
        record = json.loads(path.read_text())
        record.setdefault("id", path.stem)
        records.append(record)
    return records


def build_config(record: dict[str, Any]) -> Any:
    """The transformers config object for a record: its config.json with the record's overrides applied."""
    transformers = importlib.import_module("transformers")
    raw = dict(record["config"])
    raw.update((record.get("transformers") or {}).get("config_overrides") or {})
    model_type = raw.pop("model_type")
    return transformers.AutoConfig.for_model(model_type, **raw)


def count_parameters(record: dict[str, Any]) -> tuple[str, int, int]:
    """(class name, all parameters, language-model parameters) of the record's model built on the meta device."""
    torch = importlib.import_module("torch")
    transformers = importlib.import_module("transformers")
    class_name = record["transformers"]["class"]
    model_class = getattr(transformers, class_name)
    config = build_config(record)
    with torch.device("meta"):
        model = model_class._from_config(config)
    total = sum(p.numel() for p in model.parameters())
    # The language model: the decoder stack plus the output head (a tied head adds nothing).
    text: dict[int, int] = {id(p): p.numel() for p in model.get_decoder().parameters()}
    head = model.get_output_embeddings()
    if head is not None:
        text.update((id(p), p.numel()) for p in head.parameters())
    return class_name, total, sum(text.values())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a count differs from the stored one")
    parser.add_argument("ids", nargs="*", help="only these ids (file stems)")
    args = parser.parse_args(argv)

    transformers = importlib.import_module("transformers")
    print(f"transformers {transformers.__version__}")
    mismatches = []
    for record in load_records():
        if args.ids and record["id"] not in args.ids:
            continue
        stored = record.get("transformers") or {}
        if not stored.get("class"):
            print(f"{record['id']:<32} {'-':<40} skipped: no transformers class (counted by hand, see notes)")
            continue
        class_name, total, text = count_parameters(record)
        line = f"{record['id']:<32} {class_name:<40} {total:>16,} text {text:>16,}"
        expected = (stored.get("parameter_count"), stored.get("text_parameter_count"))
        if expected != (total, text):
            line += f"   MISMATCH stored {expected[0]} / {expected[1]}"
            mismatches.append(record["id"])
        print(line)
    if args.check and mismatches:
        print(f"{len(mismatches)} count(s) differ: {', '.join(mismatches)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
