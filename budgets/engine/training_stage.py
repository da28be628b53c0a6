"""The training stage: one optimizer step as forward, four backward instants and the optimizer step.

Model states (weights, gradients, optimizer states; ZeRO shards them over the data-parallel group) come
from `components/training.py`, activations from `components/activations.py`. Gradients are absent in the
forward (zero_grad(set_to_none=True)) and appear during backward, which is why backward is budgeted at
several instants rather than once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import NamedTuple

from . import frameworks, parallel, profiles
from .budget import ZERO, Range
from .components import activations as act
from .components import training as tr
from .components import workspace as ws
from .components.weights import weight_bytes
from .dtypes import nbytes, stored_bytes_per_weight
from .models.parameters import idle_parameters, layers_parameters, mixer_parameters, mlp_parameters
from .models.spec import ModelSpec
from .phases import StagePhases, activation_band, activation_shape, param_tensors
from .schema import Workload

#: Checkpointing modes that keep each layer's input and recompute the layer (or part of it) in backward.
CHECKPOINTED = ("full", "selective_op")


@dataclass(slots=True)
class _Trainable:
    """The stage's weights (+ LoRA adapters) and how many parameters the optimizer updates."""

    weights: Range
    weights_note: str
    trainable: float
    train_note: str


@dataclass(slots=True)
class _ModelStates:
    """Gradients and optimizer states of the trainable parameters on this device (ZeRO-sharded)."""

    grad_prec: str
    grad_shards: int
    grads_full: float  # unsharded, for the DDP / ZeRO buckets
    grads: Range
    per_param_optimizer: float
    optimizer_shards: int
    optimizer: Range
    optimizer_impl: str  # the step's implementation: as given, else torch's default for the device
    step_temp: Range  # what the optimizer step allocates beyond its states; not given: over the implementations


@dataclass(frozen=True, slots=True)
class _Kind:
    """One kind of layer's figures for the backward's instants (`_activations`), bytes."""

    first: int  # its first layer on the stage
    saved: float  # what it keeps for backward (mode none): what a recompute rebuilds
    backward: float  # its MLP's (or mixer's) backward transient
    extra: float  # a forward peak beyond what it keeps (under recompute: the whole forward)
    attention_backward: float  # an eager softmax's backward, its MLP's saved tensors freed
    mlp_instant: float  # recomputed: at its MLP's backward, the output projection's input freed
    post_norm: float  # recomputed sandwich-norm layer: at its last norm's backward
    retained: float  # recomputed: what it leaves alive after its backward (Gemma 4's stored k/v and their history)
    layer_type: str  # its mixer kind: a stored k/v is replaced by the next recomputed layer of the same kind


@dataclass(slots=True)
class _Activations:
    """Activation bytes at each instant of the step, and the gradients that exist at the backward ones."""

    batch: Range  # input_ids and labels, held in every phase
    forward: float
    backward_start: float
    backward_head: float
    backward_first_layer: float
    backward_end: float
    head_grad: float
    untied_embedding_grad: float  # not yet allocated at the first layer's backward
    first_layer_absent_grad: float  # the gradients not yet written at the late-backward peak
    embedding_grad_extra: float  # a tied embedding's dense gradient (+ the sum with the head's)
    offloaded: float  # the layers' saved inputs in host RAM (activation offloading)


def training_stage(
    w: Workload, stage: parallel.Stage, layer_p: float, emb_p: float, head_p: float, total_params: int
) -> StagePhases:
    """The stage's phases of one training step; the largest is its peak."""
    assert w.training is not None
    spec, t, prec = w.spec, w.training, w.precision
    d = nbytes(prec.compute or "bf16")
    lo, hi = activation_band(w.runtime.device)
    cuda = w.runtime.device == "cuda"
    fp16_cuda = cuda and (prec.compute or "bf16") == "fp16"
    # under context parallelism each device holds its share of every sequence (`parallel.Stage.context`)
    local = t.sequence_length // stage.context
    x = activation_shape(spec, stage, t.micro_batch_size, local, local, d, fp16_cuda, cuda)
    params = _trainable(w, spec, stage, layer_p, emb_p, head_p, total_params, d)
    states = _model_states(w, spec, stage, params.trainable)
    kept = _kept(w, stage, x)
    compiled = _Compiled(_compiled(w, spec, stage, kept), _compiled_loss(w, stage))
    a = _activations(w, spec, stage, x, states, compiled, kept)
    eager = _activations(w, spec, stage, x, states, _EAGER, kept) if compiled != _EAGER else a
    # a pipelined FSDP stage's late backward phases are those of a later micro-batch, one fewer in flight
    # (`_pipelined_fsdp`); elsewhere the one micro-batch's
    pipelined = _pipelined_fsdp_applies(w, stage)
    later = stage.in_flight_microbatches - 1
    late = (
        _activations(w, spec, replace(stage, in_flight_microbatches=later), x, states, compiled, kept)
        if pipelined and later >= 1
        else a
    )
    weights, optimizer, batch = params.weights, states.optimizer, a.batch

    out = StagePhases(stage.name)
    out.fixed["workspace"] = _workspace(w, spec, stage, layer_p, params.trainable, states, x)
    # the weights and the optimizer state are alive, unchanged, in every phase of the step
    out.fixed["weights"], out.fixed["optimizer_state"] = weights, optimizer

    def banded(v: float) -> Range:
        return Range(min(int(v * lo), int(v)), int(v), max(int(v * hi), int(v)))

    def band(field: str) -> Range:
        # Under torch.compile the expected figure is the partitioner's saved set and the CUDA band covers it as it
        # covers the eager model: torchtune's published A100 table (llama3_2 3B, "+ Compile" row) lowered the
        # allocated peak by 9.0 GiB, the engine's compiled-minus-eager budget of that setup by 8.85 GiB
        # (tests/engine/test_training_mechanisms.py). A run whose compile falls back to eager is not the stated
        # setup: the note names its figure (`_eager_fallback_note`).
        return banded(getattr(late if field in _LATE_FIELDS else a, field))

    out.phases["forward"] = {"activations": band("forward") + batch}
    out.phases["backward"] = {
        # measured (CPU profiler): the backward peak is at log_softmax backward, before any
        # parameter gradient exists; the LM head gradient arrives after the loss buffers are freed
        "activations": band("backward_start") + batch,
        "gradients": ZERO,
    }
    out.phases["backward_head"] = {
        "activations": band("backward_head") + batch,
        "gradients": Range.exact(a.head_grad),
    }
    out.phases["backward_first_layer"] = {
        "activations": band("backward_first_layer") + batch,
        "gradients": Range.exact(states.grads.bytes - a.untied_embedding_grad - a.first_layer_absent_grad),
    }
    out.phases["backward_end"] = {
        "activations": band("backward_end") + batch,
        "gradients": states.grads + Range.exact(a.embedding_grad_extra),
    }
    out.phases["optimizer_step"] = {
        "gradients": states.grads,
        "workspace": states.step_temp,
        "activations": batch,
    }
    out.notes.update(_notes(w, stage, params, states, compiled))
    if compiled != _EAGER:
        out.notes["activations"] += _eager_fallback_note(a, eager)
    _place(w, stage, layer_p, states, a, out)
    if pipelined:  # the next micro-batch's backward starts with one fewer in flight (`late`)
        _pipelined_fsdp(w, stage, (layer_p, emb_p, head_p), states, banded(late.backward_start) + batch, out)
    out.transient_for_fragmentation = int(max(a.forward, a.backward_start))
    out.live_tensors = param_tensors(spec, stage.layers) * (4 if t.method == "full" else 1)
    return out


