"""`estimate(workload) -> Budget`: the per-device peak as the maximum over phases, not a sum.

Each phase lists the components alive together at its peak (inference: prefill, decode; training:
forward, backward, optimizer_step). A component's reported value is its own largest value over the
phases; the total is the largest phase (plus allocator fragmentation), and the budget names it.
With pipeline parallelism the first and last stages are both budgeted and the busier one reported.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from . import parallel, vllm
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
from .components import activations as act
from .components import fragmentation as frag
from .components import host as host_mod
from .components import kv_cache as kv
from .components import runtime as rt
from .components import training as tr
from .components import workspace as ws
from .components.weights import weight_bytes
from .dtypes import nbytes
from .models import ModelSpec, parameter_count
from .schema import Workload

MIB = 2**20
GIB = 2**30
# CUDA graphs on the device (inside the pool's deduction only from 0.21): estimate 0.36 GiB, measured up to
# 2.37 GiB, and negative (capture reuses freed memory) on large dense models (budgets/engine/vllm.py)
VLLM_CUDA_GRAPHS = Range(0, vllm.CUDA_GRAPH_ESTIMATE_BYTES, vllm.CUDA_GRAPH_HIGH_BYTES)

# Uncertainty bands of modelled (not exact) terms: (low factor, high factor)
ACTIVATION_BAND_CPU = (0.9, 1.15)
ACTIVATION_BAND_CUDA = (0.8, 1.3)


@dataclass
class _Stage:
    name: str
    phases: dict[str, dict[str, Range]] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)
    fixed: dict[str, Range] = field(default_factory=dict)  # alive in every phase (workspace, runtime)
    transient_for_fragmentation: int = 0
    live_tensors: int = 0
    preallocated: bool = False
    serving: ServingPlan | None = None
    checkpoint_bytes: int = 0
    converted_bytes: int = 0
    training_checkpoint_bytes: int = 0


def _param_tensors(spec: ModelSpec, layers: int) -> int:
    per_layer = 4 + (3 if spec.qkv_bias else 0) + (1 if spec.o_bias else 0) + spec.norms_per_layer
    per_layer *= 2 if spec.norm == "layer" else 1
    per_layer += 2 if spec.qk_norm else 0
    per_layer += spec.mlp_matrices * (spec.num_experts if spec.is_moe else 1) + (1 if spec.is_moe else 0)
    return per_layer * layers + 3


def _shape(
    spec: ModelSpec, stage: parallel.Stage, b: int, s: int, k: int, d: float, fp16_cuda: bool = False
) -> act.Shape:
    t = stage.tensor
    return act.Shape(
        b=b,
        s=s,
        k=k,
        h=spec.hidden_size,
        q=stage.heads * spec.head_dim,
        kv=stage.kv_heads * spec.head_dim,
        heads=stage.heads,
        inter=math.ceil(spec.intermediate_size / t),
        vocab=math.ceil(spec.vocab_size / t),
        d=d,
        softmax_copy=not fp16_cuda,
    )


def _band(device: str) -> tuple[float, float]:
    return ACTIVATION_BAND_CPU if device == "cpu" else ACTIVATION_BAND_CUDA


# --- inference ---------------------------------------------------------------------------------


def _inference_stage(
    w: Workload, stage: parallel.Stage, weights: Range, device_memory_bytes: int | None, device_name: str | None
) -> _Stage:
    assert w.inference is not None
    spec = w.spec
    inf = w.inference
    device = w.runtime.device
    attention = w.runtime.attention
    d = nbytes(w.precision.compute or "bf16")
    fp16_cuda = device == "cuda" and (w.precision.compute or "bf16") == "fp16"
    kv_prec = w.precision.kv_cache or "bf16"
    b, s, n = inf.concurrent_sessions, inf.max_input_tokens, inf.max_output_tokens
    layout = inf.kv_cache_layout or "paged"
    lo, hi = _band(device)
    out = _Stage(stage.name)
    layers = stage.layers
    per_tok = kv.kv_bytes_per_token(spec, stage.kv_heads, layers, kv_prec)
    gqa_sdpa = attention != "eager" and spec.head_dim <= 256

    if inf.engine == "vllm":
        return _vllm_stage(w, stage, weights, device_memory_bytes, out, device_name)

    # transformers / generic: prefill all prompts together, then decode one token per step
    longest = s + n
    if layout == "dynamic":
        # sliding layers still hold the whole prompt's storage after prefill (a view keeps it)
        kv_prefill = kv.kv_cache_bytes(spec, stage.kv_heads, layers, kv_prec, "contiguous", s, b, window=False)
        kv_final = kv.kv_cache_bytes(spec, stage.kv_heads, layers, kv_prec, "contiguous", longest - 1, b)
        growth = kv.dynamic_growth_transient(spec, stage.kv_heads, kv_prec, longest - 1, b)
        kv_note = (
            f"dynamic cache grown by torch.cat to {longest - 1} positions × {b} sequences"
            " + one layer's K copy while growing"
            + (
                f"; sliding layers keep {spec.sliding_window} positions, but the whole prompt's storage"
                " until the first decode step"
                if spec.sliding_window and spec.num_sliding_layers and s > spec.sliding_window
                else ""
            )
        )
        attend_prefill, attend_decode = s, longest - 1
        decode_gqa = gqa_sdpa
    else:
        # transformers generate sizes its StaticCache to max_length - 1 positions (the last token is
        # never fed back; generation/utils.py `_prepare_cache_for_generation`)
        slots = longest - 1 if (layout == "contiguous" and inf.engine == "transformers") else longest
        kv_final = kv.kv_cache_bytes(spec, stage.kv_heads, layers, kv_prec, layout, slots, b, inf.kv_block_tokens)
        kv_prefill = kv_final
        growth = 0
        out.preallocated = True
        kv_note = (
            f"{layout} cache preallocated for {slots} positions × {b} sequences"
            if layout == "contiguous"
            else f"paged blocks of {inf.kv_block_tokens} tokens, ≤ one partly filled block per sequence"
        )
        # a static cache attends over the whole preallocated length; in decode SDPA gets a padding
        # mask, so no enable_gqa, but a single query is packed per KV head (sdpa_attention.py pack_gqa)
        # instead of repeat_kv copies
        attend_prefill = attend_decode = slots if layout == "contiguous" else s
        decode_gqa = gqa_sdpa
        if layout == "paged":
            attend_decode = longest - 1
    kv_note += f"; {per_tok:,} B/token/device across {layers} layers ({kv_prec})"

    # SDPA prefill runs mask-free with is_causal even over a static cache (the cache is empty,
    # masking_utils._ignore_causal_mask_sdpa), so GQA goes through enable_gqa (use_gqa_in_sdpa)
    prefill_gqa = gqa_sdpa
    xp = _shape(spec, stage, b, s, attend_prefill, d, fp16_cuda)
    _, mask_copy = act.attention_masks(spec, xp, attention, attend_prefill)
    prefill_layer = act.inference_forward_transient(
        spec, xp, attention, gqa_copies=not prefill_gqa, mask_copy=mask_copy
    )
    # a dynamic cache gets no up-front 4D masks from generate: a sliding bool mask is batch-broadcast
    broadcast_mask = layout == "dynamic"
    model_level = act.model_level_inference(spec, xp, attention, attend_prefill, broadcast_mask)
    # the new last-position logits exist only at the head, after the layers' transients are freed
    logits = b * xp.vocab * d if stage.holds_head else 0
    # besides input_ids and position_ids (model_level): the caller's attention_mask, and the copy of the
    # prompt ids prepare_inputs_for_generation makes (`input_ids.clone(memory_format=...)`, int64)
    prompt_ids = 2 * xp.tokens * 8
    prefill_act = model_level + prompt_ids + max(prefill_layer, 2 * xp.tokens * xp.h * d + logits)

    xd = _shape(spec, stage, b, 1, attend_decode, d, fp16_cuda)
    _, mask_copy_d = act.attention_masks(spec, xd, attention, attend_decode)
    decode_layer = act.inference_forward_transient(
        spec, xd, attention, gqa_copies=not decode_gqa, mask_copy=mask_copy_d
    )
    decode_model = act.model_level_inference(spec, xd, attention, attend_decode, broadcast_mask)
    # int64 ids at the end of generate: the caller's input_ids and attention_mask and the prefill
    # position_ids (b·s each), input_ids grown by cat to the longest length and position_ids to one less
    # (generation/utils.py `_update_model_kwargs_for_generation`; the all-ones mask is dropped)
    generation_ids = b * (3 * s + 2 * longest - 1) * 8
    prev_scores = act.previous_step_scores(b, xp.vocab) if stage.holds_head else 0
    # in a layer the dynamic cache's growth copy (kv_cache component) is alive; at the head it is not
    decode_act = decode_model + generation_ids + prev_scores + max(decode_layer, 2 * b * xp.h * d + logits - growth)
    # between forwards: logits processing of the last step, over the final cache (no forward alive)
    sample_act = act.logits_sample(b, xp.vocab, d) + generation_ids if stage.holds_head else 0
    sample_low = act.logits_sample(b, xp.vocab, d, processors=0) + generation_ids if stage.holds_head else 0

    act_note = (
        f"prefill of {b}×{s} tokens ({attention} attention"
        + (", b·heads·s·s scores materialized" if attention == "eager" else "")
        + f"), last-position logits (+fp32 score copies between forwards, {inf.engine} generate),"
        + f" decode over {attend_decode} positions"
    )
    out.phases["prefill"] = {
        "weights": weights,
        "kv_cache": Range.exact(kv_prefill),
        "activations": Range.spread(prefill_act, lo, hi),
    }
    out.phases["decode"] = {
        "weights": weights,
        "kv_cache": Range.exact(kv_final + growth),  # torch.cat always copies while growing
        "activations": Range.spread(decode_act, lo, hi),
    }
    if sample_act:
        # with min_new_tokens = max_output_tokens (a full-length run) two eos-suppressing processors
        # add fp32 [b, V] clones; without them only the fp32 copy (the low end)
        out.phases["sample"] = {
            "weights": weights,
            "kv_cache": Range.exact(kv_final),
            "activations": Range(int(sample_low), int(sample_act), int(sample_act * hi)),
        }
    out.notes["kv_cache"] = kv_note
    out.notes["activations"] = act_note
    out.transient_for_fragmentation = int(
        max(prefill_act, decode_act, sample_act) + (kv_final if layout == "dynamic" else 0)
    )
    out.live_tensors = _param_tensors(spec, layers) + 2 * layers
    return out


def _vllm_stage(
    w: Workload,
    stage: parallel.Stage,
    weights: Range,
    device_memory_bytes: int | None,
    out: _Stage,
    device_name: str | None,
) -> _Stage:
    """vLLM: weights + the profile run's peak + the KV pool it sizes from T (budgets/engine/vllm.py)."""
    assert w.inference is not None and w.inference.max_model_len is not None
    spec, inf = w.spec, w.inference
    d = nbytes(w.precision.compute or "bf16")
    kv_prec = w.precision.kv_cache or "bf16"
    version = w.runtime.engine_version or vllm.DEFAULT_VLLM_VERSION
    util = inf.gpu_memory_utilization or vllm.default_gpu_memory_utilization(version)
    b, longest, block = inf.concurrent_sessions, inf.max_request_tokens, inf.kv_block_tokens
    batched, seqs = vllm.scheduler_defaults(version, device_memory_bytes, device_name)
    batched, seqs = inf.max_num_batched_tokens or batched, inf.max_num_seqs or seqs
    kv_heads = vllm.kv_heads_on_rank(spec, stage.tensor)
    per_tok = kv.kv_bytes_per_token(spec, kv_heads, stage.layers, kv_prec)
    needed = kv.kv_cache_bytes(spec, kv_heads, stage.layers, kv_prec, "paged", longest, b, block)
    weights = weights + Range.exact(vllm.rotary_cache_bytes(spec, d))
    forward, sampler = vllm.profile_activations(spec, stage.tensor, batched, seqs, d, stage.holds_head)
    activations = Range.spread(max(forward, sampler), *ACTIVATION_BAND_CUDA)
    pool_in = vllm.PoolInputs(
        version=version,
        utilization=util,
        device_memory_bytes=device_memory_bytes,
        weights_bytes=weights.bytes,
        activations_bytes=activations.bytes,
        tensor=stage.tensor,
        page_bytes_per_token=per_tok,
        block_tokens=block,
        max_model_len=inf.max_model_len,
        longest_request=longest,
        sessions=b,
        max_num_batched_tokens=batched,
        max_num_seqs=seqs,
    )
    out.serving = plan = vllm.serving_plan(pool_in, needed)
    kv_value = Range.exact(needed)
    kv_note = (
        f"paged KV the workload needs: {b} × {longest} tokens in blocks of {block}; {per_tok:,} B/token/device;"
        f" vLLM needs T ≥ {vllm.needed_device_memory(pool_in, needed) / GIB:,.2f} GiB (cudaMemGetInfo) to hold it"
    )
    if plan.kv_pool_bytes is not None:
        pool = plan.kv_pool_bytes
        kv_value = Range(min(needed, pool), max(pool, needed), max(pool, needed)) if plan.starts else kv_value
        kv_note = (
            f"vLLM KV pool = {util:g} × {device_memory_bytes:,} B − weights − profile-run peak − non-torch"
            + (" − CUDA-graph estimate" if vllm.profile_for(version).graphs_in_pool else "")
            + f" = {pool:,} B ({plan.kv_pool_tokens:,} tokens, {plan.max_concurrency}× max_model_len"
            f" {inf.max_model_len}); the workload needs {needed:,} B" + (f"; {plan.reason}" if plan.reason else "")
        )
    out.preallocated = True
    out.phases["profile"] = {"weights": weights, "activations": activations}
    out.phases["serve"] = {"weights": weights, "kv_cache": kv_value, "activations": activations}
    # outside the pool on the device: CUDA graphs, and the lazily loaded modules (non-torch growth)
    out.fixed["workspace"] = VLLM_CUDA_GRAPHS + Range.exact(vllm.non_torch_bytes(vllm.profile_for(version), 1))
    out.notes["kv_cache"] = kv_note
    out.notes["activations"] = (
        f"vLLM profile run: forward over {batched} batched tokens {forward:,} B; sampler over"
        f" {min(seqs, batched)} rows × {spec.vocab_size:,} vocabulary {sampler:,} B; the larger is the peak"
    )
    out.notes["workspace"] = (
        "cuBLAS workspace; CUDA graphs (captured after the KV cache); non-torch growth (lazily loaded modules)"
    )
    out.transient_for_fragmentation = activations.bytes
    out.live_tensors = _param_tensors(spec, stage.layers)
    return out


