"""Measure the exact CPU tensor peak of one accuracy case.

Run one case per fresh process (so measurements never share allocator state or caches):

    python -m benchmarks.accuracy.measure CASE_ID        # prints one line: "@@RESULT@@ {json}"

The whole case, from before the model is built to the end, runs under
``torch.profiler.profile(activities=[CPU], profile_memory=True, record_shapes=False)``; the
``[memory]`` events are replayed in time order (``replay.py``). Because the profiler is already
running when the weights are allocated, every free in the measured window has a known size,
and the window's live bytes include everything already resident (weights, optimizer state,
caches). Inside the window, ``record_function`` labels mark phases (forward / backward /
optimizer_step / zero_grad; generate prefill / decode), every ``nn.Module`` call (``mod:NAME``),
and snapshots of known tensors (weights, gradients, optimizer state, KV cache, logits,
inputs) so each block live at the peak can be attributed.
"""

from __future__ import annotations

import bisect
import gc
import json
import os
import platform
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

from benchmarks.accuracy.replay import Event, live_blocks_at, replay, window_peak

RESULT_PREFIX = "@@RESULT@@ "
TRAIN_STEPS = 3  # step 1 is warm-up (optimizer state is created there); peak over steps 2..N
REPO_ROOT = Path(__file__).resolve().parents[2]


# --------------------------------------------------------------------------------------------
# helpers that need torch (imported lazily so the parent process stays light)
# --------------------------------------------------------------------------------------------