def _place(
    w: Workload, stage: parallel.Stage, layer_p: float, states: _ModelStates, a: _Activations, out: StagePhases
) -> None:
    """What the framework's settings take off the device, into host RAM (``out.host_bytes``, with why), or out of
    the step: offloaded layer inputs, paged or offloaded optimizer states, offloaded gradients and parameters, and
    gradients freed one at a time (optimizer in backward)."""
    assert w.training is not None
    t, prec = w.training, w.precision
    host: list[tuple[str, float]] = []
    if a.offloaded:
        host.append(("checkpointed layer inputs (activation offloading)", a.offloaded))
    if t.optimizer_in_backward:
        # each parameter is stepped in its post-accumulate-grad hook and its gradient freed: at most the largest
        # gradient is alive, with its own step's temporary; there is no optimizer phase
        largest = _largest_tensor(w, stage)
        one = Range.exact(math.ceil(largest * nbytes(states.grad_prec) / states.grad_shards))
        step = tr.optimizer_step_transient(
            t.optimizer, states.optimizer_impl, prec.weights, prec.master_weights, largest, largest
        )
        for phase in ("backward_head", "backward_first_layer", "backward_end"):
            out.phases[phase]["gradients"] = one
            if step:
                out.phases[phase]["workspace"] = Range.exact(int(step))
        out.phases["backward_end"]["gradients"] = one + Range.exact(a.embedding_grad_extra)
        del out.phases["optimizer_step"]
        out.notes["gradients"] = (
            f"optimizer in backward: one gradient at a time, the largest {one.bytes:,} B ({largest:,.0f} elements);"
            " each is stepped and freed as soon as it is written (torchtune 0.6.1 training/memory.py:219-242)"
        )
    offload = t.cpu_offload
    if t.optimizer == "paged_adamw_8bit" or offload != "none":
        states_bytes = out.fixed["optimizer_state"].bytes
        why = "paged optimizer states (CUDA managed memory)" if offload == "none" else "optimizer states, CPU step"
        host.append((why, states_bytes))
        out.fixed["optimizer_state"] = ZERO
        out.notes["optimizer_state"] = f"{states_bytes:,} B in host RAM: " + (
            "bitsandbytes' paged states are cudaMallocManaged, outside PyTorch's allocator, resident on the"
            " device only while it has room and paged to the host otherwise"
            if offload == "none"
            else f"cpu_offload {offload!r}: the step runs on the CPU"
        )
    if offload != "none":
        # reduced gradients are copied to the host as they are produced (the reduce buckets stay: workspace)
        host.append(("gradients", states.grads.bytes))
        for alive in out.phases.values():
            if "gradients" in alive:
                alive["gradients"] = ZERO
        if "optimizer_step" in out.phases:
            out.phases["optimizer_step"].pop("workspace", None)
        out.notes["gradients"] = f"cpu_offload {offload!r}: {states.grads.bytes:,} B of gradients in host RAM"
    if offload == "parameters":
        weights = out.fixed["weights"].bytes
        host.append(("parameters", weights))
        out.fixed["weights"] = ZERO
        # gathered to the device a layer at a time, the next one prefetched (`_workspace` counts the two layers under
        # ZeRO-3 over several ranks); the root unit, embedding and head (16-bit in a quantized model), stays gathered
        # from the forward's start to the backward's end (FSDP does not reshard the root after forward)
        layer = (
            (layer_p / stage.layers) * stored_bytes_per_weight(prec.weights, w.nf4_double_quant) if stage.layers else 0
        )
        two_layers = 0.0 if (stage.zero_stage >= 3 and stage.shards > 1) else 2 * layer
        root_bytes = 2 if prec.weights not in ("fp32", "bf16", "fp16") else nbytes(prec.weights)
        vocab = w.spec.vocab_size * w.spec.embed_dim / stage.tensor
        root = vocab * (1 if w.spec.tie_word_embeddings else 2) * root_bytes
        out.fixed["workspace"] = out.fixed["workspace"] + Range.exact(int(two_layers + root))
        out.notes["weights"] = (
            f"cpu_offload 'parameters': {weights:,} B of parameters in host RAM, gathered to the device a layer at a"
            f" time, with the next prefetched; the embedding and head ({int(root):,} B) gathered for the whole step"
            " (workspace)"
        )
    out.host_bytes = int(sum(b for _, b in host))
    out.host_note = "; ".join(f"{why} {int(b):,} B" for why, b in host if b)


