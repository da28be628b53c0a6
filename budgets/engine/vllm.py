"""vLLM's start-up memory accounting: the KV pool it allocates, by release.

vLLM measures at start-up and gives the KV cache what is left of its share of the device
(`docs/research/vllm-memory.md` §1 and §4; file:line references are inside vLLM's release wheels):

    KV = u·T − W − A − N − G   per GPU ("Available KV cache memory")
    blocks = floor(KV / (block_tokens × per-token bytes on the rank)), min over pipeline ranks
    GPU KV cache size = blocks × block_tokens;  max concurrency = blocks / ceil(max_model_len / block_tokens)

T is what `cudaMemGetInfo` reports (not the marketed size), u the utilization, W the weights as loaded,
A the torch peak of the profile run, N the non-torch growth after the start-up snapshot and G the CUDA-graph
estimate (0.21 and later). vLLM refuses to start when KV ≤ 0 or fewer blocks than one max_model_len
request remain (`vllm-0.11.0/v1/core/kv_cache_utils.py:678-720`; V0: `vllm-0.6.4.post1/worker/worker.py:492-498`).

Releases before 0.8 default to vLLM's first engine, V0 (`VLLM_USE_V1` defaults to "0":
`vllm-0.7.2/envs.py:494-495`). V0 takes the same shape of formula with its own scheduler defaults and, by
release, a different baseline (the V0 profiles below; file:line inside the release wheels).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import TypedDict

from .budget import ServingPlan
from .components import kv_cache as kv
from .dtypes import nbytes
from .models import ModelSpec
from .models.layers import Mixer, heads_per_device

GIB = 2**30
DEFAULT_VLLM_VERSION = "0.11.0"  # the release whose code the formula was read from (vllm-memory.md §1.1)
# A = max(forward, c·R·V + B·h·d). Sort-based samplers (V0 and V1 to 0.16: fp32 copy, full sort with int64
# indices, softmax, cumsum, scatter; vllm-0.6.3/model_executor/layers/sampler.py:257, 419) — c fitted to six published
# H100/H200 runs of the 0.10/0.11 native sampler (vllm-memory.md §1.3 table; llm-d empirical-vllm-memory-results.md;
# 0.10.2 H200 log)
SAMPLER_BYTES_PER_LOGIT = 38.3
# From 0.17 top-k/top-p runs in place in a Triton kernel for ≥ 8 rows, no sort (vllm-0.17.0/v1/sample/ops/
# topk_topp_sampler.py:246-258, topk_topp_triton.py:947-1031): the live tensors are the 16-bit logits (2 B), their
# fp32 copy (4 B; v1/sample/sampler.py:90, temperature divided in place :141), the softmax probs (4 B) and the
# exponential noise q (4 B; topk_topp_sampler.py:112, 334) = 14 B per logit. The kernel's per-SM buffer
# (≤ SMs × V × 4 B, 0.08 GiB on H100) is left out.
TRITON_SAMPLER_BYTES_PER_LOGIT = 14.0
# vllm serve `max_num_batched_tokens` / `max_num_seqs` defaults (vllm-0.11.0/engine/arg_utils.py:1595-1624;
# vllm-0.8.5/engine/arg_utils.py:1596-1609; vllm-0.33.0/engine/arg_utils.py:2973-2996)
LARGE_GPU_BYTES = 70 * GIB  # "≥ 70 GiB" GPU class of those defaults
HUGE_GPU_BYTES = 160 * GIB  # B200/B300 class, 0.33 and later
SERVE_DEFAULTS = {"huge": (16384, 1024), "large": (8192, 1024), "small": (2048, 256)}  # (B, S)
# G from 0.21: the one published estimate, 0.36 GiB (gpustack/runner#251, vLLM 0.27.1,
# tests/workers/data/vllm_logs/v0.27.1_tp2_gpustack-runner-pr-251.log); graph memory measured −0.88…+2.37 GiB
# at ≤0.20 (llm-d empirical-vllm-memory-results.md; 0.10.2 H200 log), hence the band
CUDA_GRAPH_ESTIMATE_BYTES = int(0.36 * GIB)
CUDA_GRAPH_HIGH_BYTES = int(2.37 * GIB)
# N at tensor degree 1: lazily loaded modules after the snapshot, 0.13 GiB on H100 (llm-d
# empirical-vllm-memory-results.md); at degree ≥ 2 with the snapshot taken before NCCL init the communicators and
# custom all-reduce buffers join it: 1.38 GiB at TP2 on H200 (vLLM 0.10.2 log, vllm-memory.md §1.2)
MODULES_BYTES = int(0.13 * GIB)
MODULES_AND_NCCL_BYTES = int(1.38 * GIB)
# the CUDA context of a vLLM process, used before the snapshot: 79.18 − 78.57 = 0.61 GiB on H100 (llm-d: "Free
# memory on device: 78.57/79.18 GiB on startup"); an H100 figure, smaller on consumer GPUs (vllm-memory.md §3)
CUDA_CONTEXT_BYTES = int(0.61 * GIB)
# V0 scheduler defaults: max_num_seqs 256 (vllm-0.6.3/engine/arg_utils.py:115; vllm-0.7.2/engine/arg_utils.py:217);
# chunked prefill switched on by default above 32,768 tokens of max_model_len (vllm-0.5.5/engine/arg_utils.py:820-838;
# vllm-0.6.3/engine/arg_utils.py:936-952; vllm-0.4.2 has no such default), with max_num_batched_tokens 512
# (vllm-0.6.3/config.py:983) or 2048 from 0.6.5 (vllm-0.6.5/config.py:1344; vllm-0.7.2/config.py:1533);
# otherwise max(max_model_len, 2048) (vllm-0.6.3/config.py:987; vllm-0.4.2/config.py:625)
V0_MAX_NUM_SEQS = 256
V0_LONG_CONTEXT_TOKENS = 32768
V0_MIN_BATCHED_TOKENS = 2048


@dataclass(frozen=True, slots=True)
class Profile:
    """What one range of vLLM releases deducts from the pool (vllm-memory.md §1.2)."""

    name: str  # "0.11": the first release of the range
    since: tuple[int, ...]  # first release it applies to
    default_utilization: float  # gpu_memory_utilization default, fraction
    non_torch_tp1_bytes: int  # N at tensor degree 1, bytes
    non_torch_tp_bytes: int  # N at tensor degree ≥ 2, bytes
    graphs_in_pool: bool  # G deducted from the pool
    summary: str
    v0: bool = False  # vLLM's first engine: its scheduler defaults (V0_*)
    context_in_pool: bool = False  # N includes the CUDA context (CUDA_CONTEXT_BYTES)
    sampler_bytes_per_logit: float = SAMPLER_BYTES_PER_LOGIT  # c of the sampler term


PROFILES: tuple[Profile, ...] = (
    # V0 0.4–0.6.3: the baseline is the free memory after the context (vllm-0.6.3/worker/worker.py:171, before NCCL
    # init at :176; vllm-0.4.2/worker/worker.py:106, 111); after the profile run vLLM charges the whole drop in free
    # memory, T·u − (free_init − free_after) (vllm-0.6.3/worker/worker.py:228-245; vllm-0.4.2/worker/worker.py:144-155):
    # weights, the profile run's cached blocks, NCCL and loaded modules; the context stays outside. The allocator's
    # cached blocks can exceed the allocated peak the engine models (not modelled).
    Profile(
        name="0.4",
        since=(0, 4),
        default_utilization=0.90,
        non_torch_tp1_bytes=MODULES_BYTES,
        non_torch_tp_bytes=MODULES_AND_NCCL_BYTES,
        graphs_in_pool=False,
        summary="V0: free-memory drop from after the CUDA context, NCCL buffers inside the pool",
        v0=True,
    ),
    # V0 0.6.4: T·u − allocated peak − (used − torch allocated) (vllm-0.6.4.post1/worker/worker.py:201-217): "used" is
    # everything on the device, so the CUDA context (and any other process) is charged too
    Profile(
        name="0.6.4",
        since=(0, 6, 4),
        default_utilization=0.90,
        non_torch_tp1_bytes=MODULES_BYTES + CUDA_CONTEXT_BYTES,
        non_torch_tp_bytes=MODULES_AND_NCCL_BYTES + CUDA_CONTEXT_BYTES,
        graphs_in_pool=False,
        summary="V0: CUDA context and NCCL buffers inside the pool",
        v0=True,
        context_in_pool=True,
    ),
    # V0 0.6.5–0.7: memory_profiling (PR #10511) from a baseline taken after the context, before NCCL init
    # (vllm-0.6.5/worker/worker.py:143, 148, 198-210; vllm-0.6.5/utils.py:1736): T·u − W − A − N
    Profile(
        name="0.6.5",
        since=(0, 6, 5),
        default_utilization=0.90,
        non_torch_tp1_bytes=MODULES_BYTES,
        non_torch_tp_bytes=MODULES_AND_NCCL_BYTES,
        graphs_in_pool=False,
        summary="V0: NCCL buffers inside the pool, context outside",
        v0=True,
    ),
    # V1 0.8–0.9.1: as 0.10, and the CUDA context charged too (vllm-0.8.5/v1/worker/gpu_worker.py:165-212)
    Profile(
        name="0.8",
        since=(0, 8),
        default_utilization=0.90,
        non_torch_tp1_bytes=MODULES_BYTES + CUDA_CONTEXT_BYTES,
        non_torch_tp_bytes=MODULES_AND_NCCL_BYTES + CUDA_CONTEXT_BYTES,
        graphs_in_pool=False,
        summary="V1 to 0.9.1: CUDA context and NCCL buffers inside the pool, CUDA graphs outside",
        context_in_pool=True,
    ),
    # V1 0.9.2–0.10: snapshot before NCCL init (vllm-0.10.1.1/v1/worker/gpu_worker.py:174,192)
    Profile(
        name="0.10",
        since=(0, 9, 2),
        default_utilization=0.90,
        non_torch_tp1_bytes=MODULES_BYTES,
        non_torch_tp_bytes=MODULES_AND_NCCL_BYTES,
        graphs_in_pool=False,
        summary="NCCL buffers inside the pool, CUDA graphs outside",
    ),
    # 0.11–0.20: snapshot after NCCL init (PR #25359, vllm-0.11.0/v1/worker/gpu_worker.py:165-184, 255-280);
    # N = 0.13 GiB TP1, 0.55 GiB TP2 on H100 (llm-d empirical-vllm-memory-results.md)
    Profile(
        name="0.11",
        since=(0, 11),
        default_utilization=0.90,
        non_torch_tp1_bytes=MODULES_BYTES,
        non_torch_tp_bytes=int(0.55 * GIB),
        graphs_in_pool=False,
        summary="context, NCCL buffers and CUDA graphs outside the pool",
    ),
    # 0.17: the Triton top-k/top-p sampler (TRITON_SAMPLER_BYTES_PER_LOGIT); llm-d-planner PR #205 measures the
    # activation of Qwen3-14B at 5.64 GiB to 0.16 and 2.23 GiB from 0.17 (accuracy_report.md, Part 2)
    Profile(
        name="0.17",
        since=(0, 17),
        default_utilization=0.90,
        non_torch_tp1_bytes=MODULES_BYTES,
        non_torch_tp_bytes=int(0.55 * GIB),
        graphs_in_pool=False,
        summary="context, NCCL buffers and CUDA graphs outside the pool; Triton top-k/top-p sampler",
        sampler_bytes_per_logit=TRITON_SAMPLER_BYTES_PER_LOGIT,
    ),
    # 0.18: N rises to 0.25 GiB at TP1 (Qwen3-14B at v0.18.0, Llama-3.1-8B at v0.19.0) and 2.07 GiB at TP2
    # (Llama-3.1-8B, v0.19.0) in llm-d-planner PR #205's accuracy_report.md (Part 2; Part 1 TP table)
    Profile(
        name="0.18",
        since=(0, 18),
        default_utilization=0.90,
        non_torch_tp1_bytes=int(0.25 * GIB),
        non_torch_tp_bytes=int(2.07 * GIB),
        graphs_in_pool=False,
        summary="context and CUDA graphs outside the pool; Triton top-k/top-p sampler",
        sampler_bytes_per_logit=TRITON_SAMPLER_BYTES_PER_LOGIT,
    ),
    # 0.21+: graph estimate deducted and util 0.92 (vllm-0.21.0/v1/worker/gpu_worker.py:398-446;
    # envs.py:1768-1770; config/cache.py:66); N carried from 0.18–0.19 (not measured at 0.21); the Triton sampler
    # is still used in 0.33 (vllm-0.33.0/v1/sample/ops/topk_topp_sampler.py:18-23, 516)
    Profile(
        name="0.21",
        since=(0, 21),
        default_utilization=0.92,
        non_torch_tp1_bytes=int(0.25 * GIB),
        non_torch_tp_bytes=int(2.07 * GIB),
        graphs_in_pool=True,
        summary="CUDA-graph estimate deducted from the pool; Triton top-k/top-p sampler",
        sampler_bytes_per_logit=TRITON_SAMPLER_BYTES_PER_LOGIT,
    ),
)


@lru_cache(maxsize=256)
def parse_version(version: str) -> tuple[int, ...]:
    """The numeric release parts: "0.10.1.1" → (0, 10, 1, 1); a "v" prefix, suffixes (post1, rc1, dev233) and a
    local part (+gad5a35c2, +cu128) are dropped."""
    base = re.split(r"post|rc|dev|a|b|\+", version.lstrip("v"))[0]
    return tuple(int(p) for p in re.findall(r"\d+", base))


# The releases whose memory accounting was read (file:line references above and in docs/research/vllm-memory.md) or
# measured (benchmarks/gpu_published/records.json; the 0.27.1 graph-estimate log), by major.minor. A release between
# two of them is budgeted by its profile, which holds at both; a change made in between is not known here (the budget
# says so). Releases before the oldest and after the newest read are refused (`version_refusal`).
READ_RELEASES: tuple[tuple[int, int], ...] = (
    (0, 4), (0, 5), (0, 6), (0, 7), (0, 8), (0, 10), (0, 11), (0, 15), (0, 16), (0, 17), (0, 18), (0, 19), (0, 21),
    (0, 27), (0, 33),
)  # fmt: skip


def version_refusal(version: str) -> str | None:
    """Why a vLLM release cannot be budgeted (None when it can): before the oldest or after the newest release read."""
    v, oldest, newest = parse_version(version)[:2], READ_RELEASES[0], READ_RELEASES[-1]
    if oldest <= v <= newest:
        return None
    side = "older than the oldest" if v < oldest else "newer than the newest"
    return (
        f"runtime.engine_version {version!r}: vLLM {'.'.join(map(str, v))} is {side} release read here"
        f" ({'.'.join(map(str, oldest))}–{'.'.join(map(str, newest))}); how it sizes its KV pool (utilization default,"
        " what the start-up deducts, the sampler of its profile run) is not known here. Give a release in that range,"
        f" or leave engine_version out to budget {DEFAULT_VLLM_VERSION}"
    )


def release_note(version: str) -> str:
    """How a pasted version string maps to the rules applied, for the budget's assumptions ("" for a plain release of
    a minor version read)."""
    v = parse_version(version)
    release = ".".join(str(p) for p in v)
    profile = profile_for(version)
    unread = "" if v[:2] in READ_RELEASES else _unread(v, profile)
    if version == release:
        return unread
    pre = re.search(r"(rc|dev|a|b)\d", version.lstrip("v"))
    kind = "a pre-release (rc/dev) of" if pre else "a build of"
    return (
        f"vLLM {version!r} is {kind} {release}: the {profile.name} profile applies (releases from"
        f" {'.'.join(map(str, profile.since))})"
        + ("; changes merged for the release may be missing from it" if pre else "")
        + (f"; {unread}" if unread else "")
    )


def _unread(v: tuple[int, ...], profile: Profile) -> str:
    """What is not known of a release no source or record was read for: the read releases on either side, and which
    of them the profile applied holds at."""
    name = ".".join(map(str, v[:2]))
    older = ".".join(map(str, max((r for r in READ_RELEASES if r < v[:2]), default=READ_RELEASES[0])))
    newer = ".".join(map(str, min((r for r in READ_RELEASES if r > v[:2]), default=READ_RELEASES[-1])))
    holds = [r for r in (older, newer) if profile_for(r) is profile]
    where = "both" if len(holds) == 2 else f"{holds[0]} only" if holds else "neither"
    return (
        f"vLLM {name} was not read (read on either side: {older} and {newer}): budgeted by the {profile.name} profile,"
        f" which holds at {where}; a change to the pool's accounting made in {name} would not be in this budget"
    )


@lru_cache(maxsize=256)
def profile_for(version: str) -> Profile:
    """The profile of the release (releases outside the ones read are refused by the schema: `version_refusal`; the
    oldest profile stands for them here)."""
    v = parse_version(version)
    return ([p for p in PROFILES if v >= p.since] or [PROFILES[0]])[-1]


def default_gpu_memory_utilization(version: str) -> float:
    return profile_for(version).default_utilization


def v0_scheduler_defaults(version: str, max_model_len: int) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) of V0: the profile run covers max_model_len tokens unless chunked
    prefill is on by default (above 32,768 tokens, from 0.5) — V0_* constants above."""
    v = parse_version(version)
    if v >= (0, 5) and max_model_len > V0_LONG_CONTEXT_TOKENS:
        return (V0_MIN_BATCHED_TOKENS if v >= (0, 6, 5) else 512), V0_MAX_NUM_SEQS
    return max(max_model_len, V0_MIN_BATCHED_TOKENS), V0_MAX_NUM_SEQS


