"""``recommend(workload, views, calibration=None, top=None) -> list[Entry]``: every configuration judged,
ranked, each entry saying why and on what evidence. Pure: no Django (views come from
``recommendations.views_data`` or are built by hand).

Per configuration: the compatibility rules (``unsupported`` with their reasons), the plan search and
verdict (``verdicts``), the suggested settings (``settings``), the evidence (``measurements.calibration``:
measured here > measured on the architecture > estimate only, and the correction applied to the need and
the latency), the roofline latency and the cost. Then ``ranking``.
"""

from __future__ import annotations

import bisect
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import date
from typing import Any, NamedTuple

from budgets.engine import Budget, Workload
from catalog import compat
from catalog.units import HOURS_PER_MONTH
from measurements.calibration import (
    LATENCY_VIEW,
    CalibrationRecord,
    Correction,
    EvidenceIndex,
    EvidenceLevel,
    GroupKey,
    WorkloadSummary,
    build_calibration,
)

from .launch import Launch, launch_for, no_serving_launch
from .plans import ConfigurationView, Plan
from .ranking import best_possible_key, rank_key
from .settings import Variants, suggested_settings
from .training_launch import no_training_launch, training_launch
from .verdicts import (
    Corrections,
    LatencyFigures,
    Margin,
    Outcome,
    Reason,
    Verdict,
    facts_key,
    judge,
    judge_runnable,
    memory_view,
    usable_for,
)


@dataclass(frozen=True, slots=True)
class Calibration:
    """Acceptance measurements and their corrections, with the summary of the workload being recommended."""

    records: tuple[CalibrationRecord, ...]
    corrections: Mapping[GroupKey, Correction]
    workload: WorkloadSummary
    evidence: EvidenceIndex  # the records of similar workloads, for each configuration's evidence
    # each configuration's evidence as the entries show it, made once per (slug, architecture): a calibration is kept
    # across requests (``recommendations.services``), and its evidence does not change while it is
    _shown: dict[tuple[str, str], tuple[EvidenceLevel, str, tuple[dict[str, Any], ...]]] = field(
        default_factory=dict, compare=False, repr=False
    )

    @classmethod
    def build(cls, records: Iterable[CalibrationRecord], workload: WorkloadSummary) -> Calibration:
        kept = tuple(records)
        return cls(kept, build_calibration(kept), workload, EvidenceIndex.build(kept, workload))

    def evidence_shown(self, slug: str, architecture: str) -> tuple[EvidenceLevel, str, tuple[dict[str, Any], ...]]:
        """The evidence of a configuration as an entry shows it: its level, sentence and measurements."""
        key = (slug, architecture)
        found = self._shown.get(key)
        if found is None:
            picked = self.evidence.pick(slug, architecture)
            measurements = tuple(
                {
                    "measurement": r.measurement_id,
                    "order": r.order_id,
                    "job": r.job_id,
                    "configuration": r.configuration,
                    "view": r.view,
                }
                for r in picked.records
            )
            found = self._shown.setdefault(key, (picked.level, picked.sentence, measurements))
        return found

    def corrections_for(self, architecture: str, view: str) -> Corrections:
        engine, task = self.workload.engine, self.workload.task
        return Corrections(
            memory=self.corrections.get((architecture, engine, task, view)),
            latency=self.corrections.get((architecture, engine, task, LATENCY_VIEW)),
        )


@dataclass(frozen=True, slots=True)
class EvidenceInfo:
    level: int  # EvidenceLevel: 2 measured here, 1 measured on the architecture, 0 estimate only
    label: str  # "measured_here" | "measured_architecture" | "estimate_only"
    sentence: str
    measurements: tuple[dict[str, Any], ...]  # {"measurement", "order", "job", "configuration", "view"} each
    correction: str  # how the per-device need was corrected, or why it was not
    usable_source: str  # where the usable memory figure comes from


