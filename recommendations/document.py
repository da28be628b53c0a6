"""The recommendation document: the JSON of a ranked entry and of the API's answer, defined once.

The recommender writes each entry through it (``Entry.as_dict``, ``recommendations.services.recommendations_payload``),
the API's OpenAPI schema is generated from it (``recommendations.api.views``), and the suggested settings
(``recommendations.settings``, plain dicts the admin reads) are validated against it on the way out, so a key the
settings write that the document does not define fails there, not in a client. Pure: pydantic, no Django.
"""

from __future__ import annotations

import functools
from datetime import date
from typing import TYPE_CHECKING, Any, Literal, TypeVar, cast

from pydantic import BaseModel, ConfigDict, Field

from .plans import Plan
from .verdicts import LatencyFigures, Margin, Reason, Verdict

if TYPE_CHECKING:
    from .launch import Launch
    from .recommend import CostFigures, Entry, EvidenceInfo, PriceBasis

#: ``measurements.calibration.EvidenceLevel``'s labels (tests/recommendations/test_api.py checks they agree).
EvidenceLabel = Literal["estimate_only", "measured_architecture", "measured_here"]
MarginRule = Literal["min_headroom_fraction", "estimate_uncertainty", "calibration_spread"]
PriceBasisName = Literal["usd_per_million_output_tokens", "usd_per_hour", "no_price"]


class _Document(BaseModel):
    model_config = ConfigDict(extra="forbid")

    def dump(self) -> dict[str, Any]:
        """The JSON-ready dict: what was set (an optional setting a configuration does not have is left out)."""
        return self.model_dump(mode="json", exclude_unset=True)

    def dump_json(self) -> bytes:
        """``dump()`` encoded as JSON (UTF-8), in one step."""
        return self.__pydantic_serializer__.to_json(self, exclude_unset=True)


D = TypeVar("D", bound=_Document)


def _read(cls: type[D], source: object, **given: Any) -> D:
    """``cls`` built from ``source``'s attributes of the same names, and ``given`` for the rest; not validated again
    (the recommender's values are of their types by construction; the tests validate real answers against the
    generated schema)."""
    fields = {name: getattr(source, name) for name in cls.model_fields if name not in given}
    return cast(D, cls.model_construct(None, **fields, **given))  # Self, which the pydantic plugin reads as the base


class ConfigurationRefDocument(_Document):
    id: int | None = Field(description="The catalog configuration's primary key.")
    slug: str
    accelerator_name: str | None = Field(description="null for a CPU-only configuration.")
    device_count: int
    driver_version: str


class PlanDocument(_Document):
    tensor: int = Field(description="Tensor-parallel degree.")
    pipeline: int = Field(description="Pipeline-parallel stages.")
    replicas: int = Field(
        description="Serving replicas (under expert parallel, its data-parallel attention ranks), or the training"
        " data-parallel degree."
    )
    expert: int = Field(description="Devices a MoE model's routed experts are split over, whole experts each; 1: none.")
    context: int = Field(1, description="Training: devices each sequence is split over (context parallelism); 1: none.")
    zero_stage: int
    activation_checkpointing: str | None = Field(description="Set by the plan; null: the workload's setting.")
    devices: int = Field(description="Devices the plan uses (tensor × pipeline × context × replicas).")
    label: str

    @classmethod
    def of(cls, plan: Plan) -> PlanDocument:
        return _read(cls, plan, activation_checkpointing=plan.recompute, label=plan.label())


class MarginDocument(_Document):
    bytes: int = Field(description="Headroom a fit must keep, bytes.")
    fraction: float = Field(description="Of usable memory.")
    set_by: MarginRule
    candidates: dict[str, int] = Field(description="Each rule's figure, bytes.")

    @classmethod
    def of(cls, margin: Margin) -> MarginDocument:
        return _read(cls, margin)


class ReasonDocument(_Document):
    rule: str = Field(
        description="A compatibility rule, or vllm, sglang, memory, host_ram, disk, latency, headroom, parallelism;"
        " framework or engine where plans it cannot launch were left out."
    )
    message: str
    action: str = Field(description="What to do about it.")
    component: str | None = Field(description="The budget component that overflows.")
    overflow_bytes: int | None

    @classmethod
    def of(cls, reason: Reason) -> ReasonDocument:
        return _read(cls, reason)


