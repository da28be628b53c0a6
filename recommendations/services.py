"""Recommend configurations for a workload: the one path for the API, the command and the admin.

Builds the configuration views from the catalog (``views_data``), the calibration from the acceptance
measurements the caller may see (``measurements.services.calibration_records``; staff and the command see
all), and calls the pure ``recommend.recommend``.

The configuration views are kept per process (``catalog_views``) while the catalog stays the same: reading
and building them is about half of a request over the full catalog. So are the calibration records of the
measurements a caller may see (``acceptance_records``) while those measurements and the views stay the
same: building them reads every visible measurement and budgets each measured order's latency, which grows
with the measurements (100 of them: 99 ms a request; ``python -m benchmarks.load --part http`` prints it).
And so are the recommenders of the last few workloads asked for (``_recommenders``): what a recommendation derives
from the workload and the views (plan budgets, verdicts, settings) while those views are kept, so asking again for a
workload's recommendations, with another calibration, filter or ``top``, does not ask the engine again.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from django.db import connection
from django.db.models import QuerySet

from budgets.engine import Workload as WorkloadSpec
from budgets.services import budget_compute, workload_validate
from catalog.selectors import catalog_version
from measurements.calibration import CalibrationRecord, WorkloadSummary
from measurements.models import Measurement, MeasurementReview
from measurements.services import calibration_records, summary_of, trusted_measurements

from .document import RecommendationDocument, RecommendationsDocument, RecommendedWorkloadDocument
from .plans import ConfigurationView
from .ranking import Filters
from .recommend import Calibration, Entry, Recommender, recommend
from .views_data import configuration_views

DEFAULT_TOP = 10  # the ranked list an API page shows (benchmarks/recommend_speed.py times the same)
MAX_TOP = 200
#: The longest this process keeps configuration views: bounds how long a change that
#: ``catalog.selectors.catalog_version`` cannot see (an in-place ``update()`` elsewhere) goes unseen.
VIEWS_MAX_AGE_S = 5.0
_clock = time.monotonic  # replaced in tests, to age the views without waiting


class _ViewsCache:
    """The last configuration views built in this process, with the catalog version they were built at."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.entry: tuple[tuple[Any, ...], float, tuple[ConfigurationView, ...]] | None = None

    def clear(self) -> None:
        with self.lock:
            self.entry = None


_views_cache = _ViewsCache()


def catalog_views() -> tuple[ConfigurationView, ...]:
    """Every configuration as the recommender sees it, reused while ``catalog_version()`` stays the same
    and for at most ``VIEWS_MAX_AGE_S`` seconds (one fingerprint query instead of the catalog's rows).

    Never kept from inside a transaction (its rows may be uncommitted or rolled back): there, and when the
    cache cannot be read, the views are built from the database every time. The version is read before
    the rows, so a change made while they are read is seen on the next call.
    """
    if connection.in_atomic_block:
        return tuple(configuration_views())
    version = catalog_version()
    now = _clock()
    entry = _views_cache.entry
    if version is not None and entry is not None and entry[0] == version and now - entry[1] < VIEWS_MAX_AGE_S:
        return entry[2]
    views = tuple(configuration_views())
    if entry is not None and entry[2] == views:
        views = entry[2]  # the same views as before: keep them, so what was derived from them stays valid
    if version is not None:
        with _views_cache.lock:
            _views_cache.entry = (version, now, views)
    return views


def _visible_measurements(user: Any | None) -> QuerySet[Measurement]:
    """The measurements that calibrate the caller's recommendations: its own orders' (its unreviewed uploads
    included, labelled as its own); for staff and the command line, every order's node-verified runs and reviewed
    uploads, never another user's unreviewed upload (``measurements.calibration``, provenance)."""
    rows = Measurement.objects.all()
    if user is None or user.is_staff:
        return trusted_measurements(rows)
    return rows.visible_to(user)