@dataclass(frozen=True, slots=True)
class CostFigures:
    """What the configuration costs to run, and which offer that price is, so that a buyer can check it.

    Training has no cost per run: the roofline gives no training step time and the workload no token count."""

    usd_per_hour: float  # the configuration's price: its cheapest on-demand offer, USD per hour for the whole node
    usd_per_million_output_tokens: float | None  # at the plan's roofline throughput; None for training
    output_tokens_per_s: float | None
    usd_per_month: float = 0.0  # usd_per_hour × HOURS_PER_MONTH
    provider: str = ""  # whose offer the price is; "" for a price no offer has (set by hand)
    region: str = ""
    read_on: date | None = None  # the day the price was read
    source_url: str = ""  # the catalog file at the commit read
    stale: bool = False  # read more than 90 days before the catalog views were built

    def offer_text(self) -> str:
        """``at Lambda us-east-1 on-demand, read 2026-11-20`` (and that it is stale when it is): where the price is
        from; ``(set in the catalog without a source)`` for a price no offer has."""
        if not self.provider or self.read_on is None:
            return "(set in the catalog without a source)"
        text = f"at {self.provider} {self.region} on-demand, read {self.read_on.isoformat()}"
        return text + (" (stale: read more than 90 days ago)" if self.stale else "")


class PriceBasis(NamedTuple):
    """What the ranking compares on price (``ranking``, step 3), and how a person reads it."""

    rank: int  # 0: per million output tokens, 1: per hour, 2: no price (ranked after the priced)
    value: float | None  # USD
    basis: str  # "usd_per_million_output_tokens" | "usd_per_hour" | "no_price"
    text: str


@dataclass(frozen=True, slots=True)
class Entry:
    configuration: dict[str, Any]  # id, slug, accelerator_name, device_count, driver_version
    verdict: Verdict
    plan: Plan | None  # the chosen plan; the closest one for does_not_fit; None when unsupported
    per_device_bytes: int | None  # what the plan needs per device (corrected when a calibration applies)
    usable_bytes: int
    usable_basis: str
    headroom_bytes: int | None
    margin: Margin | None
    reasons: tuple[Reason, ...]
    evidence: EvidenceInfo
    suggested_settings: dict[str, Any]
    latency: LatencyFigures | None
    cost: CostFigures | None
    budget: Budget | None  # the engine's budget under the plan (components for the admin's bar)
    launch: Launch | None = None  # the command that runs the plan (fits and tight; engines with a launch only)

    @property
    def price_basis(self) -> PriceBasis:
        """USD per million output tokens where the plan's throughput is known, else USD per hour, each saying which
        offer it is (provider, region, the day read; stale when read more than 90 days ago); "no price" when the
        catalog has none for the configuration."""
        cost = self.cost
        if cost is None:
            return PriceBasis(2, None, "no_price", "no price in the catalog: ranked after the priced")
        if cost.usd_per_million_output_tokens is not None:
            per_million = cost.usd_per_million_output_tokens
            text = f"${per_million:,.2f} per million output tokens {cost.offer_text()}"
            return PriceBasis(0, per_million, "usd_per_million_output_tokens", text)
        text = f"${cost.usd_per_hour:,.2f} per hour {cost.offer_text()}"
        return PriceBasis(1, cost.usd_per_hour, "usd_per_hour", text)

    @property
    def reserved_bytes(self) -> int | None:
        """What the engine holds on each device under the plan (vLLM: its whole preallocated pool), beside what the
        workload needs of it (`per_device_bytes`); None without a plan."""
        return self.budget.per_device.total_bytes if self.budget is not None else None

    def as_dict(self) -> dict[str, Any]:
        """The entry as its one definition writes it (``recommendations.document.RecommendationDocument``)."""
        from .document import RecommendationDocument

        return RecommendationDocument.of(self).dump()


def _evidence(view: ConfigurationView, calibration: Calibration | None, outcome: Outcome) -> EvidenceInfo:
    correction = outcome.assessment.need.sentence if outcome.assessment else "Not corrected: no plan was budgeted."
    if calibration is None:
        level = EvidenceLevel.ESTIMATE_ONLY
        sentence = "Estimate only: no calibration given."
        return EvidenceInfo(level, level.label, sentence, (), correction, view.usable_source)
    level, sentence, measurements = calibration.evidence_shown(view.slug, view.architecture)
    return EvidenceInfo(level, level.label, sentence, measurements, correction, view.usable_source)


def _cost(view: ConfigurationView, latency: LatencyFigures | None) -> CostFigures | None:
    """The configuration's price per hour and per month, per million output tokens where the plan's roofline
    throughput is known, with the offer it is; None without a price."""
    if view.hourly_price_usd is None:
        return None
    price = float(view.hourly_price_usd)
    per_million, throughput = None, None
    if latency is not None and latency.output_tokens_per_s > 0:
        throughput = latency.output_tokens_per_s
        per_million = price / (throughput * 3600) * 1e6
    return CostFigures(
        usd_per_hour=price,
        usd_per_million_output_tokens=per_million,
        output_tokens_per_s=throughput,
        usd_per_month=price * HOURS_PER_MONTH,
        provider=view.price_provider,
        region=view.price_region,
        read_on=view.price_read_on,
        source_url=view.price_source_url,
        stale=view.price_stale,
    )