_LATE_FIELDS = ("backward_head", "backward_first_layer", "backward_end")


def _pipelined_fsdp_applies(w: Workload, stage: parallel.Stage) -> bool:
    """Pipeline stages under FSDP (ZeRO-2/3 over more than one rank) in a framework that keeps them gathered."""
    assert w.training is not None
    profile = frameworks.framework_profile(w.training.framework)
    return (
        profile.pipeline_keeps_fsdp_gathered
        and w.parallelism.pipeline > 1
        and stage.zero_stage >= 2
        and stage.shards > 1
    )


def _pipelined_fsdp(
    w: Workload,
    stage: parallel.Stage,
    params: tuple[float, float, float],
    states: _ModelStates,
    next_start: Range,
    out: StagePhases,
) -> None:
    """A framework whose pipeline stages keep FSDP gathered (``pipeline_keeps_fsdp_gathered``: torchtitan) runs every
    micro-batch of a stage on its whole parameters and accumulates whole gradients.

    torchtitan turns FSDP2's reshard-after-forward off when pipeline stages are on (``reshard_after_forward = not
    pp_enabled``, models/llama3/infra/parallelize.py:289-292 at v0.2.0), and the pipeline stage turns reshard after
    backward and gradient sync off for every micro-batch's backward (torch 2.13
    distributed/pipelining/stage.py:844-848), so: the stage's parameters stay gathered in FSDP's param dtype (the
    compute dtype; the linear weights in float8 with ``float8_linear``'s float8 all-gather) from the first forward to
    the end of the last backward, and FSDP2 keeps each parameter's gradient unsharded, upcast to the reduce dtype and
    accumulated over the micro-batches (fsdp/_fully_shard/_fsdp_param.py:802-820 ``to_accumulated_grad_if_needed``;
    torchtitan's mixed_precision_reduce "float32", config/job_config.py:239). The last backward reduce-scatters them
    into the sharded gradients and reshards the parameters before the optimizer step. So the first micro-batch's
    backward starts with no gradient and every micro-batch in flight (``backward``); from its late phases on, and at
    the next micro-batch's backward (``backward_next_microbatch``: ``next_start``, its activations), every gradient
    exists and one micro-batch fewer is in flight. ZeRO-3's per-layer gathers are part of the whole stage here."""
    assert w.training is not None
    t = w.training
    layer_p, emb_p, head_p = params
    d = nbytes(w.precision.compute or "bf16")
    linear_d = nbytes("fp8") if t.float8_linear else d
    gathered = Range.exact(int((layer_p + head_p) * linear_d + emb_p * d))
    accumulated = int((layer_p + emb_p + head_p) * nbytes("fp32"))
    out.phases["backward_next_microbatch"] = {"activations": next_start}
    for name, alive in out.phases.items():
        if name == "optimizer_step":
            continue
        alive["weights"] = gathered
        if name not in ("forward", "backward"):
            alive["gradients"] = Range.exact(accumulated + (states.grads.bytes if name == "backward_end" else 0))
    if stage.zero_stage >= 3:  # ZeRO-3's two gathered layers (`_workspace`) are part of the whole stage here
        per_layer = layer_p / max(stage.layers, 1)
        gather = int(2 * per_layer * nbytes(w.precision.weights))
        ws = out.fixed["workspace"]
        out.fixed["workspace"] = Range(max(ws.low - gather, 0), max(ws.bytes - gather, 0), max(ws.high - gather, 0))
    out.notes["weights"] = (
        out.notes.get("weights", "")
        + f"; pipeline stages under FSDP2: the stage's {layer_p + emb_p + head_p:,.0f} parameters stay gathered"
        + (" (linear weights in float8)" if t.float8_linear else "")
        + f" through forward and backward, {gathered.bytes:,} B"
    )
    out.notes["gradients"] = (
        f"pipeline stages under FSDP2: unsharded fp32 gradients accumulated over the micro-batches, {accumulated:,} B,"
        " from the first backward to the last, reduce-scattered then"
    )


def _trainable(
    w: Workload,
    spec: ModelSpec,
    stage: parallel.Stage,
    layer_p: float,
    emb_p: float,
    head_p: float,
    total_params: int,
    d: float,
) -> _Trainable:
    assert w.training is not None
    t, prec = w.training, w.precision
    device_params = layer_p + emb_p + head_p
    # an unsplit device holds the model's exact parameter count, not the sum of the per-part split
    exact_params = total_params if (stage.name == "only" and stage.tensor == 1) else device_params

    # weights (ZeRO-3 partitions them over the data-parallel group)
    w_bytes, w_note = weight_bytes(
        layer_p,
        emb_p,
        head_p,
        prec.weights,
        w.model.weights_bytes if w.model else None,
        total_params,
        w.nf4_double_quant,
    )
    if (
        exact_params == total_params
        and prec.weights in ("fp32", "bf16", "fp16")
        and not (w.model and w.model.weights_bytes)
    ):
        w_bytes = int(total_params * nbytes(prec.weights))
    z3 = stage.zero_shards_parameters
    w_bytes = w_bytes // z3 if w_bytes % z3 == 0 else math.ceil(w_bytes / z3)

    if t.method == "full":
        idle = idle_parameters(spec, stage.first_layer, stage.first_layer + stage.layers, stage.holds_embedding)
        trainable = exact_params - idle
        adapter_bytes = 0
        train_note = "all parameters trainable"
        if idle:
            train_note += (
                f"; {idle:,} of them (vision/audio towers, cross-attention layers, a no-grad indexer) never get a"
                " gradient in a text-only step: no gradients or optimizer state for them"
            )
    else:
        x0 = activation_shape(spec, stage, 1, 1, 1, d)
        trainable = tr.lora_parameters(
            spec.hidden_size, x0.q, x0.kv, x0.inter, stage.layers, t.lora.rank, list(t.lora.target_modules)
        )
        adapter_bytes = int(trainable * nbytes(prec.master_weights or prec.compute or "bf16"))
        train_note = (
            f"LoRA rank {t.lora.rank} on {', '.join(t.lora.target_modules)}: {trainable:,} trainable parameters"
        )
    weights_note = (
        w_note
        + (f" / {z3} (ZeRO-3 partitions)" if z3 > 1 else "")
        + (f"; + LoRA adapters {adapter_bytes:,} B" if adapter_bytes else "")
    )
    return _Trainable(Range.exact(w_bytes + adapter_bytes), weights_note, trainable, train_note)


