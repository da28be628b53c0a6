"""Load benchmark (issue 9, item 4): the HTTP API under gunicorn, and acceptance jobs drained by Celery workers.

    python -m benchmarks.load [--part http|jobs|all] [--duration 10] [--endpoints NAME ...] [--jobs 1000]
                              [--job-workers 4] [--program tiny|synthetic] [--json FILE]

Needs PostgreSQL, Redis and ``wrk`` (``apt-get install wrk``); ``--program synthetic`` jobs need torch
(``pip install 'vramplan[node]'``). Databases and broker (created, migrated and loaded with the catalog by
``manage.py migrate`` and ``manage.py loadcatalog`` when needed):

* ``--database-url`` (default ``$DATABASE_URL``) for the HTTP part, ``--jobs-database-url`` (default: the same
  name with ``_jobs`` appended) for the jobs, ``--broker-url`` (default ``$CELERY_BROKER_URL``, Redis).

HTTP part. gunicorn serves ``vramplan.wsgi`` with production settings (DEBUG off) plus ``/bench/ping``, a
trivial DRF endpoint (token authentication, permission, throttle, JSON) that exists only in the benchmark
(``benchmarks.load.settings`` → ``benchmarks.load.urls``); every ``*_THROTTLE_RATE`` is set to 100,000,000/s
so no request is throttled. gunicorn runs 3 sync workers by default: the work is CPU-bound Python (threads
share one GIL), 2 cores are shared with wrk and PostgreSQL, and a third process covers the moments one
waits on the database (``--gunicorn-workers``, ``--gunicorn-threads`` > 1 switches to gthread). wrk drives
one endpoint at a time for ``--duration`` seconds with ``--connections`` (8) open connections, from
``wrk.lua`` (method, JSON body and the ``Authorization: Token`` header): ``ping`` first and again last,
then ``estimate`` (POST /api/v1/estimate, fixtures/workloads/vllm-llama-3.1-8b-chat.json), ``recommend``
(POST /api/v1/recommend, the Llama-3.1-70B workload of benchmarks/recommend_speed.py over the full
catalog, default top), ``configurations`` and ``accelerators`` (the catalog lists, first page) and
``job-status`` (GET an acceptance job of the benchmark user). Prints the machine's load average before
and after (other work on the machine moves every figure), then per endpoint: req/s, p50 and p99 in ms,
errors (socket errors and non-2xx/3xx answers), the ratio of its req/s to ping's (the mean of both ping
runs), the CPU milliseconds gunicorn's workers spent per request (psutil; barely moved by other load: 2
cores / CPU ms is the ceiling), and "within"/"OUTSIDE" for the targets, each against ping in the same run:
estimate >= 0.6 x ping's req/s with p99 < 150 ms, recommend >= 0.15 x ping's with p99 < 400 ms. Then, on a gunicorn
that keeps the per-account limit on recommendations (one at a time, the default), another account's ping alone and
beside the benchmark user's training recommendations on every connection: within when its p99 stays below the time of
one such recommendation (none of its requests waited behind one). Then the SQL
queries of one request per catalog list (every row on one page) on the catalog as loaded and with every architecture,
accelerator and configuration copied (twice the rows, rolled back after): "within" when the count does not grow.

Jobs part (``benchmarks.load.jobs``). ``--jobs`` tiny CPU acceptance jobs (one order each) drained by
``--job-workers`` real Celery workers, each on its own node; prints jobs/s (finished jobs over the time from
the first dispatch to the last final state), the count of each final state, lost (not final, or succeeded
without a measurement), duplicated (a second measurement for a job or its order), orders whose decision is
not their job's measurement, retried jobs, jobs per node and per program. ``--program tiny`` (default): each
job runs ``loadbench-tiny``, a staff program the benchmark registers in its own database (a Python one-liner
holding 16 MiB for 0.25 s; no torch), in a real child under the real sampler, and stores a real measurement
(host RSS about 28 MB) that accepts its order. Measured 2026-12-01 on the quiet machine (2 cores) with
``python -m benchmarks.load --part jobs --jobs 1000``: 1,000 jobs, 4 workers, 10.0 jobs/s (99.7 s), succeeded
1000, lost 0, duplicated 0, decision inconsistent 0, retried 0, 249 to 252 jobs per node (README, "Load", for
the dispatch changes that took it from 1.84 jobs/s).
``--program synthetic``: the built-in synthetic workload, whose child imports torch and runs the model
(40 jobs, 4 workers: 0.459 jobs/s in 87.1 s, succeeded 40, lost 0, duplicated 0, 10 jobs per node;
``--jobs 40`` takes about a minute and a half).

Exit status: 1 when any job was lost or duplicated, did not succeed, or any request failed; 0 otherwise
(a missed throughput target is printed as OUTSIDE, not an error: the figures depend on the machine).
``--json FILE`` writes every figure as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from .common import django_env, prepare_database, run

PROGRAMS = ("tiny", "synthetic")  # benchmarks.load.jobs.PROGRAMS (not imported: that module imports Django)
#: Seconds per job per worker the default --jobs-timeout allows.
JOB_SECONDS = {"tiny": 3.0, "synthetic": 30.0}
ENDPOINT_NAMES = ("ping", "estimate", "recommend", "recommend-new", "configurations", "accelerators", "job-status")


def jobs_url(database_url: str) -> str:
    parts = urlsplit(database_url)
    return urlunsplit(parts._replace(path=parts.path.rstrip("/") + "_jobs"))


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.load", description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=("http", "jobs", "all"), default="all")
    parser.add_argument("--database-url", default=os.environ.get("DATABASE_URL", ""))
    parser.add_argument("--jobs-database-url", default="", help="default: the HTTP database's name + _jobs")
    parser.add_argument("--broker-url", default=os.environ.get("CELERY_BROKER_URL", ""))
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per endpoint (default 10)")
    parser.add_argument("--endpoints", nargs="+", choices=ENDPOINT_NAMES, default=list(ENDPOINT_NAMES))
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--wrk-threads", type=int, default=2)
    parser.add_argument("--gunicorn-workers", type=int, default=3)
    parser.add_argument("--gunicorn-threads", type=int, default=1)
    parser.add_argument("--no-queries", action="store_true", help="skip the query counts of the catalog lists")
    parser.add_argument("--jobs", type=int, default=1000, help="acceptance jobs (default 1000)")
    parser.add_argument("--job-workers", type=int, default=4)
    parser.add_argument("--program", choices=PROGRAMS, default="tiny",
                        help="what jobs run: tiny (a staff program, default), synthetic (torch)")  # fmt: skip
    parser.add_argument("--jobs-timeout", type=float, default=0.0,
                        help="seconds (default per job per worker: tiny 3, synthetic 30; at least 120)")  # fmt: skip
    parser.add_argument("--json", type=Path, help="also write every figure to this file")
    args = parser.parse_args(argv)
    if not args.database_url:
        parser.error("give --database-url or set DATABASE_URL (postgres://USER@HOST:PORT/NAME)")
    args.jobs_database_url = args.jobs_database_url or jobs_url(args.database_url)
    if args.part != "http" and not args.broker_url.startswith(("redis://", "rediss://")):
        parser.error("the jobs part needs a Redis broker: give --broker-url or set CELERY_BROKER_URL=redis://...")
    if args.jobs < 1 or args.job_workers < 1:
        parser.error("--jobs and --job-workers must be at least 1")
    return args


def run_jobs(args: argparse.Namespace) -> dict[str, Any]:
    prepare_database(args.jobs_database_url, args.broker_url)
    timeout_s = args.jobs_timeout or max(120.0, JOB_SECONDS[args.program] * args.jobs / args.job_workers)
    env = django_env(args.jobs_database_url, args.broker_url)
    argv = [sys.executable, "-m", "benchmarks.load.jobs", str(args.jobs), str(args.job_workers), str(timeout_s),
            args.program]  # fmt: skip
    out = run(argv, env=env, timeout=timeout_s + 300)
    return json.loads(out.strip().splitlines()[-1])


def print_jobs(result: dict[str, Any]) -> None:
    states = ", ".join(f"{state} {n}" for state, n in result["states"].items())
    print(f"Jobs: {result['count']} tiny CPU acceptance jobs ({result['program']}), "
          f"{result['workers']} Celery workers (one node each)")  # fmt: skip
    print(f"  jobs/s {result['jobs_per_s']:.3f}  (wall {result['wall_s']:.1f} s)")
    print(f"  final states: {states}")
    print(f"  lost {result['lost']}  duplicated {result['duplicated']}  "
          f"decision inconsistent {result['decision_inconsistent']}  retried {result['retried']}")  # fmt: skip
    print(f"  per node: {', '.join(f'{k}: {v}' for k, v in sorted(result['per_node'].items(), key=str))}")
    print(f"  per program: {', '.join(f'{slug}: {n}' for slug, n in result['per_program'].items())}")
    if result["errors"]:
        print(f"  errors: {result['errors']}")
    if "worker_log_tail" in result:
        print(f"  first worker's log (tail):\n{result['worker_log_tail']}")


def main(argv: list[str]) -> int:
    from .web import print_http, run_http

    args = parse(argv)
    results: dict[str, Any] = {}
    failed = False
    if args.part in ("http", "all"):
        results["http"] = run_http(args)
        print_http(results["http"])
        held = results["http"]["held"]
        failed |= any(r["errors"] for r in results["http"]["endpoints"]) or bool(held["alone"]["errors"])
        failed |= bool(held["beside"]["errors"])
    if args.part in ("jobs", "all"):
        results["jobs"] = run_jobs(args)
        print_jobs(results["jobs"])
        jobs = results["jobs"]
        failed |= bool(jobs["lost"] or jobs["duplicated"] or jobs["states"]["succeeded"] != jobs["count"])
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, default=str))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