# --- training ----------------------------------------------------------------------------------


def _training_stage(
    w: Workload, stage: parallel.Stage, layer_p: float, emb_p: float, head_p: float, total_params: int
) -> _Stage:
    assert w.training is not None
    spec = w.spec
    t = w.training
    prec = w.precision
    device = w.runtime.device
    attention = w.runtime.attention
    d = nbytes(prec.compute or "bf16")
    lo, hi = _band(device)
    out = _Stage(stage.name)
    device_params = layer_p + emb_p + head_p
    exact_params = total_params if (stage.name == "only" and stage.tensor == 1) else device_params

    # weights (ZeRO-3 partitions them over the data-parallel group)
    w_bytes, w_note = weight_bytes(
        layer_p, emb_p, head_p, prec.weights, w.model.weights_bytes if w.model else None, total_params
    )
    if (
        exact_params == total_params
        and prec.weights in ("fp32", "bf16", "fp16")
        and not (w.model and w.model.weights_bytes)
    ):
        w_bytes = int(total_params * nbytes(prec.weights))
    z3 = stage.zero_shards_parameters
    w_bytes = w_bytes // z3 if w_bytes % z3 == 0 else math.ceil(w_bytes / z3)

    # trainable parameters
    if t.method == "full":
        trainable = exact_params
        adapter_bytes = 0
        train_note = "all parameters trainable"
    else:
        x0 = _shape(spec, stage, 1, 1, 1, d)
        trainable = tr.lora_parameters(
            spec.hidden_size, x0.q, x0.kv, x0.inter, stage.layers, t.lora.rank, list(t.lora.target_modules)
        )
        adapter_bytes = int(trainable * nbytes(prec.master_weights or prec.compute or "bf16"))
        train_note = (
            f"LoRA rank {t.lora.rank} on {', '.join(t.lora.target_modules)}: {trainable:,} trainable parameters"
        )
    weights = Range.exact(w_bytes + adapter_bytes)

    grad_prec = prec.gradients or prec.weights
    if grad_prec not in ("fp32", "bf16", "fp16"):
        grad_prec = "bf16"
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
        prec.master_weights,
        spec.hidden_size,
    )
    o_shards = stage.zero_shards_optimizer
    opt_total = trainable * per_param_opt
    opt_bytes = opt_total / o_shards
    opt_bytes = int(opt_bytes) if opt_bytes == int(opt_bytes) else math.ceil(opt_bytes)
    step_scalars = 0
    if device == "cpu":
        n_tensors = (
            _param_tensors(spec, stage.layers) if t.method == "full" else 2 * stage.layers * len(t.lora.target_modules)
        )
        step_scalars = tr.adam_step_tensors_bytes(t.optimizer, n_tensors)
        opt_bytes += step_scalars
    # AdamW-step ranges (round 4): low counts no `step` scalars, since `_param_tensors` is only an upper
    # bound (fused experts / projections, LayerNorm models: up to 184 tensors, 736 B, too many measured)
    optimizer = Range(opt_bytes - step_scalars, opt_bytes, opt_bytes)
    step_temp = (
        trainable * tr.optimizer_step_transient_per_param(t.optimizer, prec.weights, prec.master_weights) / o_shards
    )

    # activations
    b, s = t.micro_batch_size, t.sequence_length
    fp16_cuda = device == "cuda" and (prec.compute or "bf16") == "fp16"
    x = _shape(spec, stage, b, s, s, d, fp16_cuda)
    gqa_sdpa = attention != "eager" and spec.head_dim <= 256
    sp_t = stage.tensor if stage.sequence_parallel else 1
    mode = t.activation_checkpointing
    per_layer = act.training_saved_per_layer(spec, x, attention, not gqa_sdpa, mode, sp_t)
    saved_layers = per_layer * stage.layers * stage.in_flight_microbatches
    # masks: eager additive masks (two with a sliding mapping), or an SDPA sliding bool mask; every
    # sliding SDPA layer saves its converted (additive, dtype d) copy of the bool mask for backward
    # the training step passes no 2D attention mask (labels only): a sliding bool mask is batch-broadcast
    mask, sliding_mask_copy = act.attention_masks(spec, x, attention, s, batch_broadcast=True)
    sliding_layers = round(spec.num_sliding_layers * stage.layers / spec.num_layers) if spec.num_layers else 0
    if mode == "none" and sliding_mask_copy:
        saved_layers += sliding_mask_copy * sliding_layers * stage.in_flight_microbatches
    # the embedding output is the model forward's `inputs_embeds` local. An fp32 RMSNorm, or the
    # LayerNorm of a model without learned positions, saves it as layer 0's norm input (already in
    # `saved_layers`); a bf16/fp16 RMSNorm saves its fp32 upcast and a learned-position LayerNorm model
    # saves the sum with the position embeddings, so there it is a separate tensor that lives only
    # through the forward. With full checkpointing it is layer 0's checkpoint input.
    embed_saved_by_norm = (spec.norm == "rms" and d >= 4) or (spec.norm == "layer" and not spec.learned_positions)
    embed_out = x.tokens * x.h * d if (mode != "full" and not embed_saved_by_norm) else 0
    # training forward: position_ids = cache_position.unsqueeze(0), so cos/sin (or the learned position
    # embeddings) have batch 1 (modeling_llama.LlamaModel.forward); the rope muls save cos and sin,
    # so they stay alive into backward
    positions = act.rope_tables_bytes(spec, s, d)
    kept_positions = 0 if spec.learned_positions else positions
    model_level = positions + s * 8 + mask + act.unread_masks(spec, x, attention, s, batch_broadcast=True)
    # with full checkpointing the masks and cos/sin are inputs of every checkpointed layer, so
    # torch.utils.checkpoint keeps them until that layer's backward
    kept_model_level = kept_positions + (mask if mode == "full" else 0)
    # the batch the training loop holds in every phase: input_ids and labels (int64); labels may be
    # input_ids itself (low), a collator may add an attention_mask (high)
    batch = Range(x.tokens * 8, 2 * x.tokens * 8, 3 * x.tokens * 8)
    recompute = act.training_layer_recompute(spec, x, attention, not gqa_sdpa) if mode == "full" else 0
    if recompute and sliding_mask_copy:
        recompute += sliding_mask_copy
    bwd_transient = act.training_backward_transient(spec, x)
    if stage.holds_head:
        final_norm = act._norm_saved(spec, x)
        loss_fwd = act.loss_peak(x, spec)
        loss_keep = act.loss_saved(x, spec)
    else:
        final_norm = loss_fwd = loss_keep = 0
    head_grad = (
        (spec.vocab_size * spec.embed_dim / stage.tensor) * nbytes(grad_prec)
        if (stage.holds_head and t.method == "full")
        else 0
    )
    head_grad = head_grad / g_shards
    emb_grad_transient = (
        (spec.vocab_size * spec.embed_dim / stage.tensor) * nbytes(grad_prec)
        if (spec.tie_word_embeddings and t.method == "full" and stage.holds_embedding)
        else 0
    )

    fwd_act = (
        saved_layers + embed_out + model_level + final_norm + (act.loss_forward(x, spec) if stage.holds_head else 0)
    )
    bwd_start_act = saved_layers + kept_model_level + final_norm + max(loss_fwd, loss_keep + recompute + bwd_transient)
    # late backward, the stage's first layer: its recompute and gradients, the gradient of its input,
    # cos/sin (and checkpointed masks) still saved; every parameter gradient exists but the untied
    # embedding's, which EmbeddingBackward0 allocates only after this layer's backward has returned
    bwd_layer0_act = recompute + bwd_transient + x.tokens * x.h * d + kept_model_level
    untied_emb_grad = (
        (spec.vocab_size * spec.embed_dim / stage.tensor) * nbytes(grad_prec) / g_shards
        if (not spec.tie_word_embeddings and t.method == "full" and stage.holds_embedding)
        else 0
    )
    # end of backward (EmbeddingBackward0): all gradients over the gradient of the embedding output
    # alone (+ a tied embedding's dense gradient, which EmbeddingBackward0 computes from it)
    bwd_end_act = x.tokens * x.h * d if stage.holds_embedding else 0
    # tied weight used twice (head matmul + embedding lookup): once EmbeddingBackward0 has returned (its
    # grad_output freed) autograd sums its contribution with the head's (counted in `grads`), so three
    # V·h tensors are live at that aten::add: measured in round 4 in fp32 and bf16 alike
    tied_sum = emb_grad_transient if emb_grad_transient > bwd_end_act else 0
    if tied_sum:
        bwd_end_act = 0

    # workspace: optimizer foreach buffer, ZeRO-3 gathered layers, DDP/ZeRO buckets, NCCL, cuBLAS
    layer_params_full = (layer_p / max(stage.layers, 1)) if stage.layers else 0
    zero3_gather = 2 * layer_params_full * nbytes(prec.weights) if stage.zero_stage >= 3 and stage.data > 1 else 0
    buckets = 0.0
    if stage.data > 1:
        if stage.zero_stage == 0:
            buckets = grads_full  # DDP gradient buckets (gradient_as_bucket_view=False)
        else:
            buckets = min(5e8, trainable) * nbytes(grad_prec)  # DeepSpeed reduce bucket 5e8 elements
    ws_fixed = Range.exact(zero3_gather + buckets)
    qlora_dequant = 0
    if t.method == "qlora":
        qlora_dequant = spec.hidden_size * max(x.inter, x.q) * d  # one dequantized matrix at a time
    ws_fixed = ws_fixed + Range.exact(qlora_dequant)
    out.fixed["workspace"] = ws_fixed

    opt_phase_ws = Range.exact(step_temp)
    band = lambda v: Range.spread(v, lo, hi)  # noqa: E731
    out.phases["forward"] = {
        "weights": weights,
        "optimizer_state": optimizer,
        "activations": band(fwd_act) + batch,
    }
    out.phases["backward"] = {
        "weights": weights,
        "optimizer_state": optimizer,
        # measured (CPU profiler): the backward peak is at log_softmax backward, before any
        # parameter gradient exists; the LM head gradient arrives after the loss buffers are freed
        "activations": band(bwd_start_act) + batch,
        "gradients": ZERO,
    }
    out.phases["backward_head"] = {
        "weights": weights,
        "optimizer_state": optimizer,
        "activations": band(saved_layers + kept_model_level + final_norm + x.tokens * x.vocab * d) + batch,
        "gradients": Range.exact(head_grad),
    }
    out.phases["backward_first_layer"] = {
        "weights": weights,
        "optimizer_state": optimizer,
        "activations": band(bwd_layer0_act) + batch,
        "gradients": Range.exact(grads.bytes - untied_emb_grad),
    }
    out.phases["backward_end"] = {
        "weights": weights,
        "optimizer_state": optimizer,
        "activations": band(bwd_end_act) + batch,
        "gradients": grads + Range.exact(emb_grad_transient + tied_sum),
    }
    out.phases["optimizer_step"] = {
        "weights": weights,
        "optimizer_state": optimizer,
        "gradients": grads,
        "workspace": opt_phase_ws,
        "activations": batch,
    }
    if step_temp:
        # torch.optim foreach step: e.g. AdamW's _foreach_sqrt(exp_avg_sq) is a parameter-sized temporary
        out.notes["workspace"] = (
            "cpu device: no library workspaces" if device == "cpu" else "cuBLAS workspace (:4096:2:16:8)"
        ) + f"; optimizer step: {t.optimizer} foreach temporary {int(step_temp):,} B"
    grad_note = f"{trainable:,} trainable parameters × {nbytes(grad_prec):g} B ({grad_prec})" + (
        f" / {g_shards} (ZeRO-{stage.zero_stage})" if g_shards > 1 else ""
    )
    out.notes["weights"] = (
        w_note
        + (f" / {z3} (ZeRO-3 partitions)" if z3 > 1 else "")
        + (f"; + LoRA adapters {adapter_bytes:,} B" if adapter_bytes else "")
    )
    out.notes["gradients"] = grad_note + "; absent in forward (zero_grad(set_to_none=True))"
    out.notes["optimizer_state"] = (
        f"{t.optimizer}: {per_param_opt:g} B/param"
        + (" incl. fp32 master copy" if prec.master_weights else " (states in the parameter dtype)")
        + (f" / {o_shards} (ZeRO-{stage.zero_stage})" if o_shards > 1 else "")
    )
    out.notes["activations"] = (
        f"{mode} recomputation, {attention} attention, {b}×{s} tokens × {stage.layers} layers"
        + (
            f" × {stage.in_flight_microbatches} in-flight micro-batches (1F1B)"
            if stage.in_flight_microbatches > 1
            else ""
        )
        + ("; logits, fp32 upcast and cross-entropy copies" if stage.holds_head else "")
        + f"; {train_note}"
    )
    out.transient_for_fragmentation = int(max(fwd_act, bwd_start_act))
    out.live_tensors = _param_tensors(spec, stage.layers) * (4 if t.method == "full" else 1)
    return out


