"""Pure checks of the accuracy benchmark's case lists and report layout (no torch needed)."""

from __future__ import annotations

import json

from benchmarks.accuracy import cases


def test_holdout_and_tuning_sets_are_disjoint_and_cover_cases():
    original = [c["name"] for c in cases.CASES[:17]]
    round1 = [c["name"] for c in cases.HOLDOUT_ROUND1_CASES]
    round2 = [c["name"] for c in cases.HOLDOUT_ROUND2_CASES]
    tuning = [c["name"] for c in cases.TUNING_CASES]
    holdout = [c["name"] for c in cases.HOLDOUT_CASES]
    # tuning set = the 17 original cases + the round-1 and round-2 hold-outs (each tuned on after
    # its first comparison in HOLDOUT.md), in that order
    assert len(round1) == 11
    assert len(round2) == 11
    assert tuning == original + round1 + round2
    assert len(set(tuning)) == 39
    # round-3 hold-out: at least 8 fresh cases, none shared with the tuning set
    assert len(set(holdout)) == len(holdout) >= 8
    assert not set(tuning) & set(holdout)
    assert [c["name"] for c in cases.CASES] == tuning + holdout
    assert all(cases.is_holdout(n) for n in holdout)
    assert not any(cases.is_holdout(n) for n in tuning)


def test_holdout_workloads_differ_from_every_tuning_workload():
    def body(w):
        return json.dumps({k: v for k, v in w.items() if k != "name"}, sort_keys=True)

    tuning = {body(w) for w in cases.TUNING_CASES}
    assert not any(body(w) in tuning for w in cases.HOLDOUT_CASES)


def test_holdout_cases_use_only_what_the_harness_runs():
    for w in cases.HOLDOUT_CASES:
        p = w["precision"]
        assert p["weights"] == p["compute"]
        if w["task"] == "training":
            t = w["training"]
            assert p["gradients"] == p["weights"] and p["master_weights"] is None
            assert t["optimizer"] in ("adamw", "sgd", "sgd_momentum")
            assert t["activation_checkpointing"] in ("none", "full")
            assert t["method"] == "full"
        else:
            assert w["inference"]["kv_cache_layout"] in ("dynamic", "contiguous")
            assert w["inference"]["engine"] == "transformers"
        assert w["runtime"]["device"] == "cpu"


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
    assert "### Tuning set (39 cases" in text
    assert "### Hold-out set (" in text
    assert "Hold-out set: median |error|" in text
    assert "- All cases: median |error|" in text