def _latency_estimator(views: dict[str, ConfigurationView]):
    """The recommender's roofline time per output token for a measured order (its workload on its
    configuration, uncorrected): what a measured ``ms_per_output_token`` is compared with."""
    remembered: dict[tuple[int, str], float | None] = {}

    def estimate(measurement: Measurement) -> float | None:
        order = measurement.order
        key = (order.workload_id, order.configuration.slug)
        if key not in remembered:
            view = views.get(order.configuration.slug)
            spec = workload_validate(order.workload.description)
            entries = recommend(spec, [view]) if view is not None else []
            latency = entries[0].latency if entries else None
            remembered[key] = latency.ms_per_output_token if latency is not None else None
        return remembered[key]

    return estimate


#: What the calibration records of a set of measurements are kept under: count, highest id and sum of the
#: ids (rows added or removed, also when an earlier id commits late and another row is deleted), the sum
#: of the job ids (a deleted job leaves its measurements with no job: ``on_delete=SET_NULL``) and of their reviews'
#: ids (a review changes a record's provenance).
Fingerprint = tuple[int, int | None, int | None, int | None, int | None]

#: How many calibration records this process keeps, over every visibility scope (a user, or everything);
#: the least recently used scopes are dropped first (one scope is kept whatever its size). A record is a few
#: hundred bytes, so this bounds the cache at tens of MB per process.
RECORDS_CACHE_MAX_RECORDS = 50_000


#: Calibrations (the records grouped into corrections and indexed for evidence) kept per scope's records,
#: one per workload summary, least recently used dropped first.
CALIBRATIONS_PER_SCOPE = 16


@dataclass
class _Kept:
    fingerprint: Fingerprint  # of the visible measurements
    views: tuple[ConfigurationView, ...]  # held, so compared by identity
    records: list[CalibrationRecord]
    calibrations: OrderedDict[WorkloadSummary, Calibration] = field(default_factory=OrderedDict)


class _RecordsCache:
    """Calibration records per visibility scope, with what they were built from, and the calibrations
    built from them."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.entries: OrderedDict[Any, _Kept] = OrderedDict()
        self.size = 0  # records held, over every scope

    def clear(self) -> None:
        with self.lock:
            self.entries.clear()
            self.size = 0

    def get(self, scope: Any, fingerprint: Fingerprint, views: tuple[ConfigurationView, ...]) -> _Kept | None:
        with self.lock:
            kept = self.entries.get(scope)
            if kept is None or kept.fingerprint != fingerprint or kept.views is not views:
                return None
            self.entries.move_to_end(scope)
            return kept

    def put(self, scope: Any, kept: _Kept) -> None:
        with self.lock:
            self._drop(scope)
            self.entries[scope] = kept
            self.size += len(kept.records)
            while self.size > RECORDS_CACHE_MAX_RECORDS and len(self.entries) > 1:
                self._drop(next(iter(self.entries)))

    def _drop(self, scope: Any) -> None:
        kept = self.entries.pop(scope, None)
        if kept is not None:
            self.size -= len(kept.records)

    def calibration(self, kept: _Kept, summary: WorkloadSummary) -> Calibration | None:
        with self.lock:
            found = kept.calibrations.get(summary)
            if found is not None:
                kept.calibrations.move_to_end(summary)
            return found

    def keep_calibration(self, kept: _Kept, summary: WorkloadSummary, calibration: Calibration) -> None:
        with self.lock:
            kept.calibrations[summary] = calibration
            while len(kept.calibrations) > CALIBRATIONS_PER_SCOPE:
                kept.calibrations.popitem(last=False)


_records_cache = _RecordsCache()


def _scope(user: Any | None) -> Any:
    """Whose measurements ``user`` sees: everyone's (staff, the command line) or its own."""
    return "all" if user is None or user.is_staff else ("user", user.pk)


#: The fingerprint's SQL per visibility scope, compiled once (compiling the ORM's aggregate cost 0.6 ms of CPU per
#: request, running it 0.04 ms); least recently used dropped first.
FINGERPRINT_SQL_KEPT = 1024
_fingerprint_sql: OrderedDict[Any, tuple[str, tuple[Any, ...]]] = OrderedDict()
_fingerprint_lock = threading.Lock()