def _model_states(w: Workload, spec: ModelSpec, stage: parallel.Stage, trainable: float) -> _ModelStates:
    assert w.training is not None
    t, prec = w.training, w.precision
    peft_fp32 = peft_fp32_adapters(w, stage)
    grad_prec = "fp32" if peft_fp32 else (prec.gradients or prec.weights)
    if grad_prec not in ("fp32", "bf16", "fp16"):
        grad_prec = "bf16"  # quantized weights (QLoRA) still get half-precision gradients
    g_shards = stage.zero_shards_gradients
    grads_full = trainable * nbytes(grad_prec)
    grads = Range.exact(
        grads_full / g_shards
        if (grads_full / g_shards) == int(grads_full / g_shards)
        else math.ceil(grads_full / g_shards)
    )
    per_param_opt = tr.optimizer_state_bytes_per_param(
        t.optimizer,
        prec.weights if t.method == "full" else (prec.master_weights or prec.compute or "bf16"),
        None if peft_fp32 else prec.master_weights,  # PEFT's fp32 adapters are their own master copy
        spec.hidden_size,
    )
    o_shards = stage.zero_shards_optimizer
    opt_total = trainable * per_param_opt
    opt_bytes = opt_total / o_shards
    opt_bytes = int(opt_bytes) if opt_bytes == int(opt_bytes) else math.ceil(opt_bytes)
    step_scalars = 0
    if w.runtime.device == "cpu":
        n_tensors = (
            param_tensors(spec, stage.layers) if t.method == "full" else 2 * stage.layers * len(t.lora.target_modules)
        )
        step_scalars = tr.adam_step_tensors_bytes(t.optimizer, n_tensors)
        opt_bytes += step_scalars
    # AdamW-step ranges (round 4): low counts no `step` scalars, since `param_tensors` is only an upper
    # bound (fused experts / projections, LayerNorm models: up to 184 tensors, 736 B, too many measured)
    optimizer = Range(opt_bytes - step_scalars, opt_bytes, opt_bytes)
    largest = _largest_tensor(w, stage)
    step = {
        impl: tr.optimizer_step_transient(t.optimizer, impl, prec.weights, prec.master_weights, trainable, largest)
        / o_shards
        for impl in tr.OPTIMIZER_IMPLS
    }
    impl = t.optimizer_impl or tr.default_optimizer_impl(w.runtime.device)
    # an implementation the workload leaves to torch is its device default; the range covers the others
    step_temp = (
        Range.exact(step[impl])
        if t.optimizer_impl
        else Range(int(min(step.values())), int(step[impl]), int(max(step.values())))
    )
    return _ModelStates(grad_prec, g_shards, grads_full, grads, per_param_opt, o_shards, optimizer, impl, step_temp)


def _largest_tensor(w: Workload, stage: parallel.Stage) -> float:
    """Elements of the largest trainable parameter tensor on this stage: a LoRA adapter's A or B
    (rank × the widest projection side), else the vocabulary matrix, a (fused) projection, or a fused
    experts' tensor (transformers 5.24 modeling_mixtral.py:65 `gate_up_proj` (experts, 2·inter, h))."""
    assert w.training is not None
    spec = w.spec
    x = activation_shape(spec, stage, 1, 1, 1, 1)
    if w.training.method != "full":
        return w.training.lora.rank * max(spec.hidden_size, x.q, x.inter)
    mlp_width = x.inter * (2 if spec.fused_gate_up else 1)
    if spec.is_moe:
        expert_inter = math.ceil(spec.expert_intermediate_size / stage.tensor)
        mlp_width = max(mlp_width, spec.num_experts * expert_inter * (2 if spec.mlp == "gated" else 1))
    qkv_width = x.q + 2 * x.kv if spec.fused_qkv else x.q
    vocab = x.vocab * spec.embed_dim if (stage.holds_embedding or stage.holds_head) else 0
    return max(vocab, mlp_width * spec.hidden_size, qkv_width * spec.hidden_size) if stage.layers else vocab


def _compiled(w: Workload, spec: ModelSpec, stage: parallel.Stage, kept: act.Kept) -> bool:
    """torch.compile's saved set replaces the eager layers' where it is modelled (not with selective
    recomputation or sequence parallelism)."""
    assert w.training is not None
    t = w.training
    return (
        w.runtime.compile
        and act.compile_modelled(spec, w.runtime.attention, t.method, kept)
        and t.activation_checkpointing not in ("selective", "selective_op")
        and not stage.sequence_parallel
    )


class _Compiled(NamedTuple):
    layers: bool
    loss: bool


_EAGER = _Compiled(False, False)


def _compiled_loss(w: Workload, stage: parallel.Stage) -> bool:
    """torchtune compiles the per-chunk cross-entropy of its chunked loss (`loss_chunks` > 1) under
    `compile`; lit-gpt's loss is its own (profiles/litgpt.py)."""
    assert w.training is not None
    t = w.training
    return (
        w.runtime.compile
        and t.loss_chunks > 1
        and t.framework in ("transformers", "torchtune")
        and not frameworks.fused_loss(t.framework, t.fused_loss)
        and stage.holds_head
    )


