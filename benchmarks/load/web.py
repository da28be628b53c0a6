"""The HTTP part: gunicorn on loopback against PostgreSQL, driven endpoint by endpoint with wrk."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .common import ROOT, django_env, django_json, prepare_database, stop, wait_until

WRK_SCRIPT = Path(__file__).with_name("wrk.lua")
ESTIMATE_BODY = ROOT / "fixtures" / "workloads" / "vllm-llama-3.1-8b-chat.json"
# the slowest recommendation of the example workloads: 70B training over the whole catalog, every plan searched
TRAINING_BODY = ROOT / "fixtures" / "workloads" / "train-llama-3.1-70b-tp4-pp4.json"
MS = 1000.0


@dataclass(frozen=True)
class Endpoint:
    name: str
    method: str
    path: str
    body: str | None = None  # JSON text sent as the body
    vary: bool = False  # every request a workload not asked before (its name prefixed with a count; wrk.lua)

    def label(self) -> str:
        return f"{self.method} {self.path}"


def endpoints(job_id: int) -> dict[str, Endpoint]:
    """Every endpoint measured, ``ping`` (the stack's ceiling) first."""
    from benchmarks.recommend_speed import WORKLOAD

    return {
        e.name: e
        for e in (
            Endpoint("ping", "GET", "/bench/ping"),
            Endpoint("estimate", "POST", "/api/v1/estimate", ESTIMATE_BODY.read_text()),
            Endpoint("recommend", "POST", "/api/v1/recommend", json.dumps(WORKLOAD)),
            # the same, each request a workload this process has not recommended before: nothing kept is found
            Endpoint("recommend-new", "POST", "/api/v1/recommend", json.dumps(WORKLOAD), vary=True),
            Endpoint("configurations", "GET", "/api/v1/configurations/"),
            Endpoint("accelerators", "GET", "/api/v1/accelerators/"),
            Endpoint("job-status", "GET", f"/api/v1/acceptance-jobs/{job_id}/"),
        )
    }


#: (least req/s as a share of ping's in the same run, p99 below, in ms) per endpoint with a target (issue 16): absolute
#: rates move with the machine (ping ran 310-342 req/s on one machine, 776 on another), so each endpoint is judged
#: against ping measured beside it
TARGETS = {"estimate": (0.6, 150.0), "recommend": (0.15, 400.0), "recommend-new": (0.15, 400.0)}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Server:
    process: subprocess.Popen
    base_url: str
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


def start_gunicorn(env: dict[str, str], workers: int, threads: int, folder: Path) -> Server:
    port = free_port()
    log_path = folder / "gunicorn.log"
    worker_class = (
        ["--worker-class", "gthread", "--threads", str(threads)] if threads > 1 else ["--worker-class", "sync"]
    )
    argv = [sys.executable, "-m", "gunicorn", "vramplan.wsgi:application", "--bind", f"127.0.0.1:{port}",
            "--workers", str(workers), *worker_class, "--keep-alive", "5", "--log-level", "warning",
            "--error-logfile", str(log_path), "--worker-tmp-dir", str(folder)]  # fmt: skip
    process = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
                               start_new_session=True)  # fmt: skip
    return Server(process, f"http://127.0.0.1:{port}", log_path)


def request(server: Server, endpoint: Endpoint, token: str, timeout_s: float = 30.0, name_prefix: str = "") -> int:
    """One request's status (0: no answer); ``name_prefix`` prefixes the body's workload name, as ``vary`` does."""
    body = endpoint.body
    if body is not None and name_prefix:
        body = json.dumps({**json.loads(body), "name": name_prefix + json.loads(body)["name"]})
    data = body.encode() if body is not None else None
    req = urllib.request.Request(server.base_url + endpoint.path, data=data, method=endpoint.method)
    req.add_header("Authorization", f"Token {token}")
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as response:
            response.read()
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except OSError:
        return 0


def server_cpu_s(server: Server) -> float:
    """CPU seconds (user + system) used so far by gunicorn's worker processes (the master does no requests)."""
    import psutil

    total = 0.0
    for child in psutil.Process(server.process.pid).children(recursive=True):
        try:
            times = child.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += times.user + times.system
    return total


