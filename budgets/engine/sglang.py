"""SGLang's start-up memory accounting: its static share, the token-to-KV pool and the request pool (pure).

SGLang (release 0.5.10.post1, the one profile here) gives weights and KV cache a static share of the memory free
when it starts, `mem_fraction_static` (mfs), and leaves the rest for activations, CUDA graphs and the request
pool. File:line references below are inside `sglang-0.5.10.post1/sglang/srt/` (the PyPI sdist,
sha256 01f7adfe…2263); SA = server_args.py, KVM = model_executor/model_runner_kv_cache_mixin.py,
MP = mem_cache/memory_pool.py.

    free_at_start = free memory after the CUDA context and torch.distributed (NCCL) init, min over ranks
                    (model_runner.py:999-1004; utils/common.py:498-601)
    rest          = free_after_weights − free_at_start × (1 − mfs)                        (KVM:171-173)
    tokens        = int(rest × 2^30) // cell bytes per token, then // page_size × page_size (KVM:177, 826)

SGLang refuses to start when tokens ≤ 0 ("Not enough memory. Please try to increase --mem-fraction-static",
KVM:55-60) or when the pool is too small for one token of input (tokens − 6 ≤ 0: `max_req_input_len =
min(context_len − 1, tokens − 1) − 5` must be > 0, managers/tp_worker.py:301-308). It does NOT need one request
of context length to start: a longer request is refused when it arrives ("Input length … exceeds the maximum
allowed length").
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from .budget import ServingPlan
from .components import kv_cache as kv
from .dtypes import nbytes
from .models import ModelSpec
from .models.hf_defaults import SGLANG_HYBRID_SWA_MODEL_TYPES, SGLANG_NO_PIECEWISE_GRAPHS_MODEL_TYPES
from .models.layers import heads_per_device

GIB = 2**30
MIB = 2**20
SGLANG_VERSION = "0.5.10.post1"  # the pinned release whose code the rules were read from
PROFILE = SGLANG_VERSION
# mem_fraction_static when the GPU's memory is not known (SA:1324-1328)
FRACTION_WITHOUT_GPU = 0.88
# swa_full_tokens_ratio (SA:360) and mamba_full_memory_ratio (SA:550) defaults
SWA_FULL_TOKENS_RATIO = 0.8
MAMBA_FULL_MEMORY_RATIO = 0.9
# max_running_requests ratio of the mamba state pool (KVM:64-66, 373-385: 3 with the radix cache and overlap
# scheduling, the defaults)
MAMBA_REQUEST_RATIO = 3
# the smallest pool SGLang starts with: max_req_input_len = min(context_len − 1, tokens − 1) − 5 > 0
# (managers/tp_worker.py:301-308)
MIN_START_TOKENS = 7
# the first release whose piecewise CUDA graphs are on by default (`disable_piecewise_cuda_graph: bool = False`,
# SA:637); 0.5.5-0.5.9 have them opt-in (`enable_piecewise_cuda_graph: bool = False`, 0.5.9 server_args.py:604) and
# 0.5.3 has none, so their default fraction reserves nothing for them (0.5.9 server_args.py:1043-1046 adds the term
# only when enabled; 0.5.3 server_args.py:637-676 has no such term)
PIECEWISE_DEFAULT_FROM = (0, 5, 10)
# model classes whose sliding-window layers get their own pool, and those without piecewise CUDA graphs: by
# model_type in the HF adapter (models/hf_defaults.py, with their SGLang file:line)
HYBRID_SWA_MODEL_TYPES = SGLANG_HYBRID_SWA_MODEL_TYPES
# nvidia-smi's memory.total (MiB) where published; SGLang's defaults read it (utils/common.py:1514-1544), and it is
# larger than cudaMemGetInfo's total T by the driver's reserve. H100 80GB and H200: RULE.md §1b worked example
# (/work/scratch/sglang/RULE.md); L40S: sgl-project/sglang PR #13023 ("L40S (46068 MiB)"). Other GPUs: T in MiB.
NVIDIA_SMI_MIB: tuple[tuple[re.Pattern[str], int], ...] = (
    (re.compile(r"\bh100\b(?!.*\bnvl\b)"), 81559),
    (re.compile(r"\bh200\b"), 143771),
    (re.compile(r"\bl40s?\b"), 46068),
)


def parse_version(version: str) -> tuple[int, ...]:
    """The numeric release parts: "0.5.10.post1" → (0, 5, 10); "v0.5.9" → (0, 5, 9)."""
    base = re.split(r"post|rc|dev|a|b|\+", version.lstrip("v"))[0]
    return tuple(int(p) for p in re.findall(r"\d+", base))


def version_refusal(version: str) -> str | None:
    """Why a version string cannot be budgeted (None when it can): only 0.5.x releases share the 0.5.10.post1
    rules; 0.5.2 and earlier 0.x releases chose mem_fraction_static by other tables (0.5.2: server_args.py:452-498,
    0.4.x: by tensor degree alone), so they are refused rather than budgeted by the wrong rule."""
    v = parse_version(version)
    if v[:2] == (0, 5) and v >= (0, 5, 3):
        return None
    return (
        f"runtime.engine_version {version!r}: SGLang has one profile here, {SGLANG_VERSION} (the rules of 0.5.3 and"
        " later 0.5.x releases are budgeted by it); earlier releases chose mem_fraction_static by other tables"
        " (0.5.2: (gpu_mem − reserved GiB by GPU class)/gpu_mem; 0.4.x: 0.79–0.88 by tensor degree) and later ones"
        " are not read yet. Leave engine_version out to budget SGLang 0.5.10.post1, and give"
        " inference.gpu_memory_utilization as the server's log prints mem_fraction_static"
    )


def piecewise_by_default(version: str) -> bool:
    """Whether the release captures piecewise CUDA graphs unless told not to (PIECEWISE_DEFAULT_FROM): 0.5.10 and
    later; the earlier 0.5.x releases budgeted here neither capture them nor reserve for them by default."""
    return parse_version(version) >= PIECEWISE_DEFAULT_FROM


def version_note(version: str) -> str:
    """How a version string maps to the profile, for the budget's assumptions ("" for the pinned release)."""
    if parse_version(version) == (0, 5, 10) and version.lstrip("v").startswith("0.5.10.post1"):
        return ""
    note = f"SGLang {version!r} has no profile of its own: budgeted by the {SGLANG_VERSION} rules (nearest profile)"
    if not piecewise_by_default(version):
        note += ", without piecewise CUDA graphs, off by default before 0.5.10"
    return note