def _fingerprint_query(scope: Any, visible: QuerySet[Measurement]) -> tuple[str, tuple[Any, ...]]:
    """``visible``'s count, highest id and sums of the ids, job ids and review ids, as SQL with its parameters:
    the visible rows' ids as a subquery (the scope decides them: ``_visible_measurements``)."""
    with _fingerprint_lock:
        found = _fingerprint_sql.get(scope)
        if found is not None:
            _fingerprint_sql.move_to_end(scope)
            return found
    ids, params = visible.order_by().values("id").query.sql_with_params()
    measurement, review = Measurement._meta.db_table, MeasurementReview._meta.db_table
    sql = (
        f"SELECT COUNT(m.id), MAX(m.id), SUM(m.id), SUM(m.job_id), SUM(r.id) FROM {measurement} m"
        f" LEFT OUTER JOIN {review} r ON r.measurement_id = m.id WHERE m.id IN ({ids})"
    )
    with _fingerprint_lock:
        _fingerprint_sql[scope] = (sql, tuple(params))
        while len(_fingerprint_sql) > FINGERPRINT_SQL_KEPT:
            _fingerprint_sql.popitem(last=False)
    return sql, tuple(params)


def _fingerprint(scope: Any, visible: QuerySet[Measurement]) -> Fingerprint:
    sql, params = _fingerprint_query(scope, visible)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        count, top, ids, jobs, reviews = cursor.fetchone()
    return (int(count), top, ids, jobs, reviews)


def acceptance_records(views: Iterable[ConfigurationView], user: Any | None) -> list[CalibrationRecord]:
    """Every calibration record of the measurements ``user`` may see (None: all), the latency view
    compared with the recommender's roofline on ``views``.

    Kept per process and visibility scope while the visible measurements (``Fingerprint``, one query) and
    ``views`` stay the same: measurements, and the orders and workloads they belong to, are never edited,
    only added or deleted (their job may be deleted). The fingerprint is read again after the records are
    built, and they are kept only when it did not change meanwhile. Never kept from inside a transaction
    (its rows may be rolled back), as the views are not.
    """
    records, _ = _records_kept(tuple(views), user)
    return records


def _records_kept(
    views: tuple[ConfigurationView, ...], user: Any | None
) -> tuple[list[CalibrationRecord], _Kept | None]:
    """``acceptance_records``, with the cache entry that holds them (None when they are not kept)."""
    visible = _visible_measurements(user)
    if connection.in_atomic_block:
        return _build_records(views, visible), None
    scope = _scope(user)
    fingerprint = _fingerprint(scope, visible)
    kept = _records_cache.get(scope, fingerprint, views)
    if kept is None:
        kept = _Kept(fingerprint, views, _build_records(views, visible))
        if _fingerprint(scope, visible) != fingerprint:  # a row added or removed while they were read: not kept
            return kept.records, None
        _records_cache.put(scope, kept)
    return kept.records, kept


#: Workloads whose recommenders this process keeps (``Recommender``: plan budgets, verdicts, settings), least
#: recently used dropped first. One holds up to about 20 MiB (the example 70B training workload with every
#: entry's settings; ``python -m benchmarks.recommend_speed`` prints the largest), so this bounds it per process.
KEPT_RECOMMENDERS = 8


