"""Read SGLang's start-up memory report out of its log: what SGLang itself measured and decided.

SGLang logs, rank by rank, the free memory it sees before and after each start-up stage (weights, KV pool,
CUDA graphs), the pool it allocated, and the scheduler's limits; and it says why it refused to start.
This module recognises each line of SGLang 0.5.10.post1 (the release ``budgets/engine/sglang.py``
budgets) and returns one :class:`SglangMemoryReport` (every figure ``None`` when the log does not say
it). Pure: standard library only, no I/O.

Sources. File:line references are inside ``sglang-0.5.10.post1/sglang/srt/`` of the PyPI sdist (sha256
01f7adfe7cde85b238fb0e1bae4b31d494e19d1471cf35ff3c5489a02f9d2263); :data:`FORMATS` names the line
behind every format. The tests read the published lines of ``benchmarks/sglang_published`` and of the
issues named there, and lines built from these format strings.

Units. SGLang's "GB" is GiB: ``get_available_gpu_memory`` returns ``free / (1 << 30)``
(utils/common.py:498-601) and the pool divides by ``GB = 1024 * 1024 * 1024`` (mem_cache/memory_pool.py:74).
Figures are printed with two decimals, so the bytes here are ``round(value × 2**30)``, exact to 0.01 GiB.
"avail mem" is ``torch.cuda.mem_get_info()``'s free memory on that GPU; a stage's "mem usage" is the drop
of free memory over the stage (weights: model_runner.py:1239-1240; CUDA graphs: model_runner.py:2458-2459).

Ranks. With tensor or pipeline parallelism every rank prints its own lines, prefixed ``[time DP0 PP0 TP1]``
(utils/common.py:1137, managers/scheduler.py:3535-3547). The report keeps each rank's figures in
:attr:`SglangMemoryReport.ranks` and, at the top level, the most any GPU holds (weights, pool, graphs),
the least any GPU has free ("avail") and the smallest pool in tokens: the GPU that decides whether it fits.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from .engine_log import bounded_log

GiB = 1 << 30
#: Longest line read, longest error kept (the longest log: engine_log.MAX_LOG_CHARS).
MAX_LINE_CHARS = 20_000
MAX_ERROR_CHARS = 600
_MAX_GIB = 1_000_000.0  # a printed figure above this is not believed

#: Start-up failures that mean "it does not fit": the SGLang program exits 3 (out of memory) on these.
MEMORY_ERROR_KINDS = frozenset({"not_enough_memory", "pool_too_small", "no_request_slots", "cuda_oom"})

#: Every line kind recognised: name → the line and where SGLang 0.5.10.post1 prints it.
FORMATS: dict[str, str] = {
    "server_args": "'server_args=ServerArgs(model_path=…, mem_fraction_static=…, …)' (entrypoints/engine.py:648): "
    "the settings in force, defaults resolved",
    "init_distributed": "'Init torch distributed ends. elapsed=T s, mem usage=X GB' (model_runner.py:1020-1023): "
    "CUDA context and NCCL",
    "load_weight_begin": "'Load weight begin. avail mem=X GB' (model_runner.py:1074-1076)",
    "load_weight_end": "'Load weight end. elapsed=T s, type=Cls, [quantization, ]avail mem=X GB, mem usage=Y GB.' "
    "(model_runner.py:1246-1253; 0.4.x printed 'type=Cls, dtype=torch.D, avail mem=…, mem usage=…')",
    "kv_cache_dtype": "'Using KV cache dtype: torch.D' (model_runner.py:1948)",
    "kv_cache_allocated": "'KV Cache is allocated. #tokens: N, K size: a GB, V size: b GB' or '… #tokens: N, KV size: "
    "c GB' (MLA) (mem_cache/memory_pool.py:686-704; one line per pool: hybrid sliding-window models print two)",
    "mamba_cache_allocated": "'Mamba Cache is allocated. max_mamba_cache_size: N, conv_state size: aGB, "
    "ssm_state size: bGB' (mem_cache/memory_pool.py:310-324)",
    "profiled_tokens": "'max_total_tokens=U is larger than the profiled value P. Use the profiled value instead.' "
    "(model_executor/model_runner_kv_cache_mixin.py:816-819; P can be negative)",
    "memory_pool_end": "'Memory pool end. avail mem=X GB' (model_executor/model_runner_kv_cache_mixin.py:905-908)",
    "cuda_graph_begin": "'Capture cuda graph begin. This can take up to several minutes. avail mem=X GB' "
    "(model_runner.py:2445-2447)",
    "cuda_graph_end": "'Capture cuda graph end. Time elapsed: T s. mem usage=Y GB. avail mem=Z GB.' "
    "(model_runner.py:2459-2462)",
    "piecewise_cuda_graph_end": "'Capture piecewise CUDA graph end. Time elapsed: T s. mem usage=Y GB. avail mem=Z "
    "GB.' (model_runner.py:2573-2576)",
    "scheduler_limits": "'max_total_num_tokens=N, chunked_prefill_size=C, max_prefill_tokens=P, "
    "max_running_requests=R, context_len=L, available_gpu_mem=X GB' (managers/scheduler.py:686-697, TP rank 0)",
    "startup_complete": "'The server is fired up and ready to roll!' (entrypoints/http_server.py:1929), after the "
    "warm-up request (uvicorn's 'Uvicorn running on' comes before it, so it is not read as ready)",
    "startup_error": "a start-up failure: 'Not enough memory. Please try to increase --mem-fraction-static.' "
    "(model_runner_kv_cache_mixin.py:55-60), 'Memory pool size is too small' / 'max_running_request is zero' "
    "(managers/tp_worker.py:296-308), 'context_length (X) is greater than the derived context_length (Y)' "
    "(configs/model_config.py:384-404), 'Capture cuda graph failed: …' (model_executor/cuda_graph_runner.py:"
    "655-657), 'Rank N scheduler died during initialization' (entrypoints/engine.py:1182-1190), 'Scheduler hit "
    "an exception' (managers/scheduler.py:3620), 'Initialization failed.' (entrypoints/engine.py:1211-1213)",
    "cuda_oom": "'CUDA out of memory' / 'OutOfMemoryError' / 'CUDA error: out of memory' / cudaErrorMemoryAllocation "
    "/ CUBLAS_STATUS_ALLOC_FAILED anywhere in the log",
    "pool_exhausted": "'Prefill out of memory. Try to lower your batch size.' / 'Decode out of memory. …' / "
    "'alloc_req_slots runs out of memory.' (mem_cache/common.py:284-290, 410-416, 319-325): the pool ran dry "
    "while serving and the scheduler raised",
    "retraction": "'KV cache pool is full. Retract requests. #retracted_reqs: N, …' (managers/scheduler.py:"
    "2595-2605): requests put back in the queue, not failed",
    "request_too_long": "'Input length (N tokens) exceeds the maximum allowed length (M tokens). …' "
    "(managers/utils.py:136-140; sent to the client, logged by 0.4.x)",
}


@dataclass
class SglangMemoryReport:
    """What one SGLang log says about memory. Bytes are ints converted from the GiB figure printed."""

    server_args: dict[str, Any] = field(default_factory=dict)  # settings in force (the ServerArgs line)
    mem_fraction_static: float | None = None
    torch_distributed_bytes: int | None = None  # free memory taken by CUDA context + NCCL init
    avail_before_load_bytes: int | None = None
    weights_bytes: int | None = None  # drop of free memory over the weight load
    avail_after_load_bytes: int | None = None
    load_seconds: float | None = None
    model_class: str | None = None
    kv_cache_torch_dtype: str | None = None
    kv_cache_tokens: int | None = None  # "#tokens" of the (first) pool
    k_cache_bytes: int | None = None
    v_cache_bytes: int | None = None
    kv_cache_bytes: int | None = None  # every KV pool of one GPU
    mamba_cache_bytes: int | None = None
    max_mamba_cache_size: int | None = None
    # the profiled pool, printed only when a user max_total_tokens exceeded it; negative when the weights left no room
    # (so not named *_tokens: an uploaded measurement bounds those to ≥ 0, measurements/document.py NUMBER_BOUNDS)
    profiled_token_capacity: int | None = None
    avail_after_pool_bytes: int | None = None
    avail_before_cuda_graph_bytes: int | None = None
    cuda_graph_bytes: int | None = None
    avail_after_cuda_graph_bytes: int | None = None
    cuda_graph_seconds: float | None = None
    piecewise_cuda_graph_bytes: int | None = None
    avail_after_piecewise_cuda_graph_bytes: int | None = None
    max_total_num_tokens: int | None = None  # the pool the scheduler uses, tokens
    chunked_prefill_size: int | None = None
    max_prefill_tokens: int | None = None
    max_running_requests: int | None = None
    context_len: int | None = None
    available_gpu_mem_bytes: int | None = None  # free when the scheduler was ready
    startup_complete: bool = False
    cuda_oom: bool = False
    pool_exhausted: str | None = None  # SGLang's own "… out of memory" while serving
    retractions: int = 0  # "KV cache pool is full. Retract requests."
    max_allowed_input_tokens: int | None = None  # from a logged "exceeds the maximum allowed length (M tokens)"
    startup_error: str | None = None
    startup_error_kind: str | None = None
    ranks: dict[str, dict[str, Any]] = field(default_factory=dict)  # each rank's own figures (several GPUs)
    warnings: list[str] = field(default_factory=list)
    formats: list[str] = field(default_factory=list)  # the FORMATS seen, in order

    @property
    def refused_for_memory(self) -> bool:
        """SGLang did not start (or died starting) because the memory did not suffice."""
        return self.startup_error_kind in MEMORY_ERROR_KINDS

    @property
    def pool_limits_requests(self) -> bool:
        """The KV pool, not the context length, sets the longest request SGLang accepts.

        ``max_req_len = min(context_len − 1, pool − 1)`` and ``max_req_input_len = max_req_len − 5``
        (managers/tp_worker.py:301-306): with a pool smaller than the context length, a prompt the context
        allows is refused for memory ("Input length … exceeds the maximum allowed length").
        """
        pool, context = self.max_total_num_tokens, self.context_len
        return pool is not None and context is not None and pool < context

    def as_dict(self) -> dict[str, Any]:
        value = asdict(self)
        value["refused_for_memory"] = self.refused_for_memory
        value["pool_limits_requests"] = self.pool_limits_requests
        return value


# --- line patterns -------------------------------------------------------------------------------

_NUM = r"-?\d{1,9}(?:\.\d{1,6})?"  # bounded: no catastrophic input, no absurd figures
_INT = r"-?\d{1,15}"
_ANSI = re.compile(r"\x1b\[[0-9;?]{0,20}[A-Za-z]")
#: "[2025-11-10 19:59:09 DP0 PP1 TP3]" → the rank part ("DP0 PP1 TP3"); no prefix, or no rank in it: "".
_PREFIX = re.compile(r"^\s*\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d{1,6})?((?: [A-Z_]{1,12}\d{1,5}){0,8})\]")


@dataclass
class _Seen:
    """Values found so far: per rank, per field, in log order; errors in log order."""

    report: SglangMemoryReport
    by_rank: dict[str, dict[str, list[Any]]] = field(default_factory=dict)
    pools: dict[str, list[tuple[int, int, int, int]]] = field(default_factory=dict)  # tokens, K, V, K+V
    errors: list[tuple[str, str]] = field(default_factory=list)

    def add(self, rank: str, name: str, value: Any, fmt: str) -> None:
        self.by_rank.setdefault(rank, {}).setdefault(name, []).append(value)
        self.note(fmt)

    def note(self, fmt: str) -> None:
        if fmt not in self.report.formats:
            self.report.formats.append(fmt)

    def error(self, kind: str, text: str) -> None:
        """A start-up failure; after "ready to roll" the same lines are serving failures, not kept here."""
        if not self.report.startup_complete:
            self.errors.append((kind, text.strip()[:MAX_ERROR_CHARS]))
            self.note("startup_error")


def _bytes(text: str, seen: _Seen, name: str) -> int | None:
    number = float(text)
    if abs(number) > _MAX_GIB:
        seen.report.warnings.append(f"{name}: {text} GB is not believable; ignored")
        return None
    return round(number * GiB)


def _convert(name: str, text: str, seen: _Seen) -> Any:
    """A named group's text as its field's type: GiB figures → bytes, seconds and fractions → float, counts → int."""
    if name.endswith("_bytes"):
        return _bytes(text, seen, name)
    if name.endswith("_seconds"):
        return float(text)
    if name in ("model_class", "kv_cache_torch_dtype"):
        return text
    return int(text)


Handler = Callable[[_Seen, str, "re.Match[str]"], None]


def _fields(fmt: str) -> Handler:
    """A handler that records every named group of the match under its name."""

    def handler(seen: _Seen, rank: str, m: re.Match[str]) -> None:
        for name, text in m.groupdict().items():
            if text is not None and (value := _convert(name, text, seen)) is not None:
                seen.add(rank, name, value, fmt)

    return handler


def _pool(seen: _Seen, rank: str, m: re.Match[str]) -> None:
    """One "KV Cache is allocated" line: a pool of this rank (K and V sizes, or one KV size for MLA)."""
    tokens = int(m.group("tokens"))
    k = _bytes(m.group("k") or "0", seen, "k_cache_bytes") or 0
    v = _bytes(m.group("v") or "0", seen, "v_cache_bytes") or 0
    kv = _bytes(m.group("kv"), seen, "kv_cache_bytes") if m.group("kv") else k + v
    seen.pools.setdefault(rank, []).append((tokens, k, v, kv or 0))
    seen.note("kv_cache_allocated")


def _mamba(seen: _Seen, rank: str, m: re.Match[str]) -> None:
    conv = _bytes(m.group("conv"), seen, "mamba_cache_bytes") or 0
    ssm = _bytes(m.group("ssm"), seen, "mamba_cache_bytes") or 0
    seen.add(rank, "mamba_cache_bytes", conv + ssm, "mamba_cache_allocated")
    seen.add(rank, "max_mamba_cache_size", int(m.group("size")), "mamba_cache_allocated")


_SERVER_ARG = re.compile(r"\b([a-z_]{2,40})=('[^',]{0,512}'|None|True|False|-?\d{1,15}(?:\.\d{1,9})?)(?=[,)])")
_SERVER_ARG_KEYS = frozenset({
    "model_path", "context_length", "dtype", "quantization", "kv_cache_dtype", "mem_fraction_static",
    "max_running_requests", "max_total_tokens", "chunked_prefill_size", "page_size", "tp_size", "pp_size",
    "dp_size", "cuda_graph_max_bs", "disable_cuda_graph",
})  # fmt: skip


def _literal(text: str) -> Any:
    """A value of the ServerArgs repr: 'str', None, True/False, int or float."""
    if text.startswith("'"):
        return text[1:-1]
    if text in ("None", "True", "False"):
        return {"None": None, "True": True, "False": False}[text]
    return float(text) if "." in text else int(text)


def _server_args(seen: _Seen, rank: str, m: re.Match[str]) -> None:
    if seen.report.server_args:  # printed once per launch; a second line is a later restart
        return
    for key, text in _SERVER_ARG.findall(m.string[m.end() :]):
        if key in _SERVER_ARG_KEYS:
            seen.report.server_args.setdefault(key, _literal(text))
    fraction = seen.report.server_args.get("mem_fraction_static")
    if isinstance(fraction, int | float):
        seen.report.mem_fraction_static = float(fraction)
    seen.note("server_args")


def _startup_error(kind: str) -> Handler:
    def handler(seen: _Seen, rank: str, m: re.Match[str]) -> None:
        seen.error(kind, m.string[m.start() :])

    return handler


def _cuda_oom(seen: _Seen, rank: str, m: re.Match[str]) -> None:
    seen.report.cuda_oom = True
    seen.note("cuda_oom")
    seen.error("cuda_oom", m.string[m.start() :])


def _pool_exhausted(seen: _Seen, rank: str, m: re.Match[str]) -> None:
    if seen.report.pool_exhausted is None:
        seen.report.pool_exhausted = m.string[m.start() :].strip()[:MAX_ERROR_CHARS]
    seen.note("pool_exhausted")


def _retraction(seen: _Seen, rank: str, m: re.Match[str]) -> None:
    seen.report.retractions += 1
    seen.note("retraction")


def _request_too_long(seen: _Seen, rank: str, m: re.Match[str]) -> None:
    allowed = int(m.group(1))
    current = seen.report.max_allowed_input_tokens
    seen.report.max_allowed_input_tokens = allowed if current is None else min(current, allowed)
    seen.note("request_too_long")


def _ready(seen: _Seen, rank: str, m: re.Match[str]) -> None:
    seen.report.startup_complete = True
    seen.note("startup_complete")


# (literal that must be in the line, pattern, handler): the literal keeps the scan cheap. CUDA OOM comes first,
# so that "Capture cuda graph failed: CUDA out of memory …" is read as the out-of-memory error it is.
_LINES: list[tuple[str, re.Pattern[str], Handler]] = [
    (literal, re.compile(pattern), handler)
    for literal, pattern, handler in [
        ("out of memory", r"CUDA out of memory|CUDA error: out of memory", _cuda_oom),
        ("OutOfMemoryError", r"OutOfMemoryError", _cuda_oom),
        ("cudaErrorMemoryAllocation", r"cudaErrorMemoryAllocation", _cuda_oom),
        ("CUBLAS_STATUS_ALLOC_FAILED", r"CUBLAS_STATUS_ALLOC_FAILED", _cuda_oom),
        ("server_args=ServerArgs(", r"server_args=ServerArgs\(", _server_args),
        ("Init torch distributed ends.", rf"Init torch distributed ends\. elapsed={_NUM} s, "
         rf"mem usage=(?P<torch_distributed_bytes>{_NUM}) ?GB", _fields("init_distributed")),
        ("Load weight begin.", rf"Load weight begin\. avail mem=(?P<avail_before_load_bytes>{_NUM}) ?GB",
         _fields("load_weight_begin")),
        ("Load weight end.", rf"Load weight end\. (?:elapsed=(?P<load_seconds>{_NUM}) s, )?"
         rf"(?:type=(?P<model_class>[A-Za-z0-9_]{{1,128}}), )?(?:.{{0,400}}?)avail mem=(?P<avail_after_load_bytes>"
         rf"{_NUM}) ?GB, mem usage=(?P<weights_bytes>{_NUM}) ?GB", _fields("load_weight_end")),
        ("Using KV cache dtype:", r"Using KV cache dtype: torch\.(?P<kv_cache_torch_dtype>[A-Za-z0-9_]{1,32})",
         _fields("kv_cache_dtype")),
        ("KV Cache is allocated.", rf"KV Cache is allocated\. (?:dtype: [A-Za-z0-9_.]{{1,40}}, )?#tokens: "
         rf"(?P<tokens>{_INT}), (?:K size: (?P<k>{_NUM}) ?GB, V size: (?P<v>{_NUM}) ?GB|KV size: (?P<kv>{_NUM}) ?GB)",
         _pool),
        ("Mamba Cache is allocated.", rf"Mamba Cache is allocated\. max_mamba_cache_size: (?P<size>{_INT}), "
         rf"conv_state size: (?P<conv>{_NUM}) ?GB, ssm_state size: (?P<ssm>{_NUM}) ?GB", _mamba),
        ("is larger than the profiled value", rf"is larger than the profiled value "
         rf"(?P<profiled_token_capacity>{_INT})\.", _fields("profiled_tokens")),
        ("Memory pool end.", rf"Memory pool end\. avail mem=(?P<avail_after_pool_bytes>{_NUM}) ?GB",
         _fields("memory_pool_end")),
        ("Capture cuda graph begin.", rf"Capture cuda graph begin\..{{0,80}}avail mem="
         rf"(?P<avail_before_cuda_graph_bytes>{_NUM}) ?GB", _fields("cuda_graph_begin")),
        ("Capture cuda graph end.", rf"Capture cuda graph end\. Time elapsed: (?P<cuda_graph_seconds>{_NUM}) ?s\. "
         rf"mem usage=(?P<cuda_graph_bytes>{_NUM}) ?GB\. avail mem=(?P<avail_after_cuda_graph_bytes>{_NUM}) ?GB",
         _fields("cuda_graph_end")),
        ("Capture piecewise CUDA graph end.", rf"Capture piecewise CUDA graph end\. Time elapsed: {_NUM} ?s\. "
         rf"mem usage=(?P<piecewise_cuda_graph_bytes>{_NUM}) ?GB\. avail mem="
         rf"(?P<avail_after_piecewise_cuda_graph_bytes>{_NUM}) ?GB", _fields("piecewise_cuda_graph_end")),
        ("max_total_num_tokens=", rf"max_total_num_tokens=(?P<max_total_num_tokens>{_INT}), chunked_prefill_size="
         rf"(?P<chunked_prefill_size>{_INT}), max_prefill_tokens=(?P<max_prefill_tokens>{_INT}), "
         rf"max_running_requests=(?P<max_running_requests>{_INT}), context_len=(?P<context_len>{_INT}), "
         rf"available_(?:gpu|cpu)_mem=(?P<available_gpu_mem_bytes>{_NUM}) ?GB", _fields("scheduler_limits")),
        ("Not enough memory.", r"Not enough memory\. Please try to increase --mem-fraction-static",
         _startup_error("not_enough_memory")),
        ("Memory pool size is too small", r"Memory pool size is too small", _startup_error("pool_too_small")),
        ("max_running_request is zero", r"max_running_request is zero", _startup_error("no_request_slots")),
        ("is greater than the derived context_length", r"context_length \(\d{1,12}\) is greater than the derived "
         r"context_length", _startup_error("context_length_exceeds_model")),
        ("Capture cuda graph failed", r"Capture cuda graph failed", _startup_error("cuda_graph_capture_failed")),
        ("scheduler died during initialization", r"Rank \d{1,6} scheduler died during initialization",
         _startup_error("scheduler_died")),
        ("Scheduler hit an exception", r"Scheduler hit an exception", _startup_error("engine_failed")),
        ("Received sigquit from a child process", r"Received sigquit from a child process",
         _startup_error("engine_failed")),
        ("Initialization failed.", r"Initialization failed\.", _startup_error("engine_failed")),
        ("out of memory. Try to lower your batch size", r"(?:Prefill|Decode) out of memory\. Try to lower your "
         r"batch size", _pool_exhausted),
        ("alloc_req_slots runs out of memory", r"alloc_req_slots runs out of memory", _pool_exhausted),
        ("KV cache pool is full. Retract requests.", r"KV cache pool is full\. Retract requests\.", _retraction),
        ("exceeds the maximum allowed length", r"exceeds the maximum allowed length \((\d{1,15}) tokens\)",
         _request_too_long),
        ("The server is fired up and ready to roll", r"The server is fired up and ready to roll", _ready),
    ]
]  # fmt: skip


# --- reading -------------------------------------------------------------------------------------


def parse_sglang_memory_report(log_text: str) -> SglangMemoryReport:
    """Everything the log says about SGLang's memory; unknown text gives an all-``None`` report."""
    report = SglangMemoryReport()
    text = bounded_log(log_text, report.warnings)
    if text is None:
        return report
    seen = _Seen(report)
    for raw in text.splitlines():
        _read_line(seen, raw[:MAX_LINE_CHARS])
    _settle(seen)
    return report


