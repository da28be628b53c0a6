"""``manage.py recommend`` on the real catalog: the same answer as the API, a table, and clear errors."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from tests.recommendations.test_api import LLAMA_70B, by_slug, recommend

pytestmark = pytest.mark.django_db


def run(*args: str) -> str:
    out = StringIO()
    call_command("recommend", *args, stdout=out)
    return out.getvalue()


@pytest.fixture
def llama_file(tmp_path: Path) -> Path:
    path = tmp_path / "llama.json"
    path.write_text(json.dumps(LLAMA_70B))
    return path


def test_json_is_the_apis_answer(api, catalog, llama_file) -> None:
    printed = json.loads(run(str(llama_file), "--format", "json", "--top", "200"))
    assert printed == recommend(api, LLAMA_70B)
    entries = by_slug(printed)
    assert entries["h100-sxm-80gb-x1-r550"]["verdict"] == "does_not_fit"
    assert entries["h100-sxm-80gb-x4-r550"]["plan"]["tensor"] == 4


def test_the_table_has_one_ranked_line_per_entry(catalog, llama_file) -> None:
    lines = run(str(llama_file), "--top", "5").splitlines()
    assert lines[0].split()[:3] == ["#", "configuration", "verdict"]
    assert [line.split()[0] for line in lines[1:]] == ["1", "2", "3", "4", "5"]
    assert lines[1].split()[2] == "fits"


def test_launch_prints_each_runnable_entrys_command_as_the_api_gives_it(api, catalog, llama_file) -> None:
    printed = run(str(llama_file), "--top", "3", "--launch")
    launches = [e["launch"] for e in recommend(api, LLAMA_70B)["recommendations"][:3]]
    assert launches[0] is not None and launches[0]["argv"][:2] == ["vllm", "serve"]
    for launch in launches:
        if launch is not None:
            assert launch["text"] in printed.splitlines()
    assert "Launch commands:" in printed


def test_launch_prints_an_sglang_workloads_launch_server_commands(api, catalog) -> None:
    path = Path(__file__).resolve().parents[2] / "fixtures" / "workloads" / "sglang-qwen3-30b-a3b-chat.json"
    printed = run(str(path), "--top", "3", "--launch")
    launches = [e["launch"] for e in recommend(api, json.loads(path.read_text()))["recommendations"][:3]]
    assert launches[0] is not None and launches[0]["engine"] == "sglang"
    assert launches[0]["argv"][:5] == ["python", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-30B-A3B"]
    for launch in launches:
        if launch is not None:
            assert launch["text"] in printed.splitlines()
    assert "flags of sglang 0.5.10.post1)" in printed


def test_launch_prints_the_generic_engines_measured_run_and_a_custom_workloads_replay(catalog) -> None:
    examples = Path(__file__).resolve().parents[2] / "fixtures" / "workloads"
    generic = run(str(examples / "generic-mistral-7b-contiguous.json"), "--top", "1", "--launch")
    assert "vramplan-measure -- python -m workers.runner.synthetic acceptance_spec.json" in generic.splitlines()
    assert "cat > acceptance_spec.json <<'EOF'" in generic
    custom = run(str(examples / "custom-rendering.json"), "--top", "1", "--launch")
    assert "vramplan-measure -- python -m workers.runner.replay replay_spec.json" in custom.splitlines()
    assert "cat > replay_spec.json <<'EOF'" in custom and "register it (/api/v1/programs/)" in custom


@pytest.mark.parametrize(
    "content,message",
    [
        ("{not json", "is not JSON"),
        (json.dumps({**LLAMA_70B, "inference": {"concurrent_sessions": 0}}), "inference.concurrent_sessions"),
        (json.dumps({**LLAMA_70B, "precision": {"weights": "fp7"}}), "precision.weights"),
    ],
)
def test_a_bad_file_exits_2_naming_what_is_wrong(catalog, tmp_path, content, message) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(CommandError, match=message) as raised:
        run(str(path))
    assert raised.value.returncode == 2


def test_a_missing_file_exits_2(catalog, tmp_path) -> None:
    with pytest.raises(CommandError, match="cannot read") as raised:
        run(str(tmp_path / "missing.json"))
    assert raised.value.returncode == 2


def test_top_outside_1_to_200_is_refused(catalog, llama_file) -> None:
    with pytest.raises(CommandError, match="from 1 to 200"):
        run(str(llama_file), "--top", "201")


def test_an_empty_catalog_says_to_load_it(llama_file) -> None:
    with pytest.raises(CommandError, match="make catalog"):
        run(str(llama_file))
