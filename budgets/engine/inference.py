"""Inference stages: transformers/generic `generate` (prefill, decode, sample), the vLLM and the SGLang servers.

generate prefills all prompts together, then decodes one token per step over a KV cache that is either
preallocated (contiguous StaticCache, paged blocks) or grown by torch.cat (dynamic); what the engine's
generate loop holds on top of the model comes from its implementation profile (`profiles/`). vLLM
preallocates a KV pool sized from the device's memory; its accounting lives in `vllm.py`, the stage here
only wires the workload to it. SGLang likewise (`sglang.py`).
"""

from __future__ import annotations

from dataclasses import dataclass

from . import parallel, profiles, sglang, vllm
from .budget import ZERO, Range, ServingPlan
from .components import activations as act
from .components import kv_cache as kv
from .components import runtime as rt
from .components import workspace as ws
from .device import Device
from .dtypes import nbytes
from .engines import engine
from .models.spec import ModelSpec
from .phases import ACTIVATION_BAND_CUDA, StagePhases, activation_band, activation_shape, param_tensors
from .schema import Workload

GIB = 2**30
# CUDA graphs on the device (inside the pool's deduction only from 0.21): estimate 0.36 GiB, measured up to
# 2.37 GiB, and negative (capture reuses freed memory) on large dense models (budgets/engine/vllm.py)
VLLM_CUDA_GRAPHS = Range(0, vllm.CUDA_GRAPH_ESTIMATE_BYTES, vllm.CUDA_GRAPH_HIGH_BYTES)


def inference_stage(w: Workload, stage: parallel.Stage, weights: Range, device: Device) -> StagePhases:
    """The stage's phases under the workload's serving engine."""
    assert w.inference is not None
    if w.inference.engine == "sglang":
        return sglang_stage(w, stage, weights, device)
    if engine(w.inference.engine).preallocated_pool:
        return vllm_stage(w, stage, weights, device)
    return generate_stage(w, stage, weights)


# --- transformers / generic generate ----------------------------------------------------------------


@dataclass(slots=True)
class _GenerateCache:
    """The KV cache of a generate run: its size after prefill and at the end, and what attention reads."""

    layout: str
    prefill_bytes: int
    final_bytes: int
    growth_bytes: int  # dynamic cache: one layer's K copy while torch.cat grows it, or the previous step's whole cache
    growth_at_head: bool  # the growth is still alive when the LM head runs (the previous step's cache)
    first_decode_bytes: int  # the cache during the first decode forward: the prompt's and the one growing
    attend_prefill: int  # key positions attention reads in prefill
    attend_decode: int  # ... and in the last decode step
    preallocated: bool
    note: str


