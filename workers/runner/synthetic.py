"""The synthetic acceptance workload: a random-weight transformer run at the workload's shapes.

    python -m workers.runner.synthetic SPEC_JSON_PATH

SPEC_JSON_PATH holds ``{"workload": <v1 workload description>, "device": "cpu" | "cuda",
"warmup_steps": 1, "measure_steps": 2, "quality": true, "seed": 0}`` (every key but ``workload`` has
that default; ``device`` defaults to the workload's ``runtime.device``).

The child builds a decoder-only transformer in plain PyTorch from the workload's ``ModelSpec``
(embeddings, tied or untied head, per layer norm → attention with q/k/v/o projections honouring
GQA/MQA, RoPE or learned positions, SDPA or eager attention → gated or standard MLP, top-k routed
experts when the model is MoE, final norm) with random, seeded weights in ``precision.weights``, and
runs the whole task at its maximum shapes:

* ``inference``: ``concurrent_sessions`` prompts of ``max_input_tokens`` prefilled together, then
  ``max_output_tokens`` generated greedily one token at a time (logits of the last position only)
  into a KV cache laid out as ``kv_cache_layout`` says — ``contiguous`` (preallocated for the longest
  request), ``dynamic`` (grown with ``torch.cat``), ``paged`` (a pool of ``kv_block_tokens`` blocks for
  the longest request, a shuffled block table, gathered every step);
* ``training``: ``micro_batch_size`` × ``sequence_length`` forward, cross-entropy, backward, optimizer
  step, ``zero_grad(set_to_none=True)``, with per-layer (``full``) or attention-core (``selective``)
  activation checkpointing.

``warmup_steps`` full passes (or training steps) run first, then ``measure_steps`` measured ones. The
measurement is PyTorch's own view: on CUDA the allocator's high-water marks (reset at each measured
step); on CPU the exact peak of live tensor bytes (``workers.runner.cpu_memory``). The child reports
``progress`` and the ``cuda_init`` / ``weights_loaded`` checkpoints to the parent and ends with ONE
``result`` message (see ``workers.runner.report``); run by hand, it also prints the result on stdout.

Output quality (bf16/fp16 compute): the same inputs through an fp32 copy of the model, built from the
same seed, after the measured window (so it never raises the measured peak).

Exit status: 0 measured · 2 the spec or workload cannot be run synthetically (one ``error:`` line on
stderr naming the field) · 3 out of memory (reported as a result with ``"oom": true``) · anything else
is a crash with its traceback.

torch is imported inside the functions that run the workload only: importing this module (for its
constants and spec checks) needs no torch.
"""

from __future__ import annotations

import gc
import json
import math
import os
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from budgets.engine import ModelSpec, Workload, parameter_count, validation_errors

from .cpu_memory import CpuPeakTracker, is_cpu_oom
from .report import REPORT_FD_ENV, checkpoint, progress, report

EXIT_OK = 0
EXIT_SPEC_ERROR = 2
EXIT_OOM = 3

SUPPORTED_TASKS = ("inference", "training")
SUPPORTED_WEIGHTS = ("fp32", "bf16", "fp16")
SUPPORTED_OPTIMIZERS = ("adamw", "sgd", "sgd_momentum")
LOW_PRECISION = ("bf16", "fp16")
PHASES = ("build", "warmup", "prefill", "decode", "train", "quality")

#: Quality comparison bounds: positions compared and fp32 logits held (per model) for it.
QUALITY_MAX_TOKENS = 1024
QUALITY_MAX_LOGITS = 1 << 24  # 64 MiB of fp32 logits
ROPE_THETA = 10_000.0
FINAL_SOFTCAP = 30.0
ATTN_SOFTCAP = 50.0
PROGRESS_MIN_INTERVAL_S = 0.5
PROGRESS_MIN_STEP = 5.0
MEASURED_END_SETTLE_S = 0.05  # lets the parent read NVML at measured_end before the quality model exists

ALLOC_CONF_VARS = ("PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF")


class SpecError(ValueError):
    """The spec or the workload cannot be run by the synthetic workload; the message names the field."""


class WorkloadSpec(BaseModel):
    """A runner's spec file: a workload description and the runner's own keys (none others)."""

    model_config = ConfigDict(extra="forbid")

    workload: dict[str, Any]


class SyntheticSpec(WorkloadSpec):
    """The spec file's content."""

    device: Literal["cpu", "cuda"] | None = Field(None, description="default: the workload's runtime.device")
    warmup_steps: int = Field(1, ge=0, le=1000, description="full passes (training steps) before measuring")
    measure_steps: int = Field(2, ge=1, le=1000, description="measured passes (training steps)")
    quality: bool = Field(True, description="compare bf16/fp16 logits with an fp32 reference")
    seed: int = Field(0, ge=0, le=2**63 - 1)


@dataclass(frozen=True)
class Plan:
    """What the child runs, resolved and checked (no torch needed)."""

    workload: Workload
    spec: ModelSpec
    device: str
    task: str
    warmup_steps: int
    measure_steps: int
    quality: bool
    seed: int
    weights: str  # fp32 | bf16 | fp16
    compute: str  # fp32 | bf16 | fp16
    autocast: bool  # fp32 weights, bf16/fp16 compute
    attention: str  # implementation: sdpa | eager
    # inference
    batch: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    kv_layout: str | None = None
    kv_block_tokens: int | None = None
    # training
    sequence_length: int = 0
    optimizer: str | None = None
    checkpointing: str | None = None
    notes: tuple[str, ...] = field(default=())

    @property
    def max_positions(self) -> int:
        if self.task == "inference":
            return self.input_tokens + self.output_tokens
        return self.sequence_length


def _unsupported(path: str, value: Any, supported: tuple[str, ...] | str) -> SpecError:
    allowed = supported if isinstance(supported, str) else ", ".join(supported)
    return SpecError(f"{path} {value!r} is not supported by the synthetic workload (supported: {allowed})")


SpecModel = TypeVar("SpecModel", bound=WorkloadSpec)


def read_spec(raw: Any, model: type[SpecModel]) -> tuple[SpecModel, Workload]:
    """A spec file's content validated as ``model``, and its ``workload`` as a v1 workload; :class:`SpecError`
    naming every wrong key or field."""
    try:
        spec = model.model_validate(raw)
    except ValidationError as exc:
        keys = ", ".join(model.model_fields)
        messages = [
            m.replace("unknown field (not part of the workload schema)", f"unknown key (a spec has: {keys})")
            for msgs in validation_errors(exc).values()
            for m in msgs
        ]
        raise SpecError("invalid spec: " + "; ".join(messages)) from None
    try:
        workload = Workload.model_validate(spec.workload)
    except ValidationError as exc:
        messages = [f"workload.{m}" for msgs in validation_errors(exc).values() for m in msgs]
        raise SpecError("invalid workload: " + "; ".join(messages)) from None
    return spec, workload