def gpu_mem_mib(device_memory_bytes: int | None, device_name: str | None) -> int | None:
    """The GPU memory SGLang's defaults read: nvidia-smi memory.total in MiB. The published figure of the GPU when
    the name matches and T is within 1 GiB below it, else T (cudaMemGetInfo total) in MiB, which is lower by the
    driver's reserve (0.3–0.9 GiB): the default fraction then comes out at most 0.002 low."""
    if device_memory_bytes is None:
        return None
    mib = device_memory_bytes // MIB
    name = (device_name or "").lower()
    for pattern, published in NVIDIA_SMI_MIB:
        if pattern.search(name) and 0 <= published - mib <= 1024:
            return published
    return mib


def chunked_prefill_and_graph_bs(gpu_mem: int | None, tensor: int) -> tuple[int, int]:
    """(chunked_prefill_size, cuda_graph_max_bs) defaults by GPU memory (MiB) and tensor degree (SA:1165-1228)."""
    if gpu_mem is None:
        return 4096, 160
    small_tp = tensor < 4
    if gpu_mem < 20 * 1024:  # T4, 4080
        return 2048, 8
    if gpu_mem < 35 * 1024:  # A10, 4090, 5090
        return 2048, 24 if small_tp else 80
    if gpu_mem < 60 * 1024:  # A100-40G, L40
        return 4096, 32 if small_tp else 160
    if gpu_mem < 160 * 1024:  # H100, A100-80G; H20, H200
        return 8192, 256 if small_tp else 512
    return 16384, 512  # B200, MI300