def start_wrk(server: Server, endpoint: Endpoint, token: str, *, duration_s: float, connections: int,
              threads: int, folder: Path, tag: str = "") -> tuple[subprocess.Popen[str], Path]:  # fmt: skip
    """A wrk run started in the background (``duration_s`` seconds, ``connections`` open connections); its process
    and the file its summary goes to (``finish_wrk``)."""
    name = f"{endpoint.name}{tag}"
    out = folder / f"wrk-{name}.json"
    out.unlink(missing_ok=True)
    env = {"BENCH_METHOD": endpoint.method, "BENCH_TOKEN": token, "BENCH_OUT": str(out), "BENCH_BODY": "",
           "BENCH_VARY": "1" if endpoint.vary else "", "PATH": "/usr/bin:/bin"}  # fmt: skip
    if endpoint.body is not None:
        body = folder / f"body-{name}.json"
        body.write_text(endpoint.body)
        env["BENCH_BODY"] = str(body)
    seconds = max(1, round(duration_s))
    argv = [wrk_binary(), f"-t{min(threads, connections)}", f"-c{connections}", f"-d{seconds}s", "--timeout", "10s",
            "-s", str(WRK_SCRIPT), server.base_url + endpoint.path]  # fmt: skip
    process = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return process, out


def finish_wrk(process: subprocess.Popen[str], out: Path, timeout_s: float) -> dict[str, Any]:
    """The JSON summary of a wrk run started by ``start_wrk``, once it ends."""
    stdout, stderr = process.communicate(timeout=timeout_s)
    if process.returncode != 0 or not out.exists():
        raise SystemExit(f"wrk failed ({process.returncode}):\n{stdout}\n{stderr}")
    return dict(json.loads(out.read_text()))


def run_wrk(server: Server, endpoint: Endpoint, token: str, *, duration_s: float, connections: int,
            threads: int, folder: Path) -> dict[str, Any]:  # fmt: skip
    """One bounded wrk run (``duration_s`` seconds, ``connections`` open connections); its summary, with the
    CPU time gunicorn's workers spent per request (what the machine's other load does not change much)."""
    cpu_before = server_cpu_s(server)
    process, out = start_wrk(server, endpoint, token, duration_s=duration_s, connections=connections,
                             threads=threads, folder=folder)  # fmt: skip
    raw = finish_wrk(process, out, max(1, round(duration_s)) + 60)
    cpu_s = server_cpu_s(server) - cpu_before
    seconds_run = raw["duration_us"] / 1e6
    latency = raw["latency_us"]
    return {
        "endpoint": endpoint.name,
        "request": endpoint.label(),
        "requests": raw["requests"],
        "seconds": round(seconds_run, 3),
        "rps": raw["requests"] / seconds_run if seconds_run else 0.0,
        "p50_ms": latency["p50"] / MS,
        "p99_ms": latency["p99"] / MS,
        "max_ms": latency["max"] / MS,
        "cpu_ms_per_request": cpu_s * MS / raw["requests"] if raw["requests"] else None,
        "errors": sum(raw["errors"].values()),
        "error_kinds": {kind: n for kind, n in raw["errors"].items() if n},
    }


def wrk_binary() -> str:
    path = shutil.which("wrk")
    if path is None:
        raise SystemExit("wrk is not installed: apt-get install wrk (Debian package wrk)")
    return path