def _dtype(name: str):
    import torch

    return {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[name]


# Remote-code model_types (a Hub checkpoint's own modeling file, no transformers 5.24 type), measured with a stand-in of
# the same architecture (round 16, HOLDOUT.md). The case's hf_config keeps its own model_type, so the engine reads it as
# that family; only the measurement swaps the class, and only for these three types:
#   kimi_k2 -> transformers' deepseek_v3: Kimi K2's config.json declares "architectures": ["DeepseekV3ForCausalLM"] with
#     auto_map to its modeling_deepseek.py (DeepSeek-V3's code: MLA, sigmoid noaux_tc routing, shared expert,
#     first_k_dense_replace dense layers), the same modules transformers' DeepseekV3ForCausalLM builds;
#   mimo -> transformers' qwen2: MiMo-7B's remote MiMoForCausalLM (modeling_mimo.py) is Qwen2's decoder (biased q/k/v,
#     unbiased o) plus `num_nextn_predict_layers` MTP layers that its MiMoModel builds and its causal LM forward never
#     runs; the stand-in builds no MTP layer (the engine's reading of a mimo config counts none: hf_defaults.py's "mimo"
#     rule), so the cases measure MiMo without MTP weights (HOLDOUT.md, round 16);
#   nemotron-nas -> benchmarks/accuracy/decilm.py (DECILM_STAND_IN): DeciLM's per-layer block_configs built from
#     transformers' Llama modules (transformers 5.24 has no class for it; see that module for what it cannot build).
DECILM_STAND_IN = "decilm (benchmarks/accuracy/decilm.py)"
REMOTE_CODE_STAND_INS: dict[str, str] = {
    "kimi_k2": "deepseek_v3",
    "mimo": "qwen2",
    "nemotron-nas": DECILM_STAND_IN,
}


def build_config(hf_config: dict, attention: str):
    from transformers import AutoConfig

    fields = dict(hf_config)
    model_type = fields.pop("model_type")
    stand_in = REMOTE_CODE_STAND_INS.get(model_type)
    if stand_in == DECILM_STAND_IN:
        from benchmarks.accuracy.decilm import decilm_config

        return decilm_config(fields)
    cfg = AutoConfig.for_model(stand_in or model_type, **fields)
    return cfg


def model_class(cfg):
    """AutoModelForCausalLM where transformers has a causal LM for the config's type (the text model alone, also for
    the wrappers it maps: llama4, mllama, qwen3_5, qwen3_5_moe); else AutoModelForImageTextToText, the multimodal
    ForConditionalGeneration with its towers (qwen2_5_vl, qwen3_vl, mistral3), run on text alone. A remote-code type
    measured through a stand-in (REMOTE_CODE_STAND_INS) has the stand-in's config: kimi_k2 and mimo are deepseek_v3
    and qwen2 configs here (their transformers causal LMs), nemotron-nas the DeciLM stand-in's own class."""
    from transformers import AutoModelForCausalLM, AutoModelForImageTextToText
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    if REMOTE_CODE_STAND_INS.get(cfg.model_type) == DECILM_STAND_IN:
        from benchmarks.accuracy.decilm import DeciLMForCausalLM

        return DeciLMForCausalLM
    if cfg.model_type in TEXT_MODEL_CLASSES:
        import transformers

        return getattr(transformers, TEXT_MODEL_CLASSES[cfg.model_type])
    if cfg.model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        return AutoModelForCausalLM
    return AutoModelForImageTextToText


# text configs of a wrapper whose causal LM transformers builds from the text config but does not map by its type
# (modeling_mllama.py MllamaForCausalLM: config_class MllamaTextConfig)
TEXT_MODEL_CLASSES = {"mllama_text_model": "MllamaForCausalLM"}


# parameters outside the language model of a multimodal ForConditionalGeneration (modeling_qwen2_5_vl.py `visual`,
# modeling_qwen3_vl.py `visual`, modeling_mistral3.py `vision_tower` and `multi_modal_projector`, modeling_gemma4.py
# `vision_tower` and `embed_vision`: round 14; no earlier case's model has a module of that name)
TOWER_MODULES = ("visual", "vision_tower", "multi_modal_projector", "vision_model", "embed_vision")


def tower_param_count(model) -> int:
    return sum(
        p.numel() for name, p in model.named_parameters() if any(part in TOWER_MODULES for part in name.split("."))
    )


class Tracer:
    """record_function labels and tensor snapshots, all timestamped by the profiler itself."""

    def __init__(self):
        import torch

        self.torch = torch
        self.snaps: list[tuple[str, dict[int, int]]] = []
        self.stack = []
        self.in_generate = False
        self.gen_calls = 0

    def label(self, name: str):
        return self.torch.profiler.record_function(name)

    def snap(self, role: str, tensors) -> None:
        ptrs: dict[int, int] = {}
        for t in tensors:
            if isinstance(t, self.torch.Tensor) and t.numel() > 0:
                st = t.untyped_storage()
                ptrs[st.data_ptr()] = st.nbytes()
        idx = len(self.snaps)
        self.snaps.append((role, ptrs))
        with self.label(f"snap:{idx}"):
            pass

    # module hooks ---------------------------------------------------------------------------
    def install(self, model) -> None:
        lm_head = model.get_output_embeddings()
        for name, mod in model.named_modules():
            is_root = name == ""
            label = "mod:" + (name or "<root>")

            def pre(m, args, kwargs, _label=label, _root=is_root):
                if _root and self.in_generate:
                    kind = "prefill" if self.gen_calls == 0 else "decode"
                    rf = self.label(f"gen:{kind}:{self.gen_calls}")
                    rf.__enter__()
                    self.stack.append(rf)
                    self.gen_calls += 1
                rf = self.label(_label)
                rf.__enter__()
                self.stack.append(rf)

            def post(m, args, kwargs, out, _root=is_root, _is_head=(mod is lm_head)):
                if _is_head and isinstance(out, self.torch.Tensor):
                    self.snap("logits", [out])
                if _root and self.in_generate:
                    pkv = getattr(out, "past_key_values", None)
                    if pkv is not None:
                        self.snap("kv_cache", cache_tensors(pkv))
                rf = self.stack.pop()
                rf.__exit__(None, None, None)
                if _root and self.in_generate:
                    rf = self.stack.pop()
                    rf.__exit__(None, None, None)

            mod.register_forward_pre_hook(pre, with_kwargs=True)
            mod.register_forward_hook(post, with_kwargs=True)


def cache_tensors(cache) -> list:
    import torch

    out = []
    layers = getattr(cache, "layers", None)
    if layers is not None:
        for layer in layers:
            for attr in ("keys", "values"):
                t = getattr(layer, attr, None)
                if isinstance(t, torch.Tensor):
                    out.append(t)
    else:
        for attr in ("key_cache", "value_cache"):
            out.extend(t for t in getattr(cache, attr, []) if isinstance(t, torch.Tensor))
    return out


def storage_bytes(tensors) -> int:
    seen: dict[int, int] = {}
    for t in tensors:
        if t is None or t.numel() == 0:
            continue
        st = t.untyped_storage()
        seen[st.data_ptr()] = st.nbytes()
    return sum(seen.values())


def module_state_tensors(model) -> list:
    """Tensors a module keeps as plain attributes between calls (not parameters or buffers): Qwen2.5-VL's and
    Qwen3-VL's `rope_deltas`, set by each prefill and read by the decode steps (modeling_qwen2_5_vl.py:1151)."""
    import torch

    return [v for m in model.modules() for v in vars(m).values() if isinstance(v, torch.Tensor)]


# training.optimizer_impl -> torch.optim keyword arguments; absent (None): none, so torch picks its own
# default for the parameters' device (torch/optim/optimizer.py `_default_to_fused_or_foreach`: the
# for-loop on CPU)
OPTIMIZER_IMPL_KWARGS: dict[str | None, dict[str, bool]] = {
    "foreach": {"foreach": True},
    "for_loop": {"foreach": False, "fused": False},
    "fused": {"fused": True},
    None: {},
}


def make_optimizer(name: str, params, impl: str | None = None):
    import torch

    kwargs = OPTIMIZER_IMPL_KWARGS[impl]
    if name == "adamw":
        return torch.optim.AdamW(params, lr=1e-4, **kwargs)
    if name == "sgd":
        return torch.optim.SGD(params, lr=1e-3, **kwargs)
    if name == "sgd_momentum":
        return torch.optim.SGD(params, lr=1e-3, momentum=0.9, **kwargs)
    raise ValueError(f"optimizer {name!r} is not measured by this harness")


def resolved_optimizer_impl(opt, params) -> str:
    """The step implementation torch runs: the one asked for, else the device default it resolves
    (`_default_to_fused_or_foreach`, as adam.py / sgd.py call it when neither flag is given)."""
    from torch.optim.optimizer import _default_to_fused_or_foreach

    if opt.defaults.get("fused"):
        return "fused"
    foreach = opt.defaults.get("foreach")
    if foreach is None:
        _, foreach = _default_to_fused_or_foreach(params, differentiable=False, use_fused=False)
    return "foreach" if foreach else "for_loop"


# --------------------------------------------------------------------------------------------
# the run
# --------------------------------------------------------------------------------------------


def describe_run(w: dict) -> dict:
    """What the harness executes for a workload (derived only from the workload)."""
    prec = w.get("precision", {})
    weights = prec.get("weights", "fp32")
    compute = prec.get("compute", weights)
    if compute != weights:
        raise ValueError("harness runs weights == compute only (no autocast)")
    if w["task"] == "training":
        grads = prec.get("gradients", weights)
        if grads != weights or prec.get("master_weights") not in (None,):
            raise ValueError("harness runs pure-precision training: gradients == weights, no master copy")
    return {"dtype": weights, "attention": w.get("runtime", {}).get("attention", "sdpa")}


def run_case(w: dict) -> dict:
    import torch
    import transformers
    from torch.profiler import ProfilerActivity, profile

    t_wall0 = time.time()
    torch.manual_seed(0)
    torch.set_num_threads(2)
    run = describe_run(w)
    dtype = _dtype(run["dtype"])
    cfg = build_config(w["model"]["hf_config"], run["attention"])
    tracer = Tracer()
    task = w["task"]
    info: dict = {}

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=False) as prof:
        with tracer.label("phase:setup"):
            # random initialisation happens here, before the window: whatever it allocates and frees (a transient
            # the size of the embedding, say) is in `setup`, not in the measured peak (README, "How the peak is
            # measured")
            cls = model_class(cfg)  # an auto class's `from_config`, a model class's `_from_config`
            build = cls.from_config if hasattr(cls, "from_config") else cls._from_config
            model = build(cfg, attn_implementation=run["attention"], dtype=dtype)
            model.to(dtype)
            if w.get("training", {}).get("activation_checkpointing", "none") == "full":
                if hasattr(model, "activation_checkpointing_enable"):
                    model.activation_checkpointing_enable()  # use_reentrant=False by default
                else:
                    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
            model.train(task == "training")
            params = [p for p in model.parameters()]
            buffers = [b for b in model.buffers()]
            info["param_count"] = sum(p.numel() for p in params)
            info["param_bytes"] = storage_bytes(params)
            info["buffer_bytes"] = storage_bytes(buffers)
            info["weights_bytes"] = storage_bytes(params + buffers)
            info["model_class"] = type(model).__name__
            measured_type = w["model"]["hf_config"]["model_type"]
            if measured_type in REMOTE_CODE_STAND_INS:
                info["stand_in"] = {"for": measured_type, "built_as": REMOTE_CODE_STAND_INS[measured_type]}
            towers = tower_param_count(model)
            if towers:
                info["tower_param_count"] = towers
            info["attn_implementation"] = getattr(model.config, "_attn_implementation", None)
            tracer.install(model)
            tracer.snap("weights", params + buffers)
            vocab = cfg.get_text_config().vocab_size

        if task == "inference":
            inf = w["inference"]
            B, Tin, N = inf["concurrent_sessions"], inf["max_input_tokens"], inf["max_output_tokens"]
            layout = inf.get("kv_cache_layout", "dynamic")
            input_ids = torch.randint(0, vocab, (B, Tin))
            mask = torch.ones_like(input_ids)
            tracer.snap("inputs", [input_ids, mask])
            gen_kwargs = dict(
                attention_mask=mask,
                max_new_tokens=N,
                min_new_tokens=N,
                do_sample=False,
                pad_token_id=0,
            )
            if layout == "contiguous":
                gen_kwargs["cache_implementation"] = "static"
                gen_kwargs["disable_compile"] = True
            elif layout != "dynamic":
                raise ValueError(f"kv_cache_layout {layout!r} is not measured by this harness")
            with torch.no_grad():
                with tracer.label("phase:warmup"):
                    tracer.in_generate, tracer.gen_calls = True, 0
                    out = model.generate(input_ids, **gen_kwargs)
                    tracer.in_generate = False
                del out
                gc.collect()
                known = params + buffers + [input_ids, mask]
                cache = getattr(model, "_cache", None)
                if cache is not None:
                    known += cache_tensors(cache)
                # the module-held tensors are looked at, not kept: holding the warm-up's `rope_deltas` here would
                # keep it alive past the measured prefill that replaces it
                info["known_live_at_window_start"] = storage_bytes(known + module_state_tensors(model))
                with tracer.label("window"), tracer.label("phase:generate"):
                    tracer.in_generate, tracer.gen_calls = True, 0
                    out = model.generate(input_ids, **gen_kwargs)
                    tracer.in_generate = False
                    info["generated_tokens"] = int(out.shape[1] - Tin)
                    info["forward_calls"] = tracer.gen_calls
            del out
        elif task == "training":
            tr = w["training"]
            B, T = tr["micro_batch_size"], tr["sequence_length"]
            input_ids = torch.randint(0, vocab, (B, T))
            tracer.snap("inputs", [input_ids])
            opt = make_optimizer(tr.get("optimizer", "adamw"), params, tr.get("optimizer_impl"))
            info["optimizer_impl"] = resolved_optimizer_impl(opt, params)
            losses = []
            window = None
            for step in range(1, TRAIN_STEPS + 1):
                if step == 2:
                    gc.collect()
                    state = [v for s in opt.state.values() for v in s.values() if isinstance(v, torch.Tensor)]
                    info["optimizer_state_bytes"] = storage_bytes(state)
                    info["known_live_at_window_start"] = storage_bytes(params + buffers + state + [input_ids])
                    window = tracer.label("window")
                    window.__enter__()
                with tracer.label(f"phase:step{step}/forward"):
                    loss = model(input_ids=input_ids, labels=input_ids, use_cache=False).loss
                with tracer.label(f"phase:step{step}/backward"):
                    loss.backward()
                tracer.snap("gradients", [p.grad for p in params if p.grad is not None])
                if step == 2:
                    info["gradient_bytes"] = storage_bytes([p.grad for p in params if p.grad is not None])
                with tracer.label(f"phase:step{step}/optimizer_step"):
                    opt.step()
                tracer.snap(
                    "optimizer_state",
                    [v for s in opt.state.values() for v in s.values() if isinstance(v, torch.Tensor)],
                )
                with tracer.label(f"phase:step{step}/zero_grad"):
                    opt.zero_grad(set_to_none=True)
                losses.append(float(loss))
                del loss
            window.__exit__(None, None, None)
            info["losses"] = losses
        else:
            raise ValueError(f"task {task!r} is not measured by this harness")

    t_run = time.time() - t_wall0
    t0 = time.time()
    analysis = analyse(prof, tracer, task)
    analysis["analysis_seconds"] = round(time.time() - t0, 2)
    return {
        "case": w["name"],
        "task": task,
        "measured_peak_bytes": analysis.pop("peak"),
        "baseline_bytes": analysis.pop("baseline"),
        **info,
        **analysis,
        "versions": {
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "python": platform.python_version(),
        },
        "machine": platform.machine(),
        "threads": torch.get_num_threads(),
        "run_seconds": round(t_run, 2),
    }


