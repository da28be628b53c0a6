"""The recommender's shortcuts change no answer, on every configuration of the committed catalog.

The plan search skips plans whose weights alone overflow the device (``verdicts.cannot_fit``), and the
nearest-change searches start from a guess (``settings._Search.largest_fitting``). Both are checked here
against the plain definitions, budgeting every candidate plan: the first plan in cost order that fits
wins, and a suggested value fits while the next value on its grid does not.
"""

from __future__ import annotations

import pytest

from budgets.engine import Workload
from catalog import compat
from recommendations.plans import ConfigurationView, Evaluator, candidate_plans
from recommendations.settings import STEPS, Variants, nearest_changes
from recommendations.verdicts import (
    Corrections,
    Verdict,
    assess_plan,
    choose_plan,
    judge,
    launchable_plans,
    usable_for,
)
from tests.recommendations.catalog_views import _views, llama70b

NONE = Corrections()

WORKLOADS = {
    "llama-3.1-70b-vllm": llama70b(),
    "llama-3.1-70b-vllm-48-sessions": llama70b(inference={"concurrent_sessions": 48}),
    "llama-3.1-8b-full-training": Workload.model_validate(
        {
            "name": "train-8b",
            "task": "training",
            "model": {"preset": "llama-3.1-8b"},
            "precision": {"weights": "bf16", "master_weights": "fp32"},
            "training": {"micro_batch_size": 8, "sequence_length": 4096},
        }
    ),
}


def _compatible(workload: Workload) -> list[ConfigurationView]:
    requirements = compat.Requirements.from_workload(workload)
    evaluator = Evaluator(workload)
    return [v for v in _views().values() if judge(v, evaluator, NONE, requirements).verdict != Verdict.UNSUPPORTED]


def _first_fitting_plan(workload: Workload, view: ConfigurationView):
    """The plain definition: every candidate budgeted (of those the framework launches), the first in cost order
    that fits."""
    evaluator = Evaluator(workload)
    usable, _ = usable_for(workload, view)
    for plan in launchable_plans(workload, view)[0]:
        pb = evaluator.evaluate(plan, usable, view.accelerator_name)
        if assess_plan(workload, view, pb, usable, NONE).fits:
            return plan
    return None


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_skipping_plans_whose_weights_overflow_never_loses_a_fitting_plan(name: str) -> None:
    workload = WORKLOADS[name]
    evaluator = Evaluator(workload)
    seen = 0
    for view in _compatible(workload):
        outcome = choose_plan(view, evaluator, NONE)
        expected = _first_fitting_plan(workload, view)
        chosen = outcome.assessment.plan_budget.plan if outcome.verdict == Verdict.FITS else None
        assert chosen == expected, view.slug
        seen += expected is not None
    assert seen > 0  # the catalog has fitting configurations for each workload


def _fits(workload: Workload, view: ConfigurationView) -> bool:
    return choose_plan(view, Evaluator(workload), NONE).verdict == Verdict.FITS