def _generate_cache(
    w: Workload,
    spec: ModelSpec,
    stage: parallel.Stage,
    profile: profiles.GenericProfile,
    rules: profiles.GenerateRules,
) -> _GenerateCache:
    assert w.inference is not None
    inf = w.inference
    kv_prec = w.precision.kv_cache or "bf16"
    b, s, n = inf.concurrent_sessions, inf.max_input_tokens, inf.max_output_tokens
    layout = inf.kv_cache_layout or "paged"
    layers = stage.layers
    t, first = stage.tensor, stage.first_layer
    per_tok = kv.kv_bytes_per_token(spec, t, first, layers, kv_prec)
    longest = s + n
    if layout == "dynamic":
        window = rules.windowed_dynamic

        def cache(tokens: int, windowed: bool = window) -> int:
            return kv.kv_cache_bytes(spec, t, first, layers, kv_prec, "contiguous", tokens, b, window=windowed)

        # sliding layers still hold the whole prompt's storage after prefill (a view keeps it)
        kv_prefill = cache(s, False)
        kv_final = cache(longest - 1)
        if rules.previous_cache:
            # the previous step's tuple: every layer's K and V of one position less, alive through the last forward
            growth = cache(longest - 2)
        else:
            growth = kv.dynamic_growth_transient(spec, t, first, layers, kv_prec, longest - 1, b)
        first_decode = kv_prefill + cache(s + 1) if rules.previous_cache else cache(s + 1)
        kv_note = (
            f"dynamic cache grown by torch.cat to {longest - 1} positions × {b} sequences"
            + (
                " + the previous step's whole cache (the legacy tuple generate still holds)"
                if rules.previous_cache
                else " + one layer's K copy while growing"
            )
            + (
                f"; sliding layers keep {spec.sliding_window} positions, but the whole prompt's storage"
                " until the first decode step"
                if window and spec.sliding_window and spec.num_sliding_layers and s > spec.sliding_window
                else ""
            )
        )
        attend_prefill, attend_decode = s, longest - 1
        preallocated = False
    else:
        slots = profile.static_cache_slots(longest) if layout == "contiguous" else longest
        kv_final = kv.kv_cache_bytes(spec, t, first, layers, kv_prec, layout, slots, b, inf.block_tokens)
        kv_prefill = first_decode = kv_final
        growth = 0
        preallocated = True
        kv_note = (
            f"{layout} cache preallocated for {slots} positions × {b} sequences"
            if layout == "contiguous"
            else f"paged blocks of {inf.block_tokens} tokens, ≤ one partly filled block per sequence"
        )
        # a static cache attends over the whole preallocated length
        attend_prefill = attend_decode = slots if layout == "contiguous" else s
        if layout == "paged":
            attend_decode = longest - 1
    kv_note += f"; {per_tok:,} B/token/device across {layers} layers ({kv_prec})"
    return _GenerateCache(
        layout,
        kv_prefill,
        kv_final,
        growth,
        rules.previous_cache and layout == "dynamic",
        first_decode,
        attend_prefill,
        attend_decode,
        preallocated,
        kv_note,
    )


def generate_stage(w: Workload, stage: parallel.Stage, weights: Range) -> StagePhases:
    """transformers / generic generate: prefill all prompts together, then decode one token per step. The release's
    rules (`profiles.generate_rules`: low, expected, high) each give the stage's phases; where they differ, each
    component's range spans the three (`_span`)."""
    low, expected, high = profiles.generate_rules(w)
    middle = _generate_phases(w, stage, weights, expected)
    if low == expected == high:
        return middle
    return _span(middle, _generate_phases(w, stage, weights, low), _generate_phases(w, stage, weights, high))


def _span(middle: StagePhases, low: StagePhases, high: StagePhases) -> StagePhases:
    """The expected phases with each component's low end the least and its high end the most of the three."""

    def spanned(mid: dict[str, Range], lo: dict[str, Range], hi: dict[str, Range]) -> dict[str, Range]:
        out = {}
        for name in mid.keys() | hi.keys():
            m = mid.get(name, ZERO)
            least = min(m.low, lo[name].low) if name in lo and name in mid else 0
            out[name] = Range(least, m.bytes, max(m.high, hi.get(name, ZERO).high))
        return out

    for phase in middle.phases.keys() | high.phases.keys():
        middle.phases[phase] = spanned(
            middle.phases.get(phase, {}), low.phases.get(phase, {}), high.phases.get(phase, {})
        )
    middle.fixed = spanned(middle.fixed, low.fixed, high.fixed)
    return middle


