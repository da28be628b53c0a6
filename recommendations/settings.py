"""Suggested settings for a chosen plan, and the nearest changes that would make a workload fit. Pure.

- **vLLM**: the settings the verdict was reached under — ``tensor_parallel_size``, ``pipeline_parallel_size``,
  replicas, ``gpu_memory_utilization``, ``max_model_len``, ``max_num_seqs``, ``max_num_batched_tokens`` —
  the KV pool per device (``kv_cache_bytes``, from the budget's ``serving`` block) and the most sessions of
  the longest request the pool holds, per replica and over the replicas.
- **SGLang**: the same, under the workload's names (the schema's: ``gpu_memory_utilization`` is
  ``--mem-fraction-static``, ``max_num_seqs`` ``--max-running-requests``, ``max_num_batched_tokens``
  ``--chunked-prefill-size``), each as the SGLang budget resolved it on the device (``sglang_settings``), with
  ``cuda_graph_max_bs`` and the page size (``kv_block_tokens``).
- **training**: the plan's parallelism, ZeRO stage and recomputation, and the largest micro-batch that
  fits under the plan (an exponential then a binary search; memory grows with the micro-batch).
- **nothing fits**: the nearest changes that would fit (verdict ``fits``), each with its plan and budget
  (searched in sixteenths of the asked figure):
  fewer sessions (a smaller micro-batch for training), an fp8 KV cache (where the device supports fp8),
  a shorter context (prompt, or training sequence; vLLM's ``max_model_len`` shrinks with it), more devices
  of the same accelerator (2, 4, 8 … up to a node's limit). Recomputation is not listed: the plan search
  already tries ``activation_checkpointing: full``, so when nothing fits it did not help.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from budgets.engine import Workload
from budgets.engine import sglang as sglang_rules
from budgets.engine.schema import MAX_TOKENS
from catalog import compat

from .document import PlanDocument
from .plans import ConfigurationView, Evaluator, PlanBudget
from .verdicts import Corrections, Outcome, PlanAssessment, Verdict, assess_plan, checked, fitting_plan

FP8 = "fp8"
#: Fewer sessions or a shorter context are searched in sixteenths of the asked figure: a suggestion needs
#: no finer grain, and each step is a plan search (a few engine calls per device type).
STEPS = 16


class Variants:
    """One evaluator per workload variant (a what-if), shared by every configuration of a recommendation."""

    def __init__(self, workload: Workload) -> None:
        self.workload = workload
        self._evaluators: dict[tuple[Any, ...], Evaluator] = {(): Evaluator(workload)}

    @property
    def base(self) -> Evaluator:
        return self._evaluators[()]

    @property
    def budgets_computed(self) -> int:
        """Plan budgets the engine was asked for, over every variant (what a recommendation costs)."""
        return sum(evaluator.budgets_computed for evaluator in self._evaluators.values())

    def get(self, key: tuple[Any, ...], make: Callable[[Workload], Workload]) -> Evaluator:
        found = self._evaluators.get(key)
        if found is None:
            found = self._evaluators[key] = Evaluator(make(self.workload))
        return found


def _with(workload: Workload, section: str, **fields: Any) -> Workload:
    """``workload`` with ``section``'s ``fields`` replaced (no re-validation: the values are in range)."""
    part = getattr(workload, section).model_copy(update=fields)
    return workload.model_copy(update={section: part})


def vllm_settings(pb: PlanBudget) -> dict[str, Any]:
    serving = pb.budget.serving
    inference = pb.workload.inference
    assert serving is not None and inference is not None
    per_replica = serving.max_concurrent_sessions_at_max_request
    expert = {"expert_parallel_size": pb.plan.expert} if pb.plan.expert > 1 else {}
    return {
        "tensor_parallel_size": pb.plan.tensor,
        "pipeline_parallel_size": pb.plan.pipeline,
        "replicas": pb.plan.replicas,
        **expert,
        "gpu_memory_utilization": inference.gpu_memory_utilization,
        "max_model_len": serving.max_model_len,
        "max_num_seqs": serving.max_num_seqs,
        "max_num_batched_tokens": serving.max_num_batched_tokens,
        "kv_cache_bytes": serving.kv_pool_bytes,
        "kv_cache_tokens": serving.kv_pool_tokens,
        "max_concurrency_at_longest_request_per_replica": per_replica,
        "max_concurrency_at_longest_request": None if per_replica is None else per_replica * pb.plan.replicas,
    }