def _read_line(seen: _Seen, line: str) -> None:
    if "\x1b" in line:
        line = _ANSI.sub("", line)
    prefix = _PREFIX.match(line)
    rank = prefix.group(1).strip() if prefix else ""
    for literal, pattern, handler in _LINES:
        if literal in line and (match := pattern.search(line)) is not None:
            handler(seen, rank, match)


#: How one GPU's figures become the report's: the most memory any GPU holds, the least any has free, the
#: smallest pool; anything else is the first value printed.
_MOST = frozenset({
    "torch_distributed_bytes", "weights_bytes", "k_cache_bytes", "v_cache_bytes", "kv_cache_bytes",
    "mamba_cache_bytes", "cuda_graph_bytes", "piecewise_cuda_graph_bytes",
})  # fmt: skip
_LEAST = frozenset({
    "avail_before_load_bytes", "avail_after_load_bytes", "avail_after_pool_bytes", "avail_before_cuda_graph_bytes",
    "avail_after_cuda_graph_bytes", "avail_after_piecewise_cuda_graph_bytes", "available_gpu_mem_bytes",
    "kv_cache_tokens", "max_total_num_tokens", "profiled_token_capacity",
})  # fmt: skip
_TOP_LEVEL = {f.name for f in fields(SglangMemoryReport)}