# --- custom ------------------------------------------------------------------------------------


def _custom(w: Workload) -> Budget:
    assert w.custom is not None
    per: dict[str, int] = {"weights": 0, "activations": 0, "kv_cache": 0, "workspace": 0}
    names: dict[str, list[str]] = {k: [] for k in per}
    for c in w.custom.components:
        mult = w.custom.concurrency if c.per_concurrent else 1
        per[c.category] += c.bytes * mult
        names[c.category].append(c.name + (f" ×{mult}" if c.per_concurrent else ""))
    device = w.runtime.device
    runtime_r, runtime_note = rt.cuda_context(device, w.runtime.cuda_version_tuple)
    tensors = sum(per.values())
    fr = frag.fragmentation(device, per["activations"] + per["kv_cache"], 0, w.runtime.expandable_segments, False)
    comps = []
    for name in COMPONENT_NAMES:
        if name in per:
            v = Range.exact(per[name])
            note = "given: " + ", ".join(names[name]) if names[name] else "none given"
        elif name == "runtime":
            v, note = runtime_r, runtime_note
        elif name == "fragmentation":
            v, note = fr, "caching allocator overhead on the given transient components"
        else:
            v, note = ZERO, "not applicable to a custom workload"
        comps.append(ComponentBudget(name, v.low, v.bytes, v.high, note))
    total = Range.exact(tensors) + runtime_r + fr
    pd = DeviceBudget(
        components=tuple(comps),
        total_bytes=total.bytes,
        total_low_bytes=total.low,
        total_high_bytes=total.high,
        peak_phase="run",
        phases=(PhasePeak("run", total.bytes, total.low, total.high),),
    )
    return Budget(
        workload=w.name,
        device=device,
        devices=1,
        per_device=pd,
        host=HostBudget(ram_bytes=host_mod.PROCESS_BASE_BYTES + per["weights"], disk_bytes=per["weights"]),
        assumptions=(
            "GB = 1e9 B, GiB = 2^30 B; every byte count is an integer number of bytes",
            f"custom task: components summed, per-concurrent ones × {w.custom.concurrency}",
        ),
        plan={"tensor": 1, "pipeline": 1, "data": 1, "zero_stage": 0},
    )


