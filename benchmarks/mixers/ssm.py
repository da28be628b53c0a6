"""Measure the Mamba mixers transformers 5.24 runs on the CPU against `budgets/engine/components/ssm.py`.

    python -m benchmarks.mixers.ssm            # every shape, a table of measured vs formula
    python -m benchmarks.mixers.ssm --json     # the same figures as JSON (what tests/engine/test_ssm.py records)
    python -m benchmarks.mixers.ssm --falcon   # also what Falcon-H1's decoder layer keeps around its two mixers

Tiny random-weight models are built with `from_config` (the round-10 configs of `benchmarks/accuracy/cases.py`,
and variants of them). Allocation events of the PyTorch profiler are replayed (`workers/runner/cpu_memory.py`):

- inference: `model.generate` of b × s prompt tokens (all-ones mask) + 2 new tokens, under `torch.no_grad()`,
  with the cache generate creates; every mixer call is marked by forward hooks. Per call: the peak above the live
  bytes at its entry (forward/decode transient) and what it leaves alive besides its output (the cache states it
  allocates: only in the prefill call).
- training: the mixer module alone in train mode (all weights trainable, input requires grad, no cache, no
  mask, as a training step without a padding mask calls it): `out = mixer(x)`; saved = live after − live before −
  out; then `out.backward(g)`: the peak above the live bytes at its start, not counting the weights' `.grad`
  tensors (the engine's gradient component) but counting the input's gradient.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from typing import Any

MIXER_CLASSES = ("JambaMambaMixer", "NemotronHMamba2Mixer", "GraniteMoeHybridMambaLayer", "FalconH1Mixer")


@dataclass
class Shape:
    name: str
    family: str  # key of ROUND10_CONFIGS
    overrides: dict[str, Any]
    gen: tuple[int, int] | None  # (b, s) prefill
    train: tuple[int, int] | None  # (b, s)
    dtype: str = "bf16"
    notes: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


SHAPES = [
    # round 10's (r10-jamba-gen-dynamic-bf16-sdpa-b4, r10-jamba-train-adamw-bf16-sdpa-b2)
    Shape("jamba-r10", "jamba", {}, (4, 256), (2, 256)),
    Shape(
        "jamba-h128-fp32",
        "jamba",
        {"hidden_size": 128, "mamba_d_state": 8, "mamba_dt_rank": 8, "mamba_d_conv": 3, "num_attention_heads": 2},
        (2, 100),
        (3, 50),
        "fp32",
    ),
    Shape(
        "jamba-h192-x3",
        "jamba",
        {
            "hidden_size": 192,
            "mamba_expand": 3,
            "mamba_dt_rank": 12,
            "mamba_d_state": 24,
            "num_attention_heads": 3,
            "num_key_value_heads": 1,
        },
        (1, 37),
        (2, 41),
    ),
    Shape("jamba-r10-fp32", "jamba", {}, (3, 64), (1, 96), "fp32"),
    # round 10's Mamba2 families
    Shape("nemotronh-r10", "nemotron_h", {}, (4, 256), (2, 256)),
    Shape("granite-r10", "granitemoehybrid", {}, (4, 256), (2, 256)),
    Shape("falconh1-r10", "falcon_h1", {}, (4, 256), (2, 256)),
    # s not a multiple of the chunk, other widths, fp32
    Shape(
        "nemotronh-g4-fp32",
        "nemotron_h",
        {"mamba_num_heads": 4, "mamba_head_dim": 24, "n_groups": 4, "ssm_state_size": 8, "chunk_size": 32},
        (2, 150),
        (3, 70),
        "fp32",
    ),
    Shape("granite-odd", "granitemoehybrid", {"mamba_n_heads": 16, "mamba_d_head": 32}, (1, 70), (2, 100)),
    Shape(
        "falconh1-norm-fp32",
        "falcon_h1",
        {"mamba_rms_norm": True, "mamba_d_ssm": 128, "mamba_d_head": 16, "mamba_n_groups": 2, "mamba_chunk_size": 48},
        (3, 100),
        (2, 130),
        "fp32",
    ),
    Shape(
        "falconh1-norm-mup",
        "falcon_h1",
        {"mamba_rms_norm": True, "ssm_multipliers": [1.0, 0.5, 0.25, 2.0, 1.5], "ssm_in_multiplier": 0.5},
        (2, 64),
        (2, 64),
    ),
]


def _torch_dtype(name: str):
    import torch

    return {"bf16": torch.bfloat16, "fp32": torch.float32, "fp16": torch.float16}[name]


def build(shape: Shape):
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from benchmarks.accuracy.cases import ROUND10_CONFIGS

    cfg = dict(ROUND10_CONFIGS[shape.family])
    cfg.update(shape.overrides)
    model_type = cfg.pop("model_type")
    torch.manual_seed(0)
    config = AutoConfig.for_model(model_type, **cfg)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="sdpa", dtype=_torch_dtype(shape.dtype))
    return model


def mixers(model) -> list[tuple[str, Any]]:
    return [(n, m) for n, m in model.named_modules() if type(m).__name__ in MIXER_CLASSES]


def mixer_dims(model, mixer) -> dict[str, int]:
    """The engine's Mixer fields, read from the built module (what hf_layered.py reads from the config)."""
    h = model.config.hidden_size
    if type(mixer).__name__ == "JambaMambaMixer":
        return {
            "variant": "mamba1",
            "h": h,
            "inner": mixer.intermediate_size,
            "state_dim": mixer.ssm_state_size,
            "kernel": mixer.conv_kernel_size,
            "rank": mixer.time_step_rank,
        }
    return {
        "variant": "mamba2",
        "h": h,
        "inner": mixer.intermediate_size,
        "heads": mixer.num_heads,
        "head_dim": mixer.head_dim,
        "state_dim": mixer.ssm_state_size,
        "groups": mixer.n_groups,
        "chunk": mixer.chunk_size,
        "kernel": mixer.conv_kernel_size,
        "norm": int(not isinstance(mixer.norm, __import__("torch").nn.Identity)),
        "falcon": int(type(mixer).__name__ == "FalconH1Mixer"),
    }


