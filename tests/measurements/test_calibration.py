"""Calibration math (pure, no database): corrections, spreads, evidence levels."""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from measurements.calibration import (
    CORRECTION_BAND,
    LATENCY_VIEW,
    MIN_ORDERS,
    OWN_UPLOAD,
    CalibrationRecord,
    EvidenceIndex,
    EvidenceLevel,
    WorkloadSummary,
    apply_correction,
    build_calibration,
    similar_workload,
)

WORKLOAD = WorkloadSummary(
    model="llama-3.1-8b", task="inference", engine="vllm", precision="bf16", concurrent_sessions=16, request_tokens=9216
)
_ids = itertools.count(1)


def record(ratio: float, *, configuration: str = "h100-x1", architecture: str = "hopper", view: str = "device_used",
           workload: WorkloadSummary = WORKLOAD, order: int | None = None,
           provenance: str = "node_verified") -> CalibrationRecord:  # fmt: skip
    """One measured view; each on its own order unless ``order`` says otherwise."""
    estimated = 60 * 2**30
    measurement = next(_ids)
    return CalibrationRecord(
        measurement_id=measurement,
        order_id=measurement if order is None else order,
        job_id=None,
        configuration=configuration,
        architecture=architecture,
        view=view,
        measured=estimated * ratio,
        estimated=estimated,
        estimated_low=None,
        estimated_high=None,
        workload=workload,
        provenance=provenance,
    )


BAND = st.floats(*CORRECTION_BAND)


@given(ratio=BAND, n=st.integers(MIN_ORDERS, 12))
def test_identical_ratios_give_that_ratio_and_no_spread(ratio: float, n: int) -> None:
    (correction,) = build_calibration(record(ratio) for _ in range(n)).values()
    assert correction.factor == pytest.approx(ratio)
    assert correction.spread == pytest.approx(0.0, abs=1e-12)
    assert correction.n == n


@given(ratios=st.lists(st.floats(0.2, 5.0), min_size=1, max_size=MIN_ORDERS - 1))
def test_below_the_minimum_there_is_no_correction_and_the_spread_is_around_one(ratios: list[float]) -> None:
    (correction,) = build_calibration(record(r) for r in ratios).values()
    assert correction.factor is None
    assert correction.spread == pytest.approx(max(abs(r - 1) for r in ratios))
    corrected = apply_correction(100.0, correction)
    assert (corrected.value, corrected.factor) == (100.0, 1.0)
    assert f"needs at least {MIN_ORDERS} orders" in corrected.sentence


@given(ratios=st.lists(BAND, min_size=MIN_ORDERS, max_size=15))
def test_the_correction_lies_among_the_ratios_and_the_spread_covers_every_ratio(ratios: list[float]) -> None:
    records = [record(r) for r in ratios]
    (correction,) = build_calibration(records).values()
    stored = [r.ratio for r in records]  # measured / estimated, as the records hold them
    assert correction.factor is not None
    assert min(stored) <= correction.factor <= max(stored)
    assert all(abs(r - correction.factor) <= correction.spread for r in stored)  # outliers included


def test_one_stray_run_is_dropped_as_an_outlier_and_listed_but_still_widens_the_spread() -> None:
    stray = record(3.0)
    (correction,) = build_calibration([record(1.05), record(1.06), record(1.04), stray]).values()
    # median 1.055, MAD 0.01: 0.6745 × 1.945 / 0.01 = 131 modified z-scores (> 3.5)
    assert correction.factor == pytest.approx(1.05)
    assert correction.dropped == (stray.measurement_id,)
    assert correction.spread == pytest.approx(3.0 - 1.05)
    assert f"dropped as outliers: #{stray.measurement_id}" in apply_correction(100.0, correction).sentence


def test_runs_of_one_order_are_one_observation() -> None:
    """Three uploads on one order (the forged-calibration report: 3 × device_used = 1 B) are one order, not three."""
    (correction,) = build_calibration(record(0.9, order=7) for _ in range(MIN_ORDERS)).values()
    assert (correction.orders, correction.n, correction.factor) == (1, MIN_ORDERS, None)
    assert f"needs at least {MIN_ORDERS} orders" in apply_correction(100.0, correction).sentence


@given(ratio=st.one_of(st.floats(1e-12, CORRECTION_BAND[0], exclude_max=True),
                       st.floats(CORRECTION_BAND[1], 1e6, exclude_min=True)))  # fmt: skip
def test_a_correction_outside_the_band_is_flagged_and_not_applied(ratio: float) -> None:
    (correction,) = build_calibration(record(ratio) for _ in range(MIN_ORDERS)).values()
    assert correction.factor is None
    assert correction.flagged == pytest.approx(ratio)
    corrected = apply_correction(100.0, correction)
    assert (corrected.value, corrected.factor) == (100.0, 1.0)
    assert "outside the band" in corrected.sentence


def test_the_sentence_says_how_many_of_the_measurements_are_the_viewers_own_uploads() -> None:
    records = [record(1.1), record(1.1), record(1.1, provenance=OWN_UPLOAD)]
    (correction,) = build_calibration(records).values()
    assert correction.own_uploads == 1
    assert "1 of them your own uploads, not reviewed by staff" in apply_correction(100.0, correction).sentence


def test_groups_are_per_architecture_engine_task_and_view() -> None:
    training = WorkloadSummary("llama-3.1-8b", "training", "transformers", "bf16", 1, 2048)
    calibration = build_calibration(
        [
            record(1.1),
            record(1.2, view=LATENCY_VIEW),
            record(0.9, architecture="ampere"),
            record(1.0, workload=training),
        ]
    )
    assert set(calibration) == {
        ("hopper", "vllm", "inference", "device_used"),
        ("hopper", "vllm", "inference", LATENCY_VIEW),
        ("ampere", "vllm", "inference", "device_used"),
        ("hopper", "transformers", "training", "device_used"),
    }
    assert all(c.n == 1 for c in calibration.values())