def scheduler_defaults(
    version: str, device_memory_bytes: int | None, device_name: str | None, max_model_len: int
) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) `vllm serve` picks for the GPU; the large class without T."""
    if profile_for(version).v0:
        return v0_scheduler_defaults(version, max_model_len)
    v = parse_version(version)
    t = device_memory_bytes if device_memory_bytes is not None else LARGE_GPU_BYTES
    if v >= (0, 33) and t >= HUGE_GPU_BYTES:
        return SERVE_DEFAULTS["huge"]
    large = t >= LARGE_GPU_BYTES
    if v >= (0, 10) and device_name and "a100" in device_name.lower():
        large = False  # 0.10+ keeps A100s (any size) in the small class
    return SERVE_DEFAULTS["large" if large else "small"]


@dataclass(frozen=True, slots=True)
class CacheLayout:
    """What vLLM's KV pool holds per request, by layer kind (vllm-0.11.0/v1/kv_cache_interface.py
    `max_memory_usage_bytes`): full attention and MLA every block of the request (:83-91, :146-153); a sliding
    window `cdiv(min(window − 1 + max_num_batched_tokens, tokens), block) + 1` blocks (:192-214); a recurrent
    (Mamba / linear-attention) layer one page per request (:217-239). Chunked local attention is cached as full
    attention: the hybrid allocator is off for chunked models by default (vllm-0.11.0/config/__init__.py:519-529).

    Hybrids with recurrent layers share one page size (vllm-0.11.0/model_executor/models/config.py:345-394): the
    attention block grows to `16 × cdiv(state page, 16 × attention bytes per token)` tokens and each state page is
    padded to that attention page.

    The pool's reported size ("GPU KV cache size: N tokens", kv_cache_utils.py:1080-1087) counts every layer on
    the rank as one attention page: page bytes per token = layers × the largest per-layer page per token."""

    spec: ModelSpec
    tensor: int
    first: int
    layers: int
    precision: str
    block: int  # the workload's kv_block_tokens
    batched: int

    @property
    def mixers(self) -> tuple[tuple[Mixer, int], ...]:
        return kv.stage_mixers(self.spec, self.first, self.layers)

    @property
    def uniform(self) -> bool:
        """Every layer keeps every position (full attention or MLA): the pool is plain blocks."""
        return _layout_figures(self)[0]

    @property
    def _attention_per_token(self) -> float:
        """Bytes per token of one attention layer (the largest), the unit of every page."""
        return _layout_figures(self)[1]

    @property
    def _state_page(self) -> float:
        return _layout_figures(self)[2]

    @property
    def block_tokens(self) -> int:
        """The attention block size vLLM runs with: raised for hybrids so one page holds a recurrent state."""
        return _layout_figures(self)[3]

    @property
    def page_bytes_per_token(self) -> int:
        return _layout_figures(self)[4]

    def request_bytes(self, tokens: int) -> int:
        """Bytes of the pool one request of `tokens` positions holds on this rank."""
        return _request_bytes(self, tokens)


@lru_cache(maxsize=1024)
def _layout_figures(layout: CacheLayout) -> tuple[bool, float, float, int, int]:
    """(uniform, attention bytes per token, state page, block tokens, page bytes per token) of a layout, computed once
    per layout (a plan search asks for them for every plan of the same stage)."""
    d = nbytes(layout.precision)
    mixers = layout.mixers
    uniform = all(m.kind in ("full", "mla", "chunked", "none") for m, _ in mixers)
    per_token = max((m.kv_elements_per_token(layout.tensor) * d for m, _ in mixers), default=0.0)
    state = max((m.state_elements_per_sequence(layout.tensor) * d for m, _ in mixers), default=0.0)
    block = layout.block if not state or not per_token else max(layout.block, 16 * math.ceil(state / (16 * per_token)))
    if uniform:
        page = int(sum(m.kv_elements_per_token(layout.tensor) * d * n for m, n in mixers))
    else:
        page = int(per_token * sum(n for m, n in mixers if m.kind != "none"))
    return uniform, per_token, state, block, page


@lru_cache(maxsize=4096)
def _request_bytes(layout: CacheLayout, tokens: int) -> int:
    d = nbytes(layout.precision)
    _, per_token, state, block, _ = _layout_figures(layout)
    padded_state = block * per_token if state and per_token else None
    total = 0.0
    for m, n in layout.mixers:
        per_block = m.kv_elements_per_token(layout.tensor) * d * block
        if m.kind == "sliding" and m.window:
            blocks = math.ceil(min(m.window - 1 + layout.batched, tokens) / block) + 1
        else:
            blocks = math.ceil(tokens / block)
        total += per_block * blocks * n
        if m.kind in ("linear", "mamba"):
            total += (padded_state or m.state_elements_per_sequence(layout.tensor) * d) * n
    return int(total)


# MXFP4 experts on the device (vllm-0.11.0/model_executor/layers/quantization/mxfp4.py): below compute capability 10
# vLLM takes the Marlin kernels unless `triton_kernels` is installed (:59-107); Marlin pads each expert's
# intermediate width to a multiple of 128 and the hidden width to a multiple of 256 (:188-205). gpt-oss-120b:
# 60.77 GiB as stored, "Model loading took 65.9651 GiB" on H100 and on an A100-class GPU (vllm#23278, 0.10.1;
# blog.huikang.dev 2025-12-28, 0.11.2) — the Marlin layout, so the expected figure; Triton's is the low end
MXFP4_MARLIN_INTERMEDIATE = 128
MXFP4_MARLIN_HIDDEN = 256
MXFP4_FLASHINFER = 256  # compute capability 10 (SM100 FlashInfer): both widths to a multiple of 256 (:185-227)
MXFP4_BYTES_PER_ELEMENT = 0.5 + 1 / 32  # two fp4 codes per byte + an e8m0 scale per 32


def mxfp4_layout(compute_capability: tuple[int, int] | None) -> str:
    """The kernel whose layout vLLM keeps MXFP4 experts in: FlashInfer on compute capability 10, Marlin below
    (the Triton kernels, without padding, only when `triton_kernels` is installed: the low end)."""
    if compute_capability is not None and compute_capability[0] == 10:
        return f"FlashInfer (both widths padded to {MXFP4_FLASHINFER})"
    return f"Marlin (intermediate padded to {MXFP4_MARLIN_INTERMEDIATE}, hidden to {MXFP4_MARLIN_HIDDEN})"


def mxfp4_padding_bytes(spec: ModelSpec, tensor: int, compute_capability: tuple[int, int] | None = None) -> int:
    """What the kernel's padding adds to a rank's MXFP4 expert weights (gate_up, down, and their biases)."""
    if not spec.is_moe:
        return 0
    flashinfer = compute_capability is not None and compute_capability[0] == 10
    multiple_i = MXFP4_FLASHINFER if flashinfer else MXFP4_MARLIN_INTERMEDIATE
    multiple_h = MXFP4_FLASHINFER if flashinfer else MXFP4_MARLIN_HIDDEN
    h, inter = spec.hidden_size, math.ceil(spec.expert_intermediate_size / tensor)
    inter_p = -(-inter // multiple_i) * multiple_i
    h_p = -(-h // multiple_h) * multiple_h
    matrices = (3 * inter_p * h_p - 3 * inter * h) * MXFP4_BYTES_PER_ELEMENT
    biased = any(g.name.endswith("experts.bias") for g in spec.weight_groups)
    biases = (2 * (inter_p - inter) + (h_p - h)) * 2 if biased else 0  # bf16 gate_up and down biases
    return int((matrices + biases) * spec.num_experts * spec.num_moe_layers)


def rotary_cache_bytes(spec: ModelSpec, d: float) -> int:
    """The rotary cos/sin cache vLLM builds once per model: max_position × rotary_dim × dtype (llm-d: W 14.99
    measured vs 14.96 parameters for Llama-3.1-8B)."""
    if spec.learned_positions or not spec.max_position_embeddings:
        return 0
    return int(spec.max_position_embeddings * spec.rope_dim * d)


def profile_activations(
    spec: ModelSpec, tensor: int, tokens: int, seqs: int, d: float, holds_head: bool, version: str
) -> tuple[int, int]:
    """(forward peak, sampler peak) of vLLM's profile run, bytes; A is the larger.

    Forward: `_dummy_run(max_num_batched_tokens)` with fused qkv and gate_up (MoE: fused-MoE caches
    [M,k,2N], [M·k,N], [M,k,h] with N = I/TP). Sampler: `_dummy_sampler_run` over R = min(S, B) rows of
    the full vocabulary (logits all-gathered in V1) while the B×h hidden states survive
    (vllm-0.11.0/v1/worker/gpu_model_runner.py:3183-3255, 3391-3401; logits_processor.py:69-77).
    """
    h = spec.hidden_size
    q = (spec.num_attention_heads // tensor) * spec.head_dim
    kv = heads_per_device(spec.num_kv_heads, tensor) * spec.head_dim
    if spec.is_moe:
        n = math.ceil(spec.expert_intermediate_size / tensor)
        mlp = tokens * spec.experts_per_token * (3 * n + h) * d
    else:
        mlp = 3 * tokens * math.ceil(spec.intermediate_size / tensor) * d
    forward = 3 * tokens * h * d + max(mlp, tokens * (2 * q + 2 * kv) * d)
    rows = min(seqs, tokens)
    per_logit = profile_for(version).sampler_bytes_per_logit
    sampler = per_logit * rows * spec.vocab_size + tokens * h * d if holds_head else 0
    return int(forward), int(sampler)


@dataclass(frozen=True, slots=True)
class PoolInputs:
    """What the pool arithmetic needs for one pipeline rank (all byte counts per GPU)."""

    version: str
    utilization: float  # fraction of T
    device_memory_bytes: int | None  # T, bytes
    weights_bytes: int  # W, bytes
    activations_bytes: int  # A, bytes
    tensor: int
    page_bytes_per_token: int  # K+V bytes per token on this rank, all its layers
    block_tokens: int
    max_model_len: int  # tokens
    longest_request: int  # the workload's input + output, tokens
    sessions: int  # the workload's concurrency
    max_num_batched_tokens: int
    max_num_seqs: int
    # models whose layers cache differently (sliding windows, recurrent state): what one request holds in the pool
    request_bytes_max_len: int | None = None
    request_bytes_longest: int | None = None


def non_torch_bytes(profile: Profile, tensor: int) -> int:
    return profile.non_torch_tp1_bytes if tensor == 1 else profile.non_torch_tp_bytes


def loaded_modules_bytes(profile: Profile) -> int:
    """The non-torch growth of one GPU less the CUDA context (which the device view counts on its own)."""
    return profile.non_torch_tp1_bytes - (CUDA_CONTEXT_BYTES if profile.context_in_pool else 0)


class _PlanInputs(TypedDict):
    """What every serving plan reports, with a device figure or without."""

    kv_bytes_per_token: int
    kv_bytes_needed: int
    device_memory_bytes: int | None
    max_model_len: int
    max_num_seqs: int
    max_num_batched_tokens: int
    profile: str


def serving_plan(p: PoolInputs, needed_bytes: int) -> ServingPlan:
    """The pool vLLM allocates, its tokens and concurrency, and whether vLLM starts at all."""
    profile = profile_for(p.version)
    inputs: _PlanInputs = {
        "kv_bytes_per_token": p.page_bytes_per_token,
        "kv_bytes_needed": needed_bytes,
        "device_memory_bytes": p.device_memory_bytes,
        "max_model_len": p.max_model_len,
        "max_num_seqs": p.max_num_seqs,
        "max_num_batched_tokens": p.max_num_batched_tokens,
        "profile": profile.name,
    }
    if not p.device_memory_bytes:
        return ServingPlan(kv_pool_bytes=None, **inputs)
    graphs = CUDA_GRAPH_ESTIMATE_BYTES if profile.graphs_in_pool else 0
    kv = int(p.device_memory_bytes * p.utilization) - p.weights_bytes - p.activations_bytes
    kv -= non_torch_bytes(profile, p.tensor) + graphs
    block_bytes = p.page_bytes_per_token * p.block_tokens
    blocks = max(kv, 0) // block_bytes if block_bytes else 0
    per_request_blocks = math.ceil(p.max_model_len / p.block_tokens)
    one_request = per_request_blocks * block_bytes
    starts = kv > 0 and blocks >= per_request_blocks
    reason = None
    if kv <= 0:
        reason = f"vLLM will not start: no memory for the KV cache blocks ({kv / GIB:.2f} GiB available)"
    elif not starts:
        reason = (
            f"vLLM will not start: one request of max_model_len {p.max_model_len} needs {one_request / GIB:.2f} GiB"
            f" of KV cache, more than the {kv / GIB:.2f} GiB available"
        )
    per_longest = math.ceil(p.longest_request / p.block_tokens)
    if p.request_bytes_max_len is not None and p.request_bytes_longest is not None:
        # layers that cache differently: requests are counted in bytes of the shared pool (max concurrency as
        # vLLM prints it: blocks over the blocks per request summed over the groups, kv_cache_utils.py:780-795)
        starts = kv > 0 and kv >= p.request_bytes_max_len
        if kv > 0 and not starts:
            reason = (
                f"vLLM will not start: one request of max_model_len {p.max_model_len} needs"
                f" {p.request_bytes_max_len / GIB:.2f} GiB of KV cache, more than the {kv / GIB:.2f} GiB available"
            )
        sessions_fit = max(kv, 0) // p.request_bytes_longest if p.request_bytes_longest else 0
        return ServingPlan(
            **inputs,
            kv_pool_bytes=max(kv, 0),
            max_concurrent_sessions_at_max_request=int(sessions_fit),
            max_request_tokens_at_concurrency=(blocks // p.sessions) * p.block_tokens,
            kv_pool_tokens=blocks * p.block_tokens,
            max_concurrency=round(max(kv, 0) / p.request_bytes_max_len, 2) if p.request_bytes_max_len else 0.0,
            starts=starts,
            reason=reason,
            shortfall_bytes=None if starts else p.request_bytes_max_len - kv,
            available_kv_bytes=kv,
            need_bytes=int(p.device_memory_bytes * p.utilization) - kv + needed_bytes,
        )
    return ServingPlan(
        **inputs,
        kv_pool_bytes=max(kv, 0),
        max_concurrent_sessions_at_max_request=blocks // per_longest,
        max_request_tokens_at_concurrency=(blocks // p.sessions) * p.block_tokens,
        kv_pool_tokens=blocks * p.block_tokens,
        max_concurrency=round(blocks / per_request_blocks, 2),
        starts=starts,
        reason=reason,
        shortfall_bytes=None if starts else one_request - kv,
        available_kv_bytes=kv,
        need_bytes=int(p.device_memory_bytes * p.utilization) - kv + needed_bytes,
    )


def tightest(plans: list[ServingPlan]) -> ServingPlan:
    """vLLM takes the minimum of blocks over ranks (kv_cache_utils.py:1286-1289): the smallest pool."""
    with_pool = [s for s in plans if s.kv_pool_tokens is not None]
    if not with_pool:
        return plans[-1]
    return min(with_pool, key=lambda s: (s.kv_pool_tokens, s.available_kv_bytes or 0))


def needed_device_memory(p: PoolInputs, needed_bytes: int) -> int:
    """The smallest T (cudaMemGetInfo total) at which vLLM's pool holds `needed_bytes`: (W+A+N+G+KV)/u."""
    profile = profile_for(p.version)
    graphs = CUDA_GRAPH_ESTIMATE_BYTES if profile.graphs_in_pool else 0
    non_kv = p.weights_bytes + p.activations_bytes + non_torch_bytes(profile, p.tensor) + graphs
    return math.ceil((non_kv + needed_bytes) / p.utilization)