def piecewise_cuda_graph_tokens(max_tokens: int) -> list[int]:
    """The piecewise CUDA-graph capture sizes up to `max_tokens` (SA:1397-1415)."""
    sizes = (
        list(range(4, 33, 4))
        + list(range(48, 257, 16))
        + list(range(288, 513, 32))
        + list(range(576, 1025, 64))
        + list(range(1280, 4097, 256))
        + list(range(4608, max_tokens + 1, 512))
    )
    return [s for s in sizes if s <= max_tokens]


@dataclass(frozen=True, slots=True)
class ServerDefaults:
    """What `ServerArgs.__post_init__` resolves for one server (SA:744-850)."""

    gpu_mem_mib: int | None
    chunked_prefill_size: int
    cuda_graph_max_bs: int
    mem_fraction_static: float
    reserved_mib: float  # SGLang's reserve estimate behind the default fraction (0 when the user gave mfs)
    piecewise_graphs: bool
    fraction_given: bool


def default_mem_fraction_static(
    gpu_mem: int | None,
    tensor: int = 1,
    pipeline: int = 1,
    chunked_prefill_size: int = 8192,
    cuda_graph_max_bs: int = 256,
    mla: bool = False,
    piecewise_graphs: bool = True,
    dp_attention: int = 0,
    speculative: str | None = None,
) -> tuple[float, float]:
    """(mem_fraction_static, reserved MiB) by SGLang's rule (SA:1281-1328), before the multimodal factor.
    `gpu_mem` in MiB as nvidia-smi reports it; `dp_attention` the DP size under --enable-dp-attention (0: off);
    `speculative` "EAGLE", "STANDALONE" …

    H100 80GB (81559 MiB), TP1, dense: 512 + 8192·1.5 + 256·2 + 128 + 58·8 = 13,904 MiB → 0.830."""
    reserved = 512.0  # constant metadata (SA:1283)
    reserved += max(chunked_prefill_size, 2048) * 1.5 if chunked_prefill_size > 0 else 16384 * 1.5  # SA:1285-1288
    reserved += cuda_graph_max_bs * 2  # SA:1290
    reserved += tensor * pipeline / 8 * 1024  # SA:1292
    if dp_attention:  # SA:1294-1302
        reserved += cuda_graph_max_bs * dp_attention * 3
        if cuda_graph_max_bs > 300:
            reserved += cuda_graph_max_bs * dp_attention * 1.5
    if piecewise_graphs:  # SA:1305-1311
        max_tokens = 2048 if mla else chunked_prefill_size  # SA:1254-1265
        reserved += 1.5 * 1024 if mla else len(piecewise_cuda_graph_tokens(max_tokens)) * 8
    if gpu_mem is not None and gpu_mem > 60 * 1024:  # SA:1313-1314
        reserved = max(reserved, 10 * 1024)
    if speculative == "STANDALONE":  # SA:1316-1322
        reserved += 6 * 1024
    elif speculative not in (None, "NGRAM"):
        reserved += 4 * 1024
    if gpu_mem is None:
        return FRACTION_WITHOUT_GPU, reserved
    return round((gpu_mem - reserved) / gpu_mem, 3), reserved