# --- assembly ----------------------------------------------------------------------------------


def _assemble(
    w: Workload, st: _Stage, runtime_r: Range, runtime_note: str, ws_base: Range
) -> tuple[DeviceBudget, Range]:
    device = w.runtime.device
    fixed = dict(st.fixed)
    fixed["workspace"] = fixed.get("workspace", ZERO) + ws_base
    fixed["runtime"] = runtime_r
    comp_max: dict[str, list[int]] = {name: [0, 0, 0] for name in COMPONENT_NAMES}
    phases: list[PhasePeak] = []
    best_name, best = "", Range(-1, -1, -1)
    best_low = best_high = 0
    for pname, comps in st.phases.items():
        merged = dict(fixed)
        for cname, r in comps.items():
            merged[cname] = merged[cname] + r if cname in merged else r
        lo_sum = mid = hi_sum = 0
        for cname, r in merged.items():
            m = comp_max[cname]
            if r.low > m[0]:
                m[0] = r.low
            if r.bytes > m[1]:
                m[1] = r.bytes
            if r.high > m[2]:
                m[2] = r.high
            lo_sum += r.low
            mid += r.bytes
            hi_sum += r.high
        phases.append(PhasePeak(pname, mid, lo_sum, hi_sum))
        if mid > best.bytes:
            best_name, best = pname, Range(lo_sum, mid, hi_sum)
        best_low = max(best_low, lo_sum)
        best_high = max(best_high, hi_sum)
    fr = frag.fragmentation(
        device,
        st.transient_for_fragmentation,
        st.live_tensors,
        w.runtime.expandable_segments,
        st.preallocated,
    )
    comp_max["fragmentation"] = [fr.low, fr.bytes, fr.high]
    notes = dict(st.notes)
    notes.setdefault("runtime", runtime_note)
    notes.setdefault(
        "fragmentation",
        "cpu device: tensors only"
        if device == "cpu"
        else (
            "caching allocator: 2 MiB rounding of large blocks and split-block waste"
            + (" (expandable_segments)" if w.runtime.expandable_segments else "")
        ),
    )
    notes.setdefault(
        "workspace",
        "cuBLAS workspace (:4096:2:16:8)" if device == "cuda" else "cpu device: no library workspaces",
    )
    notes.setdefault("kv_cache", "no KV cache (training forward runs with use_cache=False)")
    notes.setdefault("gradients", "inference: no gradients")
    notes.setdefault("optimizer_state", "inference: no optimizer")
    comps = tuple(
        ComponentBudget(name, comp_max[name][0], comp_max[name][1], comp_max[name][2], notes.get(name, ""))
        for name in COMPONENT_NAMES
    )
    total = Range(best_low + fr.low, best.bytes + fr.bytes, best_high + fr.high)
    return (
        DeviceBudget(
            components=comps,
            total_bytes=total.bytes,
            total_low_bytes=total.low,
            total_high_bytes=total.high,
            peak_phase=best_name,
            phases=tuple(phases),
        ),
        total,
    )