class _RecommendersCache:
    """Recommenders of the last few workloads, each with the views it was built on (held, so compared by
    identity): asking again for a workload's recommendations, with any calibration, filters or ``top``, reuses
    its plan budgets instead of asking the engine again (the first 10 over the full catalog: 17.7–21.9 ms →
    1.3–1.6 ms, ``python -m benchmarks.recommend_speed``)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.entries: OrderedDict[tuple[str, int], tuple[tuple[ConfigurationView, ...], Recommender]] = OrderedDict()

    def clear(self) -> None:
        with self.lock:
            self.entries.clear()

    def get(self, spec: WorkloadSpec, views: tuple[ConfigurationView, ...]) -> Recommender:
        """The kept recommender of ``spec`` on ``views``, or a new one, kept when ``views`` are the process's
        kept views (``catalog_views``; not inside a transaction, where they are built anew every time)."""
        entry = _views_cache.entry
        if entry is None or entry[2] is not views:
            return Recommender(spec)
        key = (spec.model_dump_json(), id(views))
        with self.lock:
            found = self.entries.get(key)
            if found is not None and found[0] is views:
                self.entries.move_to_end(key)
                return found[1]
        recommender = Recommender(spec)
        with self.lock:
            self.entries[key] = (views, recommender)
            while len(self.entries) > KEPT_RECOMMENDERS:
                self.entries.popitem(last=False)
        return recommender


_recommenders = _RecommendersCache()


def _build_records(views: tuple[ConfigurationView, ...], visible: QuerySet[Measurement]) -> list[CalibrationRecord]:
    by_slug = {view.slug: view for view in views}
    return calibration_records(visible, estimate_ms_per_output_token=_latency_estimator(by_slug))


def calibration_for(spec: WorkloadSpec, views: Iterable[ConfigurationView], user: Any | None) -> Calibration:
    """The calibration of ``spec``'s recommendations from the measurements ``user`` may see.

    Building it reads every record (a few µs each); it is kept beside the records it was built from, per
    workload summary, for as long as they are kept (``acceptance_records``).
    """
    records, kept = _records_kept(tuple(views), user)
    summary = summary_of(spec, spec.model_dump(include={"model", "custom"}, mode="json", exclude_none=False))
    calibration = _records_cache.calibration(kept, summary) if kept is not None else None
    if calibration is None:
        calibration = Calibration.build(records, summary)
        if kept is not None:
            _records_cache.keep_calibration(kept, summary, calibration)
    return calibration


def recommend_for(
    workload_spec: WorkloadSpec,
    *,
    top: int | None = DEFAULT_TOP,
    vendor: str | None = None,
    max_devices: int | None = None,
    max_price: Decimal | None = None,
    user: Any | None = None,
) -> list[Entry]:
    """The catalog's configurations ranked for ``workload_spec``, the first ``top`` of those the filters keep.

    Raises ``budgets.services.BudgetOutOfRange`` (a 400) for a workload no machine could hold, as the
    estimate does, before any plan search.
    """
    budget_compute(workload_spec)
    views = catalog_views()
    filters = Filters(vendor, max_devices, max_price)
    calibration = calibration_for(workload_spec, views, user)
    kept = [v for v in views if filters.keeps(v)]
    return recommend(workload_spec, kept, calibration, top, _recommenders.get(workload_spec, views))


def verdict_for(workload_spec: WorkloadSpec, configuration_slug: str, user: Any | None) -> Entry | None:
    """The recommender's judgement of one catalog configuration for ``workload_spec`` (as the ranked list gives
    it, calibrated from what ``user`` may see), or None when the configuration is not in the catalog's views."""
    views = [view for view in catalog_views() if view.slug == configuration_slug]
    if not views:
        return None
    every = catalog_views()
    calibration = calibration_for(workload_spec, every, user)
    (entry,) = recommend(workload_spec, views, calibration, 1, _recommenders.get(workload_spec, every))
    return entry


def _recommendations_document(
    workload_spec: WorkloadSpec, entries: Iterable[Entry], workload_id: int | None
) -> RecommendationsDocument:
    return RecommendationsDocument.model_construct(
        workload=RecommendedWorkloadDocument.model_construct(
            id=workload_id, name=workload_spec.name, description=workload_spec.model_dump(mode="json")
        ),
        recommendations=[RecommendationDocument.of(entry) for entry in entries],
    )


def recommendations_payload(
    workload_spec: WorkloadSpec, entries: Iterable[Entry], workload_id: int | None = None
) -> dict[str, Any]:
    """The answer of the API and of ``manage.py recommend --format json``."""
    return _recommendations_document(workload_spec, entries, workload_id).dump()


def recommendations_json(
    workload_spec: WorkloadSpec, entries: Iterable[Entry], workload_id: int | None = None
) -> bytes:
    """``recommendations_payload`` encoded as JSON (UTF-8) by the document's own serializer: what the API sends."""
    return _recommendations_document(workload_spec, entries, workload_id).dump_json()