def _settle(seen: _Seen) -> None:
    """Per rank: the first value of each figure (the pools summed); then across ranks by :data:`_MOST`/`_LEAST`."""
    report = seen.report
    for rank, pools in seen.pools.items():
        figures = seen.by_rank.setdefault(rank, {})
        figures["kv_cache_tokens"] = [pools[0][0]]
        for index, name in ((1, "k_cache_bytes"), (2, "v_cache_bytes"), (3, "kv_cache_bytes")):
            figures[name] = [sum(pool[index] for pool in pools)]
    for rank in sorted(seen.by_rank):
        report.ranks[rank or "-"] = {name: values[0] for name, values in seen.by_rank[rank].items()}
        _warn_repeats(report, rank, seen.by_rank[rank])
    for name in sorted({n for figures in report.ranks.values() for n in figures} & _TOP_LEVEL):
        values = [figures[name] for figures in report.ranks.values() if name in figures]
        value = max(values) if name in _MOST else min(values) if name in _LEAST else values[0]
        setattr(report, name, value)
    if len(report.ranks) == 1:  # one GPU: its figures are the top level, not kept twice
        report.ranks.clear()
    _choose_error(seen)


def _warn_repeats(report: SglangMemoryReport, rank: str, figures: dict[str, list[Any]]) -> None:
    """A figure printed twice by one rank (two launches in one log?): the first is kept, and said so."""
    for name, values in figures.items():
        if len(set(values)) > 1:
            shown = ", ".join(str(v) for v in values[:6])
            report.warnings.append(f"{name}: rank {rank or '-'} printed {len(values)} values ({shown}); kept the first")


