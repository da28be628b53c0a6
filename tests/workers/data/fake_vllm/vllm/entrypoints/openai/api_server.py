"""Stand-in for ``python -m vllm.entrypoints.openai.api_server`` (tests only; no model, no GPU).

Prints real vLLM start-up lines to stderr, then serves on loopback:

``GET /health`` → 200, ``GET /v1/models`` and a streaming ``POST /v1/completions``
(``tests/workers/data/fake_openai.py``, the server shared with the fake SGLang).

``FAKE_VLLM_MODE=no_kv_memory`` prints a real "No available memory for the cache blocks" failure and
exits 1; ``FAKE_VLLM_MODE=oom_on_request`` prints a real CUDA out-of-memory line on the first
completion and answers it with HTTP 500. See the README next to the package.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from typing import Any

from tests.workers.data.fake_openai import FakeServer, log

# LMCache/LMCache#1739 (vLLM 0.10.2, one A100 40GB, Qwen3-14B);
# tests/workers/data/vllm_logs/v0.10.2_a100-40gb_lmcache-issue-1739.log
READY_LINES = (
    "(EngineCore_DP0 pid=1133552) INFO 10-03 16:22:17 [gpu_worker.py:298] Available KV cache memory: 6.51 GiB",
    "(EngineCore_DP0 pid=1133552) INFO 10-03 16:22:17 [kv_cache_utils.py:864] GPU KV cache size: 42,656 tokens",
    "(EngineCore_DP0 pid=1133552) INFO 10-03 16:22:17 [kv_cache_utils.py:868] Maximum concurrency for 32,768 tokens "
    "per request: 1.30x",
)
# vllm-project/vllm#17122 (main before 0.8.5, L40S, Llama-3.1-8B-Instruct): the weights line
LOADING_LINES = ("INFO 04-24 16:33:00 [gpu_model_runner.py:1316] Model loading took 14.9889 GiB and 3.652170 seconds",)
# vllm-project/vllm-omni#946 (vLLM 0.14.0, H100);
# tests/workers/data/vllm_logs/v0.14.0_h100_no-cache-blocks_vllm-omni-issue-946.log
NO_KV_MEMORY_LINES = (
    '(EngineCore_DP0 pid=6804)   File "/usr/local/lib/python3.12/dist-packages/vllm/v1/core/kv_cache_utils.py", '
    "line 616, in _check_enough_kv_cache_memory",
    "(EngineCore_DP0 pid=6804)     raise ValueError(",
    "(EngineCore_DP0 pid=6804) ValueError: No available memory for the cache blocks. Try increasing "
    "`gpu_memory_utilization` when initializing the engine. See "
    "https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details.",
)
# noonghunna/club-3090#16 (RTX 3090, a CUDA OOM while serving)
OOM_LINE = (
    "(EngineCore pid=112) ERROR 05-01 14:39:06 [core.py:1131] torch.OutOfMemoryError: CUDA out of memory. Tried to "
    "allocate 50.00 MiB. GPU 0 has a total capacity of 23.56 GiB of which 21.75 MiB is free. Including non-PyTorch "
    "memory, this process has 23.50 GiB memory in use."
)

MODE = os.environ.get("FAKE_VLLM_MODE", "ok")
_oom_done = threading.Event()


def refuse(_request: dict[str, Any]) -> tuple[int, Any] | None:
    """``oom_on_request``: the first completion logs a CUDA OOM and is answered with HTTP 500."""
    if MODE != "oom_on_request" or _oom_done.is_set():
        return None
    _oom_done.set()
    log(OOM_LINE)
    return 500, {"object": "error", "message": "EngineCore encountered an issue"}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--served-model-name", default=None)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args, _rest = parser.parse_known_args()
    if os.environ.get("FAKE_VLLM_PIDFILE"):
        with open(os.environ["FAKE_VLLM_PIDFILE"], "w") as out:
            out.write(str(os.getpid()))
    for line in LOADING_LINES:
        log(line)
    time.sleep(float(os.environ.get("FAKE_VLLM_STARTUP_DELAY", "0.3")))
    if MODE == "no_kv_memory":
        for line in NO_KV_MEMORY_LINES:
            log(line)
        return 1
    for line in READY_LINES:
        log(line)
    fake = FakeServer(
        model=args.served_model_name or args.model, name="fake vllm", record=os.environ.get("FAKE_VLLM_RECORD"),
        token_delay=float(os.environ.get("FAKE_VLLM_TOKEN_DELAY", "0.005")), refuse=refuse,
    )  # fmt: skip
    log(f"fake vllm: Uvicorn running on http://{args.host}:{args.port}")
    fake.serve_forever(args.host, args.port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
