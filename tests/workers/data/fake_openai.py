"""A stand-in OpenAI-compatible completions server for the fake engines (tests only; no model, no GPU).

``fake_vllm`` and ``fake_sglang`` print their engine's real start-up lines and then serve with this:

* ``GET /health`` → what ``health()`` says (200 unless the engine is still "warming up");
* ``GET`` of each extra route (``/v1/models``; SGLang's ``/server_info``) → its JSON;
* ``POST /v1/completions`` with ``"stream": true`` → ``max_tokens`` SSE chunks (``data: {...}``), a usage chunk
  when ``stream_options.include_usage`` is set, then ``data: [DONE]``; or the engine's HTTP error
  (``refuse``), or the engine's error event in the stream (``stream_error``, as SGLang reports an aborted request).

Each completion request can be recorded as one JSON line (prompt length, first ids, parameters).
Imported as ``tests.workers.data.fake_openai``: the repository root is on the fakes' ``PYTHONPATH``.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = tuple[int, Any]  # (HTTP status, JSON body)


def log(line: str) -> None:
    """A line of the engine's log (stderr, which the program under test sends to its log file)."""
    print(line, file=sys.stderr, flush=True)


def _no_refusal(_request: dict[str, Any]) -> Reply | None:
    return None


def _no_stream_error(_request: dict[str, Any]) -> dict[str, Any] | None:
    return None


@dataclass
class FakeServer:
    """What the fake engine serves; the hooks let each engine fail the way the real one does."""

    model: str
    name: str = "fake"
    token_delay: float = 0.005
    record: str | None = None
    health: Callable[[], int] = lambda: 200
    routes: dict[str, Callable[[], Reply]] = field(default_factory=dict)
    refuse: Callable[[dict[str, Any]], Reply | None] = _no_refusal
    stream_error: Callable[[dict[str, Any]], dict[str, Any] | None] = _no_stream_error
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def serve_forever(self, host: str, port: int) -> None:
        server = ThreadingHTTPServer((host, port), _handler(self))
        server.daemon_threads = True
        server.serve_forever()

    def remember(self, request: dict[str, Any], prompt: list[Any]) -> None:
        if not self.record:
            return
        entry = {key: request.get(key) for key in ("max_tokens", "temperature", "ignore_eos", "stream")}
        entry.update(prompt_len=len(prompt), first_ids=prompt[:4], all_ints=all(isinstance(t, int) for t in prompt),
                     stream_options=request.get("stream_options"))  # fmt: skip
        with self._lock, open(self.record, "a") as out:
            out.write(json.dumps(entry) + "\n")


def _handler(fake: FakeServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = f"{fake.name}/0"

        def log_message(self, format: str, *args: object) -> None:
            log(f"{fake.name}: " + format % args)

        def _json(self, status: int, value: object) -> None:
            body = json.dumps(value).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _event(self, value: object) -> None:
            self.wfile.write(f"data: {value if isinstance(value, str) else json.dumps(value)}\n\n".encode())
            self.wfile.flush()

        def do_GET(self) -> None:
            if self.path == "/health":
                self.send_response(fake.health())
                self.send_header("Content-Length", "0")
                self.end_headers()
            elif self.path == "/v1/models":
                self._json(200, {"object": "list", "data": [{"id": fake.model, "object": "model"}]})
            elif self.path in fake.routes:
                self._json(*fake.routes[self.path]())
            else:
                self._json(404, {"error": "not found"})

        def do_POST(self) -> None:
            if self.path != "/v1/completions":
                self._json(404, {"error": "not found"})
                return
            try:
                request = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
            except ValueError:
                self._json(400, {"object": "error", "message": "bad JSON"})
                return
            prompt = request.get("prompt")
            if request.get("model") != fake.model or not isinstance(prompt, list) or not prompt:
                self._json(400, {"object": "error", "message": "unknown model or prompt not a token list"})
                return
            fake.remember(request, prompt)
            refusal = fake.refuse(request)
            if refusal is not None:
                self._json(*refusal)
                return
            self._stream(request, prompt)

        def _stream(self, request: dict[str, Any], prompt: list[Any]) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            error = fake.stream_error(request)
            max_tokens = int(request.get("max_tokens") or 16)
            for index in range(0 if error else max_tokens):
                time.sleep(fake.token_delay)
                finish = "length" if index == max_tokens - 1 else None
                choice = {"index": 0, "text": " tok", "logprobs": None, "finish_reason": finish}
                self._event({"id": "cmpl-fake", "object": "text_completion", "model": fake.model, "choices": [choice]})
            if error:
                self._event(error)
            elif (request.get("stream_options") or {}).get("include_usage"):
                usage = {"prompt_tokens": len(prompt), "completion_tokens": max_tokens,
                         "total_tokens": len(prompt) + max_tokens}  # fmt: skip
                self._event({"choices": [], "usage": usage})
            self._event("[DONE]")

    return Handler