class EvidenceMeasurementDocument(_Document):
    measurement: int = Field(description="GET /api/v1/measurements/{id}/")
    order: int = Field(description="GET /api/v1/orders/{id}/")
    job: int | None = Field(description="GET /api/v1/acceptance-jobs/{id}/; null for an upload.")
    configuration: str = Field(description="The measured configuration's slug.")
    view: str = Field(description="The measurement view compared with the estimate.")


class EvidenceDocument(_Document):
    level: EvidenceLabel
    sentence: str
    measurements: list[EvidenceMeasurementDocument]
    correction: str = Field(description="How the per-device need was corrected, or why it was not.")
    usable_source: str = Field(description="Where the usable memory figure comes from.")

    @classmethod
    def of(cls, evidence: EvidenceInfo) -> EvidenceDocument:
        measured = [
            _measurement_document(m["measurement"], m["order"], m["job"], m["configuration"], m["view"])
            for m in evidence.measurements
        ]
        return _read(cls, evidence, level=evidence.label, measurements=measured)


@functools.lru_cache(maxsize=8192)
def _measurement_document(
    measurement: int, order: int, job: int | None, configuration: str, view: str
) -> EvidenceMeasurementDocument:
    """A measurement behind the evidence, built once per process: every entry a calibration picks it for (tens
    per answer, the same ones in every answer of a workload kind) shares it, as nothing changes a document once
    built."""
    return EvidenceMeasurementDocument.model_construct(
        None, measurement=measurement, order=order, job=job, configuration=configuration, view=view
    )


class LatencyDocument(_Document):
    """Roofline estimates for one replica at its share of the sessions."""

    sessions_per_replica: int
    ms_per_output_token: float = Field(description="Expected; corrected when a calibration applies.")
    ms_per_output_token_low: float
    ms_per_output_token_high: float
    prefill_ms: float = Field(description="One prompt of max_input_tokens.")
    bound: Literal["memory", "compute"]
    output_tokens_per_s: float = Field(description="All sessions decoding together, over the replicas.")
    target_ms: float | None
    max_sessions_within_target: int | None
    correction: str
    all_reduce_ms: float = Field(description="Of one decode step: tensor parallel's all-reduces over NVLink.")
    pipeline_transfer_ms: float = Field(
        description="Of one decode step: activations passed between pipeline stages on different nodes."
    )
    all_to_all_ms: float = Field(
        description="Of one decode step: expert parallel's dispatch and combine, every MoE layer (DeepEP's measured"
        " latency)."
    )
    communication: str = Field(description="Which links each communication term crosses.")
    label: Literal["roofline estimate"]

    @classmethod
    def of(cls, latency: LatencyFigures) -> LatencyDocument:
        return _read(cls, latency, label="roofline estimate")


class CostDocument(_Document):
    """The configuration's price, what it comes to, and the offer it is, so that a buyer can check it at source_url.
    Training has no cost per run: the roofline gives no training step time and the workload no token count."""

    usd_per_hour: float = Field(description="The cheapest on-demand offer, USD per hour for the whole node.")
    usd_per_month: float = Field(description="usd_per_hour × 730, the AWS Pricing Calculator's hours in a month.")
    usd_per_million_output_tokens: float | None = Field(
        description="At the plan's roofline throughput; null for training."
    )
    output_tokens_per_s: float | None
    provider: str = Field(description="Whose offer the price is; empty for a price set without a source.")
    region: str = Field(description="The provider's cheapest region for the offer.")
    read_on: date | None = Field(description="The day the price was read from its source.")
    source_url: str = Field(description="The public catalog file, at the commit read, that lists the offer.")
    stale: bool = Field(description="Read more than 90 days ago: check the price at its source before relying on it.")
    label: Literal["estimate: catalog price at the roofline throughput"]

    @classmethod
    def of(cls, cost: CostFigures) -> CostDocument:
        return _read(cls, cost, label="estimate: catalog price at the roofline throughput")


class ChangeBudgetDocument(_Document):
    total: int = Field(description="Per-device total, bytes.")
    components: dict[str, int] = Field(description="Bytes per component.")


