"""Measure the linear-attention mixers transformers 5.24 runs on the CPU (Gated DeltaNet: Qwen3-Next, Qwen3.5;
Kimi Delta Attention) and compare with `budgets.engine.components.linear_attention`.

    python -m benchmarks.mixers.linear_attention            # every shape, a table
    python -m benchmarks.mixers.linear_attention --detail   # also the largest blocks live at each peak

Each shape builds the real transformers module from a tiny config and measures, by PyTorch profiler replay of
the CPU allocation events (`workers/runner/cpu_memory.py`):

- prefill: `torch.no_grad()`, eval, s tokens per sequence into an empty `DynamicCache(config=...)` (what
  `generate` creates for these models): peak above the live level at entry (input live), and what stays alive
  after the call besides the output (the cache states the call allocated);
- decode: one more token per sequence with that cache;
- saved: train mode, input requires grad, no cache: live after `out = mixer(x)` with out's storage released
  (its graph kept, as the next op would keep it) minus before;
- backward: `out = mixer(x)`, its storage released (the decoder's residual add keeps no copy), then
  `out.backward(g)`: peak above the level at its start (saved + g + input), the parameter gradients left out
  (the engine counts them in its gradient term; their blocks are dropped from the replay).
"""

from __future__ import annotations

import argparse
import gc
import sys
from dataclasses import dataclass
from typing import Any

import torch

from budgets.engine.components import linear_attention as la
from budgets.engine.models.layers import Mixer
from workers.runner.cpu_memory import Event, replay

LABEL = "vramplan::mx::"


@dataclass(frozen=True)
class Case:
    name: str
    family: str  # qwen3_next | qwen3_5 | qwen3_5_moe | kimi_linear
    b: int
    s: int
    h: int
    heads: int  # value heads (GDN) / heads (KDA)
    kv_heads: int  # key heads (GDN) / = heads (KDA)
    dk: int
    dv: int
    kernel: int = 4
    dtype: str = "bf16"


CASES: tuple[Case, ...] = (
    # the round-10 shapes: generate 4 × 256, train 2 × 256 (benchmarks/accuracy/cases.py ROUND10_CONFIGS)
    Case("r10-qwen3next-gen", "qwen3_next", 4, 256, 256, 4, 2, 64, 64),
    Case("r10-qwen3next-train", "qwen3_next", 2, 256, 256, 4, 2, 64, 64),
    Case("r10-qwen35-gen", "qwen3_5", 4, 256, 256, 6, 2, 64, 64),
    Case("r10-qwen35-train", "qwen3_5", 2, 256, 256, 6, 2, 64, 64),
    Case("r10-qwen35moe-gen", "qwen3_5_moe", 4, 256, 256, 4, 2, 64, 64),
    Case("r10-qwen35moe-train", "qwen3_5_moe", 2, 256, 256, 4, 2, 64, 64),
    Case("r10-kimilinear-gen", "kimi_linear", 4, 256, 256, 4, 4, 64, 64),
    Case("r10-kimilinear-train", "kimi_linear", 2, 256, 256, 4, 4, 64, 64),
    # other shapes: s not a multiple of 64, short prompts, other widths and head counts, fp32
    Case("qwen3next-s100-fp32", "qwen3_next", 3, 100, 192, 2, 2, 32, 48, dtype="fp32"),
    Case("qwen3next-s200-nk1", "qwen3_next", 2, 200, 128, 6, 1, 32, 32, kernel=3),
    Case("qwen35-s40", "qwen3_5", 5, 40, 128, 4, 4, 32, 64),
    Case("qwen35-s130-fp32", "qwen3_5", 2, 130, 96, 4, 2, 48, 32, dtype="fp32"),
    Case("kimi-s100-fp32", "kimi_linear", 3, 100, 128, 2, 2, 32, 32, dtype="fp32"),
    Case("kimi-s200", "kimi_linear", 2, 200, 192, 3, 3, 48, 48),
    Case("kimi-s30", "kimi_linear", 1, 30, 64, 2, 2, 16, 16, kernel=3),
)


def _dtype(case: Case) -> torch.dtype:
    return torch.bfloat16 if case.dtype == "bf16" else torch.float32