def _generate_phases(w: Workload, stage: parallel.Stage, weights: Range, rules: profiles.GenerateRules) -> StagePhases:
    """The stage's phases under one set of generate rules."""
    assert w.inference is not None
    spec, inf = w.spec, w.inference
    profile = profiles.workload_profile(w)
    device, attention = w.runtime.device, w.runtime.attention
    d = nbytes(w.precision.compute or "bf16")
    fp16_cuda = device == "cuda" and (w.precision.compute or "bf16") == "fp16"
    b, s = inf.concurrent_sessions, inf.max_input_tokens
    lo, hi = activation_band(device)
    cache = _generate_cache(w, spec, stage, profile, rules)
    # SDPA prefill runs mask-free with is_causal even over a static cache (the cache is empty,
    # masking_utils._ignore_causal_mask_sdpa), so GQA goes through enable_gqa (use_gqa_in_sdpa); in decode
    # a static cache gets a padding mask, so no enable_gqa, but a single query is packed per KV head
    # (sdpa_attention.py pack_gqa) instead of repeat_kv copies: under SDPA neither phase copies K/V per head
    gqa_sdpa = attention != "eager" and spec.head_dim <= 256
    # a dynamic cache gets no up-front 4D masks from generate: a sliding bool mask is batch-broadcast
    broadcast_mask = cache.layout == "dynamic"
    xp = activation_shape(spec, stage, b, s, cache.attend_prefill, d, fp16_cuda)
    # the new logits exist only at the head, after the layers' transients are freed: the last position's, or every
    # prompt position's in a release without logits_to_keep
    head = stage.holds_head
    prompt_logits = _head_logits(b * (s if rules.prompt_logits else 1), xp.vocab, d, rules.upcast_logits) if head else 0
    logits = _head_logits(b, xp.vocab, d, rules.upcast_logits) if head else 0
    prefill_act = _prefill_activations(w, spec, stage, xp, gqa_sdpa, broadcast_mask, prompt_logits, profile)
    decode_act, generation_ids = _decode_activations(
        w, spec, stage, xp, cache, gqa_sdpa, broadcast_mask, logits, fp16_cuda, profile
    )
    # between forwards: logits processing of the last step, over the final cache (no forward alive)
    sample_low = sample_act = sample_high = 0.0
    if head:
        low, expected, high = profile.sample_bytes(b, xp.vocab, d, spec.eos_token)
        sample_low, sample_act, sample_high = low + generation_ids, expected + generation_ids, high + generation_ids

    out = StagePhases(stage.name, preallocated=cache.preallocated)
    out.fixed["weights"] = weights  # alive, unchanged, in every phase
    out.phases["prefill"] = {
        "kv_cache": Range.exact(cache.prefill_bytes),
        "activations": Range.spread(prefill_act, lo, hi),
    }
    if rules.prompt_logits_kept and head and rules.prompt_logits:
        # the prefill's (fp32) logits of every prompt position, alive until the first decode forward returns
        kept = b * s * xp.vocab * (4 if rules.upcast_logits else d)
        out.phases["first decode"] = {
            "kv_cache": Range.exact(cache.first_decode_bytes),
            "activations": Range.spread(decode_act + kept, lo, hi),
        }
    out.phases["decode"] = {
        "kv_cache": Range.exact(cache.final_bytes + cache.growth_bytes),  # torch.cat always copies while growing
        "activations": Range.spread(decode_act, lo, hi),
    }
    if sample_act:
        previous = cache.growth_bytes if cache.growth_at_head else 0  # the legacy tuple until the step's update
        out.phases["sample"] = {
            "kv_cache": Range.exact(cache.final_bytes + previous),
            "activations": Range(int(sample_low), int(sample_act), int(sample_high * hi)),
        }
    out.notes["kv_cache"] = cache.note
    out.notes["activations"] = (
        f"prefill of {b}×{s} tokens ({attention} attention"
        + (", b·heads·s·s scores materialized" if attention == "eager" else "")
        + ("), logits of every prompt position" if rules.prompt_logits else "), last-position logits")
        + (" upcast to fp32" if rules.upcast_logits else "")
        + (" kept through the first decode forward" if rules.prompt_logits_kept and rules.prompt_logits else "")
        + f" (+fp32 score copies between forwards, {inf.engine} generate), decode over {cache.attend_decode} positions"
    )
    workspace, note = _generate_workspace(w, stage, xp, rules)
    if note:
        out.fixed["workspace"] = workspace
        out.notes["workspace"] = note
    out.transient_for_fragmentation = int(
        max(prefill_act, decode_act, sample_act) + (cache.final_bytes if cache.layout == "dynamic" else 0)
    )
    out.live_tensors = param_tensors(spec, stage.layers) + 2 * stage.layers
    return out