class ChangeDocument(_Document):
    """A change under which the workload fits, with the plan and per-device budget it fits under."""

    kind: Literal["fewer_sessions", "smaller_micro_batch", "fp8_kv_cache", "shorter_context", "more_devices"]
    description: str
    changes: dict[str, Any] = Field(description="Dotted workload field (or device_count) → the value that fits.")
    plan: PlanDocument
    per_device_bytes: int
    usable_bytes: int
    headroom_bytes: int
    budget: ChangeBudgetDocument


class AssumedCudaDocument(_Document):
    value: str = Field(description="The CUDA version this configuration was judged with, e.g. 12.8.")
    basis: str = Field(description="Why: runtime.cuda_version not given, the newest its driver runs.")


class SuggestedSettingsDocument(_Document):
    """vLLM settings (vLLM and SGLang workloads: SGLang's under the same workload field names, e.g.
    gpu_memory_utilization for --mem-fraction-static), training settings (training), the nearest changes
    (does_not_fit); each only where it applies."""

    tensor_parallel_size: int | None = Field(None, description="vLLM")
    pipeline_parallel_size: int | None = Field(None, description="vLLM")
    replicas: int | None = Field(None, description="vLLM; under expert parallel, the data-parallel attention ranks")
    expert_parallel_size: int | None = Field(None, description="vLLM/SGLang: devices the routed experts split over.")
    nodes: int | None = Field(None, description="A multi-node configuration's nodes.")
    devices_per_node: int | None = Field(None, description="A multi-node configuration's devices in each node.")
    gpu_memory_utilization: float | None = Field(None, description="vLLM")
    max_model_len: int | None = Field(None, description="vLLM")
    max_num_seqs: int | None = Field(None, description="vLLM")
    max_num_batched_tokens: int | None = Field(None, description="vLLM")
    kv_cache_bytes: int | None = Field(None, description="vLLM: the KV pool per device, bytes.")
    kv_cache_tokens: int | None = Field(None, description="vLLM")
    max_concurrency_at_longest_request_per_replica: int | None = Field(None, description="vLLM")
    max_concurrency_at_longest_request: int | None = Field(None, description="vLLM, over the replicas.")
    cuda_graph_max_bs: int | None = Field(None, description="SGLang: --cuda-graph-max-bs, as the budget resolved it.")
    kv_block_tokens: int | None = Field(None, description="SGLang: --page-size (1 unless the workload names one).")
    tensor: int | None = Field(None, description="training")
    pipeline: int | None = Field(None, description="training")
    data: int | None = Field(None, description="training: data-parallel degree.")
    zero_stage: int | None = Field(None, description="training")
    activation_checkpointing: str | None = Field(None, description="training")
    max_micro_batch_size: int | None = Field(None, description="training: the largest that fits under the plan.")
    max_concurrency_within_latency_target: int | None = Field(
        None, description="With acceptance.max_ms_per_output_token."
    )
    nearest_changes: list[ChangeDocument] | None = Field(None, description="does_not_fit only.")
    cuda_version: AssumedCudaDocument | None = Field(None, description="Only when the workload names no CUDA version.")


class PriceBasisDocument(_Document):
    basis: PriceBasisName
    value: float | None = Field(description="USD, on that basis; null without a price.")
    text: str = Field(
        description='With the offer it is, e.g. "$1.84 per million output tokens at Lambda us-east-1 on-demand, read'
        ' 2026-11-20"; "no price in the catalog: ranked after the priced".'
    )

    @classmethod
    def of(cls, price: PriceBasis) -> PriceBasisDocument:
        return _read(cls, price)


class LaunchFileDocument(_Document):
    """A file a launch command reads."""

    path: str = Field(description="Where the command expects it, relative to where it runs.")
    content: str


class LaunchDocument(_Document):
    """The command that runs the entry's plan, checked against the engine release's own flags."""

    engine: Literal[
        "vllm", "sglang", "torchtune", "torchtitan", "transformers", "litgpt", "unsloth", "generic", "custom"
    ]
    checked_against: str = Field(description="The engine release whose flags the command passed, e.g. 'vllm 0.11.0'.")
    argv: list[str] = Field(description="The command as arguments.")
    text: str = Field(description="The same, quoted for a POSIX shell.")
    notes: list[str] = Field(description="What to know before running it.")
    files: list[LaunchFileDocument] = Field(
        default_factory=list, description="Files the command reads, to write beside it first (an accelerate config)."
    )
    servers: int = Field(
        1,
        description="Identical servers the configuration runs side by side (a multi-node configuration: one per node"
        " or per group of nodes), each serving its share of the sessions.",
    )

    @classmethod
    def of(cls, launch: Launch) -> LaunchDocument:
        files = [LaunchFileDocument(path=path, content=content) for path, content in launch.files]
        return _read(cls, launch, argv=list(launch.argv), notes=list(launch.notes), files=files)