def build(case: Case) -> tuple[Any, Any, Mixer]:
    """(module, config, the engine's Mixer) for a case."""
    import importlib

    from transformers import CONFIG_MAPPING as _MAPPING

    CONFIG_MAPPING: Any = _MAPPING

    common = {"hidden_size": case.h, "num_hidden_layers": 2, "vocab_size": 64, "hidden_act": "silu"}
    if case.family == "kimi_linear":
        m: Any = importlib.import_module("transformers.models.kimi_linear.modeling_kimi_linear")

        config = CONFIG_MAPPING["kimi_linear"](
            **common,
            num_attention_heads=2,
            num_key_value_heads=2,
            head_dim=32,
            kv_lora_rank=32,
            q_lora_rank=None,
            qk_nope_head_dim=32,
            qk_rope_head_dim=16,
            v_head_dim=32,
            linear_attn_config={
                "full_attn_layers": [2],
                "kda_layers": [1],
                "head_dim": case.dk,
                "num_heads": case.heads,
                "short_conv_kernel_size": case.kernel,
            },
        )
        module = m.KimiLinearDeltaAttention(config, 0)
        split = False
    else:
        gdn = {
            "linear_conv_kernel_dim": case.kernel,
            "linear_key_head_dim": case.dk,
            "linear_num_key_heads": case.kv_heads,
            "linear_num_value_heads": case.heads,
            "linear_value_head_dim": case.dv,
            "layer_types": ["linear_attention", "full_attention"],
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
            "head_dim": 32,
        }
        if case.family == "qwen3_next":
            m = importlib.import_module("transformers.models.qwen3_next.modeling_qwen3_next")

            config = CONFIG_MAPPING["qwen3_next"](**common, **gdn)
            module = m.Qwen3NextGatedDeltaNet(config, 0)
            split = False
        elif case.family == "qwen3_5":
            m = importlib.import_module("transformers.models.qwen3_5.modeling_qwen3_5")

            config = CONFIG_MAPPING["qwen3_5_text"](**common, **gdn)
            module = m.Qwen3_5GatedDeltaNet(config, 0)
            split = True
        else:
            m = importlib.import_module("transformers.models.qwen3_5_moe.modeling_qwen3_5_moe")

            config = CONFIG_MAPPING["qwen3_5_moe_text"](**common, **gdn)
            module = m.Qwen3_5MoeGatedDeltaNet(config, 0)
            split = True
    module = module.to(_dtype(case))
    if case.family == "kimi_linear":  # _keep_in_fp32_modules_strict (modeling_kimi_linear.py:856)
        module.forget_gate.dt_bias.data = module.forget_gate.dt_bias.data.float()
    if case.family == "kimi_linear":
        w = case.heads * case.dk
        mixer = Mixer(
            "linear",
            case.heads,
            case.heads,
            case.dk,
            case.dk,
            conv_state=(case.kernel - 1) * 3 * w,
            recurrent_state=case.heads * case.dk * case.dk,
            variant="kda",
            chunk=64,
            kernel=case.kernel,
        )
    else:
        conv = 2 * case.kv_heads * case.dk + case.heads * case.dv
        mixer = Mixer(
            "linear",
            case.heads,
            case.kv_heads,
            case.dk,
            case.dv,
            conv_state=(case.kernel - 1) * conv,
            recurrent_state=case.heads * case.dk * case.dv,
            variant="gated_delta",
            chunk=64,
            kernel=case.kernel,
            split_proj=split,
        )
    return module, config, mixer


def _events(prof: Any) -> tuple[list[Event], dict[str, tuple[int, int]]]:
    """Allocation events (ctx: the op that allocated) and the spans of our labels."""
    from torch._C._profiler import _ExtraFields_Allocation

    events: list[Event] = []
    spans: dict[str, tuple[int, int]] = {}
    stack = [(node, "") for node in prof.profiler.kineto_results.experimental_event_tree()]
    while stack:
        node, parent = stack.pop()
        extra = node.extra_fields
        try:
            node_name = node.name
        except UnicodeDecodeError:
            node_name = "?"
        if isinstance(extra, _ExtraFields_Allocation):
            if extra.alloc_size != 0:
                events.append(Event(node.start_time_ns, extra.ptr, extra.alloc_size, node.id, parent))
        elif node_name.startswith(LABEL):
            spans[node_name[len(LABEL) :]] = (node.start_time_ns, node.end_time_ns)
        name = parent
        if str(node.tag) == "_EventType.PyCall" and ".py(" in node_name:
            name = node_name.rsplit("/", 1)[-1]
        elif str(node.tag) == "_EventType.TorchOp" and " aten" not in parent:
            name = f"{parent} {node_name}"
        stack.extend((child, name) for child in node.children)
    return events, spans


