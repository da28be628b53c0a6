"""Measure DeepSeek MLA attention (transformers 5.24 `DeepseekV3Attention`, `DeepseekV32Attention` with its lightning
indexer) on the CPU under the profiler replay, and compare with `budgets/engine/components/mla.py`.

    python -m benchmarks.mixers.mla            # every shape: measured vs formula, error
    python -m benchmarks.mixers.mla --raw      # the measured figures only (what tests/engine/test_mla.py records)
    python -m benchmarks.mixers.mla --shape r12-v3-eager   # one shape (the *-eager shapes run eager attention)

One profiler session per shape, started before the module is built (so every free inside a window has a known size).
Quantities (bytes):
- prefill / decode: inference (`torch.no_grad()`, eval), the module called as `DeepseekV3Model.forward` calls it under
  `generate` (position embeddings and `create_causal_mask` built outside, DynamicCache passed): peak live during the
  call above the live bytes at its entry, minus the cache growth the call leaves (the engine counts the cache).
  Decode runs after the prefill, one token, k = prompt + 1.
- saved: train mode, grad on, input requires grad: live after `out = attn(...); del out` minus live before.
- backward: peak during `out.backward(grad)` above the level at its start (saved + output + grad of output + input),
  parameter gradients excluded (the engine counts them as gradients), the input's gradient included.
"""

from __future__ import annotations

import argparse
import gc
import json
from dataclasses import dataclass, replace
from typing import Any

from benchmarks.accuracy.cases import ROUND10_CONFIGS
from budgets.engine.components import mla
from budgets.engine.models.layers import Mixer
from workers.runner.cpu_memory import profiler_events, replay, window_peak

LABEL = "vramplan::"


@dataclass(frozen=True)
class Shape:
    name: str
    v32: bool
    b: int
    s: int  # prompt tokens (inference) / tokens per sequence (training)
    heads: int
    h: int
    q_rank: int  # 0: plain q_proj (V3 only)
    latent: int
    nope: int
    rope: int
    v: int
    dtype: str = "bf16"
    index_heads: int = 0
    index_dim: int = 0
    topk: int = 64
    train: bool = False
    attention: str = "sdpa"  # or "eager" (`eager_attention_forward`)

    def mixer(self) -> Mixer:
        return Mixer(
            "mla",
            self.heads,
            1,
            self.nope + self.rope,
            self.v,
            latent_dim=self.latent,
            rope_dim=self.rope,
            index_dim=self.index_dim,
            q_rank=self.q_rank,
            index_heads=self.index_heads,
        )

    @property
    def d(self) -> int:
        return 2 if self.dtype == "bf16" else 4


R10 = dict(h=256, heads=4, q_rank=64, latent=64, nope=64, rope=32, v=64)
R10_IDX = dict(index_heads=4, index_dim=64, topk=64)
SHAPES: list[Shape] = [
    # the round-10 cases (benchmarks/accuracy/cases.py ROUND10_CONFIGS deepseek_v3 / deepseek_v32)
    Shape("r10-v3-gen", False, 4, 256, **R10),
    Shape("r10-v3-train", False, 2, 256, **R10, train=True),
    Shape("r10-v32-gen", True, 4, 256, **R10, **R10_IDX),
    Shape("r10-v32-train", True, 2, 256, **R10, **R10_IDX, train=True),
    # variations: no q LoRA, fp32, other widths / heads / lengths, equal head dims
    Shape("v3-noqlora-fp32", False, 2, 128, h=192, heads=6, q_rank=0, latent=96, nope=32, rope=16, v=32, dtype="fp32"),
    Shape(
        "v3-noqlora-fp32-train",
        False,
        2,
        128,
        h=192,
        heads=6,
        q_rank=0,
        latent=96,
        nope=32,
        rope=16,
        v=32,
        dtype="fp32",
        train=True,
    ),
    Shape("v3-wide-bf16", False, 3, 96, h=320, heads=8, q_rank=48, latent=80, nope=48, rope=16, v=32),
    Shape("v3-wide-bf16-train", False, 3, 96, h=320, heads=8, q_rank=48, latent=80, nope=48, rope=16, v=32, train=True),
    Shape(
        "v32-fp32",
        True,
        2,
        160,
        h=192,
        heads=3,
        q_rank=48,
        latent=48,
        nope=32,
        rope=16,
        v=32,
        dtype="fp32",
        index_heads=2,
        index_dim=32,
        topk=40,
    ),
    Shape(
        "v32-topk-all",
        True,
        1,
        48,
        h=128,
        heads=2,
        q_rank=32,
        latent=32,
        nope=32,
        rope=16,
        v=32,
        index_heads=3,
        index_dim=48,
        topk=64,
    ),
]
# eager attention (`eager_attention_forward`): the round-12 cases (2 × 200 prompt tokens, bf16; deepseek_v3 and
# glm4_moe_lite, whose qk head 48 + 16 equals its v head), fp32 and other shapes, inference and training
R12_GLM = dict(h=256, heads=4, q_rank=128, latent=64, nope=48, rope=16, v=64)
NOQ_FP32 = dict(h=192, heads=6, q_rank=0, latent=96, nope=32, rope=16, v=32, dtype="fp32")
WIDE = dict(h=320, heads=8, q_rank=48, latent=80, nope=48, rope=16, v=32)
SHAPES += [
    Shape("r12-v3-eager", False, 2, 200, **R10, attention="eager"),
    Shape("r12-glm-eager", False, 2, 200, **R12_GLM, attention="eager"),
    Shape("v3-noqlora-fp32-eager", False, 2, 128, **NOQ_FP32, attention="eager"),
    Shape("v3-wide-bf16-eager", False, 3, 96, **WIDE, attention="eager"),
    Shape("r10-v3-train-eager", False, 2, 256, **R10, train=True, attention="eager"),
    Shape("v3-noqlora-fp32-train-eager", False, 2, 128, **NOQ_FP32, train=True, attention="eager"),
    Shape("r12-glm-train-eager", False, 3, 136, **R12_GLM, train=True, attention="eager"),
]
# the V3.2 fp32 shape trained as well
SHAPES.insert(
    next(i for i, shape in enumerate(SHAPES) if shape.name == "v32-fp32") + 1,
    replace(next(shape for shape in SHAPES if shape.name == "v32-fp32"), name="v32-fp32-train", train=True),
)