@dataclass(frozen=True, slots=True)
class _Judged:
    """An entry before its suggested settings, and what they are computed from."""

    entry: Entry
    view: ConfigurationView
    outcome: Outcome
    corrections: Corrections


#: Answers a recommender keeps (``Recommender.ranked``): a few calibrations, filters and ``top`` of one workload.
ANSWERS_KEPT = 4


class _Answer(NamedTuple):
    calibration: Calibration | None  # held: its identity is part of the key
    views: tuple[ConfigurationView, ...]  # held, likewise
    entries: tuple[Entry, ...]


class Recommender:
    """What recommending one workload derives from the catalog: the plan budgets, the verdict of each
    configuration shape under each calibration's corrections, the suggested settings and their what-if
    variants (``settings.Variants``), all pure functions of the workload and of the views' facts.

    One lives for a ``recommend()`` call, or longer when the caller keeps it for the same workload and the
    same views (``recommendations.services`` keeps a few per process): every memo is keyed by what it reads
    (a configuration shape, the corrections, the facts), and ``facts_key`` compares the catalog's toolkit and
    wheel tables by identity, which is exact only while the views holding them are alive and unchanged, so
    whoever keeps a recommender keeps its views with it.
    """

    def __init__(self, workload: Workload) -> None:
        self.workload = workload
        self.variants = Variants(workload)
        self.requirements = compat.Requirements.from_workload(workload)
        self.view_name = memory_view(workload)
        # the last few answers, by the calibration, views and top they were given (identities: each kept with its
        # calibration and views, so an identity is never another object's while its answer is kept)
        self._answers: OrderedDict[tuple[int, int | None, tuple[int, ...]], _Answer] = OrderedDict()

    def ranked(
        self, views: Sequence[ConfigurationView], calibration: Calibration | None, top: int | None
    ) -> list[Entry]:
        """``views`` judged and ranked, the first ``top`` with their settings; the same objects asked again (a
        kept calibration, the kept views) are answered with the entries already settled: the answer is a pure
        function of them."""
        key = (id(calibration), top, tuple(map(id, views)))
        found = self._answers.get(key)
        if found is not None and found.calibration is calibration:
            self._answers.move_to_end(key)
            return list(found.entries)
        judged = sorted(self._judged_for_page(views, calibration, top), key=lambda j: rank_key(j.entry))
        entries = tuple(self.settled(j) for j in (judged if top is None else judged[:top]))
        self._answers[key] = _Answer(calibration, tuple(views), entries)
        while len(self._answers) > ANSWERS_KEPT:
            self._answers.popitem(last=False)
        return list(entries)

    def _judged_for_page(
        self, views: Sequence[ConfigurationView], calibration: Calibration | None, top: int | None
    ) -> list[_Judged]:
        """What ranking the first ``top`` needs: every configuration judged; or, when at least ``top`` of them
        run the workload, the runnable ones that can rank among the first ``top``. ``rank_key`` puts every
        configuration that runs before any that does not, so the page is the same, and the closest plans of the
        rest (most of a large model's budgets) are never searched. Configurations are tried best bound first
        (``best_possible_key``: evidence, then priced before unpriced); once ``top`` run, one whose bound ranks
        after the ``top``-th key found is not searched, nor is any after it."""
        if top == 0:
            return []
        if top is not None:
            base = self.variants.base
            runnable: list[_Judged] = []
            page: list[tuple[object, ...]] = []  # the best ``top`` keys found so far, in order
            bounds = [(best_possible_key(v, self._evidence_level(v, calibration)), v) for v in views]
            bounded = sorted(bounds, key=lambda pair: pair[0])
            for bound, view in bounded:
                if len(page) >= top and page[top - 1] < bound:
                    break
                corrections = self._corrections(view, calibration)
                outcome = judge_runnable(view, base, corrections, self.requirements)
                if outcome is not None:
                    judged = self._entry(view, calibration, corrections, outcome)
                    runnable.append(judged)
                    bisect.insort(page, rank_key(judged.entry))
                    del page[top:]
            if len(runnable) >= top:
                return runnable
        return [self.judge(view, calibration) for view in views]

    @staticmethod
    def _evidence_level(view: ConfigurationView, calibration: Calibration | None) -> int:
        return int(calibration.evidence.level(view.slug, view.architecture)) if calibration else 0

    def _corrections(self, view: ConfigurationView, calibration: Calibration | None) -> Corrections:
        return calibration.corrections_for(view.architecture, self.view_name) if calibration else Corrections()

    def judge(self, view: ConfigurationView, calibration: Calibration | None) -> _Judged:
        corrections = self._corrections(view, calibration)
        outcome = judge(view, self.variants.base, corrections, self.requirements)
        return self._entry(view, calibration, corrections, outcome)

    def _entry(
        self, view: ConfigurationView, calibration: Calibration | None, corrections: Corrections, outcome: Outcome
    ) -> _Judged:
        usable, basis = usable_for(self.workload, view)
        a = outcome.assessment
        latency = a.latency if a else None
        entry = Entry(
            configuration=view.identity(),
            verdict=outcome.verdict,
            plan=a.plan_budget.plan if a else None,
            per_device_bytes=a.per_device_bytes if a else None,
            usable_bytes=usable,
            usable_basis=basis,
            headroom_bytes=a.headroom_bytes if a else None,
            margin=a.margin if a else None,
            reasons=outcome.reasons,
            evidence=_evidence(view, calibration, outcome),
            suggested_settings={},
            latency=latency,
            cost=_cost(view, latency),
            budget=a.plan_budget.budget if a else None,
        )
        return _Judged(entry, view, outcome, corrections)

    def settled(self, judged: _Judged) -> Entry:
        """The entry with its suggested settings (once per configuration shape, calibration and facts)."""
        view, outcome, corrections = judged.view, judged.outcome, judged.corrections
        settings = self.variants.base.memo(
            ("settings", view.shape(), corrections, facts_key(view.facts)),
            lambda: suggested_settings(self.workload, view, outcome, self.variants, corrections),
        )
        launch = None
        if judged.entry.verdict in (Verdict.FITS, Verdict.TIGHT):
            launch = self.variants.base.memo(
                ("launch", view.shape(), corrections, facts_key(view.facts)),
                lambda: self._launch(settings, judged.entry.plan),
            )
        return replace(judged.entry, suggested_settings=dict(settings), launch=launch)

    def _launch(self, settings: dict[str, Any], plan: Plan | None) -> Launch | None:
        """A serving engine's command (``launch.launch_for``), or a training framework's for the entry's plan
        (``training_launch``)."""
        if self.workload.task == "training":
            return training_launch(self.workload, settings, plan) if plan is not None else None
        return launch_for(self.workload, settings, plan)