def _forward_saved(
    w: Workload, spec: ModelSpec, stage: parallel.Stage, x: act.Shape, compiled: bool, kept: act.Kept
) -> tuple[float, float, float, float, float, float]:
    """What the forward keeps: (saved by the layers on the device, embedding output, model-level tensors,
    model-level tensors still alive in backward, one sliding layer's saved mask copy, the layers' saved
    inputs offloaded to host RAM)."""
    assert w.training is not None
    attention, mode = w.runtime.attention, w.training.activation_checkpointing
    s, d = x.s, x.d
    sp_t = stage.tensor if stage.sequence_parallel else 1
    profile = profiles.workload_profile(w)
    first, last = stage.first_layer, stage.first_layer + stage.layers
    if compiled and mode == "none":
        saved_layers = act.compiled_saved_per_layer(spec, x, kept) * stage.layers
    else:
        saved_layers = act.layers_saved(
            spec,
            x,
            attention,
            first,
            last,
            lambda view, vx, gqa_copies: profile.training_layer_saved(
                view, vx, attention, gqa_copies, mode, sp_t, kept
            ),
        )
    saved_layers *= stage.in_flight_microbatches
    offloaded = 0.0
    if w.training.activation_offloading and stage.layers:
        # the checkpointed inputs go to host RAM; the device keeps the framework's stash of them
        stash = min(stage.layers, frameworks.framework_profile(w.training.framework).offload_stash)
        offloaded = saved_layers * (stage.layers - stash) / stage.layers
        saved_layers -= offloaded
    if compiled and mode == "none" and w.training.method != "full" and stage.holds_embedding:
        saved_layers -= act.compiled_first_layer_unsaved(x) * stage.in_flight_microbatches
    # masks: eager additive masks (two with a sliding mapping), or an SDPA sliding bool mask; every
    # sliding SDPA layer saves its converted (additive, dtype d) copy of the bool mask for backward
    # the training step passes no 2D attention mask (labels only): a sliding bool mask is batch-broadcast
    mask, sliding_mask_copy = act.attention_masks(spec, x, attention, s, batch_broadcast=True)
    if act.sdpa_math_path(spec, attention, x.cuda):
        sliding_mask_copy = 0  # the math path adds the converted mask to the scores and keeps neither
    sliding_layers = round(spec.num_sliding_layers * stage.layers / spec.num_layers) if spec.num_layers else 0
    if mode == "none" and sliding_mask_copy:
        saved_layers += sliding_mask_copy * sliding_layers * stage.in_flight_microbatches
    # the embedding output is the model forward's `inputs_embeds` local. An fp32 RMSNorm, or the
    # LayerNorm of a model without learned positions, saves it as layer 0's norm input (already in
    # `saved_layers`); a bf16/fp16 RMSNorm saves its fp32 upcast and a learned-position LayerNorm model
    # saves the sum with the position embeddings, so there it is a separate tensor that lives only
    # through the forward. With full checkpointing it is layer 0's checkpoint input.
    # An embedding dropout (transformers' GPT-2 `drop`, GPT-NeoX `emb_dropout`; lit-gpt has none) hands
    # layer 0 its output instead, and keeps its mask until the embedding's backward.
    embedding_dropout = (
        spec.embedding_dropout > 0 and stage.holds_embedding and w.training.framework in ("transformers", "unsloth")
    )
    embed_saved_by_norm = not embedding_dropout and (
        (spec.norm == "rms" and d >= 4) or (spec.norm == "layer" and not spec.learned_positions)
    )
    # under torch.compile layer 0's norm saves it in the compute dtype (in `saved_layers`)
    embed_out = x.tokens * x.h * d if (mode not in CHECKPOINTED and not embed_saved_by_norm and not compiled) else 0
    embedding_mask = x.tokens * x.h * act.dropout_mask_bytes(d, x.cuda) if embedding_dropout else 0
    # training forward: position_ids = cache_position.unsqueeze(0), so cos/sin (or the learned position
    # embeddings) have batch 1 (modeling_llama.LlamaModel.forward); the rope muls save cos and sin,
    # so they stay alive into backward
    positions = act.rope_tables_bytes(spec, s, d)
    # compiled: cos/sin are recomputed in backward from inv_freq, not saved
    kept_positions = 0 if (spec.learned_positions or compiled) else positions
    model_level = positions + s * 8 + mask + act.unread_masks(spec, x, attention, s, batch_broadcast=True)
    model_level += embedding_mask
    # with full checkpointing the masks and cos/sin are inputs of every checkpointed layer, so
    # torch.utils.checkpoint keeps them until that layer's backward
    kept_model_level = kept_positions + (mask if mode in CHECKPOINTED else 0) + embedding_mask
    return saved_layers, embed_out, model_level, kept_model_level, sliding_mask_copy, offloaded