def _with(workload: Workload, dotted: str, value: int) -> Workload:
    section, field = dotted.split(".")
    part = getattr(workload, section).model_copy(update={field: value})
    update = {field: value}
    if dotted == "inference.max_input_tokens":
        update["max_model_len"] = value + workload.inference.max_output_tokens
        part = getattr(workload, section).model_copy(update=update)
    return workload.model_copy(update={section: part})


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_each_suggested_value_fits_and_the_next_on_its_grid_does_not(name: str) -> None:
    workload = WORKLOADS[name]
    checked = 0
    for view in _compatible(workload):
        variants = Variants(workload)
        outcome = choose_plan(view, variants.base, NONE)
        if outcome.verdict != Verdict.DOES_NOT_FIT:
            continue
        changes = {c.kind: c for c in nearest_changes(workload, view, outcome, variants, NONE)}
        fields = (
            ["inference.concurrent_sessions", "inference.max_input_tokens"]
            if workload.task == "inference"
            else ["training.micro_batch_size", "training.sequence_length"]
        )
        for dotted in fields:
            section, field = dotted.split(".")
            current = getattr(getattr(workload, section), field)
            step = max(current // STEPS, 1)
            found = [c for c in changes.values() if dotted in c.changes]
            if not found:  # then not even the smallest step fits
                assert current - 1 < step or not _fits(_with(workload, dotted, step), view), (view.slug, dotted)
                continue
            value = found[0].changes[dotted]
            assert value % step == 0 and value < current
            assert _fits(_with(workload, dotted, value), view), (view.slug, dotted, value)
            if value + step < current:
                assert not _fits(_with(workload, dotted, value + step), view), (view.slug, dotted, value)
            checked += 1
    assert checked > 0


def _vllm_workloads() -> list[Workload]:
    """Every preset vLLM serves (dense, MoE, MLA, sliding-window, hybrid and recurrent caches), at a few sessions
    and lengths: 1 × 32,768 tokens, 16 × 9,216 and 64 × 4,096, with an fp8 KV cache for one."""
    from pydantic import ValidationError

    from budgets.engine import load_presets

    shapes = ((1, 30_720, 2_048, "bf16"), (16, 8_192, 1_024, "bf16"), (64, 3_072, 1_024, "fp8"))
    out = []
    for preset in sorted(load_presets()):
        for sessions, prompt, output, kv in shapes:
            description = {
                "name": f"{preset}-{sessions}",
                "model": {"preset": preset},
                "precision": {"weights": "bf16", "kv_cache": kv},
                "inference": {
                    "engine": "vllm",
                    "max_input_tokens": prompt,
                    "max_output_tokens": output,
                    "concurrent_sessions": sessions,
                },
            }
            try:
                out.append(Workload.model_validate(description))
            except ValidationError:
                continue  # a preset vLLM does not serve (refused with why, elsewhere)
    return out


def test_a_plan_whose_pool_cannot_hold_the_sessions_never_runs() -> None:
    """``Evaluator.pool_cannot_hold`` skips plans without budgeting them when a search looks only for one that
    runs: every plan it skips, budgeted, has a memory failure, over every preset vLLM serves and every
    candidate plan of every catalog configuration; and it does skip (it is not vacuously right)."""
    workloads = _vllm_workloads()
    assert len(workloads) > 100
    skipped = kept = 0
    for workload in workloads:
        evaluator = Evaluator(workload)
        for view in _views().values():
            usable, _ = usable_for(workload, view)
            for plan in candidate_plans(workload, view):
                if not evaluator.pool_cannot_hold(plan, usable, view.accelerator_name, view.compute_capability):
                    kept += 1
                    continue
                skipped += 1
                pb = evaluator.evaluate(plan, usable, view.accelerator_name, view.compute_capability)
                assessment = assess_plan(workload, view, pb, usable, NONE)
                assert not assessment.runs, (workload.name, view.slug, plan.label())
    assert skipped > 1000 and kept > 1000, (skipped, kept)


@pytest.mark.parametrize("name", ["llama-3.1-70b-vllm", "llama-3.1-70b-vllm-48-sessions"])
def test_looking_only_for_a_plan_that_runs_finds_the_judged_plan(name: str) -> None:
    """``runnable_plan`` (which skips plans by their pool) and ``choose_plan`` (which judges every plan) agree on
    every configuration: the same plan where one runs, and None from the first exactly where the second does
    not find one that runs."""
    from recommendations.verdicts import runnable_plan

    workload = WORKLOADS[name]
    for view in _compatible(workload):
        found = runnable_plan(view, Evaluator(workload), NONE)
        judged = choose_plan(view, Evaluator(workload), NONE)
        if judged.verdict in (Verdict.FITS, Verdict.TIGHT):
            assert found is not None and found.assessment.plan_budget.plan == judged.assessment.plan_budget.plan
            assert found.verdict == judged.verdict
        else:
            assert found is None, view.slug