def _head_logits(rows: int, vocab: int, d: float, upcast: bool) -> float:
    """The LM head's output for `rows` positions, and its fp32 copy beside it when the model upcasts (`logits.float()`
    returns its input unchanged when that is fp32 already)."""
    return rows * vocab * (d + (4 if upcast and d != 4 else 0))


def _generate_workspace(
    w: Workload, stage: parallel.Stage, xp: act.Shape, rules: profiles.GenerateRules
) -> tuple[Range, str]:
    """What a 4.x release holds outside the layers' transients: the rotary tables of every attention layer
    (`rules.rope_tables`) and the 4-bit kernels' buffers (`rules.quantized_kernels`); (ZERO, "") for none."""
    spec, weights = w.spec, w.precision.weights
    total, notes = ZERO, []
    if rules.rope_tables and not spec.learned_positions and spec.max_position_embeddings:
        # cos and sin of max_position_embeddings × rotary dims in the dtype the model was built in, per layer
        tables = stage.layers * 2 * spec.max_position_embeddings * spec.rope_dim * xp.d
        total += Range.exact(int(tables))
        notes.append(f"rotary cos/sin tables of {spec.max_position_embeddings} positions, {stage.layers} layers")
    if rules.quantized_kernels and weights == "int4":
        total += _gptq_buffers(w, xp)
        notes.append(
            "auto-gptq's GPTQ kernel buffers: exllama's (transformers' default), 0 (other kernels) to exllama v2's"
        )
    if rules.quantized_kernels and weights == "nf4" and xp.b * xp.s > 1:
        total += Range.exact(int(ws.dequantized_weight(xp.h, max(xp.inter, xp.q), xp.d)))
        notes.append("bitsandbytes dequantizes one 4-bit matrix to the compute dtype per matmul of more than one token")
    return total, "; ".join(notes)


def _gptq_buffers(w: Workload, xp: act.Shape) -> Range:
    """auto-gptq's buffers for the decoder's quantized matrices (components/workspace.py): exllama's expected (the
    kernel transformers 4.x's GPTQConfig picks: use_exllama True, version 1; utils/quantization_config.py:448-464 at
    4.35.2), with act-order as the checkpoint's quantization_config says (none when it does not); none at the low end
    (the cuda-old / Triton kernels); the most of exllama with act-order and exllama v2 at the high end."""
    spec = w.spec
    qkv = ((xp.h, xp.q + 2 * xp.kv),) if spec.fused_qkv else ((xp.h, xp.q), (xp.h, xp.kv))
    mlp = spec.expert_intermediate_size // xp.tensor if spec.is_moe else xp.inter
    matrices = (*qkv, (xp.q, xp.h), (xp.h, xp.inter), (xp.inter, xp.h), (xp.h, mlp), (mlp, xp.h))
    config = (w.model.hf_config or {}).get("quantization_config") if w.model is not None else None
    act_order = bool(config.get("desc_act")) if isinstance(config, dict) else False
    expected = ws.exllama_buffers(matrices, act_order)
    return Range(0, expected, max(ws.exllama_buffers(matrices, True), ws.exllamav2_scratch(matrices)))


