"""Calibration: what acceptance measurements say about the estimates. Pure: no Django.

Every acceptance measurement compared with a budget gives, per view, the ratio measured / estimated
(``acceptance.view_ratios``; latency adds the view ``ms_per_output_token``). Grouped by (architecture,
engine, task) and view, the ratios give a **correction** and a **spread**:

- correction = the median ratio, once at least ``MIN_MEASUREMENTS`` measurements agree on the group.
  The median, not the mean: one run with a stray allocation (or a noisy neighbour on the latency) moves a
  mean by its whole excess and a median of three or more not at all. Below the minimum there is no
  correction: two runs that disagree cannot tell which one is typical.
- spread = the largest |ratio − correction| in the group (|ratio − 1| while there is no correction): the
  worst miss, as a fraction of the estimate, that a corrected estimate has shown on this group. A margin
  that is meant to hold for the next run must be at least this wide.

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
#: Fewest measurements of a group whose median becomes a correction (see the module docstring).
MIN_MEASUREMENTS = 3
#: Similar workloads differ in concurrent sessions and in tokens per request by at most this factor.
SIMILAR_SIZE_FACTOR = 2.0

GroupKey = tuple[str, str, str, str]  # (architecture, engine, task, view)


@dataclass(frozen=True, slots=True)
class WorkloadSummary:
    """What decides whether two workloads are similar (see :func:`similar_workload`)."""

    model: str  # preset id, or a digest of the given hf_config / architecture
    task: str  # "inference" | "training" | "custom"
    engine: str  # "vllm" | "transformers" | "generic"; training runs "transformers"; custom is "custom"
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
    factor: float | None  # median measured / estimated; None with fewer than MIN_MEASUREMENTS
    spread: float  # max |ratio − factor| (|ratio − 1| without a factor), a fraction of the estimate
    n: int  # measurements in the group
    measurement_ids: tuple[int, ...]


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
    ratios = [record.ratio for record in members]
    factor = statistics.median(ratios) if len(ratios) >= MIN_MEASUREMENTS else None
    centre = 1.0 if factor is None else factor
    architecture, engine, task, view = key
    return Correction(
        architecture=architecture,
        engine=engine,
        task=task,
        view=view,
        factor=factor,
        spread=max(abs(ratio - centre) for ratio in ratios),
        n=len(ratios),
        measurement_ids=tuple(sorted({record.measurement_id for record in members})),
    )


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
    if correction.factor is None:
        return CorrectedFigure(
            value,
            1.0,
            f"Not corrected: {correction.n} acceptance measurement{'s' if correction.n != 1 else ''} of {group}; "
            f"a correction needs at least {MIN_MEASUREMENTS}.",
        )
    return CorrectedFigure(
        value * correction.factor,
        correction.factor,
        f"Corrected × {correction.factor:.3f}: the median measured / estimated of {correction.n} acceptance "
        f"measurements of {group} (worst miss after correction ±{correction.spread:.1%}).",
    )