def _activations(
    w: Workload,
    spec: ModelSpec,
    stage: parallel.Stage,
    x: act.Shape,
    states: _ModelStates,
    compile_: _Compiled,
    kept: act.Kept,
) -> _Activations:
    assert w.training is not None
    t, attention = w.training, w.runtime.attention
    d, compiled = x.d, compile_.layers
    saved_layers, embed_out, model_level, kept_model_level, sliding_mask_copy, offloaded = _forward_saved(
        w, spec, stage, x, compiled, kept
    )
    # the batch the training loop holds in every phase: input_ids and labels (int64); labels may be
    # input_ids itself (low), a collator may add an attention_mask (high)
    batch = Range(x.tokens * 8, 2 * x.tokens * 8, 3 * x.tokens * 8)
    full_ckpt = t.activation_checkpointing == "full"
    # per-op selective checkpointing (torchtitan) recomputes what it did not save, layer by layer, as full does
    op_sac = t.activation_checkpointing == "selective_op"
    checkpointed = full_ckpt or op_sac
    profile = profiles.workload_profile(w)
    first, last = stage.first_layer, stage.first_layer + stage.layers
    # every per-layer figure of the step, over the kinds of layer on the stage (`layer_views`), in one pass:
    # recompute: a recomputed layer's saved tensors (full checkpointing); backward: its MLP's (or mixer's) backward
    # transient; forward extra: a forward peak beyond what the layer keeps (V3.2's no-grad indexer), over every layer's
    # saved tensors, and under full checkpointing, where the layer keeps nothing, the whole of its forward (over the
    # checkpoint inputs, in the forward and again when backward recomputes it); attention backward: an eager
    # softmax's backward after the MLP's (its saved tensors freed); the MLP instant: a recomputed layer at its MLP's
    # backward, the output projection's saved input already freed; the post-norm instant: a sandwich-norm layer's
    # backward starting at its last norm over the whole recompute
    recompute = bwd_transient = fwd_extra = post_norm_peak = 0.0
    recomputed = checkpointed and not compiled
    kinds: list[_Kind] = []
    for _, view, vx, gqa_copies, kind_first in act.layer_kinds(spec, x, attention, first, last):
        saved_none = (
            profile.training_layer_saved(view, vx, attention, gqa_copies, "none", 1, kept) if checkpointed else 0.0
        )
        # what a recompute rebuilds: all of it (full), or what the per-op policy did not keep (its input and saved
        # outputs are among the stage's saved tensors already)
        if op_sac:
            saved_none = max(saved_none - act.op_selective_saved(view, vx), 0.0)
        backward = act.training_backward_transient(view, vx)
        extra = act.training_forward_extra(view, vx, attention)
        if extra and recomputed:
            extra += saved_none
        post_norm = act.post_norm_backward_transient(view, vx) if recomputed else 0.0
        layer_run = spec.run_at(kind_first)
        kinds.append(
            _Kind(
                first=kind_first,
                saved=saved_none,
                backward=backward,
                extra=extra,
                attention_backward=act.attention_backward_transient(view, vx, attention)
                - act.mlp_block_saved(view, vx, kept),
                mlp_instant=saved_none + backward - act.mlp_output_input_saved(view, vx, kept) if recomputed else 0.0,
                post_norm=saved_none + post_norm if post_norm else 0.0,
                retained=act.stored_kv_retained(view, vx) if recomputed else 0.0,
                layer_type=layer_run.mixer.kind if layer_run is not None else "full",
            )
        )
        recompute = max(recompute, saved_none)
        bwd_transient = max(bwd_transient, backward)
        fwd_extra = max(fwd_extra, extra)
        post_norm_peak = max(post_norm_peak, saved_none + post_norm if post_norm else 0.0)
    if stage.context > 1:  # a layer's context-parallel attention, in its forward and again in its backward
        cp_forward, cp_backward = act.context_parallel_attention(x, stage.context)
        fwd_extra += cp_forward
        bwd_transient += cp_backward
    compiled_recompute = act.compiled_saved_per_layer(spec, x, kept) if full_ckpt and compiled else 0.0
    if compiled_recompute:
        recompute = compiled_recompute
    mask_copy = sliding_mask_copy if checkpointed else 0.0  # a recomputed sliding layer saves its mask copy again
    if recompute and mask_copy:
        recompute += mask_copy
    if post_norm_peak:
        post_norm_peak += mask_copy
    full = t.method == "full"
    fused = frameworks.fused_loss(t.framework, t.fused_loss)
    if stage.holds_head:
        # a frozen head (LoRA, QLoRA: transformers keeps it out of 4-bit) keeps no input
        final_norm = profile.final_norm_saved(spec, x, output_saved=full, weight_trained=kept.norm_weights)
        if compiled:  # its input and output in the compute dtype and its rsqrt per row
            final_norm = 2 * x.tokens * x.h * d + x.tokens * 4
        loss_forward, loss_fwd, loss_keep = _loss(w, spec, x, compile_.loss)
    else:
        final_norm = loss_forward = loss_fwd = loss_keep = 0
    # a V×h gradient (head, or embedding) in the gradient dtype, on this tensor-parallel rank
    vocab_grad = (spec.vocab_size * spec.embed_dim / stage.tensor) * nbytes(states.grad_prec)
    head_grad = (vocab_grad if (stage.holds_head and full) else 0) / states.grad_shards
    emb_grad_transient = vocab_grad if (spec.tie_word_embeddings and full and stage.holds_embedding) else 0

    fwd_act = saved_layers + embed_out + model_level + max(final_norm + loss_forward, fwd_extra)
    # backward start: the loss's backward (over the final norm's saved input), or the last layer's recompute and
    # backward, after the loss's and the final norm's backward have freed their saved tensors (what the training loop
    # itself keeps of the loss, `loss_keep`, is still there)
    recompute_peak = max(recompute + bwd_transient, fwd_extra if recomputed else 0.0, post_norm_peak)
    bwd_start_act = saved_layers + kept_model_level + max(final_norm + loss_fwd, loss_keep + recompute_peak)
    untied_emb_grad = (
        vocab_grad / states.grad_shards if (not spec.tie_word_embeddings and full and stage.holds_embedding) else 0
    )
    # late backward: each kind of layer at its first layer on the stage, the latest moment one of its layers runs
    # backward (every later layer's gradients written, the untied embedding's not: EmbeddingBackward0 allocates it
    # only after the first layer's backward has returned), cos/sin (and checkpointed masks) still saved, the gradient
    # of the layer's output alive. Its instants, each with the gradients of its own layer not yet written then: its
    # MLP's backward (only the output projections' weight gradients written), an eager attention's softmax backward
    # after it (the MLP's gradients written, its saved tensors freed), a recomputed forward's own peak (V3.2's
    # indexer) and a sandwich-norm layer's last norm (none of its gradients); the largest is the phase
    grad_bytes = nbytes(states.grad_prec) / (stage.tensor * states.grad_shards) if full else 0.0
    hidden = x.tokens * x.h * d
    candidates: list[tuple[float, float]] = []  # (activations, gradients not yet written)
    for kind in kinds:
        layer_recompute = (compiled_recompute or kind.saved) + mask_copy if checkpointed else 0.0
        # later layers of another type leave their stored k/v (and history) alive (one per type: the latest)
        retained = max(
            (k.retained for k in kinds if k.layer_type != kind.layer_type and k.first > kind.first), default=0.0
        )
        base = layer_recompute + hidden + kept_model_level + retained
        mlp_instant = base + kind.backward
        if recomputed:
            mlp_instant = kept_model_level + mask_copy + kind.mlp_instant + retained
        before = layers_parameters(spec, first, kind.first) * grad_bytes  # the layers not reached yet
        mixer_grad = mixer_parameters(spec, kind.first) * grad_bytes
        mlp_all, mlp_out = mlp_parameters(spec, kind.first)
        mlp_in_grad, layer_grad = (mlp_all - mlp_out) * grad_bytes, (mlp_all * grad_bytes) + mixer_grad
        instants = [
            (mlp_instant, before + mixer_grad + mlp_in_grad),
            (base + kind.attention_backward, before + mixer_grad),
        ]
        if recomputed and kind.extra:
            instants.append((kept_model_level + hidden + kind.extra + retained, before + layer_grad))
        if kind.post_norm:
            instants.append((kept_model_level + hidden + kind.post_norm + mask_copy + retained, before + layer_grad))
        candidates += instants
    bwd_layer0_act, layer0_absent_grad = max(candidates, key=lambda i: i[0] - i[1], default=(0.0, 0.0))
    # end of backward (EmbeddingBackward0): all gradients over the gradient of the embedding output
    # alone (+ a tied embedding's dense gradient, which EmbeddingBackward0 computes from it)
    bwd_end_act = x.tokens * x.h * d if stage.holds_embedding else 0
    # tied weight used twice (head matmul + embedding lookup): once EmbeddingBackward0 has returned (its
    # grad_output freed) autograd sums its contribution with the head's (counted in `grads`), so three
    # V·h tensors are live at that aten::add: measured in round 4 in fp32 and bf16 alike
    tied_sum = emb_grad_transient if emb_grad_transient > bwd_end_act else 0
    if tied_sum:
        bwd_end_act = 0
    return _Activations(
        batch=batch,
        forward=fwd_act,
        backward_start=bwd_start_act,
        # the LM head's gradient, over the full logits' gradient (a fused loss: the hidden states' gradient)
        backward_head=saved_layers + kept_model_level + final_norm + x.tokens * (x.h if fused else x.vocab) * d,
        backward_first_layer=bwd_layer0_act,
        backward_end=bwd_end_act,
        head_grad=head_grad,
        untied_embedding_grad=untied_emb_grad,
        first_layer_absent_grad=layer0_absent_grad,
        embedding_grad_extra=emb_grad_transient + tied_sum,
        offloaded=offloaded,
    )