def vlm_fraction_factor(vision_layers: int = 24, vision_hidden: int = 1024) -> float:
    """The multimodal reduction of the default fraction (SA:6395-6432): 0.95 × clamp(1 − 0.1 × (layers × hidden² /
    (24 × 1024²) − 1), 0.8, 1.05), applied to the rounded fraction and not rounded again; SGLang's own defaults
    (24 layers, 1024 wide: 0.95) where the tower's size is not known, as here (the spec keeps the tower's parameters,
    not its shape)."""
    ratio = vision_layers * vision_hidden**2 / (24 * 1024**2)
    return 0.95 * min(max(1 - 0.1 * (ratio - 1), 0.8), 1.05)


def server_defaults(
    spec: ModelSpec,
    device_memory_bytes: int | None,
    device_name: str | None,
    tensor: int,
    pipeline: int,
    mem_fraction_static: float | None = None,
    chunked_prefill_size: int | None = None,
    cuda_graph_max_bs: int | None = None,
    version: str = SGLANG_VERSION,
) -> ServerDefaults:
    """The server's chunked prefill, CUDA-graph batch and static fraction, the user's where given; `version` the
    release (piecewise CUDA graphs, and their term in the default fraction, from 0.5.10: piecewise_by_default)."""
    gpu_mem = gpu_mem_mib(device_memory_bytes, device_name)
    chunk, bs = chunked_prefill_and_graph_bs(gpu_mem, tensor)
    chunk = chunked_prefill_size or chunk
    bs = cuda_graph_max_bs or bs
    multimodal = bool(spec.towers)
    mla = is_mla(spec)
    # piecewise CUDA graphs are off for multimodal models and pp > 1 (SA:1078-1139), and for the architectures of
    # configs/model_config.py:1352-1358 (DeepSeek-V3.2/DSA, Qwen3-Next …): a DSA indexer or a hybrid model here;
    # before 0.5.10 they are off unless enabled (piecewise_by_default)
    piecewise = piecewise_by_default(version) and not multimodal and pipeline == 1 and not _piecewise_excluded(spec)
    if mem_fraction_static is not None:
        return ServerDefaults(gpu_mem, chunk, bs, mem_fraction_static, 0.0, piecewise, True)
    factor = vlm_fraction_factor() if multimodal else 1.0
    fraction, reserved = default_mem_fraction_static(gpu_mem, tensor, pipeline, chunk, bs, mla, piecewise, 0, None)
    if gpu_mem is not None and multimodal:
        fraction *= factor  # not rounded again (SA:6429-6431)
    return ServerDefaults(gpu_mem, chunk, bs, fraction, reserved, piecewise, False)


def is_mla(spec: ModelSpec) -> bool:
    return any(m.kind == "mla" for m, _ in kv.stage_mixers(spec, 0, spec.num_layers))


def _piecewise_excluded(spec: ModelSpec) -> bool:
    indexer = any(m.kind == "mla" and m.index_dim for m, _ in kv.stage_mixers(spec, 0, spec.num_layers))
    return indexer or spec.model_type in SGLANG_NO_PIECEWISE_GRAPHS_MODEL_TYPES


@dataclass(frozen=True, slots=True)
class Cell:
    """Bytes per token of the KV pool on one rank (KVM:75-142), and how the pool is split."""

    bytes_per_token: int  # SGLang's cell_size: every KV layer of the rank (hybrid SWA: full + SWA layers)
    full_layers: int  # layers of the full pool
    swa_layers: int  # hybrid-SWA models only: layers of the sliding-window pool
    full_per_token: int  # one full layer, bytes per token
    swa_per_token: int  # one sliding layer, bytes per token
    window: int  # the sliding window, tokens (hybrid SWA)
    mamba_bytes_per_request: int  # recurrent (Mamba / linear-attention) state of one request, all its layers
    kind: str  # "mha", "mla", "hybrid-swa", "hybrid-linear"