def run_held(args: Any, env: dict[str, str], token: str, other_token: str, folder: Path) -> dict[str, Any]:
    """Another account's requests beside the benchmark user's slow ones (issue 16: "a slow training recommendation never
    holds other users' requests"). A gunicorn of its own keeps the product's per-account limit on recommendations
    (``VRAMPLAN_RECOMMENDATIONS_PER_ACCOUNT=1``, the default, which the other runs lift); the benchmark user sends the
    slowest example recommendation (70B training, every plan searched) on every connection, while the other account's
    ping is measured, once alone and once beside them. Within when the other account's p99 beside them stays below
    the time of one of those recommendations: no request of its waited behind one."""
    folder.mkdir()
    server = start_gunicorn({**env, "VRAMPLAN_RECOMMENDATIONS_PER_ACCOUNT": "1"}, args.gunicorn_workers,
                            args.gunicorn_threads, folder)  # fmt: skip
    ping = Endpoint("ping", "GET", "/bench/ping")
    # each a workload not asked before (vary), so each pays for its whole plan search: what a recommendation
    # that keeps a worker busy looks like (the same workload asked again is answered from what was kept)
    training = Endpoint("training-recommend", "POST", "/api/v1/recommend", TRAINING_BODY.read_text(), vary=True)
    options = {"duration_s": args.duration, "connections": args.connections, "threads": args.wrk_threads,
               "folder": folder}  # fmt: skip
    try:
        wait_until(lambda: request(server, ping, other_token, timeout_s=2) == 200, 60, "the held run's gunicorn")
        for _ in range(2 * args.gunicorn_workers * args.gunicorn_threads):  # warm every worker
            request(server, ping, other_token)
        timings = []
        for attempt in range(3):
            started = time.monotonic()
            if request(server, training, token, name_prefix=f"timed-{attempt}-") != 200:
                raise SystemExit(f"{training.label()} failed before the held run:\n{server.log()}")
            timings.append(time.monotonic() - started)
        one_s = sorted(timings)[1]
        alone = run_wrk(server, ping, other_token, **options)
        flood, flood_out = start_wrk(server, training, token, duration_s=args.duration + 2,
                                     connections=args.connections, threads=args.wrk_threads, folder=folder,
                                     tag="-flood")  # fmt: skip
        time.sleep(1.0)  # every flood connection has sent its first request
        beside = run_wrk(server, ping, other_token, **options)
        flood_raw = finish_wrk(flood, flood_out, args.duration + 70)
    finally:
        stop(server.process)
    return {
        "training_recommendation_ms": one_s * MS,
        "alone": alone,
        "beside": beside,
        "flood_requests": flood_raw["requests"],
        "flood_refused": flood_raw["errors"]["status"],  # 429s: one at a time per account
        "within": beside["errors"] == 0 and beside["p99_ms"] < one_s * MS,
    }


def run_http(args: Any) -> dict[str, Any]:
    """Set up the database, start gunicorn, measure each endpoint in turn (ping first and last)."""
    wrk_binary()
    prepare_database(args.database_url, args.broker_url)
    env = django_env(args.database_url, args.broker_url)
    fixture = django_json("fixture", env)
    token = str(fixture["token"])
    catalog = endpoints(int(fixture["job_id"]))
    chosen = [catalog[name] for name in args.endpoints]
    results: dict[str, Any] = {
        "load_average_before": os.getloadavg(),
        "cpus": os.cpu_count(),
        "gunicorn": {"workers": args.gunicorn_workers, "threads": args.gunicorn_threads},
        "wrk": {"connections": args.connections, "threads": args.wrk_threads, "duration_s": args.duration},
        "measurements": fixture["measurements"],
    }
    if not args.no_queries:
        results["queries"] = django_json("queries", env)
    results["calibration"] = django_json("calibration", env)
    with tempfile.TemporaryDirectory(prefix="vramplan-load-") as tmp:
        folder = Path(tmp)
        server = start_gunicorn(env, args.gunicorn_workers, args.gunicorn_threads, folder)
        try:
            ping = catalog["ping"]

            def ready() -> bool:
                if server.process.poll() is not None:
                    raise SystemExit(f"gunicorn exited with {server.process.returncode}:\n{server.log()}")
                return request(server, ping, token, timeout_s=2) == 200

            wait_until(ready, 60, f"gunicorn at {server.base_url}")
            for endpoint in {catalog["ping"], *chosen}:  # warm every worker: imports, presets, first queries
                for _ in range(2 * args.gunicorn_workers * args.gunicorn_threads):
                    status = request(server, endpoint, token)
                    if status != 200:
                        raise SystemExit(f"{endpoint.label()} answered {status} before the run:\n{server.log()}")
            options = {"duration_s": args.duration, "connections": args.connections, "threads": args.wrk_threads,
                       "folder": folder}  # fmt: skip
            runs = [run_wrk(server, ping, token, **options)]
            runs += [run_wrk(server, e, token, **options) for e in chosen if e.name != "ping"]
            if len(runs) > 1:
                runs.append(run_wrk(server, ping, token, **options))
        finally:
            stop(server.process)
        results["held"] = run_held(args, env, token, str(fixture["other_token"]), folder / "held")
    results["load_average_after"] = os.getloadavg()
    ceiling = [r["rps"] for r in runs if r["endpoint"] == "ping"]
    ping_rps = sum(ceiling) / len(ceiling)
    results["ping_rps"] = ceiling
    results["endpoints"] = []
    for r in runs[1:-1] if len(runs) > 1 else runs:
        r["ratio"] = r["rps"] / ping_rps if ping_rps else 0.0
        target = TARGETS.get(r["endpoint"])
        if target is not None:
            min_ratio, max_p99 = target
            r["target"] = f">= {min_ratio:g} x ping, p99 < {max_p99:.0f} ms"
            r["within"] = r["ratio"] >= min_ratio and r["p99_ms"] < max_p99 and r["errors"] == 0
        results["endpoints"].append(r)
    if len(runs) > 1:
        results["endpoints"].insert(0, {**runs[0], "ratio": runs[0]["rps"] / ping_rps})
        results["endpoints"].append({**runs[-1], "endpoint": "ping (again)", "ratio": runs[-1]["rps"] / ping_rps})
    return results


