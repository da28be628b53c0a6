"""``benchmarks.launch_coverage``: every runnable entry of the example workloads carries a launch, but where the
workload names no checkpoint and none can be built from its numbers; and the check fails when one could have a
launch and has none."""

from __future__ import annotations

import dataclasses

import pytest

from benchmarks import launch_coverage


def test_every_runnable_example_entry_launches_but_where_no_checkpoint_is_named(capsys) -> None:
    assert launch_coverage.main(["--check"]) == 0
    printed = capsys.readouterr().out
    assert "custom-rendering" in printed and "train-zero3-dp64-7.5b" in printed


def test_the_check_fails_on_an_entry_that_could_launch_and_does_not(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(launch_coverage, "no_launch_reason", lambda workload, entry: "a reason a plan could lift")
    real = launch_coverage.recommend

    def without_launches(workload, views):
        return [dataclasses.replace(entry, launch=None) for entry in real(workload, views)]

    monkeypatch.setattr(launch_coverage, "recommend", without_launches)
    assert launch_coverage.main(["--check"]) == 1