def _choose_error(seen: _Seen) -> None:
    """The first specific start-up failure; a generic 'engine failed' only when nothing says why."""
    report = seen.report
    specific = [(k, m) for k, m in seen.errors if k != "engine_failed"] or seen.errors
    if specific:
        report.startup_error_kind, report.startup_error = specific[0]


_TOO_LONG = re.compile(r"Input length \(\d{1,15} tokens\) exceeds the maximum allowed length \(\d{1,15} tokens\)")


def serving_memory_failure(report: SglangMemoryReport, request_errors: list[str]) -> str | None:
    """Why the requests failed for memory once SGLang was up, else None.

    SGLang ran out of GPU memory; or its pool ran dry and the scheduler raised (mem_cache/common.py); or it
    refused a prompt as longer than the pool allows ("exceeds the maximum allowed length", managers/utils.py:
    136-140) when the pool, not the context length, sets that limit (:attr:`SglangMemoryReport.pool_limits_requests`).
    """
    if report.cuda_oom:
        return "ran out of GPU memory while serving the requests"
    if report.pool_exhausted:
        return f"ran out of its KV pool while serving the requests: {report.pool_exhausted}"
    refusals = (_TOO_LONG.search(error) for error in request_errors)
    refusal = next((found.group(0) for found in refusals if found is not None), None)
    if refusal is not None and report.pool_limits_requests:
        return (
            f"refused the requests: its KV pool holds {report.max_total_num_tokens} tokens, fewer than the context "
            f'length {report.context_len} ("{refusal}")'
        )
    return None


def report_fields() -> list[str]:
    """The keys of :meth:`SglangMemoryReport.as_dict`, in order."""
    return [f.name for f in fields(SglangMemoryReport)] + ["refused_for_memory", "pool_limits_requests"]