def concurrency_sentence(plan: ServingPlan, sessions: int, longest: int) -> str | None:
    """Whether the pool holds the asked concurrency at the longest request, said in the answer (a `starts: true` with
    a concurrency below the asked one is not a fit); None without device memory."""
    held = plan.max_concurrent_sessions_at_max_request
    if plan.kv_pool_bytes is None or held is None:
        return None
    if not plan.starts:
        return f"the asked {sessions} sessions of {longest} tokens: vLLM does not start ({plan.reason})"
    if held >= sessions:
        return f"the KV pool holds {held} sessions of the longest request ({longest} tokens): the asked {sessions} fit"
    return (
        f"the KV pool holds {held} sessions of the longest request ({longest} tokens): the asked {sessions} do NOT"
        f" fit at that length (vLLM would queue the rest)"
    )


def describe(plan: ServingPlan, utilization: float, version: str = DEFAULT_VLLM_VERSION) -> str:
    """The budget's assumption line naming the profile used (and how a pasted version string mapped to it)."""
    profile = next(p for p in PROFILES if p.name == plan.profile)
    note = release_note(version)
    return (
        (f"{note}; " if note else "")
        + f"vLLM {profile.name} profile: KV pool = {utilization:g} × T (cudaMemGetInfo total) − weights − profile-run"
        f" peak (max of the forward over max_num_batched_tokens {plan.max_num_batched_tokens} and the sampler over"
        f" min(max_num_seqs {plan.max_num_seqs}, B) rows × the full vocabulary) − non-torch growth"
        + (" − CUDA-graph estimate" if profile.graphs_in_pool else "")
        + f"; {profile.summary}; start-up needs one request of max_model_len {plan.max_model_len}"
    )