class RecommendationDocument(_Document):
    """One configuration judged for the workload."""

    configuration: ConfigurationRefDocument
    verdict: Verdict
    plan: PlanDocument | None = Field(description="The chosen plan (the closest for does_not_fit).")
    per_device_bytes: int | None = Field(
        description="What the workload needs per device under the plan (the verdict is judged on it)."
    )
    reserved_bytes: int | None = Field(
        description="What the engine holds per device under the plan: vLLM's whole preallocated pool"
        " (gpu_memory_utilization × memory), otherwise the budget's peak."
    )
    usable_bytes: int = Field(description="Usable memory per device (host RAM for a cpu workload).")
    usable_basis: str = Field(description="verified, observed, derived, marketed or host_ram.")
    headroom_bytes: int | None
    margin: MarginDocument | None
    reasons: list[ReasonDocument]
    evidence: EvidenceDocument
    suggested_settings: SuggestedSettingsDocument
    latency: LatencyDocument | None = Field(description="Inference only, where the catalog has the figures.")
    cost: CostDocument | None = Field(description="Where the catalog has a price.")
    launch: LaunchDocument | None = Field(
        description="fits and tight entries: for the plan, `vllm serve` (vLLM), `python -m sglang.launch_server`"
        " (SGLang), `python generate_transformers.py` (transformers generate), vramplan's measured synthetic run"
        " (the generic engine); for training `tune run` (torchtune), `torchrun -m torchtitan.train` (torchtitan),"
        " `accelerate launch -m trl.scripts.sft` (transformers), `python launch_litgpt.py` (lit-gpt) or `python"
        " train_unsloth.py` (Unsloth); for a custom workload the measured replay of its declared components; each with"
        " the files it reads. Null where the workload names no checkpoint to load, or the engine or framework cannot"
        " run it as budgeted: `manage.py recommend --launch` says why."
    )
    price_basis: PriceBasisDocument = Field(
        description="The price the entry was ranked on (after the verdict and the evidence): per million output"
        " tokens where the plan's throughput is known, else per hour; configurations without a price come after"
        " the priced."
    )

    @classmethod
    def of(cls, entry: Entry) -> RecommendationDocument:
        return cls.model_construct(
            configuration=ConfigurationRefDocument.model_construct(**entry.configuration),
            verdict=entry.verdict,
            plan=PlanDocument.of(entry.plan) if entry.plan else None,
            per_device_bytes=entry.per_device_bytes,
            reserved_bytes=entry.reserved_bytes,
            usable_bytes=entry.usable_bytes,
            usable_basis=entry.usable_basis,
            headroom_bytes=entry.headroom_bytes,
            margin=MarginDocument.of(entry.margin) if entry.margin else None,
            reasons=[ReasonDocument.of(r) for r in entry.reasons],
            evidence=EvidenceDocument.of(entry.evidence),
            # validated: the settings are dicts built across recommendations.settings
            suggested_settings=SuggestedSettingsDocument.model_validate(entry.suggested_settings),
            latency=LatencyDocument.of(entry.latency) if entry.latency else None,
            cost=CostDocument.of(entry.cost) if entry.cost else None,
            price_basis=PriceBasisDocument.of(entry.price_basis),
            launch=LaunchDocument.of(entry.launch) if entry.launch else None,
        )


class RecommendedWorkloadDocument(_Document):
    id: int | None = Field(description="The stored workload; null for POST /recommend.")
    name: str
    description: dict[str, Any] = Field(description="The workload as validated.")


class RecommendationsDocument(_Document):
    """The answer of both recommendation endpoints and of ``manage.py recommend --format json``."""

    workload: RecommendedWorkloadDocument
    recommendations: list[RecommendationDocument] = Field(description="Ranked: feasible first.")