def _nbytes(t) -> int:
    return t.untyped_storage().nbytes()


class Spans:
    """Marks calls of modules with record_function labels via forward hooks."""

    def __init__(self) -> None:
        self.open: list[Any] = []
        self.out_bytes: list[int] = []
        self.handles: list[Any] = []

    def attach(self, modules: list[Any]) -> None:
        import torch

        def pre(mod, args, kwargs):
            rf = torch.profiler.record_function("vramplan::span")
            rf.__enter__()
            self.open.append(rf)

        def post(mod, args, kwargs, out):
            t = out[0] if isinstance(out, tuple) else out
            self.out_bytes.append(_nbytes(t))
            self.open.pop().__exit__(None, None, None)

        for m in modules:
            self.handles.append(m.register_forward_pre_hook(pre, with_kwargs=True))
            self.handles.append(m.register_forward_hook(post, with_kwargs=True))

    def detach(self) -> None:
        for h in self.handles:
            h.remove()


def _levels(r, start: int, end: int, exclude: set[int] | None = None) -> dict[str, int]:
    """Live bytes before `start`, the peak in [start, end] and the live bytes at `end` (blocks in `exclude`, by
    index, are left out of the count from their allocation on)."""
    exclude = exclude or set()
    live = 0
    before = 0
    peak = None
    for i, e in enumerate(r.events):
        bi = r.block_of_event[i]
        if bi is not None and bi in exclude:
            continue
        if e.time_ns > end:
            break
        live += e.size if bi is not None else 0
        if e.time_ns < start:
            before = live
            continue
        peak = live if peak is None else max(peak, live)
    return {"before": before, "peak": max(before, peak or before), "after": live if peak is not None else before}


def _run_profiled(fn):
    from torch.profiler import ProfilerActivity, profile

    from workers.runner.cpu_memory import profiler_events, replay

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=False) as prof:
        extra = fn()
    events, labels = profiler_events(prof)
    return replay(events), labels, extra