def sglang_settings(pb: PlanBudget, device_name: str | None) -> dict[str, Any]:
    """``vllm_settings`` for an SGLang server, each as the SGLang budget of ``pb`` resolved it on the device
    (``device_name``: the accelerator, whose nvidia-smi memory SGLang's defaults read): ``gpu_memory_utilization`` is
    the ``mem_fraction_static`` the pool was sized with (the workload's, else SGLang's default for this GPU and
    plan), ``max_num_batched_tokens`` and ``cuda_graph_max_bs`` the chunked-prefill size and CUDA-graph batch behind
    it, ``kv_block_tokens`` the page size (the workload's where it names one, else SGLang's 1)."""
    serving = pb.budget.serving
    inference = pb.workload.inference
    assert serving is not None and inference is not None
    server = sglang_rules.server_defaults(
        pb.workload.spec,
        serving.device_memory_bytes,
        device_name,
        pb.plan.tensor,
        pb.plan.pipeline,
        inference.gpu_memory_utilization,
        inference.max_num_batched_tokens,
        inference.cuda_graph_max_bs,
        version=pb.workload.runtime.engine_version or sglang_rules.SGLANG_VERSION,
    )
    return {
        **vllm_settings(pb),
        "gpu_memory_utilization": server.mem_fraction_static,
        "max_num_batched_tokens": server.chunked_prefill_size,
        "cuda_graph_max_bs": server.cuda_graph_max_bs,
        "kv_block_tokens": inference.block_tokens,
    }


def _largest(low: int, high: int, passes: Callable[[int], bool], guess: int | None = None) -> int:
    """The largest x in [low, high] with passes(x), given passes(low) and a monotone ``passes``.

    A ``guess`` of the answer is checked first, with the value above it: two probes when it is right (one
    when it is ``low``); when it is wrong, the interval the bisection goes on in is still narrower."""
    good, bad = low, high + 1
    if guess is not None and good <= guess < bad:
        if guess == good or passes(guess):
            good = guess
            if good + 1 < bad:
                good, bad = (good + 1, bad) if passes(good + 1) else (good, good + 1)
        else:
            bad = guess
    while bad - good > 1:
        middle = (good + bad) // 2
        good, bad = (middle, bad) if passes(middle) else (good, middle)
    return good


def largest_micro_batch(
    a: PlanAssessment, view: ConfigurationView, variants: Variants, corrections: Corrections
) -> int | None:
    """The largest micro-batch that fits (with the margin) under the chosen plan; None if even 1 does not."""
    workload, plan = variants.workload, a.plan_budget.plan
    assert workload.training is not None
    cap = MAX_TOKENS // workload.training.sequence_length

    def passes(batch: int) -> bool:
        evaluator = variants.get(("micro_batch_size", batch), lambda w: _with(w, "training", micro_batch_size=batch))
        pb = evaluator.evaluate(plan, a.usable_bytes, view.accelerator_name, view.compute_capability)
        return assess_plan(evaluator.workload, view, pb, a.usable_bytes, corrections).fits

    if not passes(1):
        return None
    low = 1
    while low * 2 <= cap and passes(low * 2):
        low *= 2
    return _largest(low, min(low * 2 - 1, cap), passes)


def training_settings(
    a: PlanAssessment, view: ConfigurationView, variants: Variants, corrections: Corrections
) -> dict[str, Any]:
    plan = a.plan_budget.plan
    training = a.plan_budget.workload.training
    assert training is not None
    return {
        "tensor": plan.tensor,
        "pipeline": plan.pipeline,
        "data": plan.replicas,
        "zero_stage": plan.zero_stage,
        "activation_checkpointing": training.activation_checkpointing,
        "max_micro_batch_size": largest_micro_batch(a, view, variants, corrections),
    }


@dataclass(frozen=True, slots=True)
class Change:
    """A change to the workload (or the node) under which it fits, with the plan and budget it fits under."""

    kind: str  # "fewer_sessions" | "smaller_micro_batch" | "fp8_kv_cache" | "shorter_context" | "more_devices"
    description: str
    changes: dict[str, Any]  # dotted workload field (or "device_count") → the value that fits
    plan: dict[str, Any]
    per_device_bytes: int
    usable_bytes: int
    headroom_bytes: int
    budget: dict[str, Any]  # the per-device budget under the change: total and components, bytes

    def as_dict(self) -> dict[str, Any]:
        # shallow: the dict fields are built for this change alone (``_change``) and never changed after
        return {field.name: getattr(self, field.name) for field in dataclasses.fields(self)}


