"""Verdicts: `fits | tight | does_not_fit | unsupported`, with their reasons and margin. Pure.

For a configuration that passes every compatibility rule, each plan (cost order, ``plans``) that the workload's
framework or engine can launch (``launchable_plans``; the others are named in a reason) is judged:

- **hard failures** (the plan cannot run the workload): vLLM would not start (its own reason); vLLM's KV
  pool holds fewer sessions of the longest request than the replica serves (``kv_cache`` overflows by the
  missing bytes); the per-device need passes the usable memory (named by the largest component, with
  the overflow); host RAM or disk too small; the latency target missed at the replica's sessions.
- **headroom** = usable − per-device need (expected, corrected by calibration when it applies);
- **margin** = the largest of (a) ``acceptance.min_headroom_fraction`` × usable, (b) the estimate's own
  uncertainty, its high − expected, (c) the calibration spread × the need (the worst miss a corrected
  estimate has shown on this architecture, engine and task); the answer names the one that set it.

A plan **fits** when it has no hard failure and headroom ≥ margin; it is **tight** when it has no hard
failure and 0 ≤ headroom < margin (it fits under the expected figure, not with the margin). The
configuration's verdict is that of the first plan that fits; else of the first tight one; else
``does_not_fit`` with the failures of the closest plan (memory fits but latency fails, before any memory
failure; then the smallest overflow). ``unsupported`` when a compatibility rule fails: its reasons.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Sequence
from dataclasses import dataclass, field

from budgets.engine import Workload
from budgets.engine.components.kv_cache import kv_bytes_per_token
from budgets.engine.engines import engine
from budgets.engine.frameworks import framework_profile
from catalog import compat
from measurements.calibration import CorrectedFigure, Correction, apply_correction

from . import roofline
from .launch import no_serving_launch
from .plans import ConfigurationView, Evaluator, Plan, PlanBudget, candidate_plans
from .training_launch import no_training_launch

GIB = 2**30


class Verdict(enum.StrEnum):
    FITS = "fits"
    TIGHT = "tight"
    DOES_NOT_FIT = "does_not_fit"
    UNSUPPORTED = "unsupported"


@dataclass(frozen=True, slots=True)
class Reason:
    """Why a verdict is what it is, for a person: the rule, what is wrong, what to do."""

    rule: str  # a compat rule ("precision", "driver", ...), an engine's name, "memory", "host_ram", "disk", "latency",
    # "headroom", "parallelism"; "framework" / "engine": plans it cannot launch left out (``launchable_plans``)
    message: str
    action: str = ""
    component: str | None = None  # the budget component that overflows
    overflow_bytes: int | None = None  # by how much, bytes


def compat_reasons(reasons: Sequence[compat.Reason]) -> tuple[Reason, ...]:
    return tuple(Reason(r.rule, r.message, r.action) for r in reasons)


@dataclass(frozen=True, slots=True)
class Corrections:
    """The calibration groups that apply to a configuration (None where no measurement exists)."""

    memory: Correction | None = None  # the memory view the verdict reads (see ``memory_view``)
    latency: Correction | None = None  # view ms_per_output_token


def memory_view(workload: Workload) -> str:
    """The measurement view whose calibration corrects the per-device need (``measurements.acceptance.VIEWS``)."""
    if workload.runtime.device == "cpu":
        return "framework_allocated"
    inference = workload.inference
    if workload.task == "inference" and inference is not None:
        return engine(inference.engine).need_view
    return "device_used"


@dataclass(frozen=True, slots=True)
class Margin:
    bytes: int  # the headroom a fit must keep, bytes
    fraction: float  # of usable memory
    set_by: str  # "min_headroom_fraction" | "estimate_uncertainty" | "calibration_spread"
    candidates: dict[str, int] = field(default_factory=dict)  # each rule's figure, bytes


def margin_for(workload: Workload, pb: PlanBudget, need: int, usable: int, memory: Correction | None) -> Margin:
    """The largest of the three (module docstring); ties go to the first named."""
    candidates = {
        "min_headroom_fraction": int(workload.acceptance.min_headroom_fraction * usable),
        "estimate_uncertainty": pb.uncertainty_bytes,
        "calibration_spread": int(memory.spread * need) if memory is not None else 0,
    }
    set_by = max(candidates, key=lambda name: candidates[name])
    return Margin(candidates[set_by], candidates[set_by] / usable, set_by, candidates)


@dataclass(frozen=True, slots=True)
class LatencyFigures:
    """Roofline estimates for one replica at its share of the sessions (``recommendations.roofline``)."""

    sessions_per_replica: int
    ms_per_output_token: float  # expected, corrected when a calibration applies
    ms_per_output_token_low: float
    ms_per_output_token_high: float
    prefill_ms: float  # one prompt of max_input_tokens
    bound: str  # "memory" | "compute"
    output_tokens_per_s: float  # all the workload's sessions decoding together, over the replicas
    target_ms: float | None
    max_sessions_within_target: int | None  # over all replicas; None without a target
    correction: str  # the sentence of the correction applied (or why none was)
    all_reduce_ms: float = 0.0  # of a decode step: tensor parallel's all-reduces, over NVLink
    pipeline_transfer_ms: float = 0.0  # of a decode step: activations between stages on different nodes
    all_to_all_ms: float = 0.0  # of a decode step: expert parallel's dispatch and combine
    communication: str = ""  # which links each term crosses, for a person


def _model_load(pb: PlanBudget) -> roofline.ModelLoad:
    """A replica's decode step reads every stage's weights and KV in turn: per device × pipeline stages."""
    workload, plan = pb.workload, pb.plan
    spec = workload.spec
    kv_per_token = kv_bytes_per_token(spec, plan.tensor, 0, spec.num_layers, workload.precision.kv_cache or "bf16")
    weights = pb.budget.per_device.component("weights").bytes * plan.pipeline
    return roofline.model_load(
        spec,
        weight_bytes_per_device=weights,
        kv_bytes_per_token_per_device=kv_per_token,
        tensor=plan.tensor,
        expert_parallel=plan.expert,
    )


def _communication(workload: Workload, view: ConfigurationView, plan: Plan) -> roofline.Communication:
    """Where the plan's traffic goes: tensor parallel stays inside one NVLink domain (``plans``); pipeline stages
    and expert groups larger than the domain cross the scale-out network."""
    spec = workload.spec
    domain = view.nvlink_domain_size
    return roofline.Communication(
        pipeline=plan.pipeline,
        pipeline_across_nodes=plan.pipeline > 1 and view.node_count > 1 and plan.devices_per_replica > domain,
        expert=plan.expert,
        expert_across_domains=plan.expert > domain,
        moe_layers=spec.num_moe_layers,
        experts_per_token=spec.experts_per_token,
    )


def _links_text(view: ConfigurationView, plan: Plan, comm: roofline.Communication) -> str:
    network = (
        f"{view.scale_out_fabric or 'the scale-out network'} ({view.scale_out_gbps_per_device or 0:g} Gb/s per GPU)"
    )
    nvlink = f"NVLink ({view.nvlink_bandwidth_gbps or 0:g} GB/s per GPU, a {view.nvlink_domain_size}-GPU domain)"
    parts = []
    if plan.tensor > 1:
        parts.append(f"tensor parallel {plan.tensor}: two all-reduces per layer over {nvlink}")
    if comm.pipeline_across_nodes:
        parts.append(f"{plan.pipeline} pipeline stages pass activations between nodes over {network}")
    if plan.expert > 1:
        if comm.expert_across_domains:
            # one node whose devices have no NVLink between them talks over PCIe: the RDMA figure is its estimate
            links = network if view.node_count > 1 else "PCIe (these devices have no NVLink between them)"
            where = (
                f"across NVLink domains over {links}, at DeepEP's measured"
                f" {roofline.all_to_all_us(plan.expert):.0f} µs per layer (128 tokens per rank, over RDMA)"
            )
        else:
            where = f"over {nvlink}"
        parts.append(f"expert parallel {plan.expert}: dispatch and combine every MoE layer {where}")
    return "; ".join(parts) or "one device per replica: no communication in a step"


def plan_latency(
    workload: Workload, view: ConfigurationView, pb: PlanBudget, correction: Correction | None
) -> LatencyFigures | None:
    """None for training and custom tasks, and where the catalog lacks the figures a roofline needs."""
    inference = workload.inference
    if workload.task != "inference" or inference is None or view.memory_bandwidth_gbps is None:
        return None
    speed = roofline.device_speed(
        view.memory_bandwidth_gbps,
        view.dense_tflops,
        inference_compute(workload),
        view.nvlink_bandwidth_gbps,
        view.scale_out_gbps_per_device,
    )
    plan = pb.plan
    if speed is None or (plan.tensor > 1 and speed.link_bandwidth_bytes_per_s is None):
        return None
    comm = _communication(workload, view, plan)
    if comm.pipeline_across_nodes and speed.scale_out_bytes_per_s is None:
        return None
    load = _model_load(pb)
    sessions = pb.workload.inference.concurrent_sessions  # type: ignore[union-attr]
    context = inference.max_request_tokens
    est = roofline.estimate_latency(
        load,
        speed,
        sessions=sessions,
        prompt_tokens=inference.max_input_tokens,
        context_tokens=context,
        tensor_parallel=plan.tensor,
        communication=comm,
    )
    corrected = apply_correction(est.ms_per_output_token, correction)
    target = workload.acceptance.max_ms_per_output_token
    within = None
    if target is not None:
        per_replica = roofline.max_sessions_within(
            load,
            speed,
            max_ms_per_output_token=target,
            context_tokens=context,
            tensor_parallel=plan.tensor,
            upper=max(inference.concurrent_sessions, 1),
            correction=corrected.factor,
            communication=comm,
        )
        within = per_replica * plan.replicas
    return LatencyFigures(
        sessions_per_replica=sessions,
        ms_per_output_token=corrected.value,
        ms_per_output_token_low=est.ms_per_output_token_low * corrected.factor,
        ms_per_output_token_high=est.ms_per_output_token_high * corrected.factor,
        prefill_ms=est.prefill_ms,
        bound=est.bound,
        output_tokens_per_s=inference.concurrent_sessions * 1000.0 / corrected.value,
        target_ms=target,
        max_sessions_within_target=within,
        correction=corrected.sentence,
        all_reduce_ms=est.all_reduce_ms,
        pipeline_transfer_ms=est.pipeline_transfer_ms,
        all_to_all_ms=est.all_to_all_ms,
        communication=_links_text(view, plan, comm),
    )


def inference_compute(workload: Workload) -> str:
    return workload.precision.compute or "bf16"


@dataclass(frozen=True, slots=True)
class PlanAssessment:
    plan_budget: PlanBudget
    need: CorrectedFigure  # per-device need, bytes, after the calibration correction
    usable_bytes: int
    margin: Margin
    failures: tuple[Reason, ...]
    latency: LatencyFigures | None

    @property
    def per_device_bytes(self) -> int:
        return int(self.need.value)

    @property
    def headroom_bytes(self) -> int:
        return self.usable_bytes - self.per_device_bytes

    @property
    def fits(self) -> bool:
        return not self.failures and self.headroom_bytes >= self.margin.bytes

    @property
    def runs(self) -> bool:
        return not self.failures


def _gib(n: float) -> str:
    return f"{n / GIB:,.2f} GiB"


def _serving_failures(pb: PlanBudget) -> list[Reason]:
    serving = pb.budget.serving
    if serving is None or serving.starts is None:
        return []
    inference = pb.workload.inference
    assert inference is not None  # a serving plan comes from an inference workload
    serving_engine = engine(inference.engine)
    if not serving.starts:
        # nothing left for the pool: the rest of the device overflows (its largest part); else the pool is short
        empty = (serving.available_kv_bytes or 0) <= 0
        rest = [c for c in pb.budget.per_device.components if c.name != "kv_cache"]
        component = max(rest, key=lambda c: c.bytes).name if empty else "kv_cache"
        return [
            Reason(
                serving_engine.name,
                serving.reason or f"{serving_engine.label} will not start",
                "more memory per device (a plan over more devices), lower-precision weights or a shorter max_model_len",
                component,
                serving.shortfall_bytes,
            )
        ]
    pool, needed = serving.kv_pool_bytes or 0, serving.kv_bytes_needed
    if pool >= needed:
        return []
    sessions = inference.concurrent_sessions
    return [
        Reason(
            "memory",
            f"kv_cache: {serving_engine.label}'s pool ({_gib(pool)} per device) holds"
            f" {serving.max_concurrent_sessions_at_max_request}"
            f" sessions of the longest request; each replica serves {sessions}, which need {_gib(needed)}"
            f" ({_gib(needed - pool)} more)",
            "fewer sessions, an fp8 KV cache, a shorter context or more devices",
            "kv_cache",
            needed - pool,
        )
    ]


def _device_failures(pb: PlanBudget, need: int, usable: int) -> list[Reason]:
    per_device = pb.budget.per_device
    largest = max(per_device.components, key=lambda c: c.bytes)
    failures: list[Reason] = []
    if need > usable:
        failures.append(
            Reason(
                "memory",
                f"{pb.plan.label()}: needs {_gib(need)} per device, {_gib(need - usable)} more than the"
                f" {_gib(usable)} usable; the largest component is {largest.name} ({_gib(largest.bytes)})",
                "a plan over more devices, lower precision or a smaller batch",
                largest.name,
                need - usable,
            )
        )
    elif pb.utilization_bytes is not None and per_device.total_bytes > usable:
        failures.append(
            Reason(
                "memory",
                f"with the engine's pool at gpu_memory_utilization × usable ({_gib(pb.utilization_bytes)}) the device"
                f" holds {_gib(per_device.total_bytes)}, {_gib(per_device.total_bytes - usable)} more than usable",
                "lower gpu_memory_utilization",
                "kv_cache",
                per_device.total_bytes - usable,
            )
        )
    return failures


def _host_failures(pb: PlanBudget, view: ConfigurationView) -> list[Reason]:
    host = pb.budget.host
    failures = []
    checks = (("host_ram", host.ram_bytes, view.host_ram_bytes), ("disk", host.disk_bytes, view.disk_bytes))
    for rule, needed, has in checks:
        if has is not None and needed > has:
            failures.append(
                Reason(
                    rule,
                    f"{rule.replace('_', ' ')}: the budget needs {_gib(needed)} per node, {_gib(has)} installed",
                    f"a configuration with more {rule.replace('_', ' ')}",
                    None,
                    needed - has,
                )
            )
    return failures


def _latency_failures(latency: LatencyFigures | None) -> list[Reason]:
    if latency is None or latency.target_ms is None or latency.ms_per_output_token <= latency.target_ms:
        return []
    return [
        Reason(
            "latency",
            f"latency: {latency.ms_per_output_token:.1f} ms per output token at {latency.sessions_per_replica}"
            f" sessions per replica (roofline estimate), slower than the target of {latency.target_ms:g} ms",
            f"serve at most {latency.max_sessions_within_target} sessions together to meet it",
        )
    ]


def assess_plan(
    workload: Workload, view: ConfigurationView, pb: PlanBudget, usable: int, corrections: Corrections
) -> PlanAssessment:
    """One plan judged; its latency is estimated only when its memory fits (else it cannot run anyway)."""
    need = apply_correction(pb.need_bytes, corrections.memory)
    need_bytes = int(need.value)
    failures = _serving_failures(pb)
    # a pool shortfall already says by how much the device is short; the need would repeat it
    if not any(r.rule == "memory" for r in failures):
        failures += _device_failures(pb, need_bytes, usable)
    failures += _host_failures(pb, view)
    latency = None if failures else plan_latency(workload, view, pb, corrections.latency)
    failures += _latency_failures(latency)
    margin = margin_for(workload, pb, need_bytes, usable, corrections.memory)
    return PlanAssessment(pb, need, usable, margin, tuple(failures), latency)


def usable_for(workload: Workload, view: ConfigurationView) -> tuple[int, str]:
    """Bytes a device offers the workload and the basis: a ``cpu`` workload is held in host RAM."""
    if workload.runtime.device == "cpu" and view.host_ram_bytes is not None:
        return view.host_ram_bytes, "host_ram"
    return view.usable_bytes, view.usable_basis


@dataclass(frozen=True, slots=True)
class Outcome:
    verdict: Verdict
    assessment: PlanAssessment | None  # the chosen plan (the closest one for does_not_fit); None if unsupported
    reasons: tuple[Reason, ...]


def _tight_reason(a: PlanAssessment) -> Reason:
    return Reason(
        "headroom",
        f"fits under the expected budget with {_gib(a.headroom_bytes)} headroom"
        f" ({a.headroom_bytes / a.usable_bytes:.1%} of usable), less than the margin of {_gib(a.margin.bytes)}"
        f" ({a.margin.fraction:.1%}, set by {a.margin.set_by})",
        "keep the margin: fewer sessions, a smaller batch or more devices",
    )


def _closeness(a: PlanAssessment) -> tuple[bool, int]:
    memory_fails = any(r.rule != "latency" for r in a.failures)
    return memory_fails, max((r.overflow_bytes or 0 for r in a.failures), default=0)


def choose_plan(view: ConfigurationView, evaluator: Evaluator, corrections: Corrections) -> Outcome:
    """The verdict of ``evaluator``'s workload on a compatible configuration: the first plan that fits wins.
    Judged once per configuration shape and calibration (``Evaluator.memo``); a ``runnable_plan`` found
    earlier is that verdict already."""
    runnable: Outcome | None = evaluator.memo_get(("runnable", view.shape(), corrections))
    if runnable is not None:
        return runnable
    key = ("outcome", view.shape(), corrections)
    return evaluator.memo(key, lambda: _judged(evaluator.workload, view, evaluator, corrections))


def runnable_plan(view: ConfigurationView, evaluator: Evaluator, corrections: Corrections) -> Outcome | None:
    """``choose_plan``'s outcome when it is ``fits`` or ``tight``, else None: a ranking that needs only the
    configurations that run (enough of them for its page) asks this first. When none runs, no plan is
    budgeted only to find the closest one, which is where most of a catalog's budgets go for a large model
    (every plan's weights overflowing a small device)."""
    judged = evaluator.memo_get(("outcome", view.shape(), corrections))
    if judged is not None:
        return judged if judged.verdict in (Verdict.FITS, Verdict.TIGHT) else None
    key = ("runnable", view.shape(), corrections)
    return evaluator.memo(key, lambda: _search_plans(evaluator.workload, view, evaluator, corrections, closest=False))


def _judged(workload: Workload, view: ConfigurationView, evaluator: Evaluator, corrections: Corrections) -> Outcome:
    outcome = _search_plans(workload, view, evaluator, corrections)
    assert outcome is not None  # with the closest plan asked for, there is always an outcome
    return outcome


def fitting_plan(view: ConfigurationView, evaluator: Evaluator, corrections: Corrections) -> Outcome | None:
    """``choose_plan``'s outcome when it is ``fits``, else None: for the what-if searches, which ask only
    whether a variant fits. When it does not, no plan is budgeted only to find the closest one."""
    found = runnable_plan(view, evaluator, corrections)
    return found if found is not None and found.verdict == Verdict.FITS else None


def cannot_fit(evaluator: Evaluator, plan: Plan, usable: int, corrections: Corrections) -> bool:
    """True when the plan's weights alone, at their floor (``Evaluator.weights_floor``) and corrected like
    the need, exceed the usable memory: its need does too, so it has a memory failure whatever the rest of
    its budget and neither fits nor runs. Known without asking the engine."""
    memory = corrections.memory
    factor = memory.factor if memory is not None and memory.factor is not None else 1.0
    return evaluator.weights_floor(plan) * factor > usable


def _search_plans(
    workload: Workload, view: ConfigurationView, evaluator: Evaluator, corrections: Corrections, closest: bool = True
) -> Outcome | None:
    """The first plan in cost order that fits; else the first that runs (``tight``); else the closest
    (``does_not_fit``), or None when ``closest`` is False.

    The closest is the plan nearest to fitting (no failure but latency first, then the least overflow, then
    the cheaper) among those whose weights fit the device; where the weights fit under no plan, among the
    plans that split them finest (the least ``Evaluator.weights_floor``): a plan whose weights alone
    overflow is no place to start from while another's do not. Plans that ``cannot_fit`` are budgeted only
    in that last case."""
    usable, _ = usable_for(workload, view)
    tight: PlanAssessment | None = None
    failing: list[tuple[int, PlanAssessment]] = []
    skipped: list[tuple[int, Plan]] = []

    def assessed(plan: Plan) -> PlanAssessment:
        pb = evaluator.evaluate(plan, usable, view.accelerator_name, view.compute_capability)
        return assess_plan(workload, view, pb, usable, corrections)

    # the candidates read only the devices and the NVLink domain (and the workload); a launch, the nodes too
    nodes = view.node_count if plan_bound(workload) else 0
    plans, left_out = evaluator.memo(
        ("plans", view.device_count, view.nvlink_domain_size, nodes), lambda: launchable_plans(workload, view)
    )
    if not plans:  # a context-parallel workload on fewer devices than its degree: no plan places it
        if not closest:
            return None
        context = workload.parallelism.context
        reason = Reason(
            "parallelism",
            f"parallelism.context {context} splits each sequence over {context} devices; this configuration has"
            f" {view.device_count}",
            f"choose a configuration of at least {context} devices, or a smaller parallelism.context",
        )
        return Outcome(Verdict.UNSUPPORTED, None, (reason,))
    for order, plan in enumerate(plans):
        if cannot_fit(evaluator, plan, usable, corrections):
            skipped.append((order, plan))
            continue
        # a plan whose pool cannot hold the sessions neither fits nor runs; only a search for the closest needs it
        if not closest and evaluator.pool_cannot_hold(plan, usable, view.accelerator_name, view.compute_capability):
            continue
        assessment = assessed(plan)
        if assessment.fits:
            return Outcome(Verdict.FITS, assessment, ())
        if assessment.runs:
            tight = tight or assessment
        else:
            failing.append((order, assessment))
    if tight is not None:
        return Outcome(Verdict.TIGHT, tight, (_tight_reason(tight),))
    if not closest:
        return None
    if not failing:
        finest = min(evaluator.weights_floor(plan) for _, plan in skipped)
        failing = [(order, assessed(plan)) for order, plan in skipped if evaluator.weights_floor(plan) == finest]
    # min keeps the first of equals: the cheaper plan
    _, nearest = min(failing, key=lambda item: (_closeness(item[1]), item[0]))
    return Outcome(Verdict.DOES_NOT_FIT, nearest, nearest.failures + left_out)


def _launch_refusal(workload: Workload, plan: Plan, view: ConfigurationView) -> str | None:
    if workload.task == "training":
        return no_training_launch(workload, view.placement(), plan)
    return no_serving_launch(workload, view.placement(), plan)


def _left_out_action(workload: Workload) -> str:
    if workload.training is not None and workload.task == "training":
        if framework_profile(workload.training.framework).context_parallel:  # runs every split the plans search
            return ""
        return "choose a framework that launches them (torchtitan runs tensor, pipeline and context parallelism)"
    assert workload.inference is not None
    return engine(workload.inference.engine).plan_bound_launch or ""


def plan_bound(workload: Workload) -> bool:
    """Whether the workload's command depends on its plan: a training framework's, or a serving engine's with
    ``plan_bound_launch`` (vLLM's and SGLang's launch every plan)."""
    inference = workload.inference if workload.task == "inference" else None
    return workload.task == "training" or (inference is not None and bool(engine(inference.engine).plan_bound_launch))


def launchable_plans(workload: Workload, view: ConfigurationView) -> tuple[list[Plan], tuple[Reason, ...]]:
    """The candidate plans the workload's training framework, or its serving engine where the command depends on the
    plan (``ServingEngine.plan_bound_launch``), can launch, and a reason naming the others: a recommendation is a run
    the user can start, so a plan with no command (the HF Trainer's tensor parallelism, lit-gpt's pipeline stages,
    the generic engine's synthetic run over two devices) is neither searched nor offered. Where none of them
    launches, the cheapest plan's refusal is the workload's, not the plans' (an optimizer, a precision, a model
    without a checkpoint): the plans refused for that alone are kept, and their entries say why they have no
    command."""
    plans = candidate_plans(workload, view)
    if not plan_bound(workload) or not plans:
        return plans, ()
    refusals = {plan: _launch_refusal(workload, plan, view) for plan in plans}
    kept = [plan for plan in plans if refusals[plan] is None]
    if not kept:
        kept = [plan for plan in plans if refusals[plan] == refusals[plans[0]]]
    if len(kept) == len(plans):
        return plans, ()
    dropped = [plan for plan in plans if plan not in kept]
    reason = Reason(
        "framework" if workload.task == "training" else "engine",
        f"{len(dropped)} of the {len(plans)} plans this configuration allows are left out, for example"
        f" {dropped[0].label()}: {refusals[dropped[0]]}",
        _left_out_action(workload),
    )
    return kept, (reason,)


@functools.lru_cache(maxsize=4096)
def compat_failures(requirements: compat.Requirements, facts: compat.Facts) -> tuple[compat.Reason, ...]:
    """``catalog.compat.check_configuration``, remembered across calls: the rules are pure functions of
    their two frozen inputs (the catalog's toolkit and wheel tables are part of ``facts``), and checking
    them costs about 0.5 ms a configuration, more than the whole plan search of a cached shape."""
    return tuple(compat.check_configuration(requirements, facts))


def facts_key(facts: compat.Facts) -> tuple[object, ...]:
    """The facts by value, the catalog-wide toolkit and wheel tables by identity: cheap to hash (the tables
    are long) and exact while the views holding the tables are alive, that is within one evaluator's life."""
    return (
        facts.label,
        facts.vendor,
        facts.compute_capability,
        facts.gfx_target,
        facts.native_precisions,
        facts.driver_version,
        facts.host_cpu_architecture,
        id(facts.toolkits),
        id(facts.wheels),
    )


def checked(evaluator: Evaluator, requirements: compat.Requirements, facts: compat.Facts) -> tuple[compat.Reason, ...]:
    """``compat_failures``, looked up once per distinct facts within the evaluator's life."""
    key = ("compat", requirements, facts_key(facts))
    return evaluator.memo(key, lambda: compat_failures(requirements, facts))


def judge(
    view: ConfigurationView, evaluator: Evaluator, corrections: Corrections, requirements: compat.Requirements
) -> Outcome:
    """``unsupported`` when a compatibility rule fails; otherwise the plan search's verdict."""
    failed = checked(evaluator, requirements, view.facts)
    if failed:
        return Outcome(Verdict.UNSUPPORTED, None, compat_reasons(failed))
    return choose_plan(view, evaluator, corrections)


def judge_runnable(
    view: ConfigurationView, evaluator: Evaluator, corrections: Corrections, requirements: compat.Requirements
) -> Outcome | None:
    """``judge``'s outcome when the configuration runs the workload (``fits`` or ``tight``), else None."""
    if checked(evaluator, requirements, view.facts):
        return None
    return runnable_plan(view, evaluator, corrections)
