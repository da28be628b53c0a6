"""Pure checks of the accuracy benchmark's case lists and report layout (no torch needed)."""

from __future__ import annotations

import json

from benchmarks.accuracy import cases


def test_holdout_and_tuning_sets_are_disjoint_and_cover_cases():
    tuning = {c["name"] for c in cases.TUNING_CASES}
    holdout = {c["name"] for c in cases.HOLDOUT_CASES}
    assert len(tuning) == 17
    assert len(holdout) >= 8
    assert not tuning & holdout
    assert [c["name"] for c in cases.CASES] == [c["name"] for c in cases.TUNING_CASES + cases.HOLDOUT_CASES]
    assert all(cases.is_holdout(n) for n in holdout)
    assert not any(cases.is_holdout(n) for n in tuning)


def test_every_case_is_recorded_in_results_json():
    from benchmarks.accuracy.__main__ import RESULTS

    recorded = json.loads(RESULTS.read_text())["cases"]
    for c in cases.CASES:
        m = recorded[c["name"]]
        assert m["measured_peak_bytes"] > 0
        assert m["replay"]["unmatched_frees"] == 0
        assert m["baseline_bytes"] == m["known_live_at_window_start"]


def test_report_shows_each_set_and_overall():
    from benchmarks.accuracy.__main__ import load_results, report

    text, _ = report(load_results())
    assert "### Tuning set (17 cases" in text
    assert "### Hold-out set (" in text
    assert "Hold-out set: median |error|" in text
    assert "- All cases: median |error|" in text