def _change(kind: str, description: str, changes: dict[str, Any], outcome: Outcome) -> Change:
    a = outcome.assessment
    assert a is not None
    per_device = a.plan_budget.budget.per_device
    return Change(
        kind=kind,
        description=description,
        changes=changes,
        plan=PlanDocument.of(a.plan_budget.plan).dump(),
        per_device_bytes=a.per_device_bytes,
        usable_bytes=a.usable_bytes,
        headroom_bytes=a.headroom_bytes,
        budget={"total": per_device.total_bytes, "components": {c.name: c.bytes for c in per_device.components}},
    )


def _slack(a: PlanAssessment) -> int:
    """Bytes to spare beyond the margin (negative: short by that much)."""
    return a.headroom_bytes - a.margin.bytes


class _Search:
    """What-if searches for one configuration; ``closest`` is the base workload's closest plan, whose
    shortfall lets a search guess where the fitting values end."""

    def __init__(
        self, view: ConfigurationView, variants: Variants, corrections: Corrections, closest: PlanAssessment
    ) -> None:
        self.view, self.variants, self.corrections, self.closest = view, variants, corrections, closest

    def fitting(self, key: tuple[Any, ...], make: Callable[[Workload], Workload]) -> Outcome | None:
        """The variant's outcome on this configuration when it fits, else None."""
        return fitting_plan(self.view, self.variants.get(key, make), self.corrections)

    def largest_fitting(
        self,
        name: str,
        current: int,
        make: Callable[[int], Callable[[Workload], Workload]],
        growing_bytes: int,
        fixed: int = 0,
    ) -> tuple[int, Outcome] | None:
        """The largest value below ``current`` under which the workload fits, searched over ``STEPS``
        steps of ``current`` (every value when ``current`` ≤ ``STEPS``).

        The first guess comes from the closest plan: ``growing_bytes`` of its need grow in proportion to
        ``value + fixed`` (the KV cache with sessions or with prompt + output tokens, the activations with a
        training batch or sequence), so its slack crosses the margin near
        ``(current + fixed) × (1 + slack / growing_bytes) − fixed``. The guess and the value above it are
        probed (two probes when it is right); when the guess does not fit, the smallest step is, and the
        search bisects below the guess. A wrong guess costs probes, never the answer."""
        step = max(current // STEPS, 1)
        top = (current - 1) // step
        if top < 1:
            return None

        def fitting(k: int) -> Outcome | None:
            return self.fitting((name, k * step), make(k * step))

        def passes(k: int) -> bool:
            return fitting(k) is not None

        slack = _slack(self.closest)
        guess = None
        if growing_bytes > 0 and slack < 0:
            crossing = (current + fixed) * (1 + slack / growing_bytes) - fixed
            guess = min(max(int(crossing // step), 1), top)
        if guess is not None and passes(guess):
            k = _largest(guess, top, passes, guess)
        elif guess != 1 and passes(1):
            k = _largest(1, (guess or top + 1) - 1, passes)
        else:
            return None
        found = fitting(k)
        assert found is not None
        return k * step, found


def _component_bytes(a: PlanAssessment, *names: str) -> int:
    components = {c.name: c.bytes for c in a.plan_budget.budget.per_device.components}
    return sum(components.get(name, 0) for name in names)


def _kv_needed_bytes(a: PlanAssessment) -> int:
    """The KV cache the closest plan's sessions need per device (vLLM's pool aside)."""
    serving = a.plan_budget.budget.serving
    return serving.kv_bytes_needed if serving is not None else _component_bytes(a, "kv_cache")


def _fewer(search: _Search, workload: Workload) -> list[Change]:
    if workload.task == "inference" and workload.inference is not None:
        section, field, kind = "inference", "concurrent_sessions", "fewer_sessions"
        current = workload.inference.concurrent_sessions
    elif workload.task == "training" and workload.training is not None:
        section, field, kind = "training", "micro_batch_size", "smaller_micro_batch"
        current = workload.training.micro_batch_size
    else:
        return []
    growing = (
        _kv_needed_bytes(search.closest) if section == "inference" else _component_bytes(search.closest, "activations")
    )
    found = search.largest_fitting(field, current, lambda v: lambda w: _with(w, section, **{field: v}), growing)
    if found is None:
        return []
    value, outcome = found
    description = f"{field.replace('_', ' ')} {value} instead of {current}"
    return [_change(kind, description, {f"{section}.{field}": value}, outcome)]


def _shorter(search: _Search, workload: Workload) -> list[Change]:
    if workload.task == "inference" and workload.inference is not None:
        output = workload.inference.max_output_tokens

        def make(value: int) -> Callable[[Workload], Workload]:
            return lambda w: _with(w, "inference", max_input_tokens=value, max_model_len=value + output)

        field, current = "inference.max_input_tokens", workload.inference.max_input_tokens
        growing, fixed = _kv_needed_bytes(search.closest), output
    elif workload.task == "training" and workload.training is not None:

        def make(value: int) -> Callable[[Workload], Workload]:
            return lambda w: _with(w, "training", sequence_length=value)

        field, current = "training.sequence_length", workload.training.sequence_length
        growing, fixed = _component_bytes(search.closest, "activations"), 0
    else:
        return []
    found = search.largest_fitting(field, current, make, growing, fixed)
    if found is None:
        return []
    value, outcome = found
    return [_change("shorter_context", f"{field} {value} instead of {current}", {field: value}, outcome)]


def _fp8_kv(search: _Search, workload: Workload) -> list[Change]:
    if workload.task != "inference" or workload.precision.kv_cache == FP8:
        return []
    variant = _with(workload, "precision", kv_cache=FP8)
    if checked(search.variants.base, compat.Requirements.from_workload(variant), search.view.facts):
        return []
    outcome = search.fitting(("kv_cache", FP8), lambda w: variant)
    if outcome is None:
        return []
    return [_change("fp8_kv_cache", "an fp8 KV cache", {"precision.kv_cache": FP8}, outcome)]


def _more_devices(search: _Search, workload: Workload) -> list[Change]:
    view = search.view
    linked = view.nvlink_domain_size == view.device_count and view.nvlink_bandwidth_gbps is not None
    count = 2
    while count <= view.max_devices_per_node:
        if count > view.device_count:
            bigger = dataclasses.replace(
                view, device_count=count, nvlink_domain_size=count if linked else view.nvlink_domain_size
            )
            outcome = fitting_plan(bigger, search.variants.base, search.corrections)
            if outcome is not None:
                description = f"{count} devices instead of {view.device_count}"
                return [_change("more_devices", description, {"device_count": count}, outcome)]
        count *= 2
    return []


def nearest_changes(
    workload: Workload, view: ConfigurationView, outcome: Outcome, variants: Variants, corrections: Corrections
) -> list[Change]:
    """Each change that alone would make the workload fit on ``view`` (module docstring)."""
    assert outcome.assessment is not None
    search = _Search(view, variants, corrections, outcome.assessment)
    return (
        _fewer(search, workload)
        + _fp8_kv(search, workload)
        + _shorter(search, workload)
        + _more_devices(search, workload)
    )


def suggested_settings(
    workload: Workload,
    view: ConfigurationView,
    outcome: Outcome,
    variants: Variants,
    corrections: Corrections,
) -> dict[str, Any]:
    """The settings of the chosen plan; with ``does_not_fit``, the nearest changes that would fit. A workload that
    names no CUDA version gets the one this configuration was judged with, and why."""
    settings: dict[str, Any] = {}
    cuda = compat.assumed_cuda(compat.Requirements.from_workload(workload), view.facts)
    if cuda is not None:
        settings["cuda_version"] = {
            "value": cuda,
            "basis": f"runtime.cuda_version not given: the newest CUDA driver {view.facts.driver_version} runs,"
            " which the compatibility rules judged this configuration with",
        }
    a = outcome.assessment
    if a is None:
        return settings
    if a.plan_budget.budget.serving is not None and a.plan_budget.utilization_bytes is not None:
        pb = a.plan_budget
        sglang = workload.inference is not None and workload.inference.engine == "sglang"
        settings.update(sglang_settings(pb, view.accelerator_name) if sglang else vllm_settings(pb))
        settings.update(view.placement())  # where the launch's processes go (``recommendations.launch``)
    if workload.task == "training" and outcome.verdict != Verdict.DOES_NOT_FIT:
        settings.update(training_settings(a, view, variants, corrections))
        settings.update(view.placement())  # where torchrun's or accelerate's processes go (``training_launch``)
    if a.latency is not None and a.latency.max_sessions_within_target is not None:
        settings["max_concurrency_within_latency_target"] = a.latency.max_sessions_within_target
    if outcome.verdict == Verdict.DOES_NOT_FIT:
        settings["nearest_changes"] = [
            c.as_dict() for c in nearest_changes(workload, view, outcome, variants, corrections)
        ]
    return settings
