"""The API sends the recommendations document encoded by pydantic's serializer in one step
(``services.recommendations_json``, passed through by ``vramplan.renderers.JSONRenderer``): the same JSON values as
the document dumped and encoded by DRF (``recommendations_payload``, what ``manage.py recommend`` prints)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.recommend_speed import fixture_views
from budgets.engine import Workload
from recommendations.document import RecommendationsDocument
from recommendations.recommend import recommend
from recommendations.services import recommendations_json, recommendations_payload
from vramplan.renderers import EncodedJSON, JSONRenderer

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "fixtures" / "workloads").glob("*.json"))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_the_encoded_answer_is_the_dumped_answer(path: Path) -> None:
    workload = Workload.model_validate(json.loads(path.read_text()))
    entries = recommend(workload, fixture_views(), top=10)
    encoded = recommendations_json(workload, entries, 7)
    assert json.loads(encoded) == recommendations_payload(workload, entries, 7)
    # the documents built without validation are what validating the answer builds
    assert RecommendationsDocument.model_validate_json(encoded).dump_json() == encoded
    assert JSONRenderer().render(EncodedJSON(encoded)) == encoded


def test_anything_else_is_rendered_as_drf_renders_it() -> None:
    assert json.loads(JSONRenderer().render({"detail": "Not found.", "n": 1.5})) == {"detail": "Not found.", "n": 1.5}
