"""Read vLLM's start-up memory report out of its log: what vLLM itself says it measured and decided.

vLLM profiles its own memory at start-up and logs the result; the wording changed with almost every
release line. This module recognises each known wording and returns one :class:`VllmMemoryReport`
(every field ``None`` when the log does not say it). Pure: standard library only, no I/O.

Units. Every figure vLLM prints in these lines is binary: ``GiB_bytes = 1 << 30`` (vllm ``utils.py``,
later ``utils/mem_constants.py``) and ``format_gib(b) = round(b / GiB_bytes, 2)``. The old
"Loading model weights took %.4f GB" line says GB but divides by ``2**30`` as well (vllm 0.6.3
``worker/model_runner.py:1071-1072``; 0.7.3 ``v1/worker/gpu_model_runner.py:1060-1061``), so it is
read as GiB. Figures are printed with two decimals (0.01 GiB ≈ 10.7 MB; "took %.4f" has four), so the
bytes returned here are ``round(value × 2**30)``, exact only to that precision.

What each figure means (read from the release wheels; see :data:`FORMATS` for the line-by-line list):

* ``total_gpu_memory`` is ``torch.cuda.mem_get_info()``'s total (cudaMemGetInfo), not NVML's total.
* 0.6.4–0.6.4.post1 ("Memory profiling results: total_gpu_memory=…", ``worker/worker.py:232-243``):
  ``peak_torch_memory`` is the PyTorch allocator peak *including the weights*; ``non_torch_memory`` is
  every non-PyTorch allocation on the device after profiling (CUDA context included); ``kv_cache_size``
  is ``total × util − (peak_torch + non_torch)``. :attr:`VllmMemoryReport.activation_peak_bytes` is then
  derived as ``peak_torch − weights`` (and a warning says so).
* 0.6.5 → current ("model weights take …; non_torch_memory takes …; PyTorch activation peak memory
  takes …", V0 ``worker/worker.py``; the same quantities in V1's debug lines and, from 0.11, in the
  "Free memory on device … Actual usage is …" line): ``non_torch`` is the *increase* of non-PyTorch
  memory during profiling and ``activation`` the *increase* of the allocator peak over the weights.
* "Available KV cache memory" (V1, ``v1/worker/gpu_worker.py``) and "the rest of the memory reserved for
  KV Cache" (V0) are per GPU. They can be negative: vLLM then refuses to start.
* "GPU KV cache size: N tokens" (V1 from 0.8) is blocks × block size (from 0.2x it is derived from the
  concurrency); V0 prints "# GPU blocks" / "# CUDA blocks" instead.
* CUDA graphs: "Graph capturing finished in N secs, took X GiB" is the drop of free memory over the
  capture (it can be negative); from 0.21 vLLM also logs an estimate made before sizing the KV cache.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from .engine_log import MAX_LOG_CHARS, bounded_log

__all__ = [
    "FORMATS", "MAX_LOG_CHARS", "MEMORY_ERROR_KINDS", "VllmMemoryReport", "parse_vllm_memory_report", "report_fields",
]  # fmt: skip

GiB = 1 << 30
MAX_LINE_CHARS = 20_000
MAX_ERROR_CHARS = 600
#: A printed memory figure above this many GiB is not believed (no GPU has a petabyte).
_MAX_GIB = 1_000_000.0

#: Start-up failures that mean "it does not fit": the vLLM program exits 3 (out of memory) on these.
MEMORY_ERROR_KINDS = frozenset(
    {"no_kv_cache_memory", "max_model_len_exceeds_kv_cache", "insufficient_free_memory", "cuda_oom"}
)

#: Every line kind recognised: name → what it is, with the vLLM versions and source that print it.
FORMATS: dict[str, str] = {
    "version": "'vLLM API server version X' (≤0.2x), 'vLLM server version X' (0.3x), "
    "'Initializing a[n] [V0 |V1 ]LLM engine (vX)' — the vLLM version",
    "engine_config": "'… LLM engine (vX) with config: … max_seq_len=N, kv_cache_dtype=…' — settings in force",
    "weights_loaded_gb": "'Loading model weights took X GB' (≤0.7; 'GB' is GiB: divided by 2**30)",
    "model_loading": "'Model loading took X GiB [memory] and Y seconds' (0.8 → current; main builds around 0.8.0 "
    "printed 'GB' here, read as GiB like the line it replaced)",
    "profile_results_v064": "'Memory profiling results: total_gpu_memory=…GiB … gpu_memory_utilization=…' "
    "(0.6.4, worker/worker.py:232-243; peak_torch includes weights)",
    "profile_table_pr10511": "tabular 'Memory profiling results:' block from a development build of "
    "vllm-project/vllm PR #10511 (never released; handled for completeness)",
    "profile_summary": "'Memory profiling takes X seconds / the current vLLM instance can use total_gpu_memory (T) "
    "x gpu_memory_utilization (u) = R / model weights take …; non_torch_memory takes …; PyTorch activation "
    "peak memory takes …; the rest of the memory reserved for KV Cache is …' (V0 0.6.5 → 0.10)",
    "profile_result_debug": "'Memory profiling takes X seconds. Total non KV cache memory: …; torch peak memory "
    "increase: …; non-torch forward increase memory: …; weights memory: …' (DEBUG level, 0.7 → current)",
    "gpu_blocks": "'# GPU blocks: N[, # CPU blocks: M]' / '# CUDA blocks: N, # CPU blocks: M' (V0; early V1)",
    "available_kv_cache_memory": "'Available KV cache memory: X GiB' (V1 0.9 → current; per GPU)",
    "kv_cache_tokens": "'GPU KV cache size: N tokens' (V1 0.8 → current; one line with the concurrency in 0.3x)",
    "max_concurrency": "'Maximum concurrency for N tokens per request: X.XXx'",
    "graph_capture": "'Graph capturing finished in N secs[, took X GiB]'",
    "cuda_graph_estimate": "'Estimated CUDA graph memory: X GiB total' (0.18 → current)",
    "cuda_graph_pool": "'CUDA graph pool memory: X GiB (actual), Y GiB (estimated), …' (0.18 → current)",
    "utilization_notice": "'The current --gpu-memory-utilization=u is equivalent to …' / '… increase "
    "--gpu-memory-utilization from u to …' (0.18 → current)",
    "kv_cache_memory_advice": "'Free memory on device (F/T GiB) on startup. Desired GPU memory utilization is "
    "(u, R GiB). Actual usage is … Current kv cache memory in use is K GiB.' (DEBUG in 0.11–0.20, INFO in 0.3x)",
    "startup_error": "a start-up failure: no memory for the cache blocks, max_model_len larger than the KV cache, "
    "not enough free memory at start-up, CUDA out of memory, or the engine core failing to start",
    "cuda_oom": "'CUDA out of memory' / 'OutOfMemoryError' / CUBLAS_STATUS_ALLOC_FAILED anywhere in the log",
    "startup_complete": "'Starting vLLM API server' / 'Uvicorn running on' / 'Application startup complete'",
}


@dataclass
class VllmMemoryReport:
    """What one vLLM log says about memory. Bytes are ints converted from the GiB figure printed."""

    vllm_version: str | None = None
    total_gpu_memory_bytes: int | None = None  # cudaMemGetInfo total, per GPU
    free_gpu_memory_bytes: int | None = None  # free at start-up ("Free memory on device (F/T GiB)")
    gpu_memory_utilization: float | None = None
    requested_memory_bytes: int | None = None  # total × utilization: vLLM's budget
    weights_bytes: int | None = None
    activation_peak_bytes: int | None = None  # increase of the allocator peak over the weights
    torch_peak_bytes: int | None = None  # 0.6.4 only: allocator peak including the weights
    non_torch_bytes: int | None = None
    non_kv_cache_bytes: int | None = None  # weights + activation + non-torch (debug line)
    initial_memory_usage_bytes: int | None = None  # 0.6.4 only
    post_profile_memory_usage_bytes: int | None = None  # 0.6.4 only
    kv_cache_bytes: int | None = None  # per GPU; negative when vLLM found no room
    kv_cache_tokens: int | None = None
    gpu_blocks: int | None = None
    cpu_blocks: int | None = None
    block_size: int | None = None  # only when tokens / blocks are both printed and divide exactly
    max_concurrency: float | None = None
    max_concurrency_request_tokens: int | None = None
    cuda_graph_bytes: int | None = None
    cuda_graph_estimate_bytes: int | None = None
    max_model_len: int | None = None  # from the engine config line
    kv_cache_dtype: str | None = None
    dtype: str | None = None
    tensor_parallel_size: int | None = None
    estimated_max_model_len: int | None = None  # what vLLM says would fit, in its refusal
    model_loading_seconds: float | None = None
    profiling_seconds: float | None = None
    graph_capture_seconds: float | None = None
    startup_complete: bool = False
    cuda_oom: bool = False
    startup_error: str | None = None
    startup_error_kind: str | None = None
    formats: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def refused_for_memory(self) -> bool:
        """vLLM did not start (or died starting) because the memory did not suffice."""
        return self.startup_error_kind in MEMORY_ERROR_KINDS

    def as_dict(self) -> dict[str, Any]:
        value = asdict(self)
        value["refused_for_memory"] = self.refused_for_memory
        return value


# --- line patterns -------------------------------------------------------------------------------

_NUM = r"(-?\d{1,9}(?:\.\d{1,6})?)"  # bounded: no catastrophic input, no absurd figures
_INT = r"(\d{1,3}(?:,\d{3}){1,5}|\d{1,15})"  # 443,248 or 443248
_ANSI = re.compile(r"\x1b\[[0-9;?]{0,20}[A-Za-z]|\^\[\[[0-9;]{0,20}m")


@dataclass
class _State:
    report: VllmMemoryReport
    values: dict[str, list[Any]] = field(default_factory=dict)
    table: bool = False  # inside the PR #10511 table block
    errors: list[tuple[str, str]] = field(default_factory=list)

    def put(self, name: str, value: Any, fmt: str) -> None:
        seen = self.values.setdefault(name, [])
        if value not in seen:
            seen.append(value)
        if fmt not in self.report.formats:
            self.report.formats.append(fmt)

    def gib(self, name: str, text: str, fmt: str) -> None:
        number = float(text)
        if abs(number) > _MAX_GIB:
            self.report.warnings.append(f"{name}: {text} GiB is not believable; ignored")
            return
        self.put(name, round(number * GiB), fmt)

    def error(self, kind: str, message: str) -> None:
        message = message.strip().strip("\"'").strip()[:MAX_ERROR_CHARS]
        self.errors.append((kind, message))
        if "startup_error" not in self.report.formats:
            self.report.formats.append("startup_error")


Handler = Callable[[_State, "re.Match[str]"], None]


def _version(s: _State, m: re.Match[str]) -> None:
    s.put("vllm_version", m.group(1).rstrip(".,;:"), "version")


def _engine_config(s: _State, m: re.Match[str]) -> None:
    line = m.string
    s.put("vllm_version", m.group(1), "version")
    if (found := re.search(r"\bmax_seq_len=(\d{1,9})\b", line)) is not None:
        s.put("max_model_len", int(found.group(1)), "engine_config")
    if (found := re.search(r"\bkv_cache_dtype=([A-Za-z0-9_]{1,32})", line)) is not None:
        s.put("kv_cache_dtype", found.group(1), "engine_config")
    if (found := re.search(r"\bdtype=torch\.([A-Za-z0-9_]{1,32})", line)) is not None:
        s.put("dtype", found.group(1), "engine_config")
    if (found := re.search(r"\btensor_parallel_size=(\d{1,4})\b", line)) is not None:
        s.put("tensor_parallel_size", int(found.group(1)), "engine_config")


def _weights_gb(s: _State, m: re.Match[str]) -> None:
    s.gib("weights_bytes", m.group(1), "weights_loaded_gb")


def _model_loading(s: _State, m: re.Match[str]) -> None:
    s.gib("weights_bytes", m.group(1), "model_loading")
    s.put("model_loading_seconds", float(m.group(2)), "model_loading")


_V064_KEYS = {
    "total_gpu_memory": "total_gpu_memory_bytes",
    "initial_memory_usage": "initial_memory_usage_bytes",
    "peak_torch_memory": "torch_peak_bytes",
    "memory_usage_post_profile": "post_profile_memory_usage_bytes",
    "non_torch_memory": "non_torch_bytes",
    "kv_cache_size": "kv_cache_bytes",
}
_V064_PAIR = re.compile(r"\b(" + "|".join(_V064_KEYS) + r")=" + _NUM + r"GiB")


def _profile_v064(s: _State, m: re.Match[str]) -> None:
    for key, number in _V064_PAIR.findall(m.string):
        s.gib(_V064_KEYS[key], number, "profile_results_v064")
    if (util := re.search(r"\bgpu_memory_utilization=" + _NUM, m.string)) is not None:
        s.put("gpu_memory_utilization", float(util.group(1)), "profile_results_v064")


def _table_start(s: _State, m: re.Match[str]) -> None:
    s.table = True


_TABLE_KEYS = {
    "total_gpu_memory": "total_gpu_memory_bytes",
    "the current vLLM instance can use": "requested_memory_bytes",
    "model weights take": "weights_bytes",
    "non_torch_memory": "non_torch_bytes",
    "PyTorch activation peak memory": "activation_peak_bytes",
    "available_kv_cache_memory": "kv_cache_bytes",
}
_TABLE_ROW = re.compile(
    r"(?:^|\s)(" + "|".join(re.escape(k) for k in (*_TABLE_KEYS, "gpu_memory_utilization", "duration")) + r")\s+"
    + _NUM + r"\s?(GiB|seconds)?\s*$"
)  # fmt: skip


def _table_row(s: _State, line: str) -> None:
    m = _TABLE_ROW.search(line)
    if m is None:
        return
    key, number, unit = m.group(1), m.group(2), m.group(3)
    if key == "gpu_memory_utilization" and unit is None:
        s.put("gpu_memory_utilization", float(number), "profile_table_pr10511")
    elif key == "duration" and unit == "seconds":
        s.put("profiling_seconds", float(number), "profile_table_pr10511")
    elif key in _TABLE_KEYS and unit == "GiB":
        s.gib(_TABLE_KEYS[key], number, "profile_table_pr10511")


def _profiling_takes(s: _State, m: re.Match[str]) -> None:
    s.put("profiling_seconds", float(m.group(1)), "profile_summary")


def _instance_can_use(s: _State, m: re.Match[str]) -> None:
    s.gib("total_gpu_memory_bytes", m.group(1), "profile_summary")
    s.put("gpu_memory_utilization", float(m.group(2)), "profile_summary")
    s.gib("requested_memory_bytes", m.group(3), "profile_summary")


def _summary(name: str, fmt: str = "profile_summary") -> Handler:
    def handler(s: _State, m: re.Match[str]) -> None:
        s.gib(name, m.group(1), fmt)

    return handler


def _debug_result(s: _State, m: re.Match[str]) -> None:
    line = m.string
    s.put("profiling_seconds", float(m.group(1)), "profile_result_debug")
    for pattern, name in (
        (r"Total non KV cache memory: " + _NUM + r"\s?GiB", "non_kv_cache_bytes"),
        (r"torch peak memory increase: " + _NUM + r"\s?GiB", "activation_peak_bytes"),
        (r"non-torch forward increase memory: " + _NUM + r"\s?GiB", "non_torch_bytes"),
        (r"weights memory: " + _NUM + r"\s?GiB", "weights_bytes"),
    ):
        if (found := re.search(pattern, line)) is not None:
            s.gib(name, found.group(1), "profile_result_debug")


def _blocks(s: _State, m: re.Match[str]) -> None:
    s.put("gpu_blocks", int(m.group(1)), "gpu_blocks")
    if m.group(2) is not None:
        s.put("cpu_blocks", int(m.group(2)), "gpu_blocks")


def _kv_tokens(s: _State, m: re.Match[str]) -> None:
    s.put("kv_cache_tokens", int(m.group(1).replace(",", "")), "kv_cache_tokens")


def _concurrency(s: _State, m: re.Match[str]) -> None:
    s.put("max_concurrency_request_tokens", int(m.group(1).replace(",", "")), "max_concurrency")
    s.put("max_concurrency", float(m.group(2)), "max_concurrency")


def _graph_capture(s: _State, m: re.Match[str]) -> None:
    s.put("graph_capture_seconds", float(m.group(1)), "graph_capture")
    if m.group(2) is not None:
        s.gib("cuda_graph_bytes", m.group(2), "graph_capture")


def _graph_pool(s: _State, m: re.Match[str]) -> None:
    s.gib("cuda_graph_bytes", m.group(1), "cuda_graph_pool")
    s.gib("cuda_graph_estimate_bytes", m.group(2), "cuda_graph_pool")


def _util(fmt: str) -> Handler:
    def handler(s: _State, m: re.Match[str]) -> None:
        s.put("gpu_memory_utilization", float(m.group(1)), fmt)

    return handler


def _free_on_device(s: _State, m: re.Match[str]) -> None:
    s.gib("free_gpu_memory_bytes", m.group(1), "kv_cache_memory_advice")
    s.gib("total_gpu_memory_bytes", m.group(2), "kv_cache_memory_advice")
    rest = m.string[m.end() :]
    if rest.lstrip(" .").startswith("is less than"):
        s.error("insufficient_free_memory", m.string[m.start() :])


def _desired(s: _State, m: re.Match[str]) -> None:
    s.put("gpu_memory_utilization", float(m.group(1)), "kv_cache_memory_advice")
    s.gib("requested_memory_bytes", m.group(2), "kv_cache_memory_advice")


def _err_no_memory(s: _State, m: re.Match[str]) -> None:
    s.error("no_kv_cache_memory", m.string[m.start() :])


def _err_v1_max_len(s: _State, m: re.Match[str]) -> None:
    s.put("max_model_len", int(m.group(1)), "startup_error")
    s.gib("kv_cache_bytes", m.group(3), "startup_error")
    if (found := re.search(r"estimated maximum model length is (\d{1,9})", m.string)) is not None:
        s.put("estimated_max_model_len", int(found.group(1)), "startup_error")
    s.error("max_model_len_exceeds_kv_cache", m.string[m.start() :])


def _err_v0_max_len(s: _State, m: re.Match[str]) -> None:
    s.put("max_model_len", int(m.group(1)), "startup_error")
    s.put("kv_cache_tokens", int(m.group(2)), "startup_error")
    s.error("max_model_len_exceeds_kv_cache", m.string[m.start() :])


def _err_kind(kind: str) -> Handler:
    def handler(s: _State, m: re.Match[str]) -> None:
        s.error(kind, m.string[m.start() :])

    return handler


def _oom(s: _State, m: re.Match[str]) -> None:
    s.report.cuda_oom = True
    if "cuda_oom" not in s.report.formats:
        s.report.formats.append("cuda_oom")
    if not s.report.startup_complete:
        s.error("cuda_oom", m.string[m.start() :])


def _ready(s: _State, m: re.Match[str]) -> None:
    s.report.startup_complete = True
    if "startup_complete" not in s.report.formats:
        s.report.formats.append("startup_complete")


# (literal that must be in the line, pattern, handler): the literal check keeps the scan cheap.
_PATTERNS: list[tuple[str, re.Pattern[str], Handler]] = [
    (p[0], re.compile(p[1]), p[2])
    for p in [
        ("server version", r"vLLM (?:API )?server version ([0-9][0-9A-Za-z.+_-]{0,63})", _version),
        ("version", r"█\s{1,8}version\s{1,8}([0-9][0-9A-Za-z.+_-]{0,63})", _version),
        ("LLM engine (v", r"LLM engine \(v([0-9][0-9A-Za-z.+_-]{0,63})\)", _engine_config),
        ("Loading model weights took", r"Loading model weights took " + _NUM + r" ?Gi?B\b", _weights_gb),
        ("Model loading took", r"Model loading took " + _NUM + r" ?Gi?B(?: memory)? and " + _NUM + r" ?s",
         _model_loading),
        ("Memory profiling results: total_gpu_memory=", r"Memory profiling results: total_gpu_memory=", _profile_v064),
        ("Memory profiling results:", r"Memory profiling results:\s*$", _table_start),
        ("Memory profiling takes", r"Memory profiling takes " + _NUM + r" seconds\s*$", _profiling_takes),
        ("Memory profiling takes", r"Memory profiling takes " + _NUM + r" seconds\. ", _debug_result),
        ("the current vLLM instance can use total_gpu_memory",
         r"total_gpu_memory \(" + _NUM + r"\s?GiB\) x gpu_memory_utilization \(" + _NUM + r"\) = " + _NUM + r"\s?GiB",
         _instance_can_use),
        ("model weights take ", r"model weights take " + _NUM + r"\s?GiB;", _summary("weights_bytes")),
        ("non_torch_memory takes", r"non_torch_memory takes " + _NUM + r"\s?GiB", _summary("non_torch_bytes")),
        ("PyTorch activation peak memory takes", r"PyTorch activation peak memory takes " + _NUM + r"\s?GiB",
         _summary("activation_peak_bytes")),
        ("reserved for KV Cache is", r"reserved for KV Cache is " + _NUM + r"\s?GiB", _summary("kv_cache_bytes")),
        ("blocks: ", r"(?:^|[\s\]])(?:# ?)?(?:GPU|CUDA) blocks: (\d{1,12})(?:, # CPU blocks: (\d{1,12}))?", _blocks),
        ("Available KV cache memory:", r"Available KV cache memory: " + _NUM + r"\s?GiB",
         _summary("kv_cache_bytes", "available_kv_cache_memory")),
        ("KV cache size:", r"KV cache size: " + _INT + r" tokens", _kv_tokens),
        ("Maximum concurrency for", r"Maximum concurrency for " + _INT + r" tokens per request: " + _NUM + r"x",
         _concurrency),
        ("Graph capturing finished in",
         r"Graph capturing finished in " + _NUM + r" secs?(?:, took " + _NUM + r"\s?GiB)?", _graph_capture),
        ("CUDA graph pool memory:",
         r"CUDA graph pool memory: " + _NUM + r"\s?GiB \(actual\), " + _NUM + r"\s?GiB \(estimated\)", _graph_pool),
        ("Estimated CUDA graph memory:", r"Estimated CUDA graph memory: " + _NUM + r"\s?GiB total",
         _summary("cuda_graph_estimate_bytes", "cuda_graph_estimate")),
        ("--gpu-memory-utilization=", r"current --gpu-memory-utilization=" + _NUM + r" is equivalent",
         _util("utilization_notice")),
        ("--gpu-memory-utilization from", r"increase --gpu-memory-utilization from " + _NUM + r" to",
         _util("utilization_notice")),
        ("Free memory on device",
         r"Free memory on device(?: \S{1,32})? \(" + _NUM + r"/" + _NUM + r"\s?GiB\) on startup", _free_on_device),
        ("Desired GPU memory utilization is", r"Desired GPU memory utilization is \(" + _NUM + r", " + _NUM
         + r"\s?GiB\)", _desired),
        ("Actual usage is", r"Actual usage is " + _NUM + r"\s?GiB for weight", _summary("weights_bytes",
         "kv_cache_memory_advice")),
        ("GiB for peak activation", _NUM + r"\s?GiB for peak activation", _summary("activation_peak_bytes",
         "kv_cache_memory_advice")),
        ("GiB for non-torch memory", _NUM + r"\s?GiB for non-torch memory", _summary("non_torch_bytes",
         "kv_cache_memory_advice")),
        ("GiB for CUDAGraph memory", _NUM + r"\s?GiB for CUDAGraph memory", _summary("cuda_graph_bytes",
         "kv_cache_memory_advice")),
        ("Current kv cache memory in use is", r"Current kv cache memory in use is " + _NUM + r"\s?GiB",
         _summary("kv_cache_bytes", "kv_cache_memory_advice")),
        ("No available memory for the cache blocks", r"No available memory for the cache blocks", _err_no_memory),
        ("Cannot auto-fit max_model_len", r"Cannot auto-fit max_model_len", _err_kind("no_kv_cache_memory")),
        ("To serve at least one request",
         r"To serve at least one request with the models?'s?'?s? max seq len \((\d{1,9})\), \(" + _NUM
         + r"\s?GiB KV cache is needed, which is larger than the available KV cache memory \(" + _NUM + r"\s?GiB\)",
         _err_v1_max_len),
        ("is larger than the maximum number of tokens",
         r"(?:The model's )?max seq len \((\d{1,9})\) is larger than the maximum number of tokens that can be stored "
         r"in KV cache "
         r"\((\d{1,12})\)", _err_v0_max_len),
        ("CUDA out of memory occurred when warming up", r"CUDA out of memory occurred when warming up", _oom),
        ("Failed to load model - not enough GPU memory", r"Failed to load model - not enough GPU memory", _oom),
        ("out of memory", r"CUDA out of memory|CUDA error: out of memory", _oom),
        ("OutOfMemoryError", r"OutOfMemoryError", _oom),
        ("CUBLAS_STATUS_ALLOC_FAILED", r"CUBLAS_STATUS_ALLOC_FAILED", _oom),
        ("cudaErrorMemoryAllocation", r"cudaErrorMemoryAllocation", _oom),
        ("Error in memory profiling", r"Error in memory profiling", _err_kind("memory_profiling_error")),
        ("EngineCore failed to start", r"EngineCore failed to start", _err_kind("engine_failed")),
        ("Engine core initialization failed", r"Engine core initialization failed", _err_kind("engine_failed")),
        ("Starting vLLM API server", r"Starting vLLM API server", _ready),
        ("Uvicorn running on", r"Uvicorn running on", _ready),
        ("Application startup complete", r"Application startup complete", _ready),
    ]
]  # fmt: skip

#: Fields where several values mean several GPUs (ranks): vLLM keeps the smallest KV cache of all ranks.
_TAKE_MIN = {"kv_cache_bytes", "kv_cache_tokens", "gpu_blocks", "max_concurrency"}
#: Fields where the first value is the one that counts (a later line repeats it, or rounds it again).
_ROUNDING_BYTES = GiB // 100  # figures are printed to 0.01 GiB
_QUIET = {"vllm_version", "profiling_seconds", "model_loading_seconds", "graph_capture_seconds", "max_model_len"}


def parse_vllm_memory_report(log_text: str) -> VllmMemoryReport:
    """Everything the log says about vLLM's memory; unknown text gives an all-``None`` report."""
    report = VllmMemoryReport()
    text = bounded_log(log_text, report.warnings)
    if text is None:
        return report
    state = _State(report)
    for raw in text.splitlines():
        line = raw[:MAX_LINE_CHARS]
        if "\x1b" in line or "^[[" in line:
            line = _ANSI.sub("", line)
        if state.table:
            if "Memory profiling results" not in line and not _TABLE_ROW.search(line):
                state.table = False
            else:
                _table_row(state, line)
        for literal, pattern, handler in _PATTERNS:
            if literal in line and (match := pattern.search(line)) is not None:
                handler(state, match)
    _finish(state)
    return report