# --------------------------------------------------------------------------------------------
# analysis of the profiler trace
# --------------------------------------------------------------------------------------------


def _walk(roots):
    stack = list(roots)
    while stack:
        n = stack.pop()
        yield n
        stack.extend(n.children)


def _chain(node) -> list[str]:
    names = []
    p = node.parent
    while p is not None:
        names.append(p.name)
        p = p.parent
    return names  # innermost first


def module_kind(mod: str | None) -> str:
    """Coarse kind of the innermost module (by its qualified name)."""
    if mod is None:
        return "none"
    m = mod.lower()
    if m == "<root>":
        return "top (loss/head glue)"
    last = m.split(".")[-1]
    if "lm_head" in m:
        return "lm_head"
    if "rotary" in m:
        return "rotary"
    if any(k in last for k in ("embed", "wte", "wpe")):
        return "embedding"
    if "norm" in last or last.startswith("ln") or last.endswith("layernorm"):
        return "norm"
    if last in ("act", "act_fn", "activation_fn", "fc1", "fc2") or any(
        k in m for k in ("mlp", "expert", "block_sparse_moe", "feed_forward", "moe")
    ):
        return "mlp/moe"
    if any(k in m for k in ("self_attn", ".attn", "attention")):
        return "attention"
    if last.isdigit():
        return "decoder layer glue"
    return "model glue"