def print_http(results: dict[str, Any]) -> None:
    g, w = results["gunicorn"], results["wrk"]
    kind = f"gthread, {g['threads']} threads each" if g["threads"] > 1 else "sync"
    print(f"HTTP: gunicorn {g['workers']} workers ({kind}); wrk {w['connections']} connections, "
          f"{w['threads']} threads, {w['duration_s']:.0f} s per endpoint; {results['cpus']} CPUs, load average "
          f"{results['load_average_before'][0]:.2f} before, {results['load_average_after'][0]:.2f} after; "
          f"the benchmark user has {results['measurements']} measurements (recommend reads them)")  # fmt: skip
    print(f"{'endpoint':<16}{'request':<42}{'req/s':>9}{'p50 ms':>9}{'p99 ms':>9}{'errors':>8}{'ratio':>7}"
          f"{'CPU ms':>8}  target")  # fmt: skip
    for r in results["endpoints"]:
        verdict = ""
        if "within" in r:
            verdict = f"{'within' if r['within'] else 'OUTSIDE'} ({r['target']})"
        cpu = f"{r['cpu_ms_per_request']:.2f}" if r["cpu_ms_per_request"] is not None else "—"
        print(f"{r['endpoint']:<16}{r['request']:<42}{r['rps']:>9.1f}{r['p50_ms']:>9.1f}{r['p99_ms']:>9.1f}"
              f"{r['errors']:>8}{r['ratio']:>7.2f}{cpu:>8}  {verdict}")  # fmt: skip
    held = results.get("held")
    if held:
        alone, beside = held["alone"], held["beside"]
        verdict = "within" if held["within"] else "OUTSIDE"
        print(f"Another account beside the benchmark user's training recommendations "
              f"({held['training_recommendation_ms']:.0f} ms each; {held['flood_requests']} sent on "
              f"{results['wrk']['connections']} connections, {held['flood_refused']} answered 429, one at a time per "
              f"account): its ping alone {alone['rps']:.1f} req/s, p99 {alone['p99_ms']:.1f} ms; beside them "
              f"{beside['rps']:.1f} req/s, p99 {beside['p99_ms']:.1f} ms, max {beside['max_ms']:.1f} ms, "
              f"{beside['errors']} errors: {verdict} (p99 below one training recommendation: never held)")  # fmt: skip
    c = results.get("calibration")
    if c:
        print(f"Calibration of the benchmark user's recommendations ({c['measurements']} measurements, "
              f"{c['records']} records; median ms in one process): records built {c['records_built_ms']}, "
              f"found kept {c['records_kept_ms']} (one query); calibration built {c['calibration_built_ms']}, "
              f"found kept {c['calibration_kept_ms']}; ranking the full catalog with it (top 10) "
              f"{c['recommend_top10_ms']}")  # fmt: skip
        gcs = "; ".join(f"threshold {t}: {n[0]} young, {n[1]} middle, {n[2]} full"
                        for t, n in c["gc_collections_per_ranking"].items())  # fmt: skip
        print(f"Garbage collections per ranking: {gcs}")
    queries = results.get("queries")
    if queries:
        print("Queries per catalog list request (?limit=500: every row on one page), at two catalog sizes:")
        print(f"{'list':<16}{'rows':>7}{'queries':>9}{'rows':>7}{'queries':>9}  target")
        for name, q in queries.items():
            small, large = q["small"], q["large"]
            verdict = "within (constant)" if q["constant"] else "OUTSIDE (grows with the catalog)"
            sizes = f"{small['rows']:>7}{small['queries']:>9}{large['rows']:>7}{large['queries']:>9}"
            print(f"{name:<16}{sizes}  {verdict}")
