"""`estimate(workload) -> Budget`: the per-device peak as the maximum over phases, not a sum.

Each phase lists the components alive together at its peak (inference: prefill, decode; training:
forward, backward, optimizer_step). A component's reported value is its own largest value over the
phases; the total is the largest phase (plus allocator fragmentation), and the budget names it.
With pipeline parallelism the first and last stages are both budgeted and the busier one reported.
The stages themselves come from `inference.py` and `training_stage.py`; this module assembles them.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from . import frameworks, parallel, profiles, vllm
from .budget import (
    COMPONENT_NAMES,
    ZERO,
    Budget,
    ComponentBudget,
    DeviceBudget,
    HostBudget,
    PhasePeak,
    Range,
    ServingPlan,
)
from .components import fragmentation as frag
from .components import host as host_mod
from .components import kv_cache as kv
from .components import runtime as rt
from .components import training as tr
from .components import workspace as ws
from .components.weights import weight_bytes
from .custom import custom_budget
from .device import Device
from .dtypes import nbytes
from .engines import engine
from .inference import inference_stage, serving_assumptions, vllm_pool_short
from .models.parameters import ParameterCount, parameter_count
from .models.spec import ModelSpec
from .phases import StagePhases
from .schema import Workload
from .training_stage import dropout_assumption, training_stage


def estimate(
    workload: Workload,
    device_memory_bytes: int | None = None,
    device_name: str | None = None,
    compute_capability: tuple[int, int] | None = None,
) -> Budget:
    """Budget the busiest device of a validated workload.

    `device_memory_bytes` (the device's memory as cudaMemGetInfo reports it, T) lets the vLLM engine size
    its KV pool, report the concurrency it holds and whether it starts; without it the budget reports the
    KV cache the workload needs. `device_name` (e.g. "NVIDIA A100-SXM4-80GB") picks vLLM's defaults for
    the GPU class (A100s get the small-GPU scheduler defaults from vLLM 0.10: vLLM's own rule reads the name).
    `compute_capability` (the catalog's fact) decides the architecture-dependent terms (CUDA context, cuBLAS
    workspaces, vLLM's MXFP4 kernel layout); without it the architecture is read from the name.
    """
    w = workload
    if w.task == "custom":
        return custom_budget(w)
    spec = w.spec
    pc = parameter_count(spec)
    total_params = (w.model.parameter_count if w.model else None) or pc.total
    par = w.parallelism
    device = w.runtime.device
    training = w.task == "training"
    gpu = Device(device_memory_bytes, device_name, compute_capability)
    runtime_r, runtime_note = rt.cuda_context(device, w.runtime.cuda_version_tuple, device_name, compute_capability)
    data = par.data if training else 1
    context = par.context if training else 1
    ws_base = ws.cublas(device, device_name, compute_capability) + ws.nccl(
        device, par.tensor, par.pipeline, data, context
    )
    ws_base = ws_base + ws.attention_backend(device, w.runtime.attention)
    stages = parallel.stages(
        spec,
        par.tensor,
        par.pipeline,
        par.data if training else 1,
        par.zero_stage if training else 0,
        par.sequence_parallel,
        par.expert,
        context,
    )
    # every stage is budgeted; the busiest device is the one reported
    best: tuple[_Peaks, str] | None = None
    plans: list[ServingPlan] = []
    for stage in stages:
        st = _stage_phases(w, spec, stage, pc, total_params, gpu)
        if st.serving is not None:
            plans.append(st.serving)
        peaks = _device_peaks(w, st, runtime_r, ws_base)
        if best is None or peaks.total.bytes > best[0].total.bytes:
            best = (peaks, stage.name)
    assert best is not None
    peaks, stage_name = best
    db = peaks.budget(_notes(w, peaks.stage, runtime_note, gpu))
    serving = vllm.tightest(plans) if plans else None
    assumptions = _assumptions(w, stage_name, total_params)
    if peaks.stage.host_bytes:
        per_node = min(w.parallelism.devices, 8)
        assumptions += (
            f"host RAM instead of device memory, per process: {peaks.stage.host_note}"
            f" ({per_node} process{'es' if per_node > 1 else ''} per node counted in host.ram_bytes)",
        )
    if serving is not None and w.inference is not None:
        assumptions += serving_assumptions(w, serving, gpu)
    plan = {
        "tensor": par.tensor,
        "pipeline": par.pipeline,
        "data": par.data,
        "zero_stage": par.zero_stage,
        "sequence_parallel": par.sequence_parallel,
        "context": par.context,
        "busiest_stage": stage_name,
    }
    return Budget(
        workload=w.name,
        device=device,
        devices=par.devices,
        per_device=db,
        host=_host(w, spec, total_params, db.total_bytes, peaks.stage.host_bytes),
        assumptions=assumptions,
        plan=plan,
        serving=serving,
    )


def model_weight_bytes(workload: Workload) -> int:
    """The whole model's weights as the workload stores them, bytes.

    A floor for plan searches that skip plans without budgeting them: under any split, the busiest device
    needs at least this over the devices sharing one copy of the model (tensor × pipeline; × data under
    ZeRO-3). Every split only divides the same parts (``parallel.stage_parameters``) or adds to them
    (replicated norms, a tied head's copy), and the first pipeline stage (ceil(L/p) layers and the
    embedding) or the last (the head) holds at least the average share
    (``tests/engine/test_behaviour.py::test_no_plan_needs_less_than_its_share_of_the_model_weights``).
    """
    w = workload
    if w.task == "custom":
        return 0
    pc = parameter_count(w.spec)
    total_params = (w.model.parameter_count if w.model else None) or pc.total
    scale = total_params / pc.total if w.model and w.model.parameter_count else 1.0
    value, _ = weight_bytes(
        pc.layers_total * scale,
        pc.embedding * scale,
        (pc.lm_head + pc.final_norm) * scale,
        w.precision.weights,
        w.model.weights_bytes if w.model else None,
        total_params,
        w.nf4_double_quant,
    )
    return value


def _stage_phases(
    w: Workload,
    spec: ModelSpec,
    stage: parallel.Stage,
    pc: ParameterCount,
    total_params: int,
    gpu: Device,
) -> StagePhases:
    """One stage's phases: the training step, or the inference engine over the stage's weights."""
    layer_p, emb_p, head_p = parallel.stage_parameters(spec, pc, stage, w.model.parameter_count if w.model else None)
    if w.task == "training":
        return training_stage(w, stage, layer_p, emb_p, head_p, total_params)
    weights, w_note = _stage_weights(w, stage, (layer_p, emb_p, head_p), total_params)
    st = inference_stage(w, stage, weights, gpu)
    st.notes.setdefault("weights", w_note)
    return st


def _stage_weights(
    w: Workload, stage: parallel.Stage, parameters: tuple[float, float, float], total_params: int
) -> tuple[Range, str]:
    """An inference stage's weights (its layers', embedding's and head's parameters in the workload's storage)."""
    layer_p, emb_p, head_p = parameters
    wb, w_note = weight_bytes(
        layer_p,
        emb_p,
        head_p,
        w.precision.weights,
        w.model.weights_bytes if w.model else None,
        total_params,
        w.nf4_double_quant,
    )
    # an unsplit device in a plain dtype holds exactly the model's parameters × the dtype's bytes
    if (
        stage.name == "only"
        and stage.tensor == 1
        and stage.expert == 1
        and w.precision.weights in ("fp32", "bf16", "fp16")
        and not (w.model and w.model.weights_bytes)
    ):
        wb = int(total_params * nbytes(w.precision.weights))
    if w.spec.layer_model == "generic":
        return Range.spread(wb, 1 - GENERIC_WEIGHTS_BAND, 1 + GENERIC_WEIGHTS_BAND), w_note
    return Range.exact(wb), w_note


def pool_cannot_hold(workload: Workload, device: Device) -> bool:
    """True when a vLLM workload's pool cannot hold what its sessions need on some device of its plan, known
    without budgeting it: every stage ``estimate`` budgets is asked ``inference.vllm_pool_short`` with its exact
    weights, and vLLM takes the smallest pool over the ranks (``vllm.tightest``). The plan then has a memory
    failure: it neither fits nor runs, so a search for a plan that runs skips it
    (``recommendations.verdicts.runnable_plan``). False for other engines and tasks, and without the device's
    memory."""
    w = workload
    inf = w.inference
    if w.task != "inference" or inf is None or inf.engine != "vllm" or not device.memory_bytes:
        return False
    spec, par = w.spec, w.parallelism
    pc = parameter_count(spec)
    total_params = (w.model.parameter_count if w.model else None) or pc.total
    for stage in parallel.stages(spec, par.tensor, par.pipeline, 1, 0, par.sequence_parallel, par.expert):
        parameters = parallel.stage_parameters(spec, pc, stage, w.model.parameter_count if w.model else None)
        weights, _ = _stage_weights(w, stage, parameters, total_params)
        if vllm_pool_short(w, stage, device, weights.bytes):
            return True
    return False


@dataclass(slots=True)
class _Peaks:
    """One stage's largest phase and component maxima, before the notes (only the busiest stage's are
    written: a pipeline's other stage is compared by its total)."""

    stage: StagePhases
    phases: tuple[PhasePeak, ...]
    component_max: dict[str, list[int]]  # name → [low, bytes, high]
    peak_phase: str
    total: Range

    def budget(self, notes: dict[str, str]) -> DeviceBudget:
        m = self.component_max
        comps = tuple(
            ComponentBudget(name, m[name][0], m[name][1], m[name][2], notes.get(name, "")) for name in COMPONENT_NAMES
        )
        return DeviceBudget(
            components=comps,
            total_bytes=self.total.bytes,
            total_low_bytes=self.total.low,
            total_high_bytes=self.total.high,
            peak_phase=self.peak_phase,
            phases=self.phases,
        )


def _device_peaks(w: Workload, st: StagePhases, runtime_r: Range, ws_base: Range) -> _Peaks:
    """The stage's largest phase (with the components alive in every phase) plus fragmentation."""
    fixed = dict(st.fixed)
    fixed["workspace"] = fixed.get("workspace", ZERO) + ws_base
    fixed["runtime"] = runtime_r
    phases, comp_max, best_name, best_bytes, best_low, best_high = _phase_peaks(st, fixed)
    fr = frag.fragmentation(
        w.runtime.device,
        st.transient_for_fragmentation,
        st.live_tensors,
        w.runtime.expandable_segments,
        st.preallocated,
    )
    comp_max["fragmentation"] = [fr.low, fr.bytes, fr.high]
    total = Range(best_low + fr.low, best_bytes + fr.bytes, best_high + fr.high)
    return _Peaks(st, tuple(phases), comp_max, best_name, total)


def _phase_peaks(
    st: StagePhases, fixed: dict[str, Range]
) -> tuple[list[PhasePeak], dict[str, list[int]], str, int, int, int]:
    """Each phase's sum of the components alive in it, and each component's largest value over phases.

    Returns (phases, component maxima [low, bytes, high], peak phase, its bytes, largest low, largest high):
    low and high ends are maximised over phases separately, since another phase may hold the extreme.
    """
    comp_max: dict[str, list[int]] = {name: [0, 0, 0] for name in COMPONENT_NAMES}
    phases: list[PhasePeak] = []
    best_name, best_bytes = "", -1
    best_low = best_high = 0
    if not st.phases:
        return phases, comp_max, best_name, best_bytes, best_low, best_high
    # the fixed components are alive in every phase: summed once, and each one's own value is a lower bound of
    # its maximum (a phase only adds non-negative bytes to it)
    fixed_low = fixed_mid = fixed_high = 0
    for cname, r in fixed.items():
        comp_max[cname] = [r.low, r.bytes, r.high]
        fixed_low += r.low
        fixed_mid += r.bytes
        fixed_high += r.high
    for pname, comps in st.phases.items():
        lo_sum, mid, hi_sum = fixed_low, fixed_mid, fixed_high
        for cname, r in comps.items():
            lo_sum += r.low
            mid += r.bytes
            hi_sum += r.high
            f = fixed.get(cname)
            low, value, high = (f.low + r.low, f.bytes + r.bytes, f.high + r.high) if f is not None else r
            m = comp_max[cname]
            if low > m[0]:
                m[0] = low
            if value > m[1]:
                m[1] = value
            if high > m[2]:
                m[2] = high
        phases.append(PhasePeak(pname, mid, lo_sum, hi_sum))
        if mid > best_bytes:
            best_name, best_bytes = pname, mid
        if lo_sum > best_low:
            best_low = lo_sum
        if hi_sum > best_high:
            best_high = hi_sum
    return phases, comp_max, best_name, best_bytes, best_low, best_high


def _notes(
    w: Workload,
    st: StagePhases,
    runtime_note: str,
    gpu: Device,
) -> dict[str, str]:
    """The stage's notes, with the defaults for the components it did not describe."""
    device = w.runtime.device
    notes = dict(st.notes)
    notes.setdefault("runtime", runtime_note)
    notes.setdefault(
        "fragmentation",
        "cpu device: tensors only"
        if device == "cpu"
        else (
            (
                "caching allocator, expandable_segments: 512 B block rounding, one partly used page per pool"
                if w.runtime.expandable_segments
                else "caching allocator: segment tails (2 MiB rounding, 20 MiB segments for 1–10 MiB requests)"
            )
            + "; split-block slack on the transient bytes (assumed fraction)"
        ),
    )
    # the library workspaces are in every stage's workspace; a stage's note adds what else it holds
    par = w.parallelism
    training = w.task == "training"
    data, context = (par.data, par.context) if training else (1, 1)
    library = ws.library_note(device, gpu.name, par.tensor, par.pipeline, data, gpu.compute_capability, context)
    notes["workspace"] = library + (f"; {st.notes['workspace']}" if "workspace" in st.notes else "")
    notes.setdefault("kv_cache", "no KV cache (training forward runs with use_cache=False)")
    notes.setdefault("gradients", "inference: no gradients")
    notes.setdefault("optimizer_state", "inference: no optimizer")
    return notes


def _host(w: Workload, spec: ModelSpec, total_params: int, device_total_bytes: int, offloaded: int = 0) -> HostBudget:
    """Host RAM (loading the checkpoint, per process on the node, and what each process keeps there instead of on
    its device: ``offloaded``, the busiest stage's) and disk (checkpoint, conversions)."""
    ckpt_prec = w.precision.weights if w.precision.weights in ("fp32", "bf16", "fp16") else "bf16"
    checkpoint = int(total_params * nbytes(ckpt_prec))
    if w.model and w.model.weights_bytes and w.precision.weights in ("fp32", "bf16", "fp16"):
        checkpoint = w.model.weights_bytes
    # quantized weights: a converted copy on disk (+3 % for scales and metadata)
    converted = 0
    if w.precision.weights in ("int8", "int4", "fp8"):
        converted = int(total_params * nbytes(w.precision.weights) * 1.03)
    # full training saves weights and optimizer states
    train_ckpt = 0
    if w.task == "training" and w.training is not None and w.training.method == "full":
        train_ckpt = int(
            total_params
            * (
                nbytes(ckpt_prec)
                + tr.optimizer_state_bytes_per_param(
                    w.training.optimizer, w.precision.weights, w.precision.master_weights, spec.hidden_size
                )
            )
        )
    processes_per_node = min(w.parallelism.devices, 8)
    return HostBudget(
        ram_bytes=host_mod.host_ram(w.runtime.device, checkpoint, processes_per_node, device_total_bytes)
        + processes_per_node * offloaded,
        disk_bytes=host_mod.disk(checkpoint, converted, train_ckpt),
    )


# the parameter band of a model_type read by the generic layer model: the biases, norms, tied heads and extra
# projections it cannot know. `python -m benchmarks.model_landscape.generic_reader` reads every collected config
# as an unknown model_type: max |error| 8.54 % (SmolLM3, whose tied head is a class default), hence ±10 %
GENERIC_WEIGHTS_BAND = 0.10


def _model_assumptions(w: Workload) -> list[str]:
    """How the model was read: its layer kinds, the generic reader, the towers, the checkpoint."""
    generate = w.inference is not None and not engine(w.inference.engine).preallocated_pool
    out = list(_spec_assumptions(w.spec, w.runtime.device, w.task == "training" or generate))
    if w.model is not None and w.model.checkpoint_weights is not None:
        out.extend(w.model.checkpoint_weights.notes)
    return out


@lru_cache(maxsize=1024)
def _spec_assumptions(spec: ModelSpec, device: str, scans_in_torch: bool) -> tuple[str, ...]:
    """The lines that follow from the model alone (and the device, and whether transformers runs its recurrent
    scans): cached per model, as a plan search asks for the same model on every configuration."""
    out = []
    if spec.counts_by_runs:
        out.append(f"layers: {kv.describe_layers(spec)}")
        out.append(
            "activations per kind of layer (its own mixer and MLP): the inference peak is the largest kind's,"
            " training keeps the sum over every layer; KV cache and state follow each layer's kind"
        )
        kinds = {m.kind for run in spec.layer_runs for m in (run.mixer, run.side) if m is not None}
        if kinds & {"mla"} and device == "cpu":
            out.append(
                "MLA on the CPU: SDPA takes torch's math path in fp32 (q/k head size ≠ v head size:"
                " sdp_utils_cpp.cpp check_head_dim_size_cpp)"
            )
        if kinds & {"mamba", "linear"} and scans_in_torch:
            out.append(
                "Mamba and linear-attention layers as transformers runs them without mamba-ssm, causal-conv1d or"
                " flash-linear-attention (its PyTorch scans, fp32 over the chunked sequence: measured on the CPU,"
                " benchmarks/mixers/); with those CUDA kernels installed the scans are fused and their activations"
                " are lower than this budget, which is then an upper bound"
            )
        if kinds & {"cross"}:
            out.append(
                "cross-attention layers are idle without image inputs (text requests): no activations, and in"
                " training no gradients or optimizer state for them"
            )
    if spec.layer_model == "generic":
        out.append(
            f"model_type {spec.model_type!r} has no rules of its own: read by the generic layer model from its"
            " standard fields (q/k/v/o without biases, a gated MLP, two RMSNorms per layer); weights widened by"
            f" ±{GENERIC_WEIGHTS_BAND:.0%} for the biases and norms it cannot know"
        )
    if spec.towers:
        out.append(
            f"multimodal towers in the weights: {spec.towers}; their activations over image or audio tokens are not"
            " counted (text requests only)"
        )
    if spec.draft_layers:
        out.append(
            f"the checkpoint's {spec.draft_layers} multi-token-prediction layer(s) (num_nextn_predict_layers) are not"
            " counted: transformers' own classes do not build them and vLLM's main model skips their weights"
            " (vllm model_executor/models deepseek_v2.py, glm4_moe.py, mimo.py load_weights); a model run through"
            " remote code that builds them (MiMo's MiMoModel) holds their weights beyond this budget, and the"
            " checkpoint on disk is larger by them"
        )
    return tuple(out)


def _assumptions(w: Workload, stage_name: str, total_params: int) -> tuple[str, ...]:
    p = w.precision
    out = [
        "GB = 1e9 B, GiB = 2^30 B; every byte count is an integer number of bytes",
        f"model: {w.spec.model_type}, {total_params:,} parameters (tied embeddings counted once)",
        *_model_assumptions(w),
        f"precision: weights {p.weights}, compute {p.compute}, KV {p.kv_cache}",
        "peak = the largest phase (components alive together), not the sum of component peaks",
        *_runtime_assumptions(w.runtime.device, w.runtime.attention, p.compute),
    ]
    if w.task == "training" and w.training is not None:
        t = w.training
        out.extend(
            _training_assumptions(p.gradients, bool(p.master_weights), t.optimizer, t.optimizer_impl, w.runtime.device)
        )
        out.append(dropout_assumption(w))
        if t.framework != "transformers" or t.fused_loss:
            out.append(frameworks.framework_profile(t.framework).describe())
        if frameworks.fused_loss(t.framework, t.fused_loss):
            out.append(
                "fused linear cross-entropy: no logits stored; the log-sum-exp per token, and the hidden states'"
                " gradient at the loss's backward"
                + (" (Unsloth's default: set fused_loss false for the unfused loss)" if t.fused_loss is None else "")
            )
        if t.framework == "transformers" and (w.parallelism.tensor > 1 or w.parallelism.pipeline > 1):
            out.append(
                "tensor and pipeline parallelism under the transformers framework: Megatron-LM's split of the same"
                " layers; the HF Trainer and TRL run neither, so a recommendation offers no such plan (torchtitan"
                " runs them)"
            )
        if w.parallelism.pipeline > 1:
            out.append(f"pipeline 1F1B: the {stage_name} stage is the busiest")
    elif w.inference is not None:
        out.append(f"serving engine {w.inference.engine}, KV layout {w.inference.kv_cache_layout}")
        par = w.parallelism
        if par.expert > 1:
            out.append(
                f"expert parallel {par.expert}: {w.spec.num_experts // par.expert} whole routed experts per device, the"
                f" attention, dense and shared-expert weights split by tensor {par.tensor} only"
                + (
                    " (replicated: data-parallel attention, each device serving its own sessions)"
                    if par.tensor == 1
                    else ""
                )
                + "; the experts' activations and the all-to-all buffers are budgeted as under tensor parallelism"
            )
    if w.inference is None or not engine(w.inference.engine).preallocated_pool:
        _, version = profiles.workload_engine(w)
        out.extend(profiles.workload_profile(w).describe(version, w.task == "inference", w.spec.is_moe))
    if w.parallelism.tensor > w.spec.num_kv_heads:
        out.append("tensor degree exceeds KV heads: KV heads replicated on each device")
    return tuple(out)


@lru_cache(maxsize=64)
def _runtime_assumptions(device: str, attention: str, compute: str | None) -> tuple[str, ...]:
    """The lines that follow from the device, the attention implementation and the compute dtype alone."""
    if device == "cpu":
        out = [
            "device cpu: the exact framework tensor peak on the host (PyTorch profiler view);"
            " no runtime, fragmentation or CUDA workspaces"
        ]
    else:
        out = [
            "device cuda: the device-level (NVML) peak: tensors + caching-allocator overhead"
            " + CUDA context + library workspaces"
        ]
    out.append(f"attention implementation: {attention}")
    if attention == "eager" and (compute or "bf16") in ("bf16", "fp16"):
        copy = device != "cuda" or compute != "fp16"
        out.append(
            "eager attention: softmax(dtype=float32) over half-precision scores"
            + (
                " makes an fp32 copy of them first (10 B per score element at that instant)"
                if copy
                else " reads fp16 directly on CUDA (half_to_float, no copy)"
            )
        )
    return tuple(out)


@lru_cache(maxsize=256)
def _training_assumptions(
    gradients: str | None, master_weights: bool, optimizer: str, optimizer_impl: str | None, device: str
) -> tuple[str, ...]:
    """The model-state convention and the optimizer step's buffers, from the training settings alone."""
    conv = (
        "16 B/param ZeRO convention (fp16/bf16 gradients)"
        if gradients in ("fp16", "bf16") and master_weights
        else (
            "18 B/param DeepSpeed/Megatron convention (fp32 gradients)"
            if gradients == "fp32" and master_weights
            else "pure-precision training (states in the parameter dtype)"
        )
    )
    impl = optimizer_impl or tr.default_optimizer_impl(device)
    step_buffer = (
        {
            "foreach": "the foreach step allocates a parameter-sized buffer",
            "fused": "the fused step allocates no parameter-sized buffer",
            "for_loop": "the for-loop step allocates buffers the size of the largest parameter",
        }[impl]
        if optimizer == "adamw"
        else f"the {optimizer} step runs {impl}"
    )
    if optimizer_impl is None:
        step_buffer += (
            f" (training.optimizer_impl not given: torch's default for device {device}, `foreach` only when"
            " every parameter is on cuda (torch 2.13 optimizer.py `_default_to_fused_or_foreach`); the range"
            " covers foreach, fused and for_loop)"
        )
    return (
        f"model states: {conv}; optimizer {optimizer}",
        f"gradients are freed by zero_grad(set_to_none=True) between steps; {step_buffer}",
    )