def load_plan(raw: Any) -> Plan:
    """Validate the spec and the workload, and check the synthetic builder can run it."""
    s, w = read_spec(raw, SyntheticSpec)
    if w.task not in SUPPORTED_TASKS:
        raise SpecError(
            f"task {w.task!r}: the synthetic workload needs a transformer model (task 'inference' or 'training'); "
            "a 'custom' workload has no model to build — measure it with a registered program instead"
        )
    par = w.parallelism
    for name in ("tensor", "pipeline", "data"):
        if getattr(par, name) != 1:
            raise SpecError(
                f"parallelism.{name} = {getattr(par, name)} is not supported by the synthetic workload "
                "(supported: 1; a single process measures one device)"
            )
    prec = w.precision
    if prec.weights not in SUPPORTED_WEIGHTS:
        raise _unsupported("precision.weights", prec.weights, SUPPORTED_WEIGHTS)
    compute = prec.compute or prec.weights
    if compute != prec.weights and not (prec.weights == "fp32" and compute in LOW_PRECISION):
        raise _unsupported(
            "precision.compute",
            compute,
            "the weights' precision, or bf16/fp16 with fp32 weights (autocast)",
        )
    notes: list[str] = []
    spec = w.spec
    runtime = w.runtime
    attention = "eager" if runtime.attention == "eager" else "sdpa"
    if runtime.attention == "flash":
        notes.append("runtime.attention 'flash' runs F.scaled_dot_product_attention (the backend is PyTorch's choice)")
    if spec.sliding_window and spec.num_sliding_layers:
        notes.append("sliding-window layers attend to the full context (no window mask, full KV cache)")
    if spec.learned_positions == 0:
        notes.append("rotary position embedding (theta 10000, no scaling)")
    device = s.device or runtime.device
    common: dict[str, Any] = dict(
        workload=w,
        spec=spec,
        device=device,
        task=w.task,
        warmup_steps=s.warmup_steps,
        measure_steps=s.measure_steps,
        quality=s.quality,
        seed=s.seed,
        weights=prec.weights,
        compute=compute,
        autocast=compute != prec.weights,
        attention=attention,
    )
    if w.task == "inference":
        inf = w.inference
        assert inf is not None
        if (prec.kv_cache or compute) != compute:
            raise _unsupported("precision.kv_cache", prec.kv_cache, f"the compute precision ({compute})")
        if inf.engine == "vllm":
            notes.append(
                "engine 'vllm': the paged KV pool is sized for the longest request × sessions, "
                "not by gpu_memory_utilization"
            )
        plan = Plan(
            **common,
            batch=inf.concurrent_sessions,
            input_tokens=inf.max_input_tokens,
            output_tokens=inf.max_output_tokens,
            kv_layout=inf.kv_cache_layout,
            kv_block_tokens=inf.kv_block_tokens if inf.kv_cache_layout == "paged" else None,
            notes=tuple(notes),
        )
        length_field = "inference.max_input_tokens + inference.max_output_tokens"
    else:
        tr = w.training
        assert tr is not None
        if tr.method != "full":
            raise _unsupported("training.method", tr.method, ("full",))
        if tr.optimizer not in SUPPORTED_OPTIMIZERS:
            raise _unsupported("training.optimizer", tr.optimizer, SUPPORTED_OPTIMIZERS)
        if prec.master_weights is not None:
            raise _unsupported(
                "precision.master_weights", prec.master_weights, "null (fp32 weights with bf16/fp16 compute autocast)"
            )
        if (prec.gradients or prec.weights) != prec.weights:
            raise _unsupported("precision.gradients", prec.gradients, f"the weights' precision ({prec.weights})")
        if s.warmup_steps == 0 and tr.optimizer != "sgd":
            notes.append("no warm-up step: the first step creates the optimizer state late and under-reports")
        plan = Plan(
            **common,
            batch=tr.micro_batch_size,
            sequence_length=tr.sequence_length,
            optimizer=tr.optimizer,
            checkpointing=tr.activation_checkpointing,
            notes=tuple(notes),
        )
        length_field = "training.sequence_length"
    if spec.learned_positions and plan.max_positions > spec.learned_positions:
        raise SpecError(
            f"{length_field} = {plan.max_positions} exceeds the model's learned position table "
            f"({spec.learned_positions} positions)"
        )
    return plan


# --------------------------------------------------------------------------------------------
# progress and phases
# --------------------------------------------------------------------------------------------


class Progress:
    """Phase bookkeeping (for the OOM report) and rate-limited progress messages."""

    def __init__(self) -> None:
        self.phase = "build"
        self.detail = ""
        self._last: tuple[str, float, float] | None = None

    def __call__(self, phase: str, percent: float, detail: str = "") -> None:
        self.phase = phase
        self.detail = detail
        now = time.monotonic()
        last = self._last
        if (
            last is None
            or last[0] != phase
            or percent >= 100.0
            or (percent - last[1] >= PROGRESS_MIN_STEP and now - last[2] >= PROGRESS_MIN_INTERVAL_S)
        ):
            self._last = (phase, percent, now)
            progress(phase, percent)


# --------------------------------------------------------------------------------------------
# the model (torch imported lazily: classes are built on first use)
# --------------------------------------------------------------------------------------------


