"""Stand-in for ``python -m sglang.launch_server`` (tests only; no model, no GPU).

Takes the flags ``workers.runner.programs.sglang_serve`` passes, by SGLang 0.5.10.post1's names and choices
(server_args.py; an unknown flag or value exits 2, so a wrong flag fails the test), starts a child process
in its group as SGLang starts its scheduler, prints SGLang's start-up lines to stderr with SGLang's log prefix
(``[%(asctime)s] %(message)s``, utils/common.py:1137), then serves on loopback
(``tests/workers/data/fake_openai.py``): ``GET /health`` → 503 while it "warms up", then 200 and "The server
is fired up and ready to roll!" (entrypoints/http_server.py:476-534, 1929); ``GET /server_info``; a streaming
``POST /v1/completions``.

``FAKE_SGLANG_MODE``: ``ok``; ``not_enough_memory`` (SGLang's refusal to start, then it kills itself);
``pool_exhausted`` (the first completion ends the scheduler with "Prefill out of memory", and the server
dies); ``short_pool`` (a pool of 40 tokens: longer prompts get SGLang's "exceeds the maximum allowed length"
error event). See the README next to the package.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any

from tests.workers.data.fake_openai import FakeServer, log

from . import __version__

MODE = os.environ.get("FAKE_SGLANG_MODE", "ok")
SHORT_POOL_TOKENS = 40

# xorbitsai/inference#3481 (SGLang, one GPU, Qwen3-14B; benchmarks/sglang_published/records.json), as quoted there
LOADING_LINES = (
    "Load weight end. type=Qwen3ForCausalLM, dtype=torch.bfloat16, avail mem=19.67 GB, mem usage=27.57 GB.",
    "KV Cache is allocated. #tokens: 91749, K size: 7.00 GB, V size: 7.00 GB",
    "Memory pool end. avail mem=5.27 GB",
)
POOL_TOKENS = 91749
# the same run; the elided middle written out from model_runner.py:2446
GRAPH_BEGIN_LINE = "Capture cuda graph begin. This can take up to several minutes. avail mem=4.64 GB"
# sgl-project/sglang PR #11830 (a B200 run): the end of a CUDA-graph capture
GRAPH_END_LINE = "Capture cuda graph end. Time elapsed: 5.37 s. mem usage=1.44 GB. avail mem=38.05 GB."
# sgl-project/sglang#4330 (SGLang 0.4.3.post2, L40S): the refusal; 0.5.10.post1 appends the fraction
# (model_executor/model_runner_kv_cache_mixin.py:55-60)
NOT_ENOUGH_MEMORY = "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."
# entrypoints/engine.py:1152-1154 and managers/scheduler.py:3620
SIGQUIT_LINE = "Received sigquit from a child process. It usually means the child failed."
# mem_cache/common.py:284-290 (the available/evictable line elided)
PREFILL_OOM = "Prefill out of memory. Try to lower your batch size."


def sglang_log(message: str) -> None:
    log(f"[{time.strftime('%Y-%m-%d %H:%M:%S')}] {message}")


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="sglang.launch_server")
    add = parser.add_argument
    add("--model-path", required=True)
    add("--served-model-name", default=None)
    add("--host", default="127.0.0.1")
    add("--port", type=int, default=30000)
    add("--tp-size", type=int, default=1)
    add("--pp-size", type=int, default=1)
    add("--context-length", type=int, default=None)
    add("--mem-fraction-static", type=float, default=None)
    add("--max-running-requests", type=int, default=None)
    add("--chunked-prefill-size", type=int, default=None)
    add("--cuda-graph-max-bs", type=int, default=None)
    add("--page-size", type=int, default=None)
    add("--dtype", choices=["auto", "half", "float16", "bfloat16", "float", "float32"], default="auto")
    add("--kv-cache-dtype", choices=["auto", "fp8_e5m2", "fp8_e4m3", "bf16", "bfloat16", "fp4_e2m1"], default="auto")
    return parser.parse_args()


def server_args_line(args: argparse.Namespace) -> str:
    """entrypoints/engine.py:648's ``f"{server_args=}"``, for the settings this fake takes (defaults resolved)."""
    shown = {
        "model_path": args.model_path, "dtype": args.dtype, "kv_cache_dtype": args.kv_cache_dtype,
        "context_length": args.context_length, "mem_fraction_static": args.mem_fraction_static or 0.83,
        "max_running_requests": args.max_running_requests, "tp_size": args.tp_size, "pp_size": args.pp_size,
    }  # fmt: skip
    return "server_args=ServerArgs(" + ", ".join(f"{k}={v!r}" for k, v in shown.items()) + ")"


def limits(args: argparse.Namespace) -> dict[str, int]:
    """The scheduler's limits (managers/tp_worker.py:288-306, model_runner_kv_cache_mixin.py:840-859)."""
    pool = SHORT_POOL_TOKENS if MODE == "short_pool" else POOL_TOKENS
    context = args.context_length or 40960
    running = min(args.max_running_requests or 2048, max(min(int(pool / context * 512), 4096), 2048))
    return {"pool": pool, "context": context, "running": running,
            "max_req_input_len": min(context - 1, pool - 1) - 5}  # fmt: skip