def _window(events: list[Event], span: tuple[int, int], drop: set[int] = frozenset()) -> dict[str, Any]:  # type: ignore[assignment]
    """Baseline (live before the span), peak inside it, live at its end, and the blocks live at the peak."""
    kept = [e for e in events if e.ptr not in drop or e.time_ns < span[0]]
    r = replay(kept)
    start, end = span
    base = peak = after = 0
    peak_i = None
    for i, e in enumerate(r.events):
        if e.time_ns < start:
            base = after = peak = r.live_after[i]
            continue
        if e.time_ns > end:
            break
        after = r.live_after[i]
        if after > peak:
            peak, peak_i = after, i
    blocks = []
    if peak_i is not None:
        t = r.events[peak_i].time_ns
        for blk in r.blocks:
            if blk.alloc_time >= start and blk.alloc_index <= peak_i and (blk.free_time is None or blk.free_time > t):
                blocks.append((blk.size, blk.ctx))
    blocks.sort(key=lambda x: -x[0])
    return {"base": base, "peak": peak - base, "after": after - base, "blocks": blocks}


def measure(case: Case) -> dict[str, Any]:
    from transformers import DynamicCache

    torch.manual_seed(0)
    dt = _dtype(case)
    out: dict[str, Any] = {}
    with torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True, with_stack=True
    ) as prof:
        module, config, mixer = build(case)
        module.eval()
        with torch.no_grad():
            cache = DynamicCache(config=config)
            x = torch.randn(case.b, case.s, case.h, dtype=dt)
            with torch.profiler.record_function(LABEL + "prefill"):
                y = module(x, cache=cache)
            out_bytes = y.numel() * y.element_size()
            del y, x
            x = torch.randn(case.b, 1, case.h, dtype=dt)
            with torch.profiler.record_function(LABEL + "decode"):
                y = module(x, cache=cache)
            del y, x
        layer = cache.layers[0]
        states = {
            "conv": (tuple(layer.conv_states[0].shape), layer.conv_states[0].dtype),
            "recurrent": (tuple(layer.recurrent_states[0].shape), layer.recurrent_states[0].dtype),
        }
        del cache, layer
        module.train()
        x = torch.randn(case.b, case.s, case.h, dtype=dt, requires_grad=True)
        with torch.profiler.record_function(LABEL + "saved"):
            y = module(x)
            y.untyped_storage().resize_(0)  # the output freed, its graph kept (a later op would hold it)
        del y
        gc.collect()
        y = module(x)
        g = torch.randn_like(y)
        y.untyped_storage().resize_(0)
        with torch.profiler.record_function(LABEL + "backward"):
            y.backward(g)
        grads = {p.grad.untyped_storage().data_ptr() for p in module.parameters() if p.grad is not None}
        del y, g, x
    events, spans = _events(prof)
    pre = _window(events, spans["prefill"])
    out["prefill"] = pre["peak"]
    out["prefill_leaves"] = pre["after"] - out_bytes
    out["decode"] = _window(events, spans["decode"])["peak"]
    out["saved"] = _window(events, spans["saved"])["after"]
    out["backward"] = _window(events, spans["backward"], grads)["peak"]
    out["states"] = states
    out["detail"] = {k: _window(events, spans[k], grads if k == "backward" else set())["blocks"][:14] for k in spans}
    out["mixer"] = mixer
    return out


def formulas(case: Case, mixer: Mixer) -> dict[str, float]:
    d = 2 if case.dtype == "bf16" else 4
    b, s, h = case.b, case.s, case.h
    return {
        "prefill": la.forward_transient(mixer, b, s, h, d),
        "prefill_leaves": la.forward_leaves(mixer, b, d),
        "decode": la.decode_transient(mixer, b, h, d),
        "saved": la.saved(mixer, b, s, h, d),
        "backward": la.backward_transient(mixer, b, s, h, d),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--detail", action="store_true")
    ap.add_argument("cases", nargs="*")
    args = ap.parse_args(argv)
    worst = 0.0
    keys = ("prefill", "prefill_leaves", "decode", "saved", "backward")
    print(f"{'case':24s} " + " ".join(f"{k:>28s}" for k in keys))
    for case in CASES:
        if args.cases and case.name not in args.cases:
            continue
        got = measure(case)
        want = formulas(case, got["mixer"])
        cells = []
        for k in keys:
            m, f = got[k], want[k]
            err = (f - m) / m * 100 if m else (0.0 if f == 0 else 100.0)
            if k != "backward":  # the backward is off outside the round-10 shapes (see the module's notes)
                worst = max(worst, abs(err))
            cells.append(f"{m:>12,d} {f:>12,.0f} {err:+5.1f}%")
        print(f"{case.name:24s} " + " ".join(f"{c:>28s}" for c in cells))
        if args.detail:
            print("   states:", got["states"])
            for k, blocks in got["detail"].items():
                print(f"   {k}: " + ", ".join(f"{sz:,}@{ctx}" for sz, ctx in blocks))
        sys.stdout.flush()
    print(f"worst error {worst:.2f} %")
    return 0 if worst <= 2.0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