def measure_generate(shape: Shape) -> dict[str, Any]:
    import torch

    b, s = shape.gen  # type: ignore[misc]
    state: dict[str, Any] = {}

    def run():
        model = build(shape).eval()
        mods = [m for _, m in mixers(model)]
        state["dims"] = mixer_dims(model, mods[0])
        state["n"] = len(mods)
        spans = Spans()
        spans.attach(mods)
        torch.manual_seed(1)
        ids = torch.randint(3, model.config.vocab_size, (b, s))
        with torch.no_grad():
            out = model.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=2,
                min_new_tokens=2,
                do_sample=False,
                pad_token_id=0,
                return_dict_in_generate=True,
            )
        spans.detach()
        cache = out.past_key_values
        layer = cache.layers[mods[0].layer_idx] if hasattr(cache, "layers") else None
        if layer is not None and hasattr(layer, "conv_states"):
            conv, rec = layer.conv_states[0], layer.recurrent_states[0]
            state["cache"] = {
                "class": type(cache).__name__,
                "layer": type(layer).__name__,
                "conv": [list(conv.shape), str(conv.dtype), _nbytes(conv)],
                "ssm": [list(rec.shape), str(rec.dtype), _nbytes(rec)],
            }
        state["out_bytes"] = spans.out_bytes
        return None

    r, labels, _ = _run_profiled(run)
    spans = labels.get("vramplan::span", [])
    n = state["n"]
    calls = []
    for i, (a, z) in enumerate(spans):
        lv = _levels(r, a, z)
        calls.append(
            {
                "transient": lv["peak"] - lv["before"],
                "left": lv["after"] - lv["before"] - state["out_bytes"][i],
                "out": state["out_bytes"][i],
            }
        )
    prefill, decode = calls[:n], calls[n : 2 * n]
    return {"dims": state["dims"], "prefill": prefill, "decode": decode, "cache": state.get("cache"), "b": b, "s": s}


def _layer_of(model, mixer):
    for layer in model.model.layers:
        if any(m is mixer for m in layer.modules()):
            return layer
    raise LookupError


def measure_train(shape: Shape) -> dict[str, Any]:
    import torch

    b, s = shape.train  # type: ignore[misc]
    state: dict[str, Any] = {}

    def run():
        model = build(shape).train()
        mixer = mixers(model)[0][1]
        state["dims"] = mixer_dims(model, mixer)
        torch.manual_seed(1)
        x = torch.randn(b, s, model.config.hidden_size, dtype=_torch_dtype(shape.dtype), requires_grad=True)
        g = torch.randn(b, s, model.config.hidden_size, dtype=x.dtype)
        with torch.profiler.record_function("vramplan::fwd"):
            out = mixer(x)
        with torch.profiler.record_function("vramplan::bwd"):
            out.backward(g)
        state["out"] = _nbytes(out)
        state["param_grad_ptrs"] = {
            p.grad.untyped_storage().data_ptr() for p in mixer.parameters() if p.grad is not None
        }
        state["x_grad"] = _nbytes(x.grad)

    r, labels, _ = _run_profiled(run)
    (fa, fz), (ba, bz) = labels["vramplan::fwd"][0], labels["vramplan::bwd"][0]
    fwd = _levels(r, fa, fz)
    # the weights' gradients: blocks allocated in backward, alive at the end, at a .grad's address
    ptrs = state["param_grad_ptrs"]
    grads = {
        i
        for i, blk in enumerate(r.blocks)
        if blk.ptr in ptrs and ba <= blk.alloc_time <= bz and (blk.free_time is None or blk.free_time > bz)
    }
    bwd = _levels(r, ba, bz, grads)
    return {
        "dims": state["dims"],
        "b": b,
        "s": s,
        "saved": fwd["after"] - fwd["before"] - state["out"],
        "forward_peak": fwd["peak"] - fwd["before"],
        "backward": bwd["peak"] - bwd["before"],
        "x_grad": state["x_grad"],
        "param_grads": sum(r.blocks[i].size for i in grads),
    }


def measure_falcon_layer(b: int = 4, s: int = 256) -> dict[str, Any]:
    """Falcon-H1's decoder layer in the prefill (round-10 shape): what it keeps alive beyond its input during the
    Mamba2 call and during the attention call, and (training) what the layer saves besides what the two mixers
    save."""
    import torch

    shape = Shape("falconh1-r10", "falcon_h1", {}, (b, s), (2, s))
    st: dict[str, Any] = {}

    def run():
        model = build(shape).eval()
        layer = model.model.layers[0]
        spans = Spans()
        spans.attach([layer, layer.mamba, layer.self_attn])
        ids = torch.randint(3, model.config.vocab_size, (b, s))
        with torch.no_grad():
            model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=1, do_sample=False, pad_token_id=0)
        spans.detach()
        st["h"] = model.config.hidden_size

    r, labels, _ = _run_profiled(run)
    sp = labels["vramplan::span"]  # layer, mamba, attention (nested; sorted by start)
    layer_s, mamba_s, attn_s = sp[0], sp[1], sp[2]
    lv_layer = _levels(r, *layer_s)
    lv_m = _levels(r, *mamba_s)
    lv_a = _levels(r, *attn_s)
    return {
        "b": b,
        "s": s,
        "h": st["h"],
        "bsh_bf16": b * s * st["h"] * 2,
        "at_mamba_entry_above_layer_entry": lv_m["before"] - lv_layer["before"],
        "at_attention_entry_above_layer_entry": lv_a["before"] - lv_layer["before"],
        "layer_peak_above_entry": lv_layer["peak"] - lv_layer["before"],
    }