def estimate(workload: Workload, device_memory_bytes: int | None = None, device_name: str | None = None) -> Budget:
    """Budget the busiest device of a validated workload.

    `device_memory_bytes` (the device's memory as cudaMemGetInfo reports it, T) lets the vLLM engine size
    its KV pool, report the concurrency it holds and whether it starts; without it the budget reports the
    KV cache the workload needs. `device_name` (e.g. "NVIDIA A100-SXM4-80GB") picks vLLM's defaults for
    the GPU class (A100s get the small-GPU scheduler defaults from vLLM 0.10).
    """
    w = workload
    if w.task == "custom":
        return _custom(w)
    spec = w.spec
    pc = parameter_count(spec)
    total_params = (w.model.parameter_count if w.model else None) or pc.total
    par = w.parallelism
    device = w.runtime.device
    runtime_r, runtime_note = rt.cuda_context(device, w.runtime.cuda_version_tuple)
    ws_base = ws.cublas(device) + ws.nccl(device, par.tensor, par.pipeline, par.data if w.task == "training" else 1)
    ws_base = ws_base + ws.attention_backend(device, w.runtime.attention)
    stages = parallel.stages(
        spec,
        par.tensor,
        par.pipeline,
        par.data if w.task == "training" else 1,
        par.zero_stage if w.task == "training" else 0,
        par.sequence_parallel,
    )
    best: tuple[DeviceBudget, _Stage, str] | None = None
    plans: list[ServingPlan] = []
    for stage in stages:
        layer_p, emb_p, head_p = parallel.stage_parameters(
            spec, pc, stage, w.model.parameter_count if w.model else None
        )
        if w.task == "training":
            st = _training_stage(w, stage, layer_p, emb_p, head_p, total_params)
            stage_note = ""
        else:
            wb, w_note = weight_bytes(
                layer_p,
                emb_p,
                head_p,
                w.precision.weights,
                w.model.weights_bytes if w.model else None,
                total_params,
            )
            if (
                stage.name == "only"
                and stage.tensor == 1
                and w.precision.weights in ("fp32", "bf16", "fp16")
                and not (w.model and w.model.weights_bytes)
            ):
                wb = int(total_params * nbytes(w.precision.weights))
            st = _inference_stage(w, stage, Range.exact(wb), device_memory_bytes, device_name)
            st.notes.setdefault("weights", w_note)
            stage_note = w_note
        _ = stage_note
        if st.serving is not None:
            plans.append(st.serving)
        db, _total = _assemble(w, st, runtime_r, runtime_note, ws_base)
        if best is None or db.total_bytes > best[0].total_bytes:
            best = (db, st, stage.name)
    assert best is not None
    db, st, stage_name = best

    # host RAM and disk
    ckpt_prec = w.precision.weights if w.precision.weights in ("fp32", "bf16", "fp16") else "bf16"
    checkpoint = int(total_params * nbytes(ckpt_prec))
    if w.model and w.model.weights_bytes and w.precision.weights in ("fp32", "bf16", "fp16"):
        checkpoint = w.model.weights_bytes
    converted = 0
    if w.precision.weights in ("int8", "int4", "fp8"):
        converted = int(total_params * nbytes(w.precision.weights) * 1.03)
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
    processes_per_node = min(par.devices, 8)
    host = HostBudget(
        ram_bytes=host_mod.host_ram(device, checkpoint, processes_per_node, db.total_bytes),
        disk_bytes=host_mod.disk(checkpoint, converted, train_ckpt),
    )
    serving = vllm.tightest(plans) if plans else None
    assumptions = _assumptions(w, stage_name, total_params)
    if serving is not None and w.inference is not None:
        assumptions += (vllm.describe(serving, w.inference.gpu_memory_utilization or 0.9),)
    plan = {
        "tensor": par.tensor,
        "pipeline": par.pipeline,
        "data": par.data,
        "zero_stage": par.zero_stage,
        "sequence_parallel": par.sequence_parallel,
        "busiest_stage": stage_name,
    }
    return Budget(
        workload=w.name,
        device=device,
        devices=par.devices,
        per_device=db,
        host=host,
        assumptions=assumptions,
        plan=plan,
        serving=serving,
    )