def _context(node) -> dict:
    chain = _chain(node)
    ctx = {"phase": None, "gen": None, "module": None, "op": None, "top_op": None, "autograd": None}
    for name in chain:
        if ctx["op"] is None and name.startswith("aten::"):
            ctx["op"] = name
        if name.startswith("aten::"):
            ctx["top_op"] = name  # keeps the outermost aten op below the labels
        if ctx["module"] is None and name.startswith("mod:"):
            ctx["module"] = name[4:]
        if ctx["autograd"] is None and name.startswith("autograd::engine::evaluate_function: "):
            ctx["autograd"] = name.split(": ", 1)[1]
        if ctx["gen"] is None and name.startswith("gen:"):
            ctx["gen"] = name[4:]
        if ctx["phase"] is None and name.startswith("phase:"):
            ctx["phase"] = name[6:]
        if name.startswith(("mod:", "phase:", "gen:")):
            # the outermost aten op must be below the innermost label
            pass
    # recompute top_op as the outermost aten op under the innermost label
    top = None
    for name in chain:
        if name.startswith(("mod:", "phase:", "gen:", "window", "autograd::engine")):
            break
        if name.startswith("aten::"):
            top = name
    ctx["top_op"] = top
    return ctx


def _phase_kind(phase: str | None) -> str:
    if phase is None:
        return "none"
    return phase.split("/")[-1] if "/" in phase else phase


