"""Parallel plans for one workload on one configuration, cheapest first, each budgeted by the engine. Pure.

A configuration is seen through a :class:`ConfigurationView` (built from the catalog by
``recommendations.views_data``; tests build them by hand). Its devices are never pooled: every plan is
budgeted per device, with the engine given one device's usable memory.

Plans (:func:`candidate_plans`):

- one device; else **tensor parallel** t over a divisor of the attention heads that splits the KV heads evenly or
  replicates them evenly (``_tensor_degrees``), inside the NVLink domain (t ≤ ``nvlink_domain_size``: the
  all-reduces of every layer need the links);
  **pipeline parallel** p (p ≤ layers) only beyond that: stages of the widest tensor degree the domain
  allows, crossing domains (a stage passes one activation per step; Narayanan et al. 2021, "Efficient
  Large-Scale Language Model Training on GPU Clusters Using Megatron-LM", arXiv:2104.04473, Takeaway #1:
  "tensor model parallelism should generally be used up to degree g when using g-GPU servers, and then
  pipeline model parallelism can be used to scale up to larger models across servers");
- a replica of t × p devices is repeated over the rest of the node: for serving, r = ⌊devices / (t·p)⌋
  replicas (at most one per session) divide the concurrent sessions, each serving ⌈sessions / r⌉;
  for training the replicas are the data-parallel degree d, over which ZeRO stages 1–3 shard the model
  states (FSDP full sharding is stage 3), and recomputation (``activation_checkpointing: full``) is tried
  after the workload's own setting;
- serving a mixture-of-experts model on vLLM or SGLang, also **expert parallel** e (a divisor of the routed
  experts, up to the devices) with data-parallel attention: every device holds e/num_experts of the experts whole
  and the attention and dense layers whole, and serves its own share of the sessions (the DeepSeek-V3 serving
  layout: DeepSeek-V3 technical report, arXiv:2412.19437, §3.4.2 "Decoding"; SGLang ``--enable-dp-attention``);
  the experts' all-to-all is in the roofline (``roofline``);
- a custom task, or a ``cpu`` workload, has one plan: one device; so has training under a framework that runs one
  process on one GPU whatever the node has (Unsloth, ``one_device``), the node's other devices idle; one that runs
  on one node (lit-gpt, ``one_node``) fills that node's devices only.

The recommender then keeps the plans the workload's training framework, or a serving engine whose command depends on
the plan (generic, transformers), can launch (``verdicts.launchable_plans``): a plan no command runs (the HF Trainer's
tensor parallelism) is not a recommendation.

Cost order (the first plan that fits wins): fewest devices per copy of the model (t·p, or e under expert
parallel; more replicas on the same node), then no pipeline (a pipeline adds a bubble per step, tensor parallel
does not), then tensor before expert parallel (its all-to-all crosses every device of the group each MoE layer);
for training, within one (t, p), ZeRO stages 0 to 3 without recomputation (higher stages communicate more), then
the same with recomputation (it repeats the forward pass). More replicas never cost more memory per device,
so every plan fills the configuration with them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import date
from typing import Any, TypeVar

from budgets.engine import Budget, Device, Workload, estimate, model_weight_bytes, pool_cannot_hold
from budgets.engine.engines import PLAIN_UTILIZATION, engine
from budgets.engine.frameworks import framework_profile
from catalog.compat import Facts

RECOMPUTE_FULL = "full"
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class ConfigurationView:
    """What the recommender needs of one catalog configuration (plain values; no ORM rows)."""

    slug: str
    name: str
    device_count: int  # devices in the configuration, over all its nodes
    nvlink_domain_size: int  # devices joined by NVLink/NVSwitch (1 = none): the scale-up domain (72 for an NVL72 rack)
    usable_bytes: int  # per device, bytes (host RAM for a CPU-only configuration)
    usable_basis: str  # "verified" | "observed" | "derived" | "marketed" | "host_ram" (catalog.usable)
    usable_source: str  # where the usable figure comes from, for a person
    facts: Facts  # what catalog.compat checks
    architecture: str  # architecture slug, "cpu:<host architecture>" for CPU-only (calibration groups)
    id: int | None = None  # catalog primary key
    accelerator_name: str | None = None  # "NVIDIA H100 SXM5 80GB"; None for CPU-only (the engine's device_name)
    driver_version: str = ""
    memory_bandwidth_gbps: float | None = None  # decimal GB/s, peak
    dense_tflops: Mapping[str, float | None] = field(default_factory=dict)  # the catalog's dense_tflops
    nvlink_bandwidth_gbps: float | None = None  # bidirectional total, as NVIDIA quotes it
    hourly_price_usd: float | None = None  # the cheapest on-demand price, USD per hour for the whole node
    price_provider: str = ""  # whose offer hourly_price_usd is ("" without one: no price, or set by hand)
    price_region: str = ""  # the provider's cheapest region for it
    price_instance_type: str = ""
    price_read_on: date | None = None  # the day the price was read from its source
    price_source_url: str = ""  # the catalog file at the commit read
    price_stale: bool = False  # read more than 90 days before the view was built (catalog.models.price_is_stale)
    host_ram_bytes: int | None = None  # per node, bytes
    disk_bytes: int | None = None  # per node, bytes
    max_devices_per_node: int = 8  # the accelerator's limit (for "more devices" suggestions)
    node_count: int = 1  # machines the configuration spans (device_count is over all of them)
    scale_out_fabric: str = ""  # the network between nodes, e.g. "InfiniBand NDR, one 400 Gb/s ConnectX-7 per GPU"
    scale_out_gbps_per_device: float | None = None  # Gbit/s one way per GPU between nodes; None: one node

    def shape(self) -> tuple[Any, ...]:
        """Everything the plan search reads: configurations equal in these get the same plans and verdicts
        (they differ in slug, driver, price or facts, which the compatibility rules and the cost read)."""
        return (
            self.usable_bytes,
            self.accelerator_name,
            self.compute_capability,
            self.device_count,
            self.nvlink_domain_size,
            self.host_ram_bytes,
            self.disk_bytes,
            self.memory_bandwidth_gbps,
            tuple(sorted(self.dense_tflops.items())),
            self.nvlink_bandwidth_gbps,
            self.max_devices_per_node,
            self.node_count,
            self.scale_out_gbps_per_device,
        )

    @property
    def devices_per_node(self) -> int:
        return self.device_count // self.node_count

    def placement(self) -> dict[str, int]:
        """The entry settings that place a plan on this configuration's nodes, read by the launches that start
        processes on each (``nodes``, ``devices_per_node``); none on one node."""
        return {"nodes": self.node_count, "devices_per_node": self.devices_per_node} if self.node_count > 1 else {}

    @property
    def compute_capability(self) -> tuple[int, int] | None:
        """The catalog's compute capability of the accelerator (what the engine's architecture terms read)."""
        cc = self.facts.compute_capability
        return cc.pair if cc is not None else None

    def identity(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "slug": self.slug,
            "accelerator_name": self.accelerator_name,
            "device_count": self.device_count,
            "driver_version": self.driver_version,
        }


@dataclass(frozen=True, slots=True)
class Plan:
    tensor: int
    pipeline: int
    replicas: int  # serving replicas (data-parallel attention ranks under expert parallel), or the training DP degree
    zero_stage: int = 0
    recompute: str | None = None  # activation_checkpointing the plan sets (training); None = the workload's
    expert: int = 1  # serving a MoE model: devices its routed experts are split over (1: split by the tensor degree)
    context: int = 1  # training: devices each sequence is split over (the workload's parallelism.context)

    @property
    def devices_per_replica(self) -> int:
        return self.tensor * self.pipeline * self.context

    @property
    def devices(self) -> int:
        return self.devices_per_replica * self.replicas

    @property
    def model_devices(self) -> int:
        """Devices one copy of the model's weights is spread over (a replica's; the expert group's under EP)."""
        return max(self.devices_per_replica, self.expert)

    def label(self) -> str:
        if self.expert > 1:
            attention = f"TP{self.tensor} " if self.tensor > 1 else ""
            groups = self.devices // self.expert
            return f"EP{self.expert}, {attention}data-parallel attention ({self.replicas} ranks)" + (
                f", {groups} expert groups" if groups > 1 else ""
            )
        parts = [f"TP{self.tensor}"] if self.tensor > 1 else []
        parts += [f"PP{self.pipeline}"] if self.pipeline > 1 else []
        parts += [f"CP{self.context}"] if self.context > 1 else []
        shape = " × ".join(parts) or "1 device"
        text = shape + (f", {self.replicas} replicas" if self.replicas > 1 else "")
        text += f", ZeRO-{self.zero_stage}" if self.zero_stage else ""
        return text + (f", recomputation {self.recompute}" if self.recompute else "")


