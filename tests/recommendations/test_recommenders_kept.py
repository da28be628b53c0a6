"""A recommender kept for a workload (``recommend.Recommender``, kept per process by ``services``): asking again
answers exactly as asking afresh would, whatever changed in between that the recommender does not hold (the
calibration, the filters, ``top``), and what it holds is dropped with the views it was built on.

The database tests are transactional: the views, and so the recommenders, are only kept outside a transaction, as in
a request served by gunicorn.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.core.cache import cache

from benchmarks.recommend_speed import fixture_views
from budgets.engine import Workload
from recommendations import services
from recommendations.recommend import Recommender, recommend
from tests.recommendations.measured import QWEN_7B, measured_workload

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "fixtures" / "workloads").glob("*.json"))


def _answers(entries) -> list[dict]:
    return [entry.as_dict() for entry in entries]


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_a_kept_recommender_answers_as_a_fresh_one(path: Path) -> None:
    workload = Workload.model_validate(json.loads(path.read_text()))
    views = fixture_views()
    fresh = _answers(recommend(workload, views))
    kept = Recommender(workload)
    first = _answers(recommend(workload, views, top=5, recommender=kept))  # fills part of it
    assert first == fresh[:5]
    assert _answers(recommend(workload, views, recommender=kept)) == fresh
    assert _answers(recommend(workload, views[::2], recommender=kept)) == _answers(recommend(workload, views[::2]))
    assert _answers(recommend(workload, views, recommender=kept)) == fresh  # the same objects asked again


def test_a_recommender_is_for_its_own_workload() -> None:
    qwen = Workload.model_validate(QWEN_7B)
    other = qwen.model_copy(update={"name": "another"})
    with pytest.raises(ValueError, match="another workload"):
        recommend(other, fixture_views()[:3], recommender=Recommender(qwen))


@pytest.fixture
def kept_caches():
    for part in (services._views_cache, services._records_cache, services._recommenders):
        part.clear()
    cache.clear()
    yield services._recommenders
    for part in (services._views_cache, services._records_cache, services._recommenders):
        part.clear()


@pytest.mark.django_db(transaction=True)
def test_asking_again_after_a_new_measurement_answers_as_afresh(user, catalog, kept_caches) -> None:
    spec = Workload.model_validate(QWEN_7B)
    before = _answers(services.recommend_for(spec, user=user, top=None))
    (kept,) = kept_caches.entries.values()
    measured_workload(user, ratio=1.3)  # the user's calibration changes; the kept recommender does not
    again = _answers(services.recommend_for(spec, user=user, top=None))
    assert list(kept_caches.entries.values()) == [kept]  # the same recommender answered
    assert again != before  # the new measurement is in the answer
    kept_caches.clear()
    assert _answers(services.recommend_for(spec, user=user, top=None)) == again


@pytest.mark.django_db(transaction=True)
def test_at_most_kept_recommenders_are_kept_and_a_new_catalog_is_not_answered_from_an_old_one(
    user, catalog, kept_caches
) -> None:
    spec = Workload.model_validate(QWEN_7B)
    views = services.catalog_views()
    for n in range(services.KEPT_RECOMMENDERS + 2):
        services.recommend_for(spec.model_copy(update={"name": f"qwen-{n}"}), user=user, top=1)
    assert len(kept_caches.entries) == services.KEPT_RECOMMENDERS
    assert all(kept_views is views for kept_views, _ in kept_caches.entries.values())
    services._views_cache.clear()  # as a catalog change does: the next request builds new views
    services.recommend_for(spec, user=user, top=1)
    newest_views, _ = next(reversed(kept_caches.entries.values()))
    assert newest_views is not views


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_a_page_of_configurations_that_run_is_the_full_rankings_first_page(path: Path) -> None:
    """``top`` no larger than the configurations that run is ranked from those only (the closest plans of the
    rest are never searched), and is the same page as the full ranking's; a larger ``top`` ranks everything."""
    workload = Workload.model_validate(json.loads(path.read_text()))
    views = fixture_views()
    fresh = _answers(recommend(workload, views))
    running = sum(1 for entry in fresh if entry["verdict"] in ("fits", "tight"))
    short = any(entry["verdict"] == "does_not_fit" for entry in fresh)
    for top in sorted({1, 5, running, running + 1} - {0}):
        recommender = Recommender(workload)
        assert _answers(recommend(workload, views, top=top, recommender=recommender)) == fresh[:top], top
        closest_searched = any(key[0] == "outcome" for key in recommender.variants.base._memo)
        assert closest_searched == (running < top and short), top


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_a_page_with_evidence_searches_only_what_can_rank_on_it_and_is_the_full_rankings_first_page(
    path: Path,
) -> None:
    """Measured configurations rank before estimated ones and priced before unpriced (``ranking``), so a page is
    ranked without searching the plans of a configuration whose best possible key ranks after the page's last
    entry: with evidence on some architectures, every page is still the full ranking's first entries."""
    from measurements.calibration import CalibrationRecord
    from measurements.evidence import workload_summary
    from recommendations.recommend import Calibration

    description = json.loads(path.read_text())
    workload = Workload.model_validate(description)
    views = fixture_views()
    measured = [v for v in views if v.accelerator_name][::9]  # evidence on a spread of configurations
    summary = workload_summary(description)
    records = [
        CalibrationRecord(
            measurement_id=i + 1,
            order_id=i + 1,
            job_id=i + 1,
            configuration=v.slug,
            architecture=v.architecture,
            view="device_used",
            measured=2**30,
            estimated=2**30,
            estimated_low=None,
            estimated_high=None,
            workload=summary,
        )
        for i, v in enumerate(measured)
    ]
    calibration = Calibration.build(records, summary)
    full_recommender = Recommender(workload)
    fresh = _answers(recommend(workload, views, calibration=calibration, recommender=full_recommender))
    assert {entry["evidence"]["level"] for entry in fresh} >= {"measured_here", "measured_architecture"}
    for top in (1, 5, 10):
        recommender = Recommender(workload)
        page = _answers(recommend(workload, views, calibration=calibration, top=top, recommender=recommender))
        assert page == fresh[:top], top
        assert recommender.variants.base.budgets_computed <= full_recommender.variants.base.budgets_computed