def _finish(state: _State) -> None:
    report = state.report
    for name, seen in state.values.items():
        value = min(seen) if name in _TAKE_MIN else seen[0]
        setattr(report, name, value)
        if name.endswith("_bytes"):  # the same figure printed with 4 and with 2 decimals is one value
            seen = [v for i, v in enumerate(seen) if all(abs(v - u) > _ROUNDING_BYTES for u in seen[:i])]
        if len(seen) > 1 and name not in _QUIET:
            shown = ", ".join(str(v) for v in seen[:6])
            rule = "the smallest (vLLM sizes the cache for the tightest rank)" if name in _TAKE_MIN else "the first"
            report.warnings.append(f"{name}: the log gives {len(seen)} values ({shown}); kept {rule}")
    if report.activation_peak_bytes is None and report.torch_peak_bytes is not None and report.weights_bytes:
        report.activation_peak_bytes = report.torch_peak_bytes - report.weights_bytes
        report.warnings.append(
            "activation_peak_bytes derived as peak_torch_memory − model weights (vLLM 0.6.4 logs the allocator "
            "peak including the weights)"
        )
    if report.kv_cache_tokens and report.gpu_blocks and report.kv_cache_tokens % report.gpu_blocks == 0:
        report.block_size = report.kv_cache_tokens // report.gpu_blocks
    if report.kv_cache_bytes is not None and report.kv_cache_bytes < 0:
        report.warnings.append(
            f"vLLM computed a negative KV cache budget ({report.kv_cache_bytes / GiB:.2f} GiB): the weights, "
            "activations and non-PyTorch memory exceed total × gpu_memory_utilization"
        )
    _choose_error(state)


def _choose_error(state: _State) -> None:
    """The first specific start-up failure; a generic 'engine failed' only when nothing says why."""
    report = state.report
    specific = [(k, m) for k, m in state.errors if k != "engine_failed"]
    if specific:
        report.startup_error_kind, report.startup_error = specific[0]
    elif report.kv_cache_bytes is not None and report.kv_cache_bytes <= 0 and not report.startup_complete:
        report.startup_error_kind = "no_kv_cache_memory"
        report.startup_error = (
            f"Available KV cache memory: {report.kv_cache_bytes / GiB:.2f} GiB (no room for the cache blocks)"
        )
    elif state.errors:
        report.startup_error_kind, report.startup_error = state.errors[0]


def report_fields() -> list[str]:
    """The keys of :meth:`VllmMemoryReport.as_dict`, in order."""
    return [f.name for f in fields(VllmMemoryReport)] + ["refused_for_memory"]