def _loss(w: Workload, spec: ModelSpec, x: act.Shape, compiled: bool) -> tuple[float, float, float]:
    """The loss's (forward, backward-start peak, saved through backward).

    A fused linear cross-entropy (cut cross-entropy: logits computed block by block in the kernel, never stored)
    keeps the log-sum-exp and the loss per token (fp32) and at its backward writes the hidden states' gradient."""
    assert w.training is not None
    chunks = w.training.loss_chunks
    if frameworks.fused_loss(w.training.framework, w.training.fused_loss):
        lse = x.tokens * 4 * 2
        return lse, lse + x.tokens * x.h * x.d, 0.0
    if compiled:
        return act.compiled_chunked_loss(x, spec, chunks)
    profile = profiles.workload_profile(w)
    return profile.loss_forward(x, spec, chunks), profile.loss_peak(x, spec, chunks), profile.loss_saved(x, spec)


def _workspace(
    w: Workload,
    spec: ModelSpec,
    stage: parallel.Stage,
    layer_p: float,
    trainable: float,
    states: _ModelStates,
    x: act.Shape,
) -> Range:
    """Alive in every phase: ZeRO-3 gathered layers, DDP/ZeRO buckets, a QLoRA dequantized matrix."""
    assert w.training is not None
    layer_params_full = (layer_p / max(stage.layers, 1)) if stage.layers else 0
    # ZeRO-3: two layers' full parameters gathered at once
    zero3_gather = (
        2 * layer_params_full * nbytes(w.precision.weights) if stage.zero_stage >= 3 and stage.shards > 1 else 0
    )
    buckets = 0.0
    if stage.shards > 1:
        if stage.zero_stage == 0:
            buckets = states.grads_full  # DDP gradient buckets (gradient_as_bucket_view=False)
        else:
            buckets = min(5e8, trainable) * nbytes(states.grad_prec)  # DeepSpeed reduce bucket 5e8 elements
    ws_fixed = Range.exact(zero3_gather + buckets)
    qlora_dequant = (
        ws.dequantized_weight(spec.hidden_size, max(x.inter, x.q), x.d) if w.training.method == "qlora" else 0
    )
    return ws_fixed + Range.exact(qlora_dequant)


def peft_fp32_adapters(w: Workload, stage: parallel.Stage) -> bool:
    """Whether the run is PEFT's LoRA with fp32 adapters on a 16-bit base: the transformers framework (HF Trainer /
    TRL with PEFT), bf16 or fp16 weights and ``master_weights: fp32``, outside ZeRO (one process, or DDP).

    ``get_peft_model`` casts 16-bit adapters to fp32 by default (``autocast_adapter_dtype=True``: peft 0.21.2
    mapping_func.py:110, tuners/tuners_utils.py ``_cast_adapter_dtype``), and TRL turns that off only under DeepSpeed
    ZeRO-3 (trl 1.16.0 trainer/sft_trainer.py:846-870), where DeepSpeed keeps the fp32 master copy instead. So the
    fp32 adapters are the master copy (no second one), their gradients are fp32, and each adapted projection's input
    is copied to fp32 (``components.training.lora_input_bytes``); measured on CPU against peft 0.21.2
    (tests/engine/test_training_mechanisms.py)."""
    assert w.training is not None
    t, prec = w.training, w.precision
    return (
        t.framework == "transformers"
        and t.method == "lora"
        and prec.weights in ("bf16", "fp16")
        and prec.master_weights == "fp32"
        and stage.zero_stage == 0
    )


