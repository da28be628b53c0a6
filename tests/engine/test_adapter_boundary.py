"""No model_type name outside the HF adapter and its defaults: the layer kinds are what the rest of the engine, the
recommender and the measuring half read (`budgets/engine/models/hf_config.py`, `hf_defaults.py`, `hf_layered.py`,
`hf_towers.py` are the adapter)."""

from __future__ import annotations

import ast
from pathlib import Path

from budgets.engine.models.hf_config import SUPPORTED_MODEL_TYPES
from budgets.engine.models.hf_defaults import LAYERED_RULES, MULTIMODAL_TEXT

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("budgets", "catalog", "measurements", "recommendations", "workers", "vramplan")
ADAPTER = {"hf_config.py", "hf_defaults.py", "hf_layered.py", "hf_towers.py"}
NAMES = (set(SUPPORTED_MODEL_TYPES) | set(LAYERED_RULES) | set(MULTIMODAL_TEXT) | set(MULTIMODAL_TEXT.values())) - {
    "generic"  # also the name of an engine profile and of the generic layer model
}


def _string_literals(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    ]


def test_no_model_type_name_outside_the_hf_adapter() -> None:
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations" in path.parts or (path.parent.name == "models" and path.name in ADAPTER):
                continue
            found += [
                f"{path.relative_to(ROOT)}:{line} {value!r}" for line, value in _string_literals(path) if value in NAMES
            ]
    assert not found, "model_type names outside the HF adapter:\n" + "\n".join(found)


def test_the_boundary_test_finds_a_name_where_one_is() -> None:
    adapter = ROOT / "budgets" / "engine" / "models" / "hf_config.py"
    assert any(value in NAMES for _, value in _string_literals(adapter))


def test_no_engine_name_in_the_general_schema_plans_or_verdicts() -> None:
    """Engines are asked through their registry (budgets/engine/engines.py), never named in general code."""
    from budgets.engine.engines import ENGINES

    general = (
        ROOT / "budgets" / "engine" / "schema.py",
        ROOT / "recommendations" / "plans.py",
        ROOT / "recommendations" / "verdicts.py",
    )
    found = [
        f"{path.relative_to(ROOT)}:{line} {value!r}"
        for path in general
        for line, value in _string_literals(path)
        if value in ENGINES or value == "vllm_need"
    ]
    assert not found, "engine names in general code:\n" + "\n".join(found)