def scheduler_line(args: argparse.Namespace) -> str:
    """managers/scheduler.py:686-697."""
    got = limits(args)
    return (
        f"max_total_num_tokens={got['pool']}, chunked_prefill_size={args.chunked_prefill_size or 8192}, "
        f"max_prefill_tokens=16384, max_running_requests={got['running']}, context_len={got['context']}, "
        f"available_gpu_mem=38.05 GB"
    )


def start_scheduler_child() -> None:
    """A process in the server's group, as SGLang's scheduler is: a cancelled job must stop it too."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    if os.environ.get("FAKE_SGLANG_CHILD_PIDFILE"):
        with open(os.environ["FAKE_SGLANG_CHILD_PIDFILE"], "w") as out:
            out.write(str(child.pid))


def die_like_sglang(reason: list[str]) -> None:
    """The scheduler's exception, then SIGQUIT → kill_process_tree of the whole server (engine.py:1150-1155)."""
    sglang_log("Scheduler hit an exception: Traceback (most recent call last):")
    for line in reason:
        log(line)
    sglang_log(SIGQUIT_LINE)
    os.killpg(os.getpgrp(), signal.SIGKILL)


class Behaviour:
    """How this fake SGLang answers: warm-up, /server_info, and the failures of its mode."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.opened = time.monotonic()
        self.ready = threading.Event()
        self.warmup_s = float(os.environ.get("FAKE_SGLANG_WARMUP", "0.5"))

    def health(self) -> int:
        if time.monotonic() - self.opened < self.warmup_s:
            return 503  # ServerStatus.Starting until the warm-up request ran
        if not self.ready.is_set():
            self.ready.set()
            sglang_log("The server is fired up and ready to roll!")
        return 200

    def server_info(self) -> tuple[int, Any]:
        got, args = limits(self.args), self.args
        return 200, {
            "version": __version__, "max_total_num_tokens": got["pool"], "max_req_input_len": got["max_req_input_len"],
            "context_length": args.context_length, "mem_fraction_static": args.mem_fraction_static or 0.83,
            "max_running_requests": got["running"], "internal_states": [{}],
        }  # fmt: skip

    def refuse(self, request: dict[str, Any]) -> tuple[int, Any] | None:
        if MODE == "pool_exhausted":
            die_like_sglang([f"RuntimeError: {PREFILL_OOM}", f"Try to allocate {len(request['prompt'])} tokens."])
        return None

    def stream_error(self, request: dict[str, Any]) -> dict[str, Any] | None:
        """managers/utils.py:136-140 via serving_completions.py:296-308 (an abort from the scheduler)."""
        allowed = limits(self.args)["max_req_input_len"]
        if len(request["prompt"]) < allowed:
            return None
        message = (f"Input length ({len(request['prompt'])} tokens) exceeds the maximum allowed length ({allowed} "
                   "tokens). Use a shorter input or enable --allow-auto-truncate.")  # fmt: skip
        return {"error": {"object": "error", "message": message, "type": "BadRequest", "param": None, "code": 400}}


def main() -> None:
    """Start up as SGLang does (or fail as it does in this mode), then serve until killed."""
    args = parse()
    if os.environ.get("FAKE_SGLANG_ARGV"):
        with open(os.environ["FAKE_SGLANG_ARGV"], "w") as out:
            json.dump(sys.argv[1:], out)
    if os.environ.get("FAKE_SGLANG_PIDFILE"):
        with open(os.environ["FAKE_SGLANG_PIDFILE"], "w") as out:
            out.write(str(os.getpid()))
    start_scheduler_child()
    sglang_log(server_args_line(args))
    sglang_log(LOADING_LINES[0])
    time.sleep(float(os.environ.get("FAKE_SGLANG_STARTUP_DELAY", "0.3")))
    if MODE == "not_enough_memory":
        fraction = args.mem_fraction_static
        die_like_sglang([NOT_ENOUGH_MEMORY + (f" Current value: mem_fraction_static={fraction}" if fraction else "")])
    for line in (*LOADING_LINES[1:], GRAPH_BEGIN_LINE, GRAPH_END_LINE, scheduler_line(args)):
        sglang_log(line)
    behaviour = Behaviour(args)
    fake = FakeServer(
        model=args.served_model_name or args.model_path, name="fake sglang",
        record=os.environ.get("FAKE_SGLANG_RECORD"), health=behaviour.health,
        routes={"/server_info": behaviour.server_info}, refuse=behaviour.refuse, stream_error=behaviour.stream_error,
    )  # fmt: skip
    log(f"INFO:     Uvicorn running on http://{args.host}:{args.port} (Press CTRL+C to quit)")  # uvicorn's own format
    fake.serve_forever(args.host, args.port)


if __name__ == "__main__":
    main()
