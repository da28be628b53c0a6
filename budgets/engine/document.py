"""The budget document: the JSON a budget is written as (WORKLOAD.md's Budget object), defined once.

The engine writes a :class:`~budgets.engine.budget.Budget` through it (``Budget.as_contract``), a stored budget is
read back through it (``read_budget``: the figures an order or a measurement keeps), and the API's schema is
generated from it (``budgets.api.views``). Pure: pydantic, no Django.

Strict: a byte count is a whole number ≥ 0 (never ``"16 GB"``, ``true`` or ``1.5``), a range has ``low ≤ bytes ≤
high``, and nothing the document does not define is accepted. A reader's error names the first field it stopped
at, as ``per_device.components.weights.bytes: expected a whole number, got str '16 GB'``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from .budget import (
    COMPONENT_NAMES,
    Budget,
    BudgetReadError,
    ComponentBudget,
    DeviceBudget,
    HostBudget,
    PhasePeak,
    ServingPlan,
    budget_views,
)

Bytes = Annotated[int, Field(ge=0)]


class _Document(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class RangeDocument(_Document):
    """A byte count with its uncertainty."""

    bytes: Bytes = Field(description="Expected bytes.")
    low: Bytes
    high: Bytes

    @model_validator(mode="after")
    def _ordered(self) -> RangeDocument:
        if not self.low <= self.bytes <= self.high:
            raise ValueError(f"expected low ≤ bytes ≤ high, got {self.low}, {self.bytes}, {self.high}")
        return self


class ComponentDocument(RangeDocument):
    note: str = Field("", description="Where the figure comes from: the formula's inputs and sources.")


class ComponentsDocument(_Document):
    """Every component of the per-device budget (COMPONENT_NAMES), each its own peak over phases."""

    weights: ComponentDocument
    activations: ComponentDocument
    kv_cache: ComponentDocument
    gradients: ComponentDocument
    optimizer_state: ComponentDocument
    workspace: ComponentDocument
    runtime: ComponentDocument
    fragmentation: ComponentDocument


class ViewsDocument(_Document):
    """What each measurement view would read at the peak: PyTorch's allocated and reserved peaks, NVML's used."""

    framework_allocated: RangeDocument = Field(
        description="torch.cuda.max_memory_allocated() (on cpu: the tensor peak)."
    )
    framework_reserved: RangeDocument | None = Field(None, description="torch.cuda.max_memory_reserved(); cuda only.")
    device_used: RangeDocument | None = Field(None, description="NVML device used (nvidia-smi); cuda only.")


class PerDeviceDocument(_Document):
    components: ComponentsDocument
    total: RangeDocument = Field(description="Expected per-device peak: the maximum over phases, not a sum.")
    peak_phase: str = Field(description="The phase that sets the peak.")
    phases: dict[str, Bytes] = Field(description="Each phase's components summed, bytes.")
    views: ViewsDocument | None = Field(None, description="Derived from the components; not read back.")


class HostDocument(_Document):
    ram_bytes: Bytes = Field(description="Host RAM needed to load and feed the devices, per node.")
    disk_bytes: Bytes = Field(description="Disk for model files and conversions.")


class ServingDocument(_Document):
    """vLLM-style KV pool arithmetic (engine ``vllm`` only; the pool needs the device's memory)."""

    kv_bytes_per_token: Bytes = Field(description="KV bytes per token, per device, all layers.")
    kv_bytes_needed: Bytes = Field(description="KV bytes the longest request × concurrency needs.")
    kv_pool_bytes: Bytes | None = Field(None, description="The KV pool; null without device memory.")
    max_concurrent_sessions_at_max_request: Bytes | None = Field(
        None, description="Sessions of the longest request the pool holds."
    )
    max_request_tokens_at_concurrency: Bytes | None = Field(
        None, description="The longest request (tokens) the pool holds at the asked concurrency."
    )
    device_memory_bytes: Bytes | None = Field(
        None, description="Device memory T (cudaMemGetInfo total) the pool was computed for; null without."
    )
    kv_pool_tokens: Bytes | None = Field(
        None, description="Tokens the pool's whole blocks hold (vLLM's 'GPU KV cache size')."
    )
    max_concurrency: float | None = Field(
        None, description="Requests of max_model_len the pool holds, as vLLM prints it ('Maximum concurrency … 1.30x')."
    )
    starts: bool | None = Field(None, description="Whether vLLM starts (null without device memory).")
    reason: str | None = Field(None, description="Why vLLM does not start; else null.")
    shortfall_bytes: Bytes | None = Field(
        None, description="KV memory missing within u·T for one max_model_len request."
    )
    max_model_len: Bytes | None = Field(None, description="Tokens (start-up check).")
    max_num_seqs: Bytes | None = Field(None, description="Sequence budget profiled.")
    max_num_batched_tokens: Bytes | None = Field(None, description="Tokens in vLLM's profile run.")
    profile: str | None = Field(None, description="The vLLM release profile used, e.g. '0.11' (0.11–0.20).")
    need_bytes: Bytes | None = Field(
        None,
        description="What the workload needs of vLLM's share: weights, profile-run peak, non-torch memory and CUDA"
        " graphs, plus the KV its sessions fill; what an acceptance job's vllm_need view measures.",
    )


class BudgetDocument(_Document):
    """The budget object of the v1 contract (WORKLOAD.md)."""

    workload: str
    device: Literal["cuda", "cpu"]
    devices: int = Field(ge=1, description="Devices of the plan: tensor × pipeline × data.")
    per_device: PerDeviceDocument
    host: HostDocument
    assumptions: list[str]
    calibration: dict[str, Any] | None = Field(
        None, description="Calibration applied to the estimate, or null (none yet; a stored budget: always null)."
    )
    plan: dict[str, Any] = Field(description="The parallel plan the budget assumes (degrees, ZeRO stage, …).")
    serving: ServingDocument | None = Field(None, description="vLLM workloads only.")

    @classmethod
    def of(cls, budget: Budget) -> BudgetDocument:
        """``budget`` as its document. Built without validating again (the engine's figures are in range by
        construction, and ``tests/test_typed_readers.py`` reads every example budget back through the validator);
        ``contract`` leaves out what a budget does not have (``serving`` elsewhere than vLLM, the cuda views on cpu)."""
        pd = budget.per_device
        components = ComponentsDocument.model_construct(
            None,
            **{
                c.name: ComponentDocument.model_construct(bytes=c.bytes, low=c.low, high=c.high, note=c.note)
                for c in pd.components
            },
        )
        views = {
            name: RangeDocument.model_construct(None, **figures)
            for name, figures in budget_views(budget.device, pd).items()
        }
        fields: dict[str, Any] = {
            "workload": budget.workload,
            "device": budget.device,
            "devices": budget.devices,
            "per_device": PerDeviceDocument.model_construct(
                components=components,
                total=RangeDocument.model_construct(
                    bytes=pd.total_bytes, low=pd.total_low_bytes, high=pd.total_high_bytes
                ),
                peak_phase=pd.peak_phase,
                phases={p.name: p.bytes for p in pd.phases},
                views=ViewsDocument.model_construct(None, **views),
            ),
            "host": HostDocument.model_construct(ram_bytes=budget.host.ram_bytes, disk_bytes=budget.host.disk_bytes),
            "assumptions": list(budget.assumptions),
            "calibration": budget.calibration,
            "plan": dict(budget.plan),
        }
        if budget.serving is not None:
            s = budget.serving
            fields["serving"] = ServingDocument.model_construct(
                **{name: getattr(s, name) for name in ServingDocument.model_fields}
            )
        return cls.model_construct(**fields)

    def contract(self) -> dict[str, Any]:
        """The JSON-ready dict (what was set: a cpu budget has one view, a budget without vLLM no ``serving``)."""
        return self.model_dump(mode="json", exclude_unset=True)

    def budget(self) -> Budget:
        """The :class:`Budget` this document describes. What the document does not store reads as the nearest it
        says: a phase's low and high as its expected bytes, ``serving.available_kv_bytes`` as None; ``views`` are
        derived from the components, not read."""
        pd = self.per_device
        components = tuple(
            ComponentBudget(name, c.low, c.bytes, c.high, c.note)
            for name in COMPONENT_NAMES
            for c in (getattr(pd.components, name),)
        )
        serving = self.serving
        return Budget(
            workload=self.workload,
            device=self.device,
            devices=self.devices,
            per_device=DeviceBudget(
                components=components,
                total_bytes=pd.total.bytes,
                total_low_bytes=pd.total.low,
                total_high_bytes=pd.total.high,
                peak_phase=pd.peak_phase,
                phases=tuple(PhasePeak(name, value, value, value) for name, value in pd.phases.items()),
            ),
            host=HostBudget(ram_bytes=self.host.ram_bytes, disk_bytes=self.host.disk_bytes),
            assumptions=tuple(self.assumptions),
            plan=dict(self.plan),
            serving=None if serving is None else ServingPlan(**serving.model_dump()),
        )


def read_document(data: object) -> BudgetDocument:
    """``data`` validated as a :class:`BudgetDocument`; :class:`BudgetReadError` naming the first field that is
    missing, of the wrong kind or out of range — never a KeyError or pydantic's own error."""
    try:
        return BudgetDocument.model_validate(data)
    except ValidationError as exc:
        raise BudgetReadError(_message(exc.errors(include_url=False)[0])) from None


_KINDS = {
    "int_type": "a whole number",
    "float_type": "a number",
    "string_type": "a string",
    "bool_type": "true or false",
    "list_type": "a list",
    "dict_type": "an object",
    "model_type": "an object",
}


def _message(error: Any) -> str:
    loc = error["loc"]
    where = ".".join(str(part) for part in loc) or "budget"
    kind, value = error["type"], error.get("input")
    if kind == "missing":
        return f"{where}: missing"
    if kind == "extra_forbidden" and loc[:-1] == ("per_device", "components"):
        return f"per_device.components: unknown component(s) {loc[-1]}; known: {', '.join(COMPONENT_NAMES)}"
    if kind == "extra_forbidden":
        return f"{where}: not a field of the budget document"
    if kind in _KINDS:
        shown = f"{type(value).__name__} {value!r}"[:160] if kind not in ("dict_type", "model_type") else ""
        return f"{where}: expected {_KINDS[kind]}, got {shown or type(value).__name__}"
    if kind == "greater_than_equal":
        return f"{where}: expected a whole number ≥ {error['ctx']['ge']}, got {value}"
    if kind == "literal_error":
        return f"{where}: expected {error['ctx']['expected']}, got {value!r}"[:200]
    message = str(error["msg"]).removeprefix("Value error, ")
    return f"{where}: {message}"