def _kept(w: Workload, stage: parallel.Stage, x: act.Shape) -> act.Kept:
    assert w.training is not None
    t = w.training
    targets: list[str] = list(t.lora.target_modules)
    widths = profiles.workload_profile(w).lora_dropout_widths(tr.adapted_projections(targets), x)
    adapter_d = float(nbytes("fp32")) if peft_fp32_adapters(w, stage) else None
    input_bytes = tr.lora_input_bytes(widths, adapter_d or x.d, x.d, t.lora.dropout, w.runtime.device == "cuda")
    return tr.kept_inputs(
        t.method, targets, t.lora.rank, w.runtime.bitsandbytes_version, t.lora.dropout, input_bytes, adapter_d
    )


def _notes(
    w: Workload, stage: parallel.Stage, params: _Trainable, states: _ModelStates, compiled: _Compiled
) -> dict[str, str]:
    assert w.training is not None
    t, prec = w.training, w.precision
    notes: dict[str, str] = {}
    if states.step_temp.high:
        temp = states.step_temp
        notes["workspace"] = f"optimizer step: {t.optimizer} ({states.optimizer_impl}) temporary {temp.bytes:,} B" + (
            f" (torch's default on {w.runtime.device}; {temp.low:,}–{temp.high:,} B over foreach, fused, for-loop)"
            if t.optimizer_impl is None
            else ""
        )
    grad_note = f"{params.trainable:,} trainable parameters × {nbytes(states.grad_prec):g} B ({states.grad_prec})" + (
        f" / {states.grad_shards} (ZeRO-{stage.zero_stage})" if states.grad_shards > 1 else ""
    )
    notes["weights"] = params.weights_note
    notes["gradients"] = grad_note + "; absent in forward (zero_grad(set_to_none=True))"
    peft_fp32 = peft_fp32_adapters(w, stage)
    notes["optimizer_state"] = (
        f"{t.optimizer}: {states.per_param_optimizer:g} B/param"
        + (
            " (PEFT's fp32 adapters are the master copy: autocast_adapter_dtype, no second copy)"
            if peft_fp32
            else (" incl. fp32 master copy" if prec.master_weights else " (states in the parameter dtype)")
        )
        + (f" / {states.optimizer_shards} (ZeRO-{stage.zero_stage})" if states.optimizer_shards > 1 else "")
    )
    notes["activations"] = (
        f"{t.activation_checkpointing} recomputation, {w.runtime.attention} attention,"
        f" {t.micro_batch_size}×{t.sequence_length} tokens × {stage.layers} layers"
        + (
            f" × {stage.in_flight_microbatches} in-flight micro-batches (1F1B)"
            if stage.in_flight_microbatches > 1
            else ""
        )
        + (
            "; fused linear cross-entropy (no logits)"
            if stage.holds_head and frameworks.fused_loss(t.framework, t.fused_loss)
            else ("; logits, fp32 upcast and cross-entropy copies" if stage.holds_head else "")
            + (f" in {t.loss_chunks} chunks" if stage.holds_head and t.loss_chunks > 1 else "")
        )
        + f"; {params.train_note}"
        + ("; PEFT's fp32 adapters: each adapted projection's input copied to fp32 and kept" if peft_fp32 else "")
        + _compile_note(w, compiled)
    )
    return notes


def _compile_note(w: Workload, compiled: _Compiled) -> str:
    if not w.runtime.compile:
        return ""
    loss = "; torch.compile of the chunked cross-entropy: the logits and two fp32 values per row" * compiled.loss
    if compiled.layers:
        return loss + "; torch.compile: the partitioner's saved set"
    return (
        loss + "; torch.compile not modelled for these layers (QLoRA, LoRA dropout, MoE, fused or eager-attention"
        " layers): eager layers"
    )


_PHASE_FIELDS = ("forward", "backward_start", "backward_head", "backward_first_layer", "backward_end")


def _eager_fallback_note(compiled: _Activations, eager: _Activations) -> str:
    """What the activations would hold, at their largest phase, if torch.compile ran the modelled parts eagerly."""
    compiled_peak = max(getattr(compiled, f) for f in _PHASE_FIELDS) + compiled.batch.bytes
    eager_peak = max(getattr(eager, f) for f in _PHASE_FIELDS) + eager.batch.bytes
    return (
        f"; if torch.compile falls back to eager for these parts (a graph break, suppressed errors), the activations"
        f" reach {eager_peak:,.0f} B at their largest phase instead of {compiled_peak:,.0f} B: not in the range"
    )


def dropout_assumption(w: Workload) -> str:
    """The budget's line naming the dropout settings it read, their values and where each came from."""
    assert w.training is not None and w.model is not None
    spec = w.spec
    if w.training.framework == "litgpt":
        return "dropout: none (lit-gpt's layers run no dropout: SDPA with dropout_p=0.0, model.py:251)"
    if w.training.framework in ("torchtune", "torchtitan"):
        return (
            f"dropout: none ({w.training.framework}'s Llama-family builders set attn_dropout 0.0 and no residual"
            " dropout)"
        )
    if not spec.dropout_read:
        if w.model.architecture is not None:
            return "dropout: none (a given architecture carries no dropout settings)"
        return f"dropout: not read for model_type {spec.model_type!r}; budgeted as if no dropout runs"
    line = "dropout read from the model config: " + spec.dropout_read
    if not (spec.attention_dropout or spec.hidden_dropout or spec.embedding_dropout):
        return line + "; all 0: no dropout runs"
    cuda = w.runtime.device == "cuda"
    line += "; each dropout keeps its mask for backward (" + ("a bool mask" if cuda else "its noise, compute dtype")
    line += ")"
    if spec.attention_dropout and w.runtime.attention == "eager":
        line += "; eager attention keeps the dropout's mask and output per score"
    elif spec.attention_dropout and act.sdpa_math_path(spec, w.runtime.attention, cuda):
        line += (
            "; attention dropout takes SDPA off its fused CPU kernel onto the math path: three fp32 score-sized"
            " tensors and fp32 q, k, v per layer"
        )
    elif spec.attention_dropout:
        line += "; SDPA's fused CUDA kernels take the dropout themselves (a seed and offset, no mask; not measured)"
    return line