def formulas(dims: dict[str, int], b: int, s: int, d: int, kind: str) -> float:
    from budgets.engine.components import ssm
    from budgets.engine.models.layers import Mixer

    if dims["variant"] == "mamba1":
        mixer = Mixer(
            "mamba",
            variant="mamba1",
            inner=dims["inner"],
            state_dim=dims["state_dim"],
            kernel=dims["kernel"],
            rank=dims["rank"],
        )
        norm = True
    else:
        mixer = Mixer(
            "mamba",
            dims["heads"],
            0,
            dims["head_dim"],
            variant="mamba2",
            inner=dims["inner"],
            state_dim=dims["state_dim"],
            groups=dims["groups"],
            chunk=dims["chunk"],
            kernel=dims["kernel"],
        )
        norm = bool(dims["norm"])
    h = dims["h"]
    falcon = bool(dims.get("falcon"))
    if kind == "prefill":
        return ssm.forward_transient(mixer, b, s, h, d, gated_norm=norm, falcon=falcon)
    if kind == "left":
        return ssm.cache_state_bytes(mixer, b, d)
    if kind == "decode":
        return ssm.decode_transient(mixer, b, h, d, gated_norm=norm, falcon=falcon)
    if kind == "saved":
        return ssm.saved(mixer, b, s, h, d, gated_norm=norm, falcon=falcon)
    return ssm.backward_transient(mixer, b, s, h, d, gated_norm=norm, falcon=falcon)


def main(argv: list[str] | None = None) -> int:
    import torch

    p = argparse.ArgumentParser()
    p.add_argument("--json", action="store_true")
    p.add_argument("--falcon", action="store_true")
    p.add_argument("--shape", action="append")
    a = p.parse_args(argv)
    torch.set_num_threads(2)
    rows = []
    records: dict[str, Any] = {}
    for shape in SHAPES:
        if a.shape and shape.name not in a.shape:
            continue
        d = 2 if shape.dtype == "bf16" else 4
        rec: dict[str, Any] = {"dtype": shape.dtype}
        if shape.gen:
            gm = measure_generate(shape)
            dims = gm["dims"]
            b, s = gm["b"], gm["s"]
            pre, dec = gm["prefill"][0], gm["decode"][0]
            rec.update(
                dims=dims,
                gen=[b, s],
                prefill=pre["transient"],
                left=pre["left"],
                decode=dec["transient"],
                decode_left=dec["left"],
                cache=gm["cache"],
            )
            for kind, meas, bb, ss in (
                ("prefill", pre["transient"], b, s),
                ("left", pre["left"], b, s),
                ("decode", dec["transient"], b, 1),
            ):
                rows.append((shape.name, kind, bb, ss, shape.dtype, meas, formulas(dims, bb, ss, d, kind)))
        if shape.train:
            tm = measure_train(shape)
            dims = tm["dims"]
            rec.update(dims=dims, train=[tm["b"], tm["s"]], saved=tm["saved"], backward=tm["backward"])
            rec["x_grad"] = tm["x_grad"]
            for kind in ("saved", "backward"):
                rows.append(
                    (
                        shape.name,
                        kind,
                        tm["b"],
                        tm["s"],
                        shape.dtype,
                        tm[kind],
                        formulas(dims, tm["b"], tm["s"], d, kind),
                    )
                )
        records[shape.name] = rec
        sys.stdout.flush()
    if a.falcon:
        records["falcon_layer"] = measure_falcon_layer()
    if a.json:
        print(json.dumps(records, indent=1))
        return 0
    print(f"{'shape':22} {'quantity':9} {'b':>2} {'s':>4} {'dt':4} {'measured':>12} {'formula':>12} {'err %':>8}")
    worst = 0.0
    for name, kind, b, s, dt, meas, form in rows:
        err = (form - meas) / meas * 100 if meas else (0.0 if form == 0 else float("inf"))
        worst = max(worst, abs(err))
        print(f"{name:22} {kind:9} {b:>2} {s:>4} {dt:4} {meas:>12,} {form:>12,.0f} {err:>8.2f}")
    print(f"max |error| {worst:.2f} %")
    for name, rec in records.items():
        if rec.get("cache"):
            print(name, "cache:", rec["cache"])
    if "falcon_layer" in records:
        print("falcon_h1 decoder layer:", records["falcon_layer"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