def no_launch_reason(workload: Workload, entry: Entry) -> str | None:
    """Why a ``fits`` or ``tight`` entry has no launch command; None when it has one or does not run."""
    if entry.launch is not None or entry.verdict not in (Verdict.FITS, Verdict.TIGHT):
        return None
    if workload.task == "custom":
        from .launch_generic import no_custom_launch  # it builds on launch's Launch, as launch_for's import

        found = no_custom_launch(workload)
    elif workload.task == "training" and entry.plan is not None:
        found = no_training_launch(workload, entry.suggested_settings, entry.plan)
    else:
        found = no_serving_launch(workload, entry.suggested_settings, entry.plan)
    return found or "no launch for this engine or model"


def recommend(
    workload: Workload,
    views: Iterable[ConfigurationView],
    calibration: Calibration | None = None,
    top: int | None = None,
    recommender: Recommender | None = None,
) -> list[Entry]:
    """Every configuration of ``views`` judged for ``workload`` and ranked (``ranking``); the first ``top``.

    Suggested settings (the micro-batch search, the nearest changes that would fit) are the costly part and
    do not affect the order, so they are computed after ranking, for the entries returned only. A
    ``recommender`` kept from an earlier call for the same workload and views (see :class:`Recommender`)
    answers from what that call derived; without one, everything is derived afresh.
    """
    if recommender is None:
        recommender = Recommender(workload)
    elif recommender.workload is not workload and recommender.workload != workload:
        raise ValueError("the recommender was built for another workload")
    return recommender.ranked(list(views), calibration, top)