def _tensor_degrees(workload: Workload, domain: int) -> list[int]:
    """Degrees dividing the attention heads whose KV heads split evenly, or are replicated evenly once the degree
    passes them (vLLM's QKVParallelLinear: ``tp_size % total_num_kv_heads == 0`` when tp_size ≥ the KV heads;
    MLA's one latent head is replicated on every rank)."""
    spec = workload.spec
    heads, kv_heads = spec.num_attention_heads, spec.num_kv_heads
    return [t for t in range(1, domain + 1) if heads % t == 0 and (kv_heads % t == 0 or t % kv_heads == 0)]


def _shapes(workload: Workload, view: ConfigurationView) -> list[tuple[int, int]]:
    """(tensor, pipeline) pairs that fit in the node, cheapest first.

    Tensor parallel first, as far as the NVLink domain allows; pipeline stages only beyond it, each
    stage at that largest tensor degree (Megatron-LM's rule: tensor parallel within a node's links,
    pipeline across them).
    """
    degrees = _tensor_degrees(workload, view.nvlink_domain_size)
    widest = degrees[-1]
    stages = range(2, min(view.device_count // widest, workload.spec.num_layers) + 1)
    shapes = [(t, 1) for t in degrees] + [(widest, p) for p in stages]
    return sorted(shapes, key=lambda tp: (tp[0] * tp[1], tp[1]))


def _expert_plans(workload: Workload, view: ConfigurationView) -> list[Plan]:
    """Expert parallel e over the configuration's devices with data-parallel attention (tensor 1 per rank): e a
    divisor of the routed experts (whole experts per device), up to the devices; ⌊devices / e⌋ expert groups. One
    rank per session at most."""
    spec, inference = workload.spec, workload.inference
    if inference is None or not spec.is_moe or not engine(inference.engine).expert_parallel:
        return []
    plans = []
    for e in range(2, min(view.device_count, spec.num_experts) + 1):
        if spec.num_experts % e:
            continue
        ranks = e * (view.device_count // e)
        if ranks > inference.concurrent_sessions:
            continue  # a rank with no session of its own
        plans.append(Plan(1, 1, ranks, expert=e))
    return plans


def _cost_order(plan: Plan) -> tuple[int, int, int]:
    """Fewest devices per copy of the model, then no pipeline, then tensor before expert parallel."""
    return (plan.model_devices, plan.pipeline, plan.expert > 1)


def candidate_plans(workload: Workload, view: ConfigurationView) -> list[Plan]:
    """Every plan the configuration allows, in cost order (module docstring)."""
    if workload.task == "custom" or workload.runtime.device == "cpu":
        return [Plan(1, 1, 1)]
    if workload.task == "training" and _one_device(workload):  # one of the node's devices, the others idle
        return _training_plans(workload, 1, 1, 1)
    plans: list[Plan] = []
    # training keeps the workload's context-parallel degree (not searched): each replica spans t × p × it devices
    context = workload.parallelism.context if workload.task == "training" else 1
    devices = view.devices_per_node if _one_node(workload) else view.device_count
    for t, p in _shapes(workload, view):
        replicas = devices // (t * p * context)
        if replicas == 0:
            continue
        if workload.task == "inference":
            assert workload.inference is not None
            plans.append(Plan(t, p, min(replicas, workload.inference.concurrent_sessions)))
        else:
            plans.extend(_training_plans(workload, t, p, replicas))
    if workload.task == "inference":
        plans = sorted(plans + _expert_plans(workload, view), key=_cost_order)
    return plans


def _one_device(workload: Workload) -> bool:
    """A training framework that runs one process on one GPU whatever the node has (``one_device``)."""
    return workload.training is not None and framework_profile(workload.training.framework).one_device


def _one_node(workload: Workload) -> bool:
    """A training framework that runs on one node whatever the configuration spans (``one_node``)."""
    return (
        workload.task == "training"
        and workload.training is not None
        and framework_profile(workload.training.framework).one_node
    )


def _training_plans(workload: Workload, tensor: int, pipeline: int, data: int) -> list[Plan]:
    assert workload.training is not None
    own = workload.training.activation_checkpointing
    recomputes = [None] if own == RECOMPUTE_FULL else [None, RECOMPUTE_FULL]
    # offloading to the CPU runs on ZeRO / FSDP: at least the stage the offload needs (schema: training.cpu_offload)
    least = {"none": 0, "optimizer": 1, "parameters": 3}[workload.training.cpu_offload]
    context = workload.parallelism.context
    if context > 1:  # context parallelism runs under FSDP over data × context (schema: ZeRO-2 or 3)
        least = max(least, 2)
    shards = data * context
    stages = range(least, 4) if shards > 1 else [least]  # ZeRO over one replica shards nothing
    if shards > 1:  # the stages the framework's data-parallel ranks run (torchtune and torchtitan: FSDP2, DDP)
        framework = framework_profile(workload.training.framework)
        stages = [zero for zero in stages if framework.runs_stage(zero, tensor, pipeline)]
    return [
        Plan(tensor, pipeline, data, zero, recompute, context=context) for recompute in recomputes for zero in stages
    ]


def plan_workload(workload: Workload, plan: Plan) -> Workload:
    """The workload as one replica of ``plan`` runs it: its parallelism, its share of the sessions."""
    update: dict[str, Any] = {}
    if workload.task != "custom":
        data = plan.replicas if workload.task == "training" else 1
        # a framework whose tensor parallelism is sequence parallel too runs it under every tensor degree > 1
        sequence = (
            workload.task == "training"
            and workload.training is not None
            and plan.tensor > 1
            and framework_profile(workload.training.framework).sequence_parallel_with_tensor
        )
        update["parallelism"] = workload.parallelism.model_copy(
            update={
                "tensor": plan.tensor,
                "pipeline": plan.pipeline,
                "data": data,
                "zero_stage": plan.zero_stage,
                "sequence_parallel": sequence,
                "expert": plan.expert,
                "context": plan.context,
            }
        )
    if workload.inference is not None and workload.task == "inference":
        sessions = math.ceil(workload.inference.concurrent_sessions / plan.replicas)
        update["inference"] = workload.inference.model_copy(update={"concurrent_sessions": sessions})
    if workload.training is not None and plan.recompute is not None:
        update["training"] = workload.training.model_copy(update={"activation_checkpointing": plan.recompute})
    return workload.model_copy(update=update)


@dataclass(frozen=True, slots=True)
class PlanBudget:
    """The engine's budget of one plan on one device type, and what of it must fit."""

    plan: Plan
    workload: Workload  # as one replica runs it (plan_workload)
    budget: Budget
    need_bytes: int  # expected bytes the workload needs per device (a pool engine: what it needs of its share)
    uncertainty_bytes: int  # the budget's high − expected, bytes
    utilization_bytes: int | None  # a pool engine: gpu_memory_utilization × usable, bytes; None for other engines


def _pool_share(workload: Workload, usable_bytes: int) -> int | None:
    """The share of the device an engine with a preallocated KV pool claims; None for other engines."""
    inference = workload.inference
    if workload.task != "inference" or inference is None or not engine(inference.engine).preallocated_pool:
        return None
    return int(usable_bytes * (inference.gpu_memory_utilization or PLAIN_UTILIZATION))


def need_bytes(budget: Budget, share: int | None) -> int:
    """Per-device bytes the workload needs.

    A pool engine (vLLM) preallocates its pool to ``gpu_memory_utilization`` × T whatever the workload, so its device
    total says nothing about the workload; what it needs is the non-KV part of its share (u·T − the KV it
    could give) plus the KV the workload's sessions fill: weights + profile-run peak + non-torch + graphs
    + needed KV — the serving plan's ``need_bytes``, the same figure acceptance judges a vLLM run by
    (``measurements.acceptance.vllm_need``). Other engines need their peak.
    """
    serving = budget.serving
    if share is None or serving is None or serving.need_bytes is None:
        return budget.per_device.total_bytes
    return serving.need_bytes


class Evaluator:
    """Budgets of one workload under plans, cached per (usable bytes, device name, plan).

    Many configurations share an accelerator (they differ in device count, driver or price), so a
    catalog-wide recommendation asks the engine once per distinct (device, plan), and judges each
    distinct configuration shape once (``memo``). The caches live as long as the evaluator: one
    ``recommend()`` call.
    """

    def __init__(self, workload: Workload) -> None:
        self.workload = workload
        self._cache: dict[tuple[int, str | None, tuple[int, int] | None, Plan], PlanBudget] = {}
        self._memo: dict[tuple[Any, ...], Any] = {}
        self._model_weights = model_weight_bytes(workload)
        self._workloads: dict[Plan, Workload] = {}  # plan_workload per plan
        self._pool_short: dict[tuple[int, str | None, tuple[int, int] | None, Plan], bool] = {}

    def weights_floor(self, plan: Plan) -> int:
        """A floor of what the busiest device of ``plan`` needs, without budgeting it: the model's weights
        (``budgets.engine.model_weight_bytes``) over the devices that share one copy of them (a serving
        replica's; for training, ZeRO-3 also splits them over the data-parallel group)."""
        sharing = plan.devices if self.workload.task == "training" else plan.model_devices
        return self._model_weights // sharing

    def pool_cannot_hold(
        self, plan: Plan, usable_bytes: int, device_name: str | None, compute_capability: tuple[int, int] | None
    ) -> bool:
        """True when a pool engine's pool under ``plan`` on this device cannot hold the sessions' KV, known from
        its weights without budgeting it (``budgets.engine.pool_cannot_hold``): the plan has a memory failure, so
        it neither fits nor runs."""
        key = (usable_bytes, device_name, compute_capability, plan)
        found = self._pool_short.get(key)
        if found is None:
            device = Device(usable_bytes, device_name, compute_capability)
            found = self._pool_short[key] = pool_cannot_hold(self._plan_workload(plan), device)
        return found

    def _plan_workload(self, plan: Plan) -> Workload:
        found = self._workloads.get(plan)
        if found is None:
            found = self._workloads[plan] = plan_workload(self.workload, plan)
        return found

    def memo(self, key: tuple[Any, ...], compute: Callable[[], T]) -> T:
        """A result derived from this workload's budgets (a verdict per configuration shape, its settings),
        computed once per ``key``."""
        if key not in self._memo:
            self._memo[key] = compute()
        value: T = self._memo[key]
        return value

    def memo_get(self, key: tuple[Any, ...]) -> Any:
        """What ``memo`` computed for ``key``, or None."""
        return self._memo.get(key)

    @property
    def budgets_computed(self) -> int:
        """Plan budgets asked of the engine so far (each once: kept by plan and device)."""
        return len(self._cache)

    def evaluate(
        self, plan: Plan, usable_bytes: int, device_name: str | None, compute_capability: tuple[int, int] | None = None
    ) -> PlanBudget:
        key = (usable_bytes, device_name, compute_capability, plan)
        found = self._cache.get(key)
        if found is None:
            found = self._cache[key] = self._budget(plan, usable_bytes, device_name, compute_capability)
        return found

    def _budget(
        self, plan: Plan, usable_bytes: int, device_name: str | None, compute_capability: tuple[int, int] | None
    ) -> PlanBudget:
        workload = self._plan_workload(plan)
        budget = estimate(workload, usable_bytes, device_name, compute_capability)
        share = _pool_share(workload, usable_bytes)
        per_device = budget.per_device
        return PlanBudget(
            plan=plan,
            workload=workload,
            budget=budget,
            need_bytes=need_bytes(budget, share),
            uncertainty_bytes=per_device.total_high_bytes - per_device.total_bytes,
            utilization_bytes=share,
        )
