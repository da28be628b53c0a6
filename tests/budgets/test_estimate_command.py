"""`manage.py estimate FILE`: prints exactly the contract's budget object for every example workload."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from budgets.engine.budget import COMPONENT_NAMES

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "fixtures" / "workloads").glob("*.json"))


def test_there_are_example_workloads() -> None:
    assert len(EXAMPLES) >= 8


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_json_output_is_the_budget_alone(path) -> None:
    out = StringIO()
    call_command("estimate", str(path), "--format", "json", stdout=out)
    budget = json.loads(out.getvalue())  # the whole of stdout is one JSON object
    assert budget["workload"] == json.loads(path.read_text()).get("name", "workload")
    assert tuple(budget["per_device"]["components"]) == COMPONENT_NAMES


@pytest.mark.parametrize("path", EXAMPLES[:3], ids=lambda p: p.stem)
def test_table_output_shows_both_units(path) -> None:
    out = StringIO()
    call_command("estimate", str(path), "--format", "table", stdout=out)
    assert "GiB" in out.getvalue() and "GB" in out.getvalue()


def test_bad_file_names_the_field(tmp_path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(
        json.dumps({"task": "inference", "model": {"preset": "llama-3.1-8b"}, "inference": {"concurrent_sessions": 0}})
    )
    with pytest.raises(CommandError, match=r"inference\.concurrent_sessions"):
        call_command("estimate", str(bad))
    (tmp_path / "nojson.json").write_text("{")
    with pytest.raises(CommandError, match="not JSON"):
        call_command("estimate", str(tmp_path / "nojson.json"))
    with pytest.raises(CommandError, match="cannot read"):
        call_command("estimate", str(tmp_path / "missing.json"))


@pytest.mark.slow
def test_real_process_stdout_is_pure_json() -> None:
    result = subprocess.run(
        [sys.executable, "manage.py", "estimate", str(EXAMPLES[0])],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "DJANGO_DEBUG": "1"},
    )
    assert result.returncode == 0, result.stderr
    json.loads(result.stdout)


@pytest.mark.django_db
@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_the_command_answers_what_the_api_answers(api, path) -> None:
    """Both call budgets.services (workload_validate, then budget_compute): the same budget, to the byte."""
    out = StringIO()
    call_command("estimate", str(path), "--device-memory", "80GiB", stdout=out)
    response = api.post("/api/v1/estimate?device_memory=80GiB", json.loads(path.read_text()), format="json")
    assert response.status_code == 200, response.content
    assert json.loads(out.getvalue()) == response.json()


@pytest.mark.django_db
def test_the_command_refuses_what_the_api_refuses_with_the_same_words(api, tmp_path) -> None:
    """The 1 EiB guard lives in budgets.services.budget_compute; the command and the API both go through it."""
    huge = {
        "name": "typo",
        "task": "custom",
        "custom": {
            "components": [{"name": "scene", "category": "weights", "bytes": 10**15, "per_concurrent": True}],
            "concurrency": 100_000,
        },
    }
    path = tmp_path / "huge.json"
    path.write_text(json.dumps(huge))
    refused = api.post("/api/v1/estimate", huge, format="json")
    assert refused.status_code == 400
    with pytest.raises(CommandError) as excinfo:
        call_command("estimate", str(path), stdout=StringIO())
    assert str(excinfo.value) == f"{path}: {refused.json()['workload'][0]}"
    assert "1 EiB" in str(excinfo.value) and "largest component: weights" in str(excinfo.value)
