"""``vramplan-measure -- CMD``: a real child process, real host counters, and null device views with reasons here."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import REPO_ROOT, clean_env

pytestmark = pytest.mark.slow  # runs vramplan-measure in a child interpreter

MIB = 2**20


def measure(*args: str, env: dict[str, str] | None = None, timeout: float = 60) -> tuple[int, dict, str]:
    result = subprocess.run(
        [sys.executable, "-m", "workers.runner.cli", *args],
        cwd=REPO_ROOT,
        env=env or clean_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    return result.returncode, json.loads(result.stdout), result.stderr


def test_a_300_mib_allocation_shows_in_host_rss_and_the_device_views_are_null_with_reasons() -> None:
    code, document, _ = measure("--", sys.executable, "-c", "x = bytearray(300 * 2**20); import time; time.sleep(0.3)")
    assert code == 0
    assert document["outcome"] == "succeeded" and document["exit_code"] == 0 and document["signal"] is None
    peaks = document["peaks"]
    assert peaks["host_rss_bytes"] >= 300 * MIB
    assert peaks["device_used_bytes"] is None
    assert "libnvidia-ml.so.1" in peaks["reasons"]["device_used_bytes"]
    assert (
        peaks["framework_allocated_bytes"] is None and "did not report" in peaks["reasons"]["framework_allocated_bytes"]
    )
    assert document["sampling"]["host_samples"] >= 1
    assert document["versions"]["python"] == ".".join(map(str, sys.version_info[:3]))
    assert document["duration_seconds"] > 0.2


def test_a_child_killed_by_sigkill_is_reported_with_its_signal() -> None:
    code, document, _ = measure("--", sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)")
    assert code == 128 + 9
    assert (document["outcome"], document["signal"], document["signal_name"]) == ("signalled", 9, "SIGKILL")
    assert document["exit_code"] is None


def test_a_failing_command_keeps_stdout_pure_json_and_passes_its_output_to_stderr() -> None:
    code, document, stderr = measure("--", sys.executable, "-c", "print('hello'); raise SystemExit(4)")
    assert code == 4 and document["outcome"] == "failed"
    assert "hello" in stderr


def test_the_time_limit_kills_the_process_group(tmp_path: Path) -> None:
    _, document, _ = measure("--time-limit", "1", "--", "sh", "-c", "sleep 30 & sleep 30")
    assert document["outcome"] == "timeout"
    assert document["duration_seconds"] < 15


def test_the_cli_runs_the_users_command_in_the_users_environment() -> None:
    """Unlike an acceptance job (whose child gets an allowlist, test_runner_isolation.py), the CLI measures
    the user's own command: it keeps what the command needs (HF_TOKEN, MASTER_ADDR, CUDA_VISIBLE_DEVICES)."""
    env = clean_env(HF_TOKEN="hf_x", MASTER_ADDR="10.0.0.1", CUDA_VISIBLE_DEVICES="0")
    script = "import json, os; print(json.dumps(sorted(os.environ)))"
    argv = [sys.executable, "-m", "workers.runner.cli", "--", sys.executable, "-c", script]
    result = subprocess.run(argv, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=60, check=False)
    names = json.loads(result.stderr.strip().splitlines()[-1])
    assert {"HF_TOKEN", "MASTER_ADDR", "CUDA_VISIBLE_DEVICES", "VRAMPLAN_REPORT_FD"} <= set(names)


def test_timeline_csv_and_bad_arguments(tmp_path: Path) -> None:
    csv = tmp_path / "t.csv"
    code, _, _ = measure("--timeline", str(csv), "--", sys.executable, "-c", "pass")
    assert code == 0 and csv.read_text().splitlines()[0] == "t_seconds,device_used_bytes,host_rss_bytes"
    result = subprocess.run([sys.executable, "-m", "workers.runner.cli", "--interval", "0"], cwd=REPO_ROOT,
                            env=clean_env(), capture_output=True, text=True, timeout=30, check=False)  # fmt: skip
    assert result.returncode == 2 and "--interval" in result.stderr