def _assumptions(w: Workload, stage_name: str, total_params: int) -> tuple[str, ...]:
    out = [
        "GB = 1e9 B, GiB = 2^30 B; every byte count is an integer number of bytes",
        f"model: {w.spec.model_type}, {total_params:,} parameters (tied embeddings counted once)",
        f"precision: weights {w.precision.weights}, compute {w.precision.compute}, KV {w.precision.kv_cache}",
        "peak = the largest phase (components alive together), not the sum of component peaks",
    ]
    if w.runtime.device == "cpu":
        out.append(
            "device cpu: the exact framework tensor peak on the host (PyTorch profiler view);"
            " no runtime, fragmentation or CUDA workspaces"
        )
    else:
        out.append(
            "device cuda: the device-level (NVML) peak: tensors + caching-allocator overhead"
            " + CUDA context + library workspaces"
        )
    out.append(f"attention implementation: {w.runtime.attention}")
    if w.runtime.attention == "eager" and (w.precision.compute or "bf16") in ("bf16", "fp16"):
        copy = w.runtime.device != "cuda" or w.precision.compute != "fp16"
        out.append(
            "eager attention: softmax(dtype=float32) over half-precision scores"
            + (
                " makes an fp32 copy of them first (10 B per score element at that instant)"
                if copy
                else " reads fp16 directly on CUDA (half_to_float, no copy)"
            )
        )
    if w.task == "training" and w.training is not None:
        p = w.precision
        conv = (
            "16 B/param ZeRO convention (fp16/bf16 gradients)"
            if p.gradients in ("fp16", "bf16") and p.master_weights
            else (
                "18 B/param DeepSpeed/Megatron convention (fp32 gradients)"
                if p.gradients == "fp32" and p.master_weights
                else "pure-precision training (states in the parameter dtype)"
            )
        )
        out.append(f"model states: {conv}; optimizer {w.training.optimizer}")
        out.append(
            "gradients are freed by zero_grad(set_to_none=True) between steps;"
            " foreach optimizers allocate a parameter-sized buffer in the step"
        )
        if w.parallelism.pipeline > 1:
            out.append(f"pipeline 1F1B: the {stage_name} stage is the busiest")
    elif w.inference is not None:
        out.append(f"serving engine {w.inference.engine}, KV layout {w.inference.kv_cache_layout}")
        if w.inference.engine == "transformers":
            out.append(
                "transformers generate: logits of the last position only, fp32 next-token copies; runs to"
                " max_output_tokens (min_new_tokens set: two eos-suppressing logits processors, whose fp32"
                " copies are the sampling instant; without them the low end)"
            )
    if w.spec.is_moe and (w.inference is None or w.inference.engine != "vllm"):
        out.append("MoE experts batched (transformers 5 experts_implementation 'grouped_mm', the default)")
    if w.parallelism.tensor > w.spec.num_kv_heads:
        out.append("tensor degree exceeds KV heads: KV heads replicated on each device")
    return tuple(out)