def test_the_correction_sentence_names_the_factor_the_view_and_n() -> None:
    records = [record(1.10), record(1.12), record(1.08)]
    (correction,) = build_calibration(records).values()
    corrected = apply_correction(50.0, correction)
    assert corrected.value == pytest.approx(55.0)
    assert "× 1.100" in corrected.sentence and "over 3 orders (3 acceptance measurements)" in corrected.sentence
    assert "device_used" in corrected.sentence
    assert correction.measurement_ids == tuple(sorted(r.measurement_id for r in records))
    assert apply_correction(50.0, None).value == 50.0


@pytest.mark.parametrize(
    ("change", "similar"),
    [
        ({}, True),
        ({"concurrent_sessions": 32}, True),  # × 2: the stated factor
        ({"concurrent_sessions": 33}, False),
        ({"request_tokens": 4608}, True),
        ({"request_tokens": 4607}, False),
        ({"model": "llama-3.1-70b"}, False),
        ({"engine": "transformers"}, False),
        ({"precision": "fp8"}, False),
        ({"task": "training"}, False),
    ],
)
def test_similar_workload_is_same_model_task_engine_precision_and_sizes_within_two(change, similar: bool) -> None:
    other = replace(WORKLOAD, **change)
    assert similar_workload(WORKLOAD, other) is similar
    assert similar_workload(other, WORKLOAD) is similar


def test_evidence_prefers_this_configuration_then_its_architecture_then_the_estimate() -> None:
    here = record(1.0, configuration="h100-x1")
    kin = record(1.0, configuration="h100-x8")
    elsewhere = record(1.0, configuration="a100-x1", architecture="ampere")
    unlike = record(1.0, workload=WorkloadSummary("llama-3.1-70b", "inference", "vllm", "bf16", 16, 9216))

    def level(records: list[CalibrationRecord]) -> EvidenceLevel:
        return EvidenceIndex.build(records, WORKLOAD).pick("h100-x1", "hopper").level

    assert level([here, kin, elsewhere]) is EvidenceLevel.MEASURED_HERE
    assert level([kin, elsewhere]) is EvidenceLevel.MEASURED_ARCHITECTURE
    assert level([elsewhere, unlike]) is EvidenceLevel.ESTIMATE_ONLY
    assert EvidenceLevel.MEASURED_HERE > EvidenceLevel.MEASURED_ARCHITECTURE > EvidenceLevel.ESTIMATE_ONLY
    evidence = EvidenceIndex.build([here, kin], WORKLOAD).pick("h100-x1", "hopper")
    assert evidence.records == (here,)
    assert f"#{here.measurement_id}" in evidence.sentence and evidence.level.label == "measured_here"


_shapes = st.tuples(
    st.sampled_from(["h100-x1", "h100-x8", "h200-x8", "a100-x1", "mi300x-x8"]),
    st.sampled_from([1, 4, 16, 32, 64]),
    st.sampled_from([2048, 9216, 32768]),
)


@given(st.lists(_shapes, max_size=40))
def test_the_index_picks_what_reading_every_record_for_each_configuration_picks(shapes) -> None:
    """One index serves every configuration of a catalog: per configuration, the same level and records, in
    the same order, as the plain definition (similar workloads; this configuration's, else its architecture's)."""
    architecture_of = {"h100-x1": "hopper", "h100-x8": "hopper", "h200-x8": "hopper", "a100-x1": "ampere",
                       "mi300x-x8": "cdna3"}  # fmt: skip
    records = [
        record(
            1.0,
            configuration=c,
            architecture=architecture_of[c],
            workload=replace(WORKLOAD, concurrent_sessions=n, request_tokens=t),
        )
        for c, n, t in shapes
    ]
    index = EvidenceIndex.build(records, WORKLOAD)
    for configuration, architecture in architecture_of.items():
        similar = [r for r in records if similar_workload(r.workload, WORKLOAD)]
        here = tuple(r for r in similar if r.configuration == configuration)
        kin = tuple(r for r in similar if r.architecture == architecture)
        picked = index.pick(configuration, architecture)
        expected = (EvidenceLevel.MEASURED_HERE, here) if here else (EvidenceLevel.MEASURED_ARCHITECTURE, kin)
        if not here and not kin:
            expected = (EvidenceLevel.ESTIMATE_ONLY, ())
        assert (picked.level, picked.records) == expected


def test_training_measurements_calibrate_only_their_own_framework() -> None:
    """A training workload's summary names its framework (``training.framework``), so measurements of torchtune runs
    correct torchtune budgets and not transformers ones: each framework's step holds different memory."""
    from measurements.evidence import workload_summary
    from recommendations.recommend import Calibration

    def training(framework: str) -> WorkloadSummary:
        return workload_summary(
            {
                "name": f"{framework}-8b",
                "task": "training",
                "model": {"preset": "llama-3.1-8b"},
                "training": {"framework": framework, "micro_batch_size": 2, "sequence_length": 2048},
            }
        )

    torchtune, transformers = training("torchtune"), training("transformers")
    assert (torchtune.engine, transformers.engine) == ("torchtune", "transformers")
    records = [record(1.3, workload=torchtune) for _ in range(MIN_ORDERS)]
    measured = Calibration.build(records, torchtune).corrections_for("hopper", "device_used").memory
    assert measured is not None and measured.factor == pytest.approx(1.3)
    assert Calibration.build(records, transformers).corrections_for("hopper", "device_used").memory is None