def _categorise(block, ctx, role, task, in_window: bool) -> str:
    if role is not None:
        return role
    pk = _phase_kind(ctx["phase"])
    if not in_window:
        return "persistent (allocated before the window)"
    kind = module_kind(ctx["module"])
    if task == "training":
        if pk == "forward":
            if kind == "top (loss/head glue)":
                return "loss (fp32 logits copy / log-softmax)"
            return "activations (saved for backward)"
        if pk == "backward":
            if ctx["module"] is not None:
                return "activations (recomputed in backward)"
            return "autograd buffers (grads of activations)"
        if pk == "optimizer_step":
            return "optimizer step transient"
        return f"other ({pk})"
    # inference
    if ctx["module"] is not None:
        if ctx["gen"] is None:
            return "activations"
        return "activations"
    return "generate loop (logits copies, ids, masks)"


def analyse(prof, tracer: Tracer, task: str) -> dict:
    from torch._C._profiler import _ExtraFields_Allocation

    roots = prof.profiler.kineto_results.experimental_event_tree()
    events: list[Event] = []
    labels: dict[str, list[tuple[int, int]]] = defaultdict(list)
    seq = 0
    for n in _walk(roots):
        ef = n.extra_fields
        if isinstance(ef, _ExtraFields_Allocation):
            if ef.alloc_size != 0:
                events.append(Event(n.start_time_ns, ef.ptr, ef.alloc_size, seq, n))
                seq += 1
        elif n.name.startswith(("window", "snap:", "phase:", "gen:")):
            labels[n.name].append((n.start_time_ns, n.end_time_ns))
    # keep the walk's order deterministic for ties: by time, then profiler id
    for e in events:
        e.seq = e.ctx.id
    r = replay(events)
    ((w_start, w_end),) = labels["window"]
    wp = window_peak(r, w_start, w_end)
    times = [e.time_ns for e in r.events]

    def interval_peak(a: int, b: int) -> tuple[int, int, int]:
        i0 = bisect.bisect_left(times, a)
        i1 = bisect.bisect_right(times, b)
        start_live = r.live_after[i0 - 1] if i0 > 0 else 0
        peak = start_live
        for i in range(i0, i1):
            if r.live_after[i] > peak:
                peak = r.live_after[i]
        end_live = r.live_after[i1 - 1] if i1 > 0 else 0
        return start_live, peak, end_live

    # the model's construction (random initialisation), before the window: its own peak and what it left live
    setup = None
    for s_start, s_end in labels.get("phase:setup", ()):
        _, s_peak, s_live1 = interval_peak(s_start, s_end)
        freed_in_setup = [
            b.size for b in r.blocks if s_start <= b.alloc_time and b.free_time is not None and b.free_time <= s_end
        ]
        setup = {
            "peak": s_peak,
            "end": s_live1,
            "transient_bytes": s_peak - s_live1,  # allocated and freed again while the model was built
            "largest_freed_block": max(freed_in_setup, default=0),
            "peak_over_window_baseline": s_peak - wp["baseline"],
            "ms": round((s_end - s_start) / 1e6, 2),
        }
    phases = {}
    for name, ivs in labels.items():
        if not name.startswith("phase:"):
            continue
        for a, b in ivs:
            if a < w_start or b > w_end:
                continue
            s, p, e = interval_peak(a, b)
            phases[name[6:]] = {"start": s, "peak": p, "end": e, "ms": round((b - a) / 1e6, 2)}
    gen = {}
    for name, ivs in labels.items():
        if not name.startswith("gen:"):
            continue
        for a, b in ivs:
            if a < w_start or b > w_end:
                continue
            s, p, e = interval_peak(a, b)
            kind = name.split(":")[1]
            g = gen.setdefault(kind, {"calls": 0, "peak": 0, "peak_call": None, "start_of_peak_call": None})
            g["calls"] += 1
            if p > g["peak"]:
                g.update(peak=p, peak_call=int(name.split(":")[2]), start_of_peak_call=s)
    # snapshots: ptr -> [(time, role)]
    snap_at: dict[int, list[tuple[int, str]]] = defaultdict(list)
    for idx, (role, ptrs) in enumerate(tracer.snaps):
        t = labels[f"snap:{idx}"][0][0]
        for ptr in ptrs:
            snap_at[ptr].append((t, role))

    def role_of(b) -> str | None:
        for t, role in snap_at.get(b.ptr, ()):
            if b.alloc_time <= t and (b.free_time is None or t < b.free_time):
                return role
        return None

    live = live_blocks_at(r, wp["peak_index"], wp["peak_time_ns"] if wp["peak_index"] is None else None)
    assert sum(b.size for b in live) == wp["peak"], (sum(b.size for b in live), wp["peak"])
    cats: dict[str, int] = defaultdict(int)
    details: dict[tuple, list[int]] = defaultdict(lambda: [0, 0])
    rows = []
    ctx_cache: dict[int, dict] = {}
    for b in live:
        ctx = ctx_cache.get(id(b))
        if ctx is None:
            ctx = _context(b.ctx)
        role = role_of(b)
        in_window = b.alloc_time >= w_start
        cat = _categorise(b, ctx, role, task, in_window)
        cats[cat] += b.size
        key = (
            cat,
            _phase_kind(ctx["phase"]),
            module_kind(ctx["module"]),
            ctx["top_op"] or ctx["op"],
            ctx["autograd"],
        )
        details[key][0] += b.size
        details[key][1] += 1
        rows.append((b.size, cat, ctx, b, in_window))
    rows.sort(key=lambda x: -x[0])
    top_blocks = [
        {
            "bytes": s,
            "category": cat,
            "phase": ctx["phase"],
            "gen": ctx["gen"],
            "module": ctx["module"],
            "op": ctx["op"],
            "top_op": ctx["top_op"],
            "autograd": ctx["autograd"],
            "allocated_ms_from_window_start": round((b.alloc_time - w_start) / 1e6, 2),
        }
        for s, cat, ctx, b, _ in rows[:30]
    ]
    detail_rows = sorted(
        (
            {
                "category": k[0],
                "phase": k[1],
                "module_kind": k[2],
                "op": k[3],
                "autograd": k[4],
                "bytes": v[0],
                "blocks": v[1],
            }
            for k, v in details.items()
        ),
        key=lambda d: -d["bytes"],
    )
    peak_ctx = _context(r.events[wp["peak_index"]].ctx) if wp["peak_index"] is not None else {}
    peak_event = r.events[wp["peak_index"]] if wp["peak_index"] is not None else None
    return {
        "peak": wp["peak"],
        "baseline": wp["baseline"],
        "peak_at": {
            **peak_ctx,
            "ms_from_window_start": round((wp["peak_time_ns"] - w_start) / 1e6, 2),
            "last_allocation_bytes": peak_event.size if peak_event else 0,
        },
        "window_ms": round((w_end - w_start) / 1e6, 1),
        "setup": setup,
        "phases": phases,
        "generate_calls": gen,
        "live_at_peak_by_category": dict(sorted(cats.items(), key=lambda kv: -kv[1])),
        "live_at_peak_detail": detail_rows[:40],
        "largest_live_blocks_at_peak": top_blocks,
        "live_blocks_at_peak": len(live),
        "replay": {
            "events": len(r.events),
            "unmatched_frees": r.unmatched_frees,
            "unmatched_free_bytes": r.unmatched_free_bytes,
        },
    }