def _prefill_activations(
    w: Workload,
    spec: ModelSpec,
    stage: parallel.Stage,
    xp: act.Shape,
    gqa_sdpa: bool,
    broadcast_mask: bool,
    logits: float,
    profile: profiles.GenericProfile,
) -> float:
    """Activations at the prefill peak: model-level tensors, prompt ids, the larger of a layer and the head."""
    attention = w.runtime.attention
    attend = xp.k
    _, mask_copy = act.attention_masks(spec, xp, attention, attend)
    last = stage.first_layer + stage.layers
    unwritten = None
    if w.inference and (w.inference.kv_cache_layout or "paged") == "dynamic":
        # a dynamic cache is filled layer by layer: while layer i runs, the layers after it have written nothing
        t, s, b = stage.tensor, xp.s, xp.b
        kv_prec = w.precision.kv_cache or "bf16"

        def unwritten(i: int) -> float:
            return kv.kv_cache_bytes(spec, t, i, last - i, kv_prec, "contiguous", s, b, window=False)

    layer = act.layer_forward_peak(
        spec,
        xp,
        attention,
        not gqa_sdpa,
        mask_copy,
        stage.first_layer,
        last,
        unwritten,
        stage.holds_embedding and stage.first_layer == 0,
    )
    model_level = act.model_level_inference(spec, xp, attention, attend, broadcast_mask)
    prompt_ids = profile.prefill_loop_bytes(xp.tokens)  # besides input_ids and position_ids (model_level)
    return model_level + prompt_ids + max(layer, 2 * xp.tokens * xp.h * xp.d + logits)


def _decode_activations(
    w: Workload,
    spec: ModelSpec,
    stage: parallel.Stage,
    xp: act.Shape,
    cache: _GenerateCache,
    gqa_sdpa: bool,
    broadcast_mask: bool,
    logits: float,
    fp16_cuda: bool,
    profile: profiles.GenericProfile,
) -> tuple[float, float]:
    """Activations at the last decode step, and the int64 id tensors generate holds by then."""
    assert w.inference is not None
    inf, attention = w.inference, w.runtime.attention
    b, s = inf.concurrent_sessions, inf.max_input_tokens
    longest = s + inf.max_output_tokens
    xd = activation_shape(spec, stage, b, 1, cache.attend_decode, xp.d, fp16_cuda)
    _, mask_copy = act.attention_masks(spec, xd, attention, cache.attend_decode)
    last = stage.first_layer + stage.layers
    layer = act.layer_forward_peak(spec, xd, attention, not gqa_sdpa, mask_copy, stage.first_layer, last)
    model_level = act.model_level_inference(spec, xd, attention, cache.attend_decode, broadcast_mask)
    generation_ids = profile.generation_ids_bytes(b, s, longest)
    prev_scores = profile.previous_scores_bytes(b, xp.vocab, spec.eos_token) if stage.holds_head else 0
    # in a layer the dynamic cache's growth copy (kv_cache component) is alive; at the head it is not, unless it is
    # the previous step's whole cache (the legacy tuple generate holds)
    freed = 0 if cache.growth_at_head else cache.growth_bytes
    decode = model_level + generation_ids + prev_scores + max(layer, 2 * b * xp.h * xp.d + logits - freed)
    return decode, generation_ids


# --- vLLM ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _VllmServer:
    """What a vLLM server of the workload sizes on one stage's device before any memory is counted: its
    release and memory fraction, its scheduler budgets, the stage's KV layout and the KV the sessions need."""

    version: str
    utilization: float
    batched: int  # max_num_batched_tokens
    seqs: int  # max_num_seqs
    cache: vllm.CacheLayout
    needed_bytes: int  # the asked sessions at the longest request


def _vllm_server(w: Workload, stage: parallel.Stage, device: Device) -> _VllmServer:
    assert w.inference is not None
    inf = w.inference
    assert inf.max_model_len is not None
    version = w.runtime.engine_version or vllm.DEFAULT_VLLM_VERSION
    batched, seqs = vllm.scheduler_defaults(version, device.memory_bytes, device.name, inf.max_model_len)
    batched, seqs = inf.max_num_batched_tokens or batched, inf.max_num_seqs or seqs
    kv_prec, block = w.precision.kv_cache or "bf16", inf.block_tokens
    cache = vllm.CacheLayout(w.spec, stage.tensor, stage.first_layer, stage.layers, kv_prec, block, batched)
    return _VllmServer(
        version=version,
        utilization=inf.gpu_memory_utilization or vllm.default_gpu_memory_utilization(version),
        batched=batched,
        seqs=seqs,
        cache=cache,
        needed_bytes=cache.request_bytes(inf.max_request_tokens) * inf.concurrent_sessions,
    )


