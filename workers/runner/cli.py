"""``vramplan-measure -- CMD ARGS...``: run any command under vramplan's memory sampling, print one JSON object.

Needs no Django and no database: install the package on any machine. The command runs in a child
process (own process group, scrubbed environment); its output goes to stderr so that stdout holds
the measurement document alone. ``--upload URL --order ID`` attaches the result to an order with an
order-scoped upload token (``--token`` or ``$VRAMPLAN_UPLOAD_TOKEN``; ``POST /api/v1/orders/ID/upload-token/``
issues one), never a user's password or API token.

Exit status: the command's own (128 + N when signal N killed it), or 2 when the upload failed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import Any, NoReturn

from .execute import RunOptions, run_measured
from .sampling import write_timeline_csv

TOKEN_ENV = "VRAMPLAN_UPLOAD_TOKEN"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="vramplan-measure",
        description="Run CMD and measure its peak memory through every view this machine has "
        "(NVML device, PyTorch allocator when the command reports it, host RSS).",
        epilog="Example: vramplan-measure --timeline t.csv -- python3 train.py --batch 8",
    )
    parser.add_argument("--interval", type=float, default=0.002, metavar="SECONDS",
                        help="NVML sampling interval (default 0.002 s)")  # fmt: skip
    parser.add_argument("--host-interval", type=float, default=0.05, metavar="SECONDS",
                        help="host RSS sampling interval (default 0.05 s)")  # fmt: skip
    parser.add_argument("--time-limit", type=float, default=None, metavar="SECONDS",
                        help="kill the command's process group after this long")  # fmt: skip
    parser.add_argument("--devices", default=None, metavar="UUID[,UUID...]",
                        help="sample only these GPUs (NVML UUIDs); default all")  # fmt: skip
    parser.add_argument("--timeline", default=None, metavar="FILE", help="write the sampled timeline as CSV")
    parser.add_argument(
        "--upload", default=None, metavar="URL", help="vramplan base URL, e.g. https://vramplan.example"
    )
    parser.add_argument("--order", type=int, default=None, metavar="ID", help="the order to attach the result to")
    parser.add_argument("--token", default=None, help=f"order upload token (default ${TOKEN_ENV})")
    parser.add_argument("--quiet", action="store_true", help="no progress line on a terminal")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- CMD ARGS...")
    return parser


def _check(parser: argparse.ArgumentParser, args: argparse.Namespace) -> list[str]:
    command: list[str] = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to measure after --, e.g. vramplan-measure -- python3 job.py")
    if not 0.0005 <= args.interval <= 10:
        parser.error("--interval must be between 0.0005 and 10 seconds")
    if not 0.005 <= args.host_interval <= 60:
        parser.error("--host-interval must be between 0.005 and 60 seconds")
    if args.time_limit is not None and args.time_limit <= 0:
        parser.error("--time-limit must be a positive number of seconds")
    if (args.upload is None) != (args.order is None):
        parser.error("--upload and --order go together")
    if args.upload is not None and not (args.token or os.environ.get(TOKEN_ENV)):
        parser.error(f"--upload needs an order upload token: --token or ${TOKEN_ENV}")
    if args.upload is not None and not args.upload.startswith(("http://", "https://")):
        parser.error("--upload must be an http:// or https:// URL")
    return command


class _Refused(Exception):
    """What the parser or its checks would have printed before exiting with status 2."""


def argv_problems(argv: Sequence[str]) -> list[str]:
    """What ``vramplan-measure ARGV`` would refuse (its arguments after the program name): its parser's or its
    checks' message, as it would print it; empty when it would run the command."""
    parser = _parser()

    def refuse(message: str) -> NoReturn:
        raise _Refused(message)

    parser.error = refuse  # type: ignore[method-assign]
    try:
        _check(parser, parser.parse_args(list(argv)))
    except _Refused as exc:
        return [str(exc)]
    return []


class _ProgressLine:
    """``[12.3 s] phase 40%`` on stderr, redrawn in place, when stderr is a terminal."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.phase = "running"
        self.percent: float | None = None
        self.started = time.monotonic()
        self.done = threading.Event()

    def update(self, phase: str, percent: float) -> None:
        self.phase, self.percent = phase, percent

    def _draw(self) -> None:
        while not self.done.wait(0.5):
            pct = f" {self.percent:.0f}%" if self.percent is not None else ""
            sys.stderr.write(f"\r[{time.monotonic() - self.started:7.1f} s] {self.phase}{pct}\x1b[K")
            sys.stderr.flush()
        sys.stderr.write("\r\x1b[K")

    def __enter__(self) -> _ProgressLine:
        if self.enabled:
            threading.Thread(target=self._draw, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.done.set()


def upload(base_url: str, order: int, token: str, document: dict[str, Any], timeout_s: float = 30) -> dict[str, Any]:
    """POST the document to the order; the same run posted twice is stored once (its run_id)."""
    url = f"{base_url.rstrip('/')}/api/v1/orders/{order}/measurements/"
    request = urllib.request.Request(
        url,
        data=json.dumps(document).encode(),
        method="POST",
        headers={"Content-Type": "application/json", "Authorization": f"Upload {token}"},
    )
    with urllib.request.urlopen(request, timeout=timeout_s) as response:
        answer: dict[str, Any] = json.loads(response.read() or b"{}")
    return answer


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    command = _check(parser, args)
    devices = [d.strip() for d in args.devices.split(",") if d.strip()] if args.devices else None
    options = RunOptions(
        argv=command,
        time_limit_s=args.time_limit,
        interval_s=args.interval,
        host_interval_s=args.host_interval,
        device_uuids=devices,
        pass_output=True,
        scrub_env=False,  # the user's own command, in the user's own environment
        conditions={"tool": "vramplan-measure"},
    )
    with _ProgressLine(enabled=sys.stderr.isatty() and not args.quiet) as line:
        document = run_measured(options, on_progress=line.update)
    print(json.dumps(document, indent=2))
    if args.timeline:
        write_timeline_csv(args.timeline, document["timeline"])
    status = document["exit_code"] if document["exit_code"] is not None else 128 + (document["signal"] or 0)
    if args.upload:
        try:
            answer = upload(args.upload, args.order, args.token or os.environ[TOKEN_ENV], document)
        except (urllib.error.URLError, OSError, ValueError) as exc:
            detail = exc.read().decode(errors="replace")[:2000] if isinstance(exc, urllib.error.HTTPError) else ""
            print(f"vramplan-measure: upload to order {args.order} failed: {exc} {detail}".strip(), file=sys.stderr)
            return 2
        print(f"vramplan-measure: attached to order {args.order} as measurement {answer.get('id')}", file=sys.stderr)
    return int(status)


if __name__ == "__main__":
    sys.exit(main())