def build(shape: Shape):
    import torch
    from transformers import DeepseekV3Config, DeepseekV32Config
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import DeepseekV3Attention, DeepseekV3RotaryEmbedding
    from transformers.models.deepseek_v32.modeling_deepseek_v32 import (
        DeepseekV32Attention,
        DeepseekV32RotaryEmbedding,
    )

    fields = dict(
        num_hidden_layers=1,
        hidden_size=shape.h,
        num_attention_heads=shape.heads,
        num_key_value_heads=shape.heads,
        intermediate_size=64,
        moe_intermediate_size=32,
        q_lora_rank=shape.q_rank or None,
        kv_lora_rank=shape.latent,
        qk_nope_head_dim=shape.nope,
        qk_rope_head_dim=shape.rope,
        v_head_dim=shape.v,
        attention_bias=False,
        attention_dropout=0.0,
        max_position_embeddings=163840,
        rope_scaling=dict(ROUND10_CONFIGS["deepseek_v3"]["rope_scaling"]),  # DeepSeek-V3's yarn scaling
        rope_theta=10000,
        vocab_size=100,
    )
    cfg: Any
    attn_cls: Any
    rot_cls: Any
    if shape.v32:
        cfg = DeepseekV32Config(
            **fields, index_head_dim=shape.index_dim, index_n_heads=shape.index_heads, index_topk=shape.topk
        )
        attn_cls, rot_cls = DeepseekV32Attention, DeepseekV32RotaryEmbedding
    else:
        cfg = DeepseekV3Config(**fields)
        attn_cls, rot_cls = DeepseekV3Attention, DeepseekV3RotaryEmbedding
    cfg._attn_implementation = shape.attention
    dtype = torch.bfloat16 if shape.dtype == "bf16" else torch.float32
    attn = attn_cls(cfg, 0).to(dtype)
    if shape.v32:  # PreTrainedModel keeps `indexer.weights_proj` in fp32 (_keep_in_fp32_modules)
        attn.indexer.weights_proj.float()
    rot = rot_cls(cfg)
    return cfg, attn, rot, dtype


def storages(tensors) -> dict[int, int]:
    out: dict[int, int] = {}
    for t in tensors:
        if t is not None and t.numel():
            st = t.untyped_storage()
            out[st.data_ptr()] = st.nbytes()
    return out


def cache_bytes(cache) -> int:
    layer = cache.layers[0]
    return sum(
        storages(
            [getattr(layer, "keys", None), getattr(layer, "values", None), getattr(layer, "indexer_keys", None)]
        ).values()
    )


