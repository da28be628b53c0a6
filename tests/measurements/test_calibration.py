"""Calibration math (pure, no database): corrections, spreads, evidence levels."""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from measurements.calibration import (
    LATENCY_VIEW,
    MIN_MEASUREMENTS,
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
           workload: WorkloadSummary = WORKLOAD) -> CalibrationRecord:  # fmt: skip
    estimated = 60 * 2**30
    return CalibrationRecord(
        measurement_id=next(_ids),
        order_id=1,
        job_id=None,
        configuration=configuration,
        architecture=architecture,
        view=view,
        measured=estimated * ratio,
        estimated=estimated,
        estimated_low=None,
        estimated_high=None,
        workload=workload,
    )


@given(ratio=st.floats(0.2, 5.0), n=st.integers(MIN_MEASUREMENTS, 12))
def test_identical_ratios_give_that_ratio_and_no_spread(ratio: float, n: int) -> None:
    (correction,) = build_calibration(record(ratio) for _ in range(n)).values()
    assert correction.factor == pytest.approx(ratio)
    assert correction.spread == pytest.approx(0.0, abs=1e-12)
    assert correction.n == n


@given(ratios=st.lists(st.floats(0.2, 5.0), min_size=1, max_size=MIN_MEASUREMENTS - 1))
def test_below_the_minimum_there_is_no_correction_and_the_spread_is_around_one(ratios: list[float]) -> None:
    (correction,) = build_calibration(record(r) for r in ratios).values()
    assert correction.factor is None
    assert correction.spread == pytest.approx(max(abs(r - 1) for r in ratios))
    corrected = apply_correction(100.0, correction)
    assert (corrected.value, corrected.factor) == (100.0, 1.0)
    assert f"needs at least {MIN_MEASUREMENTS}" in corrected.sentence


@given(ratios=st.lists(st.floats(0.2, 5.0), min_size=MIN_MEASUREMENTS, max_size=15))
def test_the_correction_is_the_median_and_the_spread_covers_every_ratio(ratios: list[float]) -> None:
    records = [record(r) for r in ratios]
    (correction,) = build_calibration(records).values()
    stored = [r.ratio for r in records]  # measured / estimated, as the records hold them
    assert correction.factor is not None
    assert min(stored) <= correction.factor <= max(stored)
    assert all(abs(r - correction.factor) <= correction.spread for r in stored)


def test_one_stray_run_does_not_move_the_median() -> None:
    (correction,) = build_calibration([record(1.05), record(1.06), record(1.04), record(3.0)]).values()
    assert correction.factor == pytest.approx(1.055)
    assert correction.spread == pytest.approx(3.0 - 1.055)


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
    assert "× 1.100" in corrected.sentence and "of 3 acceptance measurements" in corrected.sentence
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