@pytest.mark.parametrize("flags", [["--upload", "http://127.0.0.1:9"], ["--upload", "ftp://x", "--order", "1"]])
def test_upload_flags_are_checked_before_running(flags: list[str]) -> None:
    result = subprocess.run([sys.executable, "-m", "workers.runner.cli", *flags, "--", "true"], cwd=REPO_ROOT,
                            env=clean_env(), capture_output=True, text=True, timeout=30, check=False)  # fmt: skip
    assert result.returncode == 2 and "--upload" in result.stderr


@pytest.mark.django_db(transaction=True)
def test_upload_attaches_the_result_to_the_order_with_an_order_scoped_token(live_server, api) -> None:
    from measurements.models import Measurement
    from tests.measurements.helpers import TINY_CPU_WORKLOAD, cpu_configuration

    configuration = cpu_configuration()
    workload = api.post("/api/v1/workloads/", TINY_CPU_WORKLOAD, format="json").json()
    order = api.post("/api/v1/orders/", {"workload": workload["id"], "configuration": configuration.slug},
                     format="json").json()  # fmt: skip
    token = api.post(f"/api/v1/orders/{order['id']}/upload-token/").json()["token"]

    code, document, stderr = measure(
        "--upload", live_server.url, "--order", str(order["id"]), "--",
        sys.executable, "-c", "x = bytearray(50 * 2**20); import time; time.sleep(0.3)",
        env=clean_env(VRAMPLAN_UPLOAD_TOKEN=token),
    )  # fmt: skip
    assert code == 0, stderr
    stored = Measurement.objects.get(order_id=order["id"])
    assert stored.upload_key == document["run_id"] and stored.source == "upload"
    assert stored.host_rss_peak_bytes == document["peaks"]["host_rss_bytes"] >= 50 * MIB
    assert f"attached to order {order['id']} as measurement {stored.pk}" in stderr
    code, _, stderr = measure("--upload", live_server.url, "--order", str(order["id"]), "--token", "vpu_x", "--",
                              sys.executable, "-c", "pass")  # fmt: skip
    assert code == 2 and "401" in stderr


def test_the_device_view_reads_nvml_v2_through_the_real_bindings(fake_nvml_dir: Path) -> None:
    """The fake libnvidia-ml.so.1 reports 3 GiB allocated on device 0: the v2 ``used``, reserve apart."""
    env = clean_env(LD_LIBRARY_PATH=str(fake_nvml_dir), FAKE_NVML_PROCESSES=f"0:4242:{3 * 2**30}")
    code, document, _ = measure("--", sys.executable, "-c", "import time; time.sleep(0.2)", env=env)
    assert code == 0
    assert document["peaks"]["device_used_bytes"] == 3 * 2**30
    assert "device_used_bytes" not in document["peaks"]["reasons"]
    sampling = document["sampling"]
    assert sampling["memory_info_version"] == 2 and sampling["device_samples"] >= 10
    assert sampling["max_gap_s"] is not None and sampling["max_gap_s"] < 0.2
    assert sampling["contended"] is True  # another process held the device before the run
    assert [d["name"] for d in document["devices"]] == ["NVIDIA H100 80GB HBM3"] * 2
    assert document["devices"][0]["accounting_max_bytes"] is None and document["devices"][0]["accounting_reason"]
    assert document["versions"]["driver"] == "550.54.15"


def test_a_driver_without_the_v2_call_falls_back_to_v1_and_says_so(fake_nvml_dir: Path) -> None:
    env = clean_env(LD_LIBRARY_PATH=str(fake_nvml_dir), FAKE_NVML_MEMORY_V2_RESULT="13",
                    FAKE_NVML_PROCESSES=f"0:4242:{2**30}")  # fmt: skip
    _, document, _ = measure("--", sys.executable, "-c", "pass", env=env)
    assert document["sampling"]["memory_info_version"] == 1
    assert document["peaks"]["device_used_bytes"] == 2**30 + 566_231_040  # v1 used includes the driver's reserve