def cell(spec: ModelSpec, tensor: int, first: int, layers: int, kv_precision: str, state_precision: str) -> Cell:
    """SGLang's per-token cell of this rank's layers [first, first + layers).

    MHA/GQA: kv_heads_per_rank × (head_dim + v_head_dim) × layers × kv bytes, kv_heads_per_rank = max(1, kv_heads //
    tp) (KVM:126-131; configs/model_config.py:670-677). MLA: (kv_lora_rank + qk_rope_head_dim) × layers × kv bytes,
    the same on every TP rank (KVM:77-82; DSA's indexer adds its own buffer, KVM:96-107). fp8 KV: 1 byte
    (MP:662-666). Hybrid SWA (HYBRID_SWA_MODEL_TYPES): full and sliding layers (KVM:110-124). Sliding layers of
    any other model are cached as full layers. Hybrid linear-attention / Mamba: only the full-attention layers are
    in the cell (KVM:158-164); the state pool is sized apart (`mamba_bytes_per_request`, conv state in the model
    dtype, SSM state in fp32 by default: configs/mamba_utils.py:70-125).
    """
    d = nbytes(kv_precision)
    mixers = kv.stage_mixers(spec, first, layers)
    hybrid_swa = spec.model_type in HYBRID_SWA_MODEL_TYPES
    full = swa = 0
    full_per = swa_per = 0
    window = 0
    mla = False
    mamba = 0
    for m, n in mixers:
        if m.kind == "mla":
            mla = True
            full += n
            full_per = max(full_per, int(m.kv_elements_per_token(tensor) * d))
        elif m.kind in ("sliding", "chunked") and hybrid_swa:
            swa += n
            swa_per = max(swa_per, int(heads_per_device(m.kv_heads, tensor) * (m.head_dim + m.value_dim) * d))
            window = max(window, m.window)
        elif m.kind in ("full", "sliding", "chunked"):
            full += n
            full_per = max(full_per, int(heads_per_device(m.kv_heads, tensor) * (m.head_dim + m.value_dim) * d))
        elif m.kind in ("linear", "mamba"):
            conv = -(-m.conv_state // tensor)
            ssm = -(-m.recurrent_state // tensor)
            mamba += int((conv * nbytes(state_precision) + ssm * 4) * n)
    per_token = full_per * full + swa_per * swa
    kind = "mla" if mla else "hybrid-swa" if swa else "hybrid-linear" if mamba else "mha"
    return Cell(per_token, full, swa, full_per, swa_per, window, mamba, kind)


@dataclass(frozen=True, slots=True)
class PoolInputs:
    """What SGLang's pool arithmetic needs for one rank (bytes per GPU)."""

    device_memory_bytes: int | None  # T, cudaMemGetInfo total
    start_used_bytes: int  # used before the model loads: CUDA context + NCCL (the engine's runtime figures)
    weights_bytes: int
    cell: Cell
    mem_fraction_static: float
    page_size: int
    context_len: int  # --context-length (the workload's max_model_len)
    longest_request: int
    sessions: int
    max_running_requests: int | None  # the user's, else SGLang's own
    chunked_prefill_size: int
    max_total_tokens: int | None = None  # --max-total-tokens


@dataclass(frozen=True, slots=True)
class Pool:
    rest_bytes: int  # free_after_weights − free_at_start × (1 − mfs), before the mamba share (negative: too little)
    kv_bytes: int  # what the KV pool (tokens × cell) takes
    tokens: int  # max_total_num_tokens (hybrid SWA: the full-layer pool)
    swa_tokens: int | None
    mamba_requests: int | None  # max_mamba_cache_size
    mamba_bytes: int
    max_running_requests: int


def free_at_start(p: PoolInputs) -> int:
    assert p.device_memory_bytes is not None
    return p.device_memory_bytes - p.start_used_bytes


def pool(p: PoolInputs) -> Pool:
    """The KV pool SGLang allocates on this rank (KVM:144-177, 179-239, 286-371, 808-860)."""
    free = free_at_start(p)
    rest = int((free - p.weights_bytes) - free * (1 - p.mem_fraction_static))
    c = p.cell
    mamba_requests = None
    mamba_bytes = 0
    kv_rest = rest
    if c.mamba_bytes_per_request and rest > 0:
        r = MAMBA_FULL_MEMORY_RATIO
        mamba_requests = int(rest * r / (1 + r)) // c.mamba_bytes_per_request
        mamba_bytes = mamba_requests * c.mamba_bytes_per_request
        kv_rest = rest - mamba_bytes
    profiled = kv_rest // c.bytes_per_token if c.bytes_per_token and kv_rest > 0 else min(kv_rest, 0)
    swa_tokens = None
    if c.swa_layers and profiled > 0:
        total = profiled * c.bytes_per_token
        denominator = c.full_per_token * c.full_layers + SWA_FULL_TOKENS_RATIO * c.swa_per_token * c.swa_layers
        profiled = int(total / denominator) if c.full_layers else profiled
    if p.max_total_tokens is not None:
        profiled = min(profiled, p.max_total_tokens)
    tokens = profiled // p.page_size * p.page_size
    if c.swa_layers and tokens > 0:
        swa_tokens = int(tokens * SWA_FULL_TOKENS_RATIO) // p.page_size * p.page_size if c.full_layers else tokens
    if swa_tokens is not None and c.full_layers:
        kv_bytes = tokens * c.full_per_token * c.full_layers + swa_tokens * c.swa_per_token * c.swa_layers
    else:
        kv_bytes = max(tokens, 0) * c.bytes_per_token
    return Pool(
        rest, kv_bytes, tokens, swa_tokens, mamba_requests, mamba_bytes, running_requests(p, tokens, mamba_requests)
    )


def running_requests(p: PoolInputs, tokens: int, mamba_requests: int | None) -> int:
    """max_running_requests (KVM:840-860): clamp(tokens / context_len × 512, 2048, 4096), capped by the user's
    value or else by tokens // 2; hybrid linear models also by the mamba state pool // 3."""
    estimated = max(min(int(tokens / p.context_len * 512), 4096), 2048)
    reqs = min(p.max_running_requests, estimated) if p.max_running_requests else min(estimated, max(tokens, 0) // 2)
    if mamba_requests is not None:
        reqs = min(reqs, mamba_requests // MAMBA_REQUEST_RATIO)
    return reqs


def request_pool_bytes(max_running_requests: int, context_len: int) -> int:
    """ReqToTokenPool: int32 (max_running_requests, context_len + 4), from the reserve (KVM:392-395, MP:126-147)."""
    return max_running_requests * (context_len + 4) * 4


def serving_plan(p: PoolInputs, needed_bytes: int) -> ServingPlan:
    """The pool SGLang allocates, its tokens and concurrency, and whether it starts."""
    inputs = {
        "kv_bytes_per_token": p.cell.bytes_per_token,
        "kv_bytes_needed": needed_bytes,
        "device_memory_bytes": p.device_memory_bytes,
        "max_model_len": p.context_len,
        "max_num_batched_tokens": p.chunked_prefill_size,
        "profile": f"sglang {PROFILE}",
    }
    if not p.device_memory_bytes:
        return ServingPlan(kv_pool_bytes=None, max_num_seqs=p.max_running_requests, **inputs)  # type: ignore[arg-type]
    got = pool(p)
    starts = got.tokens >= MIN_START_TOKENS and got.max_running_requests > 0
    reason = None
    if got.tokens <= 0:
        reason = (
            "SGLang will not start: 'Not enough memory. Please try to increase --mem-fraction-static'"
            f" ({got.rest_bytes / GIB:.2f} GiB for the KV pool at mem_fraction_static {p.mem_fraction_static:g})"
        )
    elif not starts:
        reason = f"SGLang will not start: a pool of {got.tokens} tokens is too small ('Memory pool size is too small')"
    held = max(got.tokens, 0) // p.longest_request
    if got.mamba_requests is not None:
        held = min(held, got.max_running_requests)
    return ServingPlan(
        **inputs,  # type: ignore[arg-type]
        kv_pool_bytes=max(got.kv_bytes, 0),
        max_num_seqs=got.max_running_requests,
        max_concurrent_sessions_at_max_request=held,
        max_request_tokens_at_concurrency=max(got.tokens, 0) // p.sessions,
        kv_pool_tokens=max(got.tokens, 0),
        max_concurrency=round(max(got.tokens, 0) / p.context_len, 2),
        starts=starts,
        reason=reason,
        shortfall_bytes=None if starts else MIN_START_TOKENS * p.cell.bytes_per_token - got.rest_bytes,
        available_kv_bytes=got.rest_bytes - got.mamba_bytes,
        # the static share the workload needs: weights + the KV its sessions fill
        need_bytes=p.weights_bytes + needed_bytes,
    )


def needed_device_memory(p: PoolInputs, needed_bytes: int) -> int:
    """The smallest T at which SGLang's pool holds `needed_bytes`: (W + KV) / mfs + the start-up use."""
    return math.ceil((p.weights_bytes + needed_bytes) / p.mem_fraction_static) + p.start_used_bytes


def describe(plan: ServingPlan, defaults: ServerDefaults, version: str, start_used_bytes: int) -> str:
    """The budget's assumption line naming the release, the defaults it chose and the pool rule."""
    note = version_note(version)
    if defaults.fraction_given:
        fraction = f"mem_fraction_static {defaults.mem_fraction_static:.3f} (inference.gpu_memory_utilization)"
    elif defaults.gpu_mem_mib is None:
        fraction = f"mem_fraction_static {defaults.mem_fraction_static:g} (SGLang's default without a GPU)"
    else:
        fraction = (
            f"mem_fraction_static {defaults.mem_fraction_static:.3f} (SGLang's default: ({defaults.gpu_mem_mib} MiB −"
            f" {defaults.reserved_mib:,.0f} MiB reserved) / {defaults.gpu_mem_mib} MiB"
            + (", piecewise CUDA graphs on" if defaults.piecewise_graphs else ", piecewise CUDA graphs off")
            + ")"
        )
    return (
        (f"{note}; " if note else "")
        + f"SGLang {SGLANG_VERSION}: {fraction}; chunked_prefill_size {defaults.chunked_prefill_size}"
        f" (inference.max_num_batched_tokens), cuda_graph_max_bs {defaults.cuda_graph_max_bs},"
        f" max_running_requests {plan.max_num_seqs} (inference.max_num_seqs); KV pool = free memory after the weights"
        " − free memory at start × (1 − mem_fraction_static), free at start = T − CUDA context − NCCL"
        f" ({start_used_bytes / GIB:.2f} GiB); SGLang starts with any pool of ≥ {MIN_START_TOKENS} tokens and refuses"
        f" longer requests when they arrive (context_len {plan.max_model_len})"
    )


def concurrency_sentence(plan: ServingPlan, sessions: int, longest: int) -> str | None:
    """Whether the pool holds the asked concurrency at the longest request (None without device memory)."""
    held = plan.max_concurrent_sessions_at_max_request
    if plan.kv_pool_bytes is None or held is None or plan.kv_pool_tokens is None:
        return None
    if not plan.starts:
        return f"the asked {sessions} sessions of {longest} tokens: SGLang does not start ({plan.reason})"
    if longest > plan.kv_pool_tokens:
        return (
            f"the KV pool holds {plan.kv_pool_tokens} tokens: SGLang starts but refuses a request of {longest} tokens"
            " ('exceeds the maximum allowed length')"
        )
    if held >= sessions:
        return f"the KV pool holds {held} sessions of the longest request ({longest} tokens): the asked {sessions} fit"
    return (
        f"the KV pool holds {held} sessions of the longest request ({longest} tokens): the asked {sessions} do NOT"
        " fit at that length (SGLang would queue or retract the rest)"
    )