def measure(shape: Shape) -> dict[str, float]:
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function
    from transformers import DynamicCache
    from transformers.masking_utils import create_causal_mask

    torch.manual_seed(0)
    gc.collect()
    prof = profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=False)
    prof.__enter__()
    cfg, attn, rot, dtype = build(shape)
    b, s, h = shape.b, shape.s, shape.h
    res: dict[str, float] = {}
    grad_ptrs: dict[int, int] = {}
    mask_kw = {"allow_is_causal_skip": False} if shape.v32 else {}
    if not shape.train:
        attn.eval()
        cache_sizes = []
        with torch.no_grad():
            cache = DynamicCache(config=cfg)
            x = torch.randn(b, s, h, dtype=dtype)
            pos = torch.arange(s).unsqueeze(0)
            pe = rot(x, pos)
            am = torch.ones(b, s, dtype=torch.long)
            mask = create_causal_mask(
                config=cfg, inputs_embeds=x, attention_mask=am, cache=cache, position_ids=pos, **mask_kw
            )
            with record_function(LABEL + "prefill"):
                out, _ = attn(x, pe, mask, cache=cache, position_ids=pos)
            cache_sizes.append(cache_bytes(cache))
            del out, x, pe, mask
            x = torch.randn(b, 1, h, dtype=dtype)
            pos = torch.tensor([[s]])
            pe = rot(x, pos)
            am = torch.ones(b, s + 1, dtype=torch.long)
            mask = create_causal_mask(
                config=cfg, inputs_embeds=x, attention_mask=am, cache=cache, position_ids=pos, **mask_kw
            )
            with record_function(LABEL + "decode"):
                out, _ = attn(x, pe, mask, cache=cache, position_ids=pos)
            cache_sizes.append(cache_bytes(cache))
            del out
    else:
        attn.train()
        x = torch.randn(b, s, h, dtype=dtype, requires_grad=True)
        pos = torch.arange(s).unsqueeze(0)
        with torch.no_grad():
            pe = rot(x, pos)
        am = torch.ones(b, s, dtype=torch.long)
        mask = create_causal_mask(
            config=cfg, inputs_embeds=x, attention_mask=am, cache=None, position_ids=pos, **mask_kw
        )
        with record_function(LABEL + "saved"):
            out, _ = attn(x, pe, mask, cache=None, position_ids=pos)
            graph = out.grad_fn  # what the layers above hold: the graph, not the output
            del out
        del graph
        out, _ = attn(x, pe, mask, cache=None, position_ids=pos)  # the graph the backward runs (a second one)
        g = torch.randn_like(out)
        with record_function(LABEL + "backward"):
            out.backward(g)
        grad_ptrs = storages([p.grad for p in attn.parameters()])
    prof.__exit__(None, None, None)
    events, labels = profiler_events(prof)
    rp = replay(events)
    for name, (start, end) in ((k[len(LABEL) :], v[0]) for k, v in labels.items()):
        if name == "backward":
            # live bytes without the parameter gradients the backward creates
            skip = {i for i, blk in enumerate(rp.blocks) if blk.ptr in grad_ptrs and blk.alloc_time >= start}
            live, base, peak = 0, None, 0
            for i, e in enumerate(rp.events):
                bi = rp.block_of_event[i]
                if bi is not None and bi in skip:
                    continue
                if e.size > 0:
                    live += e.size if bi is not None else 0
                elif bi is not None:
                    live -= rp.blocks[bi].size
                if e.time_ns < start:
                    base = live
                elif e.time_ns <= end:
                    peak = max(peak, live)
            assert base is not None
            res["backward"] = max(peak, base) - base
            continue
        wp = window_peak(rp, start, end)
        after = wp["baseline"]
        for i, e in enumerate(rp.events):
            if e.time_ns <= end:
                after = rp.live_after[i]
        if name == "saved":
            res["saved"] = after - wp["baseline"]
            res["saved_peak"] = wp["peak"] - wp["baseline"]
        else:
            growth = cache_sizes[0] if name == "prefill" else cache_sizes[1] - cache_sizes[0]
            res[name] = wp["peak"] - wp["baseline"] - growth
            res[name + "_after"] = after - wp["baseline"] - growth
            res[name + "_cache"] = cache_sizes[0] if name == "prefill" else cache_sizes[1]
    return res


def formulas(shape: Shape) -> dict[str, float]:
    m, d, b, s, h = shape.mixer(), shape.d, shape.b, shape.s, shape.h
    att = shape.attention
    if shape.train:
        return {
            "saved": mla.saved(m, b, s, h, d, topk=shape.topk, attention=att),
            "saved_peak": mla.train_forward_transient(m, b, s, h, d, topk=shape.topk, attention=att),
        }
    per_token = m.kv_elements_per_token() * d
    return {
        "prefill": mla.forward_transient(m, b, s, s, h, d, topk=shape.topk, attention=att),
        "decode": mla.forward_transient(m, b, 1, s + 1, h, d, topk=shape.topk, attention=att),
        "prefill_cache": b * s * per_token,
        "decode_cache": b * (s + 1) * per_token,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--raw", action="store_true", help="print the measured figures only")
    ap.add_argument("--shape", action="append", help="only these shape names")
    args = ap.parse_args()
    worst = 0.0
    for shape in SHAPES:
        if args.shape and shape.name not in args.shape:
            continue
        got = measure(shape)
        if args.raw:
            print(shape.name, json.dumps(got))
            continue
        want = formulas(shape)
        for key, f in want.items():
            meas = got[key]
            err = (f - meas) / meas * 100 if meas else (0.0 if f == 0 else float("inf"))
            worst = max(worst, abs(err))
            print(f"{shape.name:24s} {key:14s} measured {meas:>12,.0f}  formula {f:>12,.0f}  error {err:+7.3f} %")
    if not args.raw:
        print(f"worst |error| {worst:.3f} %")


if __name__ == "__main__":
    main()