# --------------------------------------------------------------------------------------------
# entry points
# --------------------------------------------------------------------------------------------


def measure_in_subprocess(case_id: str, timeout: float = 900) -> dict:
    env = dict(os.environ)
    env.update(
        OMP_NUM_THREADS="2",
        MKL_NUM_THREADS="2",
        TOKENIZERS_PARALLELISM="false",
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_VERBOSITY="error",
        PYTHONHASHSEED="0",
        # glibc's dynamic mmap threshold rises after the first large free, so later large tensors come from a heap
        # that the profiler's many small allocations fragment and that is never trimmed: Jamba's PyTorch Mamba1
        # scan in training (a scan-sized zero tensor per token in backward) grew the process past 20 GB at 2 x 256
        # and was killed, against 1.7 GB with a fixed threshold. Only the process's RSS changes: the measured bytes
        # are the profiler's tensor allocation events (four peaks re-measured byte for byte, HOLDOUT.md round 10).
        MALLOC_MMAP_THRESHOLD_="131072",
    )
    t0 = time.time()
    p = subprocess.run(
        [sys.executable, "-m", "benchmarks.accuracy.measure", case_id],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith(RESULT_PREFIX)]
    if p.returncode != 0 or not lines:
        raise RuntimeError(f"measuring {case_id} failed (rc={p.returncode}):\n{p.stderr[-4000:]}")
    res = json.loads(lines[-1][len(RESULT_PREFIX) :])
    res["process_seconds"] = round(time.time() - t0, 2)
    return res


def main(argv: list[str] | None = None) -> int:
    from benchmarks.accuracy.cases import case_by_id

    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m benchmarks.accuracy.measure CASE_ID", file=sys.stderr)
        return 2
    w = case_by_id(argv[0])
    res = run_case(w)
    print(RESULT_PREFIX + json.dumps(res, sort_keys=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