def torch_dtype(name: str) -> Any:
    import torch

    return {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[name]


@lru_cache(maxsize=1)
def _nn() -> Any:
    import types

    import torch
    import torch.nn.functional as F
    from torch import nn
    from torch.utils.checkpoint import checkpoint

    def activation(name: str) -> Any:
        n = name.lower()
        if n in ("silu", "swish"):
            return F.silu
        if n == "relu":
            return F.relu
        if n in ("gelu_new", "gelu_pytorch_tanh", "gelu_fast", "gelu_python_tanh"):
            return lambda x: F.gelu(x, approximate="tanh")
        return F.gelu

    class RMSNorm(nn.Module):
        def __init__(self, size: int, dtype: Any, eps: float = 1e-6) -> None:
            super().__init__()
            self.weight = nn.Parameter(torch.ones(size, dtype=dtype))
            self.eps = eps

        def forward(self, x: Any) -> Any:  # as transformers' LlamaRMSNorm: statistics in fp32
            dtype = x.dtype
            h = x.float()
            h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
            return self.weight * h.to(dtype)

    def norm(spec: ModelSpec, size: int, dtype: Any) -> nn.Module:
        if spec.norm == "layer":
            return nn.LayerNorm(size, eps=1e-5, dtype=dtype)
        return RMSNorm(size, dtype)

    def repeat_kv(x: Any, groups: int) -> Any:
        if groups == 1:
            return x
        b, kv, length, hd = x.shape
        return x[:, :, None].expand(b, kv, groups, length, hd).reshape(b, kv * groups, length, hd)

    def rope_cos_sin(inv_freq: Any, start: int, length: int, dtype: Any) -> tuple[Any, Any]:
        pos = torch.arange(start, start + length, device=inv_freq.device, dtype=torch.float32)
        freqs = torch.outer(pos, inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(dtype), emb.sin().to(dtype)

    def apply_rope(x: Any, cos: Any, sin: Any) -> Any:
        rd = cos.shape[-1]
        xr = x[..., :rd]
        x1, x2 = xr[..., : rd // 2], xr[..., rd // 2 :]
        out = xr * cos + torch.cat((-x2, x1), dim=-1) * sin
        if rd < x.shape[-1]:
            out = torch.cat((out, x[..., rd:]), dim=-1)
        return out

    class MLP(nn.Module):
        def __init__(self, spec: ModelSpec, width: int, dtype: Any) -> None:
            super().__init__()
            h, bias = spec.hidden_size, spec.mlp_bias
            self.gated = spec.mlp == "gated"
            if self.gated:
                self.gate_proj = nn.Linear(h, width, bias=bias, dtype=dtype)
            self.up_proj = nn.Linear(h, width, bias=bias, dtype=dtype)
            self.down_proj = nn.Linear(width, h, bias=bias, dtype=dtype)
            self.act = activation(spec.activation)

        def forward(self, x: Any) -> Any:
            if self.gated:
                return self.down_proj(self.act(self.gate_proj(x)) * self.up_proj(x))
            return self.down_proj(self.act(self.up_proj(x)))

    class MoE(nn.Module):
        """Top-k routing over experts, looping over the experts that received tokens (transformers' eager MoE)."""

        def __init__(self, spec: ModelSpec, dtype: Any) -> None:
            super().__init__()
            self.top_k = spec.experts_per_token
            self.router = nn.Linear(spec.hidden_size, spec.num_experts, bias=False, dtype=dtype)
            self.experts = nn.ModuleList(
                MLP(spec, spec.expert_intermediate_size, dtype) for _ in range(spec.num_experts)
            )
            self.shared = None
            if spec.shared_expert_intermediate_size:
                self.shared = MLP(spec, spec.shared_expert_intermediate_size, dtype)
                self.shared_gate = nn.Linear(spec.hidden_size, 1, bias=False, dtype=dtype)

        def forward(self, x: Any) -> Any:
            b, t, h = x.shape
            flat = x.reshape(-1, h)
            probs = F.softmax(self.router(flat), dim=-1, dtype=torch.float32)
            weights, chosen = torch.topk(probs, self.top_k, dim=-1)
            weights = (weights / weights.sum(dim=-1, keepdim=True)).to(flat.dtype)
            out = torch.zeros_like(flat)
            for e, expert in enumerate(self.experts):
                token, slot = torch.where(chosen == e)
                if token.numel() == 0:
                    continue
                y = expert(flat[token]) * weights[token, slot, None]
                out.index_add_(0, token, y.to(out.dtype))
            if self.shared is not None:
                out = out + torch.sigmoid(self.shared_gate(flat)) * self.shared(flat)
            return out.view(b, t, h)

    class Attention(nn.Module):
        def __init__(self, spec: ModelSpec, index: int, impl: str, dtype: Any) -> None:
            super().__init__()
            h = spec.hidden_size
            self.index = index
            self.heads, self.kv_heads, self.head_dim = spec.num_attention_heads, spec.num_kv_heads, spec.head_dim
            self.q_proj = nn.Linear(h, spec.q_dim, bias=spec.qkv_bias, dtype=dtype)
            self.k_proj = nn.Linear(h, spec.kv_dim, bias=spec.qkv_bias, dtype=dtype)
            self.v_proj = nn.Linear(h, spec.kv_dim, bias=spec.qkv_bias, dtype=dtype)
            self.o_proj = nn.Linear(spec.q_dim, h, bias=spec.o_bias, dtype=dtype)
            self.q_norm = RMSNorm(spec.head_dim, dtype) if spec.qk_norm else None
            self.k_norm = RMSNorm(spec.head_dim, dtype) if spec.qk_norm else None
            self.impl = impl
            self.scale = spec.head_dim**-0.5
            self.softcap = ATTN_SOFTCAP if spec.attn_logit_softcapping else None
            self.checkpoint_core = False

        def core(self, q: Any, k: Any, v: Any) -> Any:
            groups = self.heads // self.kv_heads
            k, v = repeat_kv(k, groups), repeat_kv(v, groups)
            causal = q.shape[2] > 1
            if self.impl == "sdpa" and self.softcap is None:
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=self.scale)
            scores = torch.matmul(q, k.transpose(2, 3)) * self.scale
            if self.softcap is not None:
                scores = torch.tanh(scores / self.softcap) * self.softcap
            if causal:
                tq, tk = q.shape[2], k.shape[2]
                mask = torch.ones(tq, tk, dtype=torch.bool, device=q.device).triu(tk - tq + 1)
                scores = scores.masked_fill(mask, float("-inf"))
            probs = F.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
            return torch.matmul(probs, v)

        def forward(self, x: Any, start: int, cache: Any, rope: Any) -> Any:
            b, t, _ = x.shape
            q = self.q_proj(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)
            k = self.k_proj(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
            v = self.v_proj(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
            if self.q_norm is not None and self.k_norm is not None:  # both or neither (spec.qk_norm)
                q, k = self.q_norm(q), self.k_norm(k)
            if rope is not None:
                q, k = apply_rope(q, *rope), apply_rope(k, *rope)
            if cache is not None:
                k, v = cache.update(self.index, k, v, start)
            if self.checkpoint_core and torch.is_grad_enabled():
                out = checkpoint(self.core, q, k, v, use_reentrant=False)
            else:
                out = self.core(q, k, v)
            return self.o_proj(out.transpose(1, 2).reshape(b, t, self.heads * self.head_dim))

    class Layer(nn.Module):
        def __init__(self, spec: ModelSpec, index: int, impl: str, dtype: Any) -> None:
            super().__init__()
            h = spec.hidden_size
            self.input_norm = norm(spec, h, dtype)
            self.attn = Attention(spec, index, impl, dtype)
            self.mlp_norm = norm(spec, h, dtype)
            four = spec.norms_per_layer >= 4
            self.post_attn_norm = norm(spec, h, dtype) if four else None
            self.post_mlp_norm = norm(spec, h, dtype) if four else None
            moe = spec.is_moe and index >= spec.num_dense_layers
            self.mlp = MoE(spec, dtype) if moe else MLP(spec, spec.intermediate_size, dtype)
            self.parallel = spec.parallel_residual

        def forward(self, x: Any, start: int, cache: Any, rope: Any) -> Any:
            a = self.attn(self.input_norm(x), start, cache, rope)
            if self.parallel:
                return x + a + self.mlp(self.mlp_norm(x))
            if self.post_attn_norm is not None:
                a = self.post_attn_norm(a)
            x = x + a
            m = self.mlp(self.mlp_norm(x))
            if self.post_mlp_norm is not None:
                m = self.post_mlp_norm(m)
            return x + m

    class Decoder(nn.Module):
        def __init__(self, spec: ModelSpec, impl: str, dtype: Any) -> None:
            super().__init__()
            h, e = spec.hidden_size, spec.embed_dim
            self.spec = spec
            self.embed = nn.Embedding(spec.vocab_size, e, dtype=dtype)
            self.pos_embed = nn.Embedding(spec.learned_positions, h, dtype=dtype) if spec.learned_positions else None
            proj = bool(spec.embed_proj_dim) and spec.embed_proj_dim != h
            self.project_in = nn.Linear(e, h, bias=False, dtype=dtype) if proj else None
            self.project_out = nn.Linear(h, e, bias=False, dtype=dtype) if proj else None
            self.layers = nn.ModuleList(Layer(spec, i, impl, dtype) for i in range(spec.num_layers))
            self.final_norm = norm(spec, h, dtype) if spec.final_norm else None
            self.lm_head = (
                None if spec.tie_word_embeddings else nn.Linear(e, spec.vocab_size, bias=spec.lm_head_bias, dtype=dtype)
            )
            # a multimodal model's towers, held as one block: loaded with the model, never run by text requests
            # (the engine counts their weights, not their activations); frozen, so no gradient or optimizer state
            self.towers = (
                nn.Parameter(torch.empty(spec.tower_params, dtype=dtype), requires_grad=False)
                if spec.tower_params
                else None
            )
            if spec.learned_positions:
                self.inv_freq = None
            else:
                rd = spec.rope_dim - spec.rope_dim % 2
                inv = 1.0 / (ROPE_THETA ** (torch.arange(0, rd, 2, dtype=torch.float32) / rd))
                self.register_buffer("inv_freq", inv, persistent=False)
            self.checkpointing = "none"
            self.rope_dtype = dtype

        def set_checkpointing(self, mode: str) -> None:
            self.checkpointing = mode
            for layer in self.layers:
                layer.attn.checkpoint_core = mode == "selective"  # type: ignore[union-attr]  # ModuleList: nn.Module

        def forward(self, ids: Any, start: int = 0, cache: Any = None, last_only: bool = False) -> Any:
            t = ids.shape[1]
            x = self.embed(ids)
            if self.project_in is not None:
                x = self.project_in(x)
            if self.pos_embed is not None:
                x = x + self.pos_embed(torch.arange(start, start + t, device=ids.device))
            rope = None
            if self.inv_freq is not None:
                rope = rope_cos_sin(self.inv_freq, start, t, self.rope_dtype)
            full = self.checkpointing == "full" and torch.is_grad_enabled()
            for layer in self.layers:
                if full:
                    x = checkpoint(layer, x, start, cache, rope, use_reentrant=False)
                else:
                    x = layer(x, start, cache, rope)
            if self.final_norm is not None:
                x = self.final_norm(x)
            if last_only:
                x = x[:, -1:, :]
            if self.project_out is not None:
                x = self.project_out(x)
            logits = F.linear(x, self.embed.weight) if self.lm_head is None else self.lm_head(x)
            if self.spec.final_logit_softcapping:
                logits = torch.tanh(logits / FINAL_SOFTCAP) * FINAL_SOFTCAP
            return logits

    class ContiguousKV:
        """Preallocated for the longest request (transformers' StaticCache)."""

        layout = "contiguous"

        def __init__(self, spec: ModelSpec, batch: int, length: int, dtype: Any, device: Any) -> None:
            shape = (batch, spec.num_kv_heads, length, spec.head_dim)
            self.k = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(spec.num_layers)]
            self.v = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(spec.num_layers)]

        def update(self, i: int, k: Any, v: Any, start: int) -> tuple[Any, Any]:
            end = start + k.shape[2]
            self.k[i][:, :, start:end].copy_(k)
            self.v[i][:, :, start:end].copy_(v)
            return self.k[i][:, :, :end], self.v[i][:, :, :end]

    class DynamicKV:
        """Grown as tokens arrive (transformers' DynamicCache)."""

        layout = "dynamic"

        def __init__(self, spec: ModelSpec, batch: int, length: int, dtype: Any, device: Any) -> None:
            self.k: list[Any] = [None] * spec.num_layers
            self.v: list[Any] = [None] * spec.num_layers
            self.dtype = dtype

        def update(self, i: int, k: Any, v: Any, start: int) -> tuple[Any, Any]:
            k, v = k.to(self.dtype), v.to(self.dtype)
            if self.k[i] is None:
                self.k[i], self.v[i] = k, v
            else:
                self.k[i] = torch.cat([self.k[i], k], dim=-2)
                self.v[i] = torch.cat([self.v[i], v], dim=-2)
            return self.k[i], self.v[i]

    class PagedKV:
        """A pool of fixed-size blocks for the longest request of every session, a shuffled block table,
        writes through a slot mapping and a gather of each session's blocks at every step."""

        layout = "paged"

        def __init__(
            self, spec: ModelSpec, batch: int, length: int, dtype: Any, device: Any, block: int, seed: int
        ) -> None:
            per_seq = -(-length // block)
            self.blocks = batch * per_seq
            g = torch.Generator().manual_seed(seed)
            table = torch.randperm(self.blocks, generator=g).view(batch, per_seq).to(device)
            offsets = torch.arange(block, device=device)
            self.slots = (table[:, :, None] * block + offsets).reshape(batch, per_seq * block)[:, :length].contiguous()
            shape = (self.blocks * block, spec.num_kv_heads, spec.head_dim)
            self.k = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(spec.num_layers)]
            self.v = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(spec.num_layers)]
            self.batch, self.kv_heads, self.head_dim = batch, spec.num_kv_heads, spec.head_dim

        def update(self, i: int, k: Any, v: Any, start: int) -> tuple[Any, Any]:
            t = k.shape[2]
            end = start + t
            write = self.slots[:, start:end].reshape(-1)
            self.k[i].index_copy_(0, write, k.transpose(1, 2).reshape(-1, self.kv_heads, self.head_dim))
            self.v[i].index_copy_(0, write, v.transpose(1, 2).reshape(-1, self.kv_heads, self.head_dim))
            read = self.slots[:, :end].reshape(-1)
            shape = (self.batch, end, self.kv_heads, self.head_dim)
            keys = self.k[i].index_select(0, read).view(shape).transpose(1, 2)
            values = self.v[i].index_select(0, read).view(shape).transpose(1, 2)
            return keys, values

    return types.SimpleNamespace(Decoder=Decoder, ContiguousKV=ContiguousKV, DynamicKV=DynamicKV, PagedKV=PagedKV)


def _init_std(name: str, param: Any, layers: int) -> float | None:
    """Standard deviation of a weight's random init; None for norms (ones) and biases (zeros)."""
    leaf = name.rsplit(".", 1)[-1]
    if leaf == "bias" or "norm" in name or param.dim() < 2:
        return None
    std = 1.0 / math.sqrt(param.shape[1])  # embeddings and linears: unit-scale outputs
    if name.endswith(("o_proj.weight", "down_proj.weight")):
        std /= math.sqrt(2 * layers)  # residual branches (GPT-2 style): the stream stays O(1) with depth
    return std


def build_model(plan: Plan, dtype_name: str, device: Any) -> Any:
    """The decoder with seeded random weights: every weight is drawn in fp32 in a fixed order from the
    seed, then cast, so a bf16 model holds exactly the cast of the fp32 model built from the same seed."""
    import torch

    dtype = torch_dtype(dtype_name)
    with torch.device("meta"):
        model = _nn().Decoder(plan.spec, plan.attention, dtype)
    model.to_empty(device=device)
    if model.inv_freq is not None:  # to_empty leaves buffers uninitialised
        rd = model.inv_freq.numel() * 2
        model.inv_freq.copy_(1.0 / (ROPE_THETA ** (torch.arange(0, rd, 2, dtype=torch.float32) / rd)))
    model.rope_dtype = torch_dtype(plan.compute)
    gen = torch.Generator(device=device).manual_seed(plan.seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            std = _init_std(name, p, plan.spec.num_layers)
            if std is None:
                if name.endswith("bias"):
                    p.zero_()
                else:
                    p.fill_(1.0)
                continue
            draw = torch.randn(p.shape, generator=gen, device=device, dtype=torch.float32)
            draw.mul_(std)
            p.copy_(draw)
            del draw
    return model


def storage_bytes(tensors: Any) -> int:
    seen: dict[int, int] = {}
    for t in tensors:
        if t is None or t.numel() == 0:
            continue
        st = t.untyped_storage()
        seen[st.data_ptr()] = st.nbytes()
    return sum(seen.values())


def make_cache(plan: Plan, dtype: Any, device: Any) -> Any:
    nn_ = _nn()
    length = plan.input_tokens + plan.output_tokens
    if plan.kv_layout == "contiguous":
        return nn_.ContiguousKV(plan.spec, plan.batch, length, dtype, device)
    if plan.kv_layout == "dynamic":
        return nn_.DynamicKV(plan.spec, plan.batch, length, dtype, device)
    return nn_.PagedKV(plan.spec, plan.batch, length, dtype, device, plan.kv_block_tokens, plan.seed)


def make_optimizer(name: str, params: Any) -> Any:
    """PyTorch's optimizers with the foreach implementation (CUDA's default; forced on CPU to match it)."""
    import torch

    if name == "adamw":
        return torch.optim.AdamW(params, lr=1e-4, foreach=True)
    if name == "sgd":
        return torch.optim.SGD(params, lr=1e-3, foreach=True)
    return torch.optim.SGD(params, lr=1e-3, momentum=0.9, foreach=True)


# --------------------------------------------------------------------------------------------
# measuring
# --------------------------------------------------------------------------------------------


def alloc_conf() -> tuple[str | None, str | None]:
    """The effective allocator configuration and the variable it came from (PYTORCH_ALLOC_CONF wins)."""
    for name in ALLOC_CONF_VARS:
        value = os.environ.get(name)
        if value:
            return value, name
    return None, None


def expandable_segments_in_effect() -> bool:
    value, _ = alloc_conf()
    if not value:
        return False
    for part in value.split(","):
        key, _, val = part.partition(":")
        if key.strip() == "expandable_segments":
            return val.strip().lower() in ("true", "1")
    return False


class CudaPeakTracker:
    """The caching allocator's own counters: peaks reset at the start of each measured step."""

    method = (
        "torch.cuda.memory_stats(): allocated/reserved/inactive_split bytes .all.peak with "
        "reset_peak_memory_stats() at the start of each measured step (max over steps); "
        "num_alloc_retries and num_ooms counted over the measured window"
    )

    def __init__(self) -> None:
        import torch

        self.torch = torch
        self.steps: list[dict[str, int]] = []
        self._start: dict[str, Any] | None = None
        self._end: dict[str, Any] | None = None

    def start(self) -> None:
        pass

    def begin_window(self) -> None:
        self.torch.cuda.synchronize()
        self._start = self.torch.cuda.memory_stats()

    def begin_step(self) -> None:
        self.torch.cuda.synchronize()
        self.torch.cuda.reset_peak_memory_stats()

    def end_step(self) -> None:
        self.torch.cuda.synchronize()
        s = self.torch.cuda.memory_stats()
        self.steps.append(
            {k: int(s.get(f"{k}.all.peak", 0)) for k in ("allocated_bytes", "reserved_bytes", "inactive_split_bytes")}
        )

    def end_window(self) -> None:
        self.torch.cuda.synchronize()
        self._end = self.torch.cuda.memory_stats()

    def stop(self) -> None:
        pass

    def framework(self, oom: bool = False) -> dict[str, Any]:
        torch = self.torch
        now = torch.cuda.memory_stats()
        backend = None
        try:
            backend = torch.cuda.get_allocator_backend()
        except Exception:  # optional detail
            backend = None
        reasons: dict[str, str] = {}
        keys = ("allocated_bytes", "reserved_bytes", "inactive_split_bytes")
        peaks = {k: max([s[k] for s in self.steps], default=0) for k in keys}
        scope = "measured steps"
        if oom or not self.steps:  # failed before or inside the window: add the peaks since the last reset
            peaks = {k: max(peaks[k], int(now.get(f"{k}.all.peak", 0))) for k in keys}
            scope = "run up to the failure"
        start = self._start or {}
        end = self._end if (self._end is not None and not oom) else now
        retries = int(end.get("num_alloc_retries", 0)) - int(start.get("num_alloc_retries", 0))
        ooms = int(end.get("num_ooms", 0)) - int(start.get("num_ooms", 0))
        inactive: int | None = peaks["inactive_split_bytes"]
        if backend == "cudaMallocAsync":
            inactive = None
            reasons["inactive_split_bytes_peak"] = "backend cudaMallocAsync keeps no split blocks statistics"
        method = self.method + ("" if scope == "measured steps" else f"; peaks over the {scope}")
        return {
            "allocated_bytes_peak": peaks["allocated_bytes"],
            "reserved_bytes_peak": peaks["reserved_bytes"],
            "inactive_split_bytes_peak": inactive,
            "num_alloc_retries": retries,
            "num_ooms": ooms,
            "method": method,
            "reasons": reasons,
            "allocator_backend": backend,
            "step_peaks": [s["allocated_bytes"] for s in self.steps],
            "process_num_alloc_retries": int(now.get("num_alloc_retries", 0)),
            "process_num_ooms": int(now.get("num_ooms", 0)),
        }


def default_tracker(device: str) -> Any:
    return CudaPeakTracker() if device == "cuda" else CpuPeakTracker()


def _sync(device: Any) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize()


def _autocast(plan: Plan, device: Any) -> Any:
    import contextlib

    import torch

    if not plan.autocast:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=torch_dtype(plan.compute))


class Run:
    """One execution of a plan: the pieces of the result as they become known (also after an OOM)."""

    def __init__(self, plan: Plan, tracker: Any, device: Any) -> None:
        self.plan = plan
        self.tracker = tracker
        self.device = device
        self.progress = Progress()
        self.weights_bytes: int | None = None
        self.buffers_bytes: int | None = None
        self.parameters: int | None = None
        self.timing: dict[str, Any] = {}
        self.losses: list[float] = []
        self.kv_cache_bytes: int | None = None
        self.quality_logits: Any = None  # the run's own logits for the quality comparison (after the window)

    # -- shared ---------------------------------------------------------------------------------
    def build(self) -> Any:
        self.progress("build", 0.0)
        t0 = time.perf_counter()
        model = build_model(self.plan, self.plan.weights, self.device)
        _sync(self.device)
        self.timing["build_seconds"] = round(time.perf_counter() - t0, 4)
        params = list(model.parameters())
        self.weights_bytes = storage_bytes(params)
        self.buffers_bytes = storage_bytes(list(model.buffers()))
        self.parameters = sum(p.numel() for p in params)
        if self.device.type == "cuda":
            checkpoint("weights_loaded")
        self.progress("build", 100.0)
        return model

    def quality_wanted(self) -> bool:
        return self.plan.quality and self.plan.compute in LOW_PRECISION

    # -- inference ------------------------------------------------------------------------------
    def inference(self) -> None:
        import torch

        plan, device = self.plan, self.device
        model = self.build()
        model.eval()
        prompts = self.input_ids().to(device)
        cache_dtype = torch_dtype(plan.compute)
        total = plan.warmup_steps + plan.measure_steps
        t0 = time.perf_counter()
        with torch.no_grad():
            for i in range(plan.warmup_steps):
                self._generate(model, prompts, cache_dtype, i, total, warmup=True)
            self.timing["warmup_seconds"] = round(time.perf_counter() - t0, 4)
            gc.collect()
            passes = []
            self.tracker.begin_window()
            for i in range(plan.measure_steps):
                self.tracker.begin_step()
                passes.append(self._generate(model, prompts, cache_dtype, plan.warmup_steps + i, total, warmup=False))
                self.tracker.end_step()
            self.tracker.end_window()
        self.tracker.stop()
        n, b = plan.output_tokens, plan.batch

        def mean(key: str) -> float:
            average: float = sum(p[key] for p in passes) / len(passes)
            return average

        decode_steps = n - 1
        self.timing.update(
            seconds_per_step=round(mean("seconds"), 6),
            step_seconds=[round(p["seconds"], 6) for p in passes],
            prefill_seconds=round(mean("prefill"), 6),
            decode_seconds=round(mean("decode"), 6),
            ms_per_output_token=round(1000.0 * mean("decode") / decode_steps, 4) if decode_steps else None,
            tokens_generated=b * n,
            tokens_generated_per_session=n,
            decode_steps=decode_steps,
            prefill_tokens_per_second=round(b * plan.input_tokens / mean("prefill"), 2) if mean("prefill") else None,
            definitions={
                "step": "one whole task: prefill of every session's prompt, then greedy decoding to max_output_tokens",
                "ms_per_output_token": "decode seconds / decode steps (max_output_tokens - 1; the first token comes "
                "from the prefill): each session's latency per output token at this concurrency",
                "tokens_generated": "per step, all sessions",
            },
        )
        if decode_steps == 0:
            self.timing["reasons"] = {"ms_per_output_token": "max_output_tokens is 1: no decode step ran"}
        self.kv_cache_bytes = passes[-1]["kv_bytes"]
        del prompts
        if self.quality_wanted():
            self.quality_logits = self._quality_forward(model)
        del model

    def _generate(
        self, model: Any, prompts: Any, cache_dtype: Any, index: int, total: int, warmup: bool
    ) -> dict[str, Any]:
        import torch

        plan, device = self.plan, self.device
        n = plan.output_tokens
        label = "warmup" if warmup else None
        _sync(device)
        t0 = time.perf_counter()
        self.progress(label or "prefill", 100.0 * index / total if warmup else 0.0, f"pass {index + 1} of {total}")
        cache = make_cache(plan, cache_dtype, device)
        logits = model(prompts, 0, cache, last_only=True)
        next_ids = logits[:, -1, :].float().argmax(dim=-1, keepdim=True)
        del logits
        _sync(device)
        t1 = time.perf_counter()
        generated = [next_ids]
        for step in range(1, n):
            if label is None:
                self.progress("decode", 100.0 * step / n, f"pass {index + 1} of {total}")
            logits = model(next_ids, plan.input_tokens + step - 1, cache, last_only=True)
            next_ids = logits[:, -1, :].float().argmax(dim=-1, keepdim=True)
            del logits
            generated.append(next_ids)
        out = torch.cat(generated, dim=1)
        _sync(device)
        t2 = time.perf_counter()
        kv = storage_bytes([*cache.k, *cache.v])
        del cache, generated, out, next_ids
        if label is None:
            self.progress("decode", 100.0, f"pass {index + 1} of {total}")
        return {"seconds": t2 - t0, "prefill": t1 - t0, "decode": t2 - t1, "kv_bytes": kv}

    # -- training -------------------------------------------------------------------------------
    def training(self) -> None:
        plan, device = self.plan, self.device
        model = self.build()
        model.train()
        model.set_checkpointing(plan.checkpointing or "none")
        ids = self.input_ids()
        inputs = ids[:, :-1].contiguous().to(device)
        labels = ids[:, 1:].contiguous().to(device)
        del ids
        opt = make_optimizer(plan.optimizer or "adamw", model.parameters())
        total = plan.warmup_steps + plan.measure_steps
        t0 = time.perf_counter()
        for i in range(plan.warmup_steps):
            self.progress("warmup", 100.0 * i / total, f"step {i + 1} of {total}")
            self._train_step(model, opt, inputs, labels)
        self.timing["warmup_seconds"] = round(time.perf_counter() - t0, 4)
        gc.collect()
        steps = []
        self.tracker.begin_window()
        for i in range(plan.measure_steps):
            self.progress("train", 100.0 * i / plan.measure_steps, f"step {plan.warmup_steps + i + 1} of {total}")
            self.tracker.begin_step()
            steps.append(self._train_step(model, opt, inputs, labels))
            self.tracker.end_step()
        self.tracker.end_window()
        self.tracker.stop()
        self.progress("train", 100.0)
        mean = sum(steps) / len(steps)
        tokens = plan.batch * plan.sequence_length
        self.timing.update(
            seconds_per_step=round(mean, 6),
            step_seconds=[round(s, 6) for s in steps],
            tokens_per_step=tokens,
            tokens_per_second=round(tokens / mean, 2) if mean else None,
            definitions={
                "step": "forward, cross-entropy, backward, optimizer step, zero_grad(set_to_none=True)",
            },
        )
        del opt, inputs, labels, model
        gc.collect()

    def _train_step(self, model: Any, opt: Any, inputs: Any, labels: Any) -> float:
        import torch.nn.functional as F

        _sync(self.device)
        t0 = time.perf_counter()
        with _autocast(self.plan, self.device):
            logits = model(inputs)
            loss = F.cross_entropy(logits.float().view(-1, logits.shape[-1]), labels.view(-1))
        del logits  # the trainer keeps the loss only; autograd holds what backward needs
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        value = float(loss.detach())
        del loss
        _sync(self.device)
        self.losses.append(value)
        return time.perf_counter() - t0

    def input_ids(self) -> Any:
        """The prompts (inference) or the training batch with its next-token labels (one more column), on
        the CPU, from the seed: drawn again for the quality comparison, so no copy lives in the window."""
        import torch

        plan = self.plan
        g = torch.Generator().manual_seed(plan.seed + 1)
        shape = (plan.batch, plan.input_tokens) if plan.task == "inference" else (plan.batch, plan.sequence_length + 1)
        return torch.randint(0, plan.spec.vocab_size, shape, generator=g)

    # -- quality (after the measured window) ----------------------------------------------------
    def quality_ids(self) -> tuple[Any, str]:
        """The first sessions' (rows') first tokens, bounded so the compared fp32 logits stay small."""
        ids = self.input_ids()
        described = "the first prompts' first tokens"
        if self.plan.task == "training":
            ids, described = ids[:, :-1], "the first training batch (the weights before any step)"
        vocab = self.plan.spec.vocab_size
        positions = max(1, QUALITY_MAX_LOGITS // vocab)
        tokens = max(1, min(ids.shape[1], QUALITY_MAX_TOKENS, positions))
        rows = max(1, min(ids.shape[0], positions // tokens))
        return ids[:rows, :tokens].contiguous(), described

    def _quality_forward(self, model: Any) -> Any:
        import torch

        ids, _ = self.quality_ids()
        was_training = model.training
        model.eval()
        model.set_checkpointing("none")
        with torch.no_grad(), _autocast(self.plan, self.device):
            logits = model(ids.to(self.device)).float().cpu()
        model.train(was_training)
        return logits

    def quality(self) -> tuple[dict[str, Any] | None, str | None]:
        """Compare the run's logits with an fp32 model from the same seed, on the same inputs."""
        import torch

        plan = self.plan
        if not plan.quality:
            return None, "quality was not requested (spec quality: false)"
        if plan.compute not in LOW_PRECISION:
            return None, f"precision.compute is {plan.compute}: the run is its own reference"
        ids, described = self.quality_ids()
        self.progress("quality", 0.0)
        try:
            low = self.quality_logits
            if low is None:  # training changed the weights: rebuild them from the seed
                model = build_model(plan, plan.weights, self.device)
                low = self._quality_forward(model)
                del model
            gc.collect()
            self.progress("quality", 50.0)
            ref_plan = _replace(plan, compute="fp32", autocast=False)
            model = build_model(ref_plan, "fp32", self.device)
            with torch.no_grad():
                ref = model(ids.to(self.device)).float().cpu()
            del model
        except Exception as exc:
            if not _is_oom(exc):
                raise
            message = str(exc).splitlines()[0][:300]
            del exc
            _free(self.device)
            return None, f"the fp32 reference did not fit: {message}"
        _free(self.device)
        self.progress("quality", 100.0)
        diff = (low - ref).abs()
        scale = ref.abs().max().item()
        agree = (low.argmax(dim=-1) == ref.argmax(dim=-1)).float().mean().item()
        return {
            "reference": "fp32",
            "dtype": plan.compute,
            "max_rel_logit_error": round(diff.max().item() / scale, 6) if scale else None,
            "mean_abs_logit_error": round(diff.mean().item(), 6),
            "top1_agreement": round(agree, 6),
            "positions": int(ids.numel()),
            "sessions": int(ids.shape[0]),
            "tokens": int(ids.shape[1]),
            "inputs": described,
            "definition": (
                "max_rel_logit_error = max |a - b| / max |b| over every compared logit, a = this run's logits "
                "upcast to fp32, b = the fp32 model's (weights drawn from the same seed in fp32, then cast for this "
                "run); top1_agreement = fraction of positions whose argmax agrees"
            ),
        }, None


def _replace(plan: Plan, **changes: Any) -> Plan:
    import dataclasses

    return dataclasses.replace(plan, **changes)


#: Device allocations that fail outside the caching allocator (cuBLAS/cuDNN workspaces, the driver).
DEVICE_OOM_TEXT = ("CUDA out of memory", "CUDA error: out of memory", "CUBLAS_STATUS_ALLOC_FAILED")


def _is_oom(exc: BaseException) -> bool:
    try:
        import torch

        if isinstance(exc, torch.OutOfMemoryError):
            return True
    except ImportError:  # pragma: no cover - torch is there when this runs
        pass
    if isinstance(exc, RuntimeError) and any(text in str(exc) for text in DEVICE_OOM_TEXT):
        return True
    return is_cpu_oom(exc)


def _free(device: Any) -> None:
    gc.collect()
    if device.type == "cuda":
        import torch

        torch.cuda.synchronize()
        torch.cuda.empty_cache()


# --------------------------------------------------------------------------------------------
# the result
# --------------------------------------------------------------------------------------------


def versions(device: Any) -> dict[str, Any]:
    import torch

    value, source = alloc_conf()
    out: dict[str, Any] = {
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "cudnn": None,
        "nccl": None,
        "allocator_config": value,
        "allocator_config_variable": source,
        "python": platform.python_version(),
    }
    if device.type == "cuda":
        try:
            out["cudnn"] = torch.backends.cudnn.version()
        except Exception:  # optional detail
            out["cudnn"] = None
        try:
            nccl = torch.cuda.nccl.version()
            out["nccl"] = ".".join(str(x) for x in nccl) if isinstance(nccl, tuple) else str(nccl)
        except Exception:  # optional detail
            out["nccl"] = None
        out["device_name"] = torch.cuda.get_device_name(device)
    return out


def conditions(plan: Plan, run: Run | None, device: Any) -> dict[str, Any]:
    import torch

    spec = plan.spec
    w = plan.workload
    out: dict[str, Any] = {
        "workload": "synthetic",
        "name": w.name,
        "task": plan.task,
        "device": plan.device,
        "workload_device": w.runtime.device,
        "dtypes": {"weights": plan.weights, "compute": plan.compute, "autocast": plan.autocast},
        "batch": plan.batch,
        "layers": spec.num_layers,
        "hidden": spec.hidden_size,
        "heads": spec.num_attention_heads,
        "kv_heads": spec.num_kv_heads,
        "head_dim": spec.head_dim,
        "intermediate": spec.intermediate_size,
        "vocab": spec.vocab_size,
        "tie_word_embeddings": spec.tie_word_embeddings,
        "mlp": spec.mlp,
        "norm": spec.norm,
        "num_experts": spec.num_experts,
        "experts_per_token": spec.experts_per_token if spec.is_moe else None,
        "model_type": spec.model_type,
        "parameters_expected": parameter_count(spec).total,
        "attention": plan.attention,
        "attention_requested": w.runtime.attention,
        "warmup_steps": plan.warmup_steps,
        "measure_steps": plan.measure_steps,
        "seed": plan.seed,
        "expandable_segments": expandable_segments_in_effect() if plan.device == "cuda" else False,
        "expandable_segments_requested": w.runtime.expandable_segments,
        "threads": torch.get_num_threads(),
        "notes": list(plan.notes),
    }
    if plan.task == "inference":
        assert w.inference is not None
        out.update(
            input_tokens=plan.input_tokens,
            output_tokens=plan.output_tokens,
            kv_layout=plan.kv_layout,
            block_tokens=plan.kv_block_tokens,
            kv_dtype=plan.compute,
            engine=w.inference.engine,
        )
    else:
        out.update(
            sequence_length=plan.sequence_length,
            optimizer=plan.optimizer,
            optimizer_implementation="foreach",
            checkpointing=plan.checkpointing,
        )
    if run is not None:
        out["parameters"] = run.parameters
        out["buffers_bytes"] = run.buffers_bytes
        if run.kv_cache_bytes is not None:
            out["kv_cache_bytes"] = run.kv_cache_bytes
    if plan.device == "cuda" and w.runtime.expandable_segments and not out["expandable_segments"]:
        out["notes"].append(
            "runtime.expandable_segments is true but the allocator configuration in effect does not enable it"
        )
    return out


def execute(plan: Plan, tracker_factory: Any = None) -> tuple[dict[str, Any], int]:
    """Run the plan; returns the result message and the exit status (0, or 3 after an OOM)."""
    try:
        import torch
    except ImportError as exc:  # a node installed without the node extra: say what to install, not a traceback
        raise SpecError(
            f"PyTorch is not installed on this node ({exc}): install the node extra, `pip install -e '.[node]'`"
            " (`make run` installs it with torch's CPU build)"
        ) from None

    if plan.device == "cuda" and not torch.cuda.is_available():
        raise SpecError(f"device 'cuda': torch {torch.__version__} sees no CUDA device")
    torch.manual_seed(plan.seed)
    tracker = (tracker_factory or default_tracker)(plan.device)
    tracker.start()  # before anything of the workload is allocated
    if plan.device == "cuda":
        torch.cuda.init()
        torch.cuda.synchronize()  # the context exists from here on
        device = torch.device("cuda", torch.cuda.current_device())
        checkpoint("cuda_init")
    else:
        device = torch.device("cpu")
    run = Run(plan, tracker, device)
    oom: tuple[str, str, str] | None = None
    try:
        if plan.task == "inference":
            run.inference()
        else:
            run.training()
    except BaseException as exc:
        if not _is_oom(exc):
            tracker.stop()
            raise
        oom = (str(exc).strip()[:2000], run.progress.phase, run.progress.detail)
        del exc
    gc.collect()  # the failed frames are gone: their tensors are freed before anything else is read
    tracker.stop()
    result: dict[str, Any] = {"type": "result", "oom": oom is not None}
    quality: dict[str, Any] | None
    quality_reason: str | None
    if oom is not None:
        result.update(oom_message=oom[0], phase=oom[1], oom_detail=oom[2])
        quality, quality_reason = None, "the run did not complete (out of memory)"
    else:
        # The measured window ends here: the parent keeps the device peak until this checkpoint, so the
        # fp32 reference model built for the quality comparison never counts as the workload's memory.
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        checkpoint("measured_end")
        time.sleep(MEASURED_END_SETTLE_S)
        quality, quality_reason = run.quality()
    result.update(
        framework=tracker.framework(oom=oom is not None),
        weights_bytes=run.weights_bytes,
        timing=run.timing,
        quality=quality,
        quality_reason=quality_reason,
        conditions=conditions(plan, run, device),
        versions=versions(device),
    )
    if run.losses:
        result["losses"] = [round(x, 6) for x in run.losses]
    return json_safe(result), (EXIT_OOM if oom is not None else EXIT_OK)


def json_safe(value: Any) -> Any:
    """The value with every non-finite float (an fp16 overflow, a diverged loss) as null: JSON has no NaN."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value


def emit(result: dict[str, Any]) -> None:
    """Send the result to the parent; run by hand (no report fd), print it on stdout too."""
    report(result)
    if not os.environ.get(REPORT_FD_ENV, "").isdigit():
        sys.stdout.write(json.dumps(result, indent=1, allow_nan=False) + "\n")
        sys.stdout.flush()


def spec_main(
    argv: list[str] | None, module: str, load: Callable[[Any], Any], run: Callable[[Any], tuple[dict[str, Any], int]]
) -> int:
    """A runner's command line, ``python -m MODULE SPEC_JSON_PATH``: the spec read, ``load``ed and ``run``, its result
    emitted; a spec that cannot be read or run exits 2 with one ``error:`` line."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print(f"usage: python -m {module} SPEC_JSON_PATH", file=sys.stderr)
        return EXIT_SPEC_ERROR
    try:
        with open(argv[0], encoding="utf-8") as fh:
            raw = json.load(fh)
    except (OSError, ValueError) as exc:
        print(f"error: cannot read the spec {argv[0]!r}: {exc}", file=sys.stderr)
        return EXIT_SPEC_ERROR
    try:
        result, status = run(load(raw))
    except SpecError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_SPEC_ERROR
    emit(result)
    return status


def main(argv: list[str] | None = None) -> int:
    return spec_main(argv, "workers.runner.synthetic", load_plan, execute)


if __name__ == "__main__":
    raise SystemExit(main())
