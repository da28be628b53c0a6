"""Calibration: what acceptance measurements say about the estimates. Pure: no Django.

Every acceptance measurement compared with a budget gives, per view, the ratio measured / estimated
(``acceptance.view_ratios``; latency adds the view ``ms_per_output_token``). Grouped by (architecture,
engine, task) and view, the ratios give a **correction** and a **spread**:

- correction = the median ratio over **independent orders** (each order's own median first), once at least
  ``MIN_ORDERS`` orders agree on the group. The median, not the mean: one run with a stray allocation (or a noisy
  neighbour on the latency) moves a mean by its whole excess and a median of three or more not at all. Orders, not
  runs: three uploads of one run on one order are one observation. Below the minimum there is no correction: two
  orders that disagree cannot tell which one is typical.
- outliers: an order whose ratio lies more than ``OUTLIER_Z`` modified z-scores from the group's median (Iglewicz and
  Hoaglin's rule: 0.6745 × |x − median| / MAD > 3.5) is dropped from the median and listed with the correction.
- band: a correction outside ``CORRECTION_BAND`` is not applied but flagged: a factor beyond ×2 either way says the
  estimate or the run is wrong, not noisy (the engine's worst miss on the published GPU references is 20.2 %,
  ``python -m benchmarks.gpu_published``), and scaling it away would hide that.
- spread = the largest |ratio − correction| in the group, dropped outliers included (|ratio − 1| while there is no
  correction): the worst miss, as a fraction of the estimate, that a corrected estimate has shown on this group. A
  margin that is meant to hold for the next run must be at least this wide.

Provenance (``CalibrationRecord.provenance``): a measurement of an acceptance job run by a registered node is
``node_verified``; an upload is reported by its owner, ``reviewed_upload`` once staff have reviewed it. Only those two
calibrate for anyone but the owner; an owner's own unreviewed uploads calibrate the owner's own view, labelled
``own_upload`` (the services choose the records per viewer; the sentences here name what was used).

Evidence levels, best first: ``measured_here`` (this configuration, a similar workload) >
``measured_architecture`` (another configuration of the same architecture, a similar workload) >
``estimate_only``. Similar is defined by :func:`similar_workload`.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum

#: The latency view: milliseconds per output token (every other view is bytes of memory).
LATENCY_VIEW = "ms_per_output_token"
#: Fewest independent orders of a group whose median becomes a correction (see the module docstring).
MIN_ORDERS = 3
#: Iglewicz and Hoaglin (1993), "How to Detect and Handle Outliers", ASQC Basic References in Quality Control 16:
#: a modified z-score 0.6745 × (x − median) / MAD beyond 3.5 marks a potential outlier.
OUTLIER_Z = 3.5
#: Corrections applied only inside this band (see the module docstring); outside it they are flagged.
CORRECTION_BAND = (0.5, 2.0)
#: Where a measurement came from (``CalibrationRecord.provenance``).
NODE_VERIFIED = "node_verified"
REVIEWED_UPLOAD = "reviewed_upload"
OWN_UPLOAD = "own_upload"
PROVENANCES = (NODE_VERIFIED, REVIEWED_UPLOAD, OWN_UPLOAD)
#: Similar workloads differ in concurrent sessions and in tokens per request by at most this factor.
SIMILAR_SIZE_FACTOR = 2.0

GroupKey = tuple[str, str, str, str]  # (architecture, engine, task, view)


@dataclass(frozen=True, slots=True)
class WorkloadSummary:
    """What decides whether two workloads are similar (see :func:`similar_workload`)."""

    model: str  # preset id, or a digest of the given hf_config / architecture
    task: str  # "inference" | "training" | "custom"
    engine: str  # inference: the serving engine; training: the framework (training.framework); custom: "custom"
    precision: str  # weights precision, e.g. "bf16"
    concurrent_sessions: int  # inference sessions, or the training micro-batch (sequences)
    request_tokens: int  # longest request (input + output), or the training sequence length


@dataclass(frozen=True, slots=True)
class CalibrationRecord:
    """One view of one acceptance measurement that had a budget to compare with."""

    measurement_id: int
    order_id: int
    job_id: int | None  # None for an uploaded measurement
    configuration: str  # catalog configuration slug
    architecture: str  # catalog architecture slug ("cpu:<host architecture>" for CPU-only hosts)
    view: str  # an acceptance view ("device_used", ...) or LATENCY_VIEW
    measured: float  # bytes for memory views; milliseconds for LATENCY_VIEW
    estimated: float  # same unit, the budget's expected figure (> 0)
    estimated_low: float | None  # same unit, the budget's low figure, when it gave one
    estimated_high: float | None  # same unit, the budget's high figure, when it gave one
    workload: WorkloadSummary
    provenance: str = NODE_VERIFIED  # one of PROVENANCES

    @property
    def ratio(self) -> float:
        return self.measured / self.estimated

    @property
    def group(self) -> GroupKey:
        return (self.architecture, self.workload.engine, self.workload.task, self.view)


@dataclass(frozen=True, slots=True)
class Correction:
    """The calibration of one (architecture, engine, task, view)."""

    architecture: str
    engine: str
    task: str
    view: str
    factor: float | None  # median measured / estimated over orders; None below MIN_ORDERS or outside the band
    spread: float  # max |ratio − factor| (|ratio − 1| without a factor), a fraction of the estimate
    n: int  # measurements in the group
    measurement_ids: tuple[int, ...]
    orders: int = 0  # independent orders in the group
    dropped: tuple[int, ...] = ()  # measurement ids of the orders dropped as outliers
    flagged: float | None = None  # the median when it fell outside CORRECTION_BAND (then not applied)
    own_uploads: int = 0  # measurements among them that are the viewer's own unreviewed uploads


class EvidenceLevel(IntEnum):
    """Higher is better evidence; ``name.lower()`` is the label the API shows."""

    ESTIMATE_ONLY = 0
    MEASURED_ARCHITECTURE = 1
    MEASURED_HERE = 2

    @property
    def label(self) -> str:
        return self.name.lower()


@dataclass(frozen=True, slots=True)
class Evidence:
    level: EvidenceLevel
    records: tuple[CalibrationRecord, ...]  # the measurements behind the level (empty for estimate_only)
    sentence: str


@dataclass(frozen=True, slots=True)
class CorrectedFigure:
    value: float  # the figure after the correction (unchanged when none applies), in the view's unit
    factor: float  # the factor applied (1.0 when none applies)
    sentence: str  # names the correction, its view, its group and n; or says why there is none


def build_calibration(records: Iterable[CalibrationRecord]) -> dict[GroupKey, Correction]:
    """One correction per (architecture, engine, task, view), from every record of that group."""
    groups: dict[GroupKey, list[CalibrationRecord]] = defaultdict(list)
    for record in records:
        groups[record.group].append(record)
    return {key: _correction(key, members) for key, members in sorted(groups.items())}


def _correction(key: GroupKey, members: Sequence[CalibrationRecord]) -> Correction:
    by_order: dict[int, list[CalibrationRecord]] = defaultdict(list)
    for record in members:
        by_order[record.order_id].append(record)
    per_order = {order: statistics.median(r.ratio for r in rows) for order, rows in by_order.items()}
    kept, dropped_orders = _without_outliers(per_order)
    factor: float | None = None
    flagged: float | None = None
    if len(per_order) >= MIN_ORDERS:
        median = statistics.median(kept.values())
        low, high = CORRECTION_BAND
        if low <= median <= high:
            factor = median
        else:
            flagged = median
    centre = 1.0 if factor is None else factor
    architecture, engine, task, view = key
    return Correction(
        architecture=architecture,
        engine=engine,
        task=task,
        view=view,
        factor=factor,
        spread=max(abs(record.ratio - centre) for record in members),
        n=len(members),
        measurement_ids=tuple(sorted({record.measurement_id for record in members})),
        orders=len(per_order),
        dropped=tuple(sorted({r.measurement_id for order in dropped_orders for r in by_order[order]})),
        flagged=flagged,
        own_uploads=sum(record.provenance == OWN_UPLOAD for record in members),
    )


def _without_outliers(values: Mapping[int, float]) -> tuple[dict[int, float], list[int]]:
    """``values`` without those beyond OUTLIER_Z modified z-scores of their median, and the keys dropped. With a
    median absolute deviation of 0 (most values equal) there is no scale to judge by: nothing is dropped."""
    if len(values) < MIN_ORDERS:
        return dict(values), []
    median = statistics.median(values.values())
    mad = statistics.median(abs(v - median) for v in values.values())
    if mad == 0:
        return dict(values), []
    dropped = [key for key, v in values.items() if 0.6745 * abs(v - median) / mad > OUTLIER_Z]
    return {key: v for key, v in values.items() if key not in dropped}, dropped


def similar_workload(a: WorkloadSummary, b: WorkloadSummary, factor: float = SIMILAR_SIZE_FACTOR) -> bool:
    """Same model, task, engine and weights precision; sessions and request tokens within ``factor``.

    The first four change what is in memory and how it is laid out; sizes within a factor of two keep
    the same components dominant, so a measured ratio still describes the estimate's error.
    """
    if (a.model, a.task, a.engine, a.precision) != (b.model, b.task, b.engine, b.precision):
        return False
    return _within(a.concurrent_sessions, b.concurrent_sessions, factor) and _within(
        a.request_tokens, b.request_tokens, factor
    )


def _within(x: int, y: int, factor: float) -> bool:
    return max(x, y) <= factor * min(x, y)


@dataclass(frozen=True, slots=True)
class EvidenceIndex:
    """The records of workloads similar to one workload, by configuration and by architecture (each in the
    records' order): the best evidence for every configuration of a catalog, reading the records once."""

    by_configuration: Mapping[str, tuple[CalibrationRecord, ...]]
    by_architecture: Mapping[str, tuple[CalibrationRecord, ...]]

    @classmethod
    def build(cls, records: Iterable[CalibrationRecord], workload: WorkloadSummary) -> EvidenceIndex:
        by_configuration: dict[str, list[CalibrationRecord]] = defaultdict(list)
        by_architecture: dict[str, list[CalibrationRecord]] = defaultdict(list)
        for record in records:
            if similar_workload(record.workload, workload):
                by_configuration[record.configuration].append(record)
                by_architecture[record.architecture].append(record)
        return cls(
            {k: tuple(v) for k, v in by_configuration.items()}, {k: tuple(v) for k, v in by_architecture.items()}
        )

    def level(self, configuration: str, architecture: str) -> EvidenceLevel:
        """``pick``'s level alone, without the records' sentence (what a ranking bound needs of every configuration)."""
        if self.by_configuration.get(configuration):
            return EvidenceLevel.MEASURED_HERE
        if self.by_architecture.get(architecture):
            return EvidenceLevel.MEASURED_ARCHITECTURE
        return EvidenceLevel.ESTIMATE_ONLY

    def pick(self, configuration: str, architecture: str) -> Evidence:
        """The best evidence for the workload on ``configuration`` (of ``architecture``)."""
        here = self.by_configuration.get(configuration, ())
        if here:
            return Evidence(EvidenceLevel.MEASURED_HERE, here, _evidence_sentence(here, f"on {configuration}"))
        kin = self.by_architecture.get(architecture, ())
        if kin:
            where = f"on other {architecture} configurations"
            return Evidence(EvidenceLevel.MEASURED_ARCHITECTURE, kin, _evidence_sentence(kin, where))
        none = "Estimate only: no acceptance measurement of a similar workload."
        return Evidence(EvidenceLevel.ESTIMATE_ONLY, (), none)


def _evidence_sentence(records: Sequence[CalibrationRecord], where: str) -> str:
    ids = sorted({record.measurement_id for record in records})
    listed = ", ".join(f"#{i}" for i in ids)
    return f"Measured {where}: {len(ids)} acceptance measurement{'s' if len(ids) != 1 else ''} ({listed})."


def apply_correction(value: float, correction: Correction | None) -> CorrectedFigure:
    """``value`` (an estimate in the correction's view unit) corrected, with the sentence that says how."""
    if correction is None:
        return CorrectedFigure(value, 1.0, "Not corrected: no acceptance measurement of this group.")
    group = f"{correction.architecture} / {correction.engine} / {correction.task}, view {correction.view}"
    measured = f"{correction.n} acceptance measurement{'s' if correction.n != 1 else ''}"
    orders = f"{correction.orders} order{'s' if correction.orders != 1 else ''}"
    own = (
        f"; {correction.own_uploads} of them your own uploads, not reviewed by staff" if correction.own_uploads else ""
    )
    if correction.flagged is not None:
        low, high = CORRECTION_BAND
        return CorrectedFigure(
            value,
            1.0,
            f"Not corrected: the median measured / estimated of {measured} on {orders} of {group} is "
            f"{correction.flagged:.3f}, outside the band {low:g}–{high:g} a correction is applied in; the estimate or "
            f"the runs need a look{own}.",
        )
    if correction.factor is None:
        return CorrectedFigure(
            value,
            1.0,
            f"Not corrected: {measured} on {orders} of {group}; a correction needs at least {MIN_ORDERS} orders{own}.",
        )
    dropped = f"; dropped as outliers: {', '.join(f'#{i}' for i in correction.dropped)}" if correction.dropped else ""
    return CorrectedFigure(
        value * correction.factor,
        correction.factor,
        f"Corrected × {correction.factor:.3f}: the median measured / estimated over {orders} ({measured}) of {group} "
        f"(worst miss after correction ±{correction.spread:.1%}){dropped}{own}.",
    )