def vllm_pool_short(w: Workload, stage: parallel.Stage, device: Device, weights_bytes: int) -> bool:
    """True when the vLLM pool on ``stage``'s device, whose weights are at least ``weights_bytes``, cannot hold the KV
    the workload's sessions need there: the pool is u·T − weights − profile-run peak − non-torch − graphs
    (``vllm.serving_plan``), at most u·T − weights, and the KV needed is ``vllm_stage``'s. Known without the profile
    run; ``estimate.pool_cannot_hold`` asks it of every stage."""
    assert device.memory_bytes
    server = _vllm_server(w, stage, device)
    return int(device.memory_bytes * server.utilization) - weights_bytes < server.needed_bytes


def vllm_stage(w: Workload, stage: parallel.Stage, weights: Range, device: Device) -> StagePhases:
    """vLLM: weights + the profile run's peak + the KV pool it sizes from T (budgets/engine/vllm.py)."""
    assert w.inference is not None
    device_memory_bytes, compute_capability = device.memory_bytes, device.compute_capability
    spec, inf = w.spec, w.inference
    assert inf.max_model_len is not None
    d = nbytes(w.precision.compute or "bf16")
    server = _vllm_server(w, stage, device)
    version, util, batched, seqs, cache = server.version, server.utilization, server.batched, server.seqs, server.cache
    b, longest = inf.concurrent_sessions, inf.max_request_tokens
    per_tok = cache.page_bytes_per_token
    needed = server.needed_bytes
    weights = weights + Range.exact(vllm.rotary_cache_bytes(spec, d))
    mxfp4 = w.precision.weights == "mxfp4"
    marlin = vllm.mxfp4_padding_bytes(spec, stage.tensor, compute_capability) if mxfp4 else 0
    weights = weights + Range(0, marlin, marlin)
    forward, sampler = vllm.profile_activations(spec, stage.tensor, batched, seqs, d, stage.holds_head, version)
    activations = Range.spread(max(forward, sampler), *ACTIVATION_BAND_CUDA)
    pool_in = vllm.PoolInputs(
        version=version,
        utilization=util,
        device_memory_bytes=device_memory_bytes,
        weights_bytes=weights.bytes,
        activations_bytes=activations.bytes,
        tensor=stage.tensor,
        page_bytes_per_token=per_tok,
        block_tokens=cache.block_tokens,
        request_bytes_max_len=None if cache.uniform else cache.request_bytes(inf.max_model_len),
        request_bytes_longest=None if cache.uniform else cache.request_bytes(longest),
        max_model_len=inf.max_model_len,
        longest_request=longest,
        sessions=b,
        max_num_batched_tokens=batched,
        max_num_seqs=seqs,
    )
    out = StagePhases(stage.name, preallocated=True)
    out.serving = plan = vllm.serving_plan(pool_in, needed)
    kv_value = Range.exact(needed)
    kv_note = (
        f"paged KV the workload needs: {b} × {longest} tokens in blocks of {cache.block_tokens};"
        f" {per_tok:,} B/token/device;"
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
    out.fixed["weights"] = weights  # alive, unchanged, in both phases
    out.phases["profile"] = {"activations": activations}
    out.phases["serve"] = {"kv_cache": kv_value, "activations": activations}
    # outside the pool on the device: CUDA graphs, and the lazily loaded modules (non-torch growth)
    out.fixed["workspace"] = VLLM_CUDA_GRAPHS + Range.exact(vllm.loaded_modules_bytes(vllm.profile_for(version)))
    out.notes["kv_cache"] = kv_note
    out.notes["activations"] = (
        f"vLLM profile run: forward over {batched} batched tokens {forward:,} B; sampler over"
        f" {min(seqs, batched)} rows × {spec.vocab_size:,} vocabulary {sampler:,} B; the larger is the peak"
    )
    out.notes["workspace"] = "CUDA graphs (captured after the KV cache); non-torch growth (lazily loaded modules)"
    if marlin:
        out.notes["weights"] = (
            f"MXFP4 experts in vLLM's {vllm.mxfp4_layout(compute_capability)} layout: +{marlin:,} B over the"
            " checkpoint; the low end is the Triton kernels' (no padding)"
        )
    out.transient_for_fragmentation = activations.bytes
    out.live_tensors = param_tensors(spec, stage.layers, fused_experts=True)
    return out


def serving_assumptions(w: Workload, plan: ServingPlan, device: Device) -> tuple[str, ...]:
    """The budget's lines on the serving engine's pool: its rule and defaults, and whether the asked sessions fit."""
    assert w.inference is not None
    inf = w.inference
    if inf.engine == "sglang":
        version = w.runtime.engine_version or sglang.SGLANG_VERSION
        defaults = _sglang_defaults(w, device)
        lines = [sglang.describe(plan, defaults, version, _sglang_start_used(w, device))]
        asked = sglang.concurrency_sentence(plan, inf.concurrent_sessions, inf.max_request_tokens)
    else:
        version = w.runtime.engine_version or vllm.DEFAULT_VLLM_VERSION
        lines = [vllm.describe(plan, inf.gpu_memory_utilization or 0.9, version)]
        asked = vllm.concurrency_sentence(plan, inf.concurrent_sessions, inf.max_request_tokens)
    return tuple(lines + ([asked] if asked else []))


# --- SGLang -------------------------------------------------------------------------------------

# CUDA graphs of an SGLang server, captured after the pool from the (1 − mem_fraction_static) reserve and not in its
# arithmetic: 0.6 GB for Llama-3-8B at TP2 on H200 (sgl-project/sglang PR #7873), 0.54 GB with EAGLE/FA3
# (issue #10088), 6.19 GB for Llama-4-Maverick with FA3 (issue #8538): expected 0.6, high 6.19 GiB
SGLANG_CUDA_GRAPHS = Range(0, int(0.6 * GIB), int(6.19 * GIB))


def _sglang_defaults(w: Workload, device: Device) -> sglang.ServerDefaults:
    """SGLang's resolved defaults for this server, by the release the workload names (sglang.server_defaults)."""
    assert w.inference is not None
    inf, par = w.inference, w.parallelism
    return sglang.server_defaults(
        w.spec,
        device.memory_bytes,
        device.name,
        par.tensor,
        par.pipeline,
        inf.gpu_memory_utilization,
        inf.max_num_batched_tokens,
        inf.cuda_graph_max_bs,
        w.runtime.engine_version or sglang.SGLANG_VERSION,
    )


def _sglang_start_used(w: Workload, device: Device) -> int:
    """What a GPU holds before SGLang loads the model: the CUDA context (the runtime component's figure) and, with
    TP/PP > 1, the NCCL buffers of torch.distributed init (the workspace component's figure): SGLang measures free
    memory after both (model_runner.py:999-1004)."""
    par = w.parallelism
    context, _ = rt.cuda_context(w.runtime.device, w.runtime.cuda_version_tuple, device.name, device.compute_capability)
    return context.bytes + ws.nccl(w.runtime.device, par.tensor, par.pipeline, 1).bytes


def sglang_stage(w: Workload, stage: parallel.Stage, weights: Range, device: Device) -> StagePhases:
    """SGLang: weights + the token-to-KV pool inside mem_fraction_static × free memory at start; activations, CUDA
    graphs and the request pool in the rest (budgets/engine/sglang.py)."""
    assert w.inference is not None
    spec, inf = w.spec, w.inference
    assert inf.max_model_len is not None
    d = nbytes(w.precision.compute or "bf16")
    kv_prec = w.precision.kv_cache or "bf16"
    b, longest = inf.concurrent_sessions, inf.max_request_tokens
    defaults = _sglang_defaults(w, device)
    page = inf.block_tokens
    cell = sglang.cell(spec, stage.tensor, stage.first_layer, stage.layers, kv_prec, w.precision.compute or "bf16")
    start_used = _sglang_start_used(w, device)
    pool_in = sglang.PoolInputs(
        device_memory_bytes=device.memory_bytes,
        start_used_bytes=start_used,
        weights_bytes=weights.bytes,
        cell=cell,
        mem_fraction_static=defaults.mem_fraction_static,
        page_size=page,
        context_len=inf.max_model_len,
        longest_request=longest,
        sessions=b,
        max_running_requests=inf.max_num_seqs,
        chunked_prefill_size=defaults.chunked_prefill_size,
    )
    needed = cell.bytes_per_token * longest * b + cell.mamba_bytes_per_request * b
    out = StagePhases(stage.name, preallocated=True)
    out.serving = plan = sglang.serving_plan(pool_in, needed)
    running = plan.max_num_seqs or inf.max_num_seqs or 1
    # SGLang does not profile activations: its reserve must hold them. The forward over one chunked-prefill chunk,
    # by the shape formula of vLLM's profile run (fused qkv and gate_up; no sampler term)
    forward, _ = vllm.profile_activations(
        spec, stage.tensor, defaults.chunked_prefill_size, running, d, False, vllm.DEFAULT_VLLM_VERSION
    )
    activations = Range.spread(forward, *ACTIVATION_BAND_CUDA)
    requests = Range.exact(sglang.request_pool_bytes(running, inf.max_model_len))
    kv_value = Range.exact(needed)
    kv_note = (
        f"SGLang KV the workload needs: {b} × {longest} tokens; {cell.bytes_per_token:,} B/token/device ({cell.kind}"
        + (f", {cell.swa_layers} sliding-window layers in their own pool" if cell.swa_layers else "")
        + (
            f", {cell.mamba_bytes_per_request:,} B of recurrent state per request"
            if cell.mamba_bytes_per_request
            else ""
        )
        + f"); SGLang needs T ≥ {sglang.needed_device_memory(pool_in, needed) / GIB:,.2f} GiB to hold it"
    )
    if plan.kv_pool_bytes is not None:
        pool = plan.kv_pool_bytes
        kv_value = Range(min(needed, pool), max(pool, needed), max(pool, needed)) if plan.starts else kv_value
        kv_note = (
            f"SGLang KV pool = free after weights − free at start × (1 − {defaults.mem_fraction_static:g}) ="
            f" {pool:,} B ({plan.kv_pool_tokens:,} tokens, page {page}, {cell.bytes_per_token:,} B/token/device,"
            f" {cell.kind}); the workload needs {needed:,} B" + (f"; {plan.reason}" if plan.reason else "")
        )
    out.fixed["weights"] = weights
    out.phases["serve"] = {"kv_cache": kv_value, "activations": activations}
    out.fixed["workspace"] = SGLANG_CUDA_GRAPHS + requests
    out.notes["kv_cache"] = kv_note
    out.notes["activations"] = (
        f"SGLang forward over one chunked-prefill chunk of {defaults.chunked_prefill_size} tokens {forward:,} B"
        " (outside the static share, in the (1 − mem_fraction_static) reserve)"
    )
    out.notes["workspace"] = (
        f"CUDA graphs up to batch {defaults.cuda_graph_max_bs} (published 0.54–6.19 GiB); request-to-token pool"
        f" {running} × ({inf.max_model_len} + 4) int32 = {requests.bytes:,} B"
    )
    out.transient_for_fragmentation = activations.bytes
    out.live_tensors = param_tensors(spec, stage.layers, fused_experts=True)
    return out
