"""The parent-side memory sampler, through the real nvidia-ml-py bindings against the fake libnvidia-ml.so.1.

What these prove: the sampling *logic* (v2/v1 choice, polling schedule, honest gap reporting, the
accounting read after the child exits, errors survived, the child tree's host RSS) and the way it
reads NVML's calls, structs and errors. What they do not prove: how fast or how spiky a real GPU's
memory is (measurement.md §1.9); the last test here runs on a real GPU node only.

Each NVML case runs the sampler in a fresh interpreter (tests/workers/sampling_fake.py), because
pynvml loads libnvidia-ml.so.1 once per process; a child process drives the fake's memory over time
through FAKE_NVML_USED_FILE.
"""

from __future__ import annotations

import csv
import ctypes
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from workers.runner.sampling import TIMELINE_CSV_HEADER, Timeline, write_timeline_csv

from .conftest import REPO_ROOT, clean_env, require_real_gpu
from .sampling_fake import GIB, UsedLine, write_used_file

pytestmark = pytest.mark.slow  # samples child processes through the fake NVML

MIB = 2**20
RESERVED_BYTES = 566_231_040  # the fake's default driver reserve per device
DEVICE_0 = "GPU-fa4e0000-0000-4000-8000-000000000000"
DEVICE_1 = "GPU-fa4e0000-0000-4000-8000-000000000001"


def run_sampler(*args: str, env: dict[str, str], child: list[str]) -> dict[str, Any]:
    """``sampling_fake measure ARGS -- CHILD`` in a fresh interpreter; its JSON."""
    result = subprocess.run(
        [sys.executable, "-m", "tests.workers.sampling_fake", "measure", *args, "--", *child],
        env=env,
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, f"sampler failed:\n{result.stdout}\n{result.stderr}"
    out = json.loads(result.stdout)
    assert out["child_exit"] == 0, out
    return out


def spike_child(used_file: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "tests.workers.sampling_fake", "spike", str(used_file), *args]


def fake_env(lib_dir: Path, used_file: Path, **fake: str) -> dict[str, str]:
    return clean_env(LD_LIBRARY_PATH=str(lib_dir), FAKE_NVML_USED_FILE=str(used_file), **fake)


def device(result: dict[str, Any], index: int) -> dict[str, Any]:
    return next(d for d in result["devices"] if d["index"] == index)


def test_without_nvml_the_device_view_is_null_with_a_reason_and_host_rss_is_measured() -> None:
    try:
        ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        pass
    else:
        pytest.skip("this machine has an NVML library; the no-driver path needs one without")
    out = run_sampler(
        "--host-interval",
        "0.05",
        env=clean_env(),
        child=[sys.executable, "-c", "x = bytearray(200 * 2**20); import time; time.sleep(0.5)"],
    )

    result = out["result"]
    assert result["device_available"] is False
    assert "libnvidia-ml.so.1 not found" in result["device_reason"]
    for key in ("device_used_peak_bytes", "device_used_peak_delta_bytes", "max_gap_s", "memory_info_version"):
        assert result[key] is None, key  # not read is None, never 0
    assert result["devices"] == [] and result["device_samples"] == 0
    assert result["accounting_max_bytes"] is None and result["contended"] is None
    assert result["host_rss_peak_bytes"] >= 200 * MIB
    assert result["host_samples"] >= 3 and result["host_max_gap_s"] is not None
    assert result["host_reason"] is None
    assert out["child_pid"] in result["pids_seen"]
    assert set(result["checkpoints"]) == {"idle", "child_started"}  # marks are kept, with no device figures
    assert result["checkpoints"]["idle"] == []


def test_fine_polling_catches_a_10_ms_spike_and_accounting_agrees(fake_nvml_dir: Path, tmp_path: Path) -> None:
    used_file = tmp_path / "used"
    env = fake_env(fake_nvml_dir, used_file, FAKE_NVML_ACCOUNTING="1")

    out = run_sampler("--interval", "0.001", env=env, child=spike_child(used_file, "--spike-s", "0.01"))

    result = out["result"]
    pid = out["child_pid"]
    spike_s = json.loads(out["child_stdout"])["spike_s"]
    assert result["device_available"] is True and result["device_reason"] is None
    assert result["memory_info_version"] == 2
    assert (result["driver_version"], result["cuda_driver_version"]) == ("550.54.15", "12.4")
    assert result["device_samples"] >= 20
    assert result["max_gap_s"] is not None and result["max_gap_s"] > 0
    assert result["device_used_peak_bytes"] >= 9 * GIB, (
        f"a {spike_s * 1000:.1f} ms spike was missed at 1 ms polling (max gap {result['max_gap_s']} s)"
    )
    assert result["device_used_peak_delta_bytes"] == 9 * GIB  # the idle baseline was 0: no used file yet
    assert result["busiest_device_index"] == 0
    first = device(result, 0)
    assert first["uuid"] == DEVICE_0 and first["name"] == "NVIDIA H100 80GB HBM3"
    assert (first["total_bytes"], first["reserved_bytes"]) == (85_520_809_984, RESERVED_BYTES)
    assert (first["baseline_used_bytes"], first["peak_used_bytes"], first["final_used_bytes"]) == (0, 9 * GIB, 0)
    assert first["accounting_max_bytes"] == 9 * GIB and first["accounting_by_pid"] == {str(pid): 9 * GIB}
    assert first["accounting_reason"] is None
    assert result["accounting_max_bytes"] == 9 * GIB
    # The second GPU was idle: read (0), and the child has no accounting record there.
    second = device(result, 1)
    assert second["peak_used_bytes"] == 0 and second["accounting_max_bytes"] is None
    assert "no accounting record" in second["accounting_reason"]
    assert result["processes_before"] == [] and result["contended"] is False
    assert result["checkpoints"]["idle"] == [0, 0]
    assert len(result["checkpoints"]["child_started"]) == 2
    assert max(point[1] or 0 for point in result["timeline"]) == 9 * GIB


def test_coarse_polling_reports_a_gap_that_could_hide_the_spike_and_accounting_still_has_it(
    fake_nvml_dir: Path, tmp_path: Path
) -> None:
    used_file = tmp_path / "used"
    env = fake_env(fake_nvml_dir, used_file, FAKE_NVML_ACCOUNTING="1")

    out = run_sampler("--interval", "0.2", "--uuid", DEVICE_0, env=env, child=spike_child(used_file))

    result = out["result"]
    spike_s = json.loads(out["child_stdout"])["spike_s"]
    caught = result["device_used_peak_bytes"] >= 9 * GIB
    # Honest either way: the spike was seen, or the report says a spike that short could have been missed.
    assert caught or result["max_gap_s"] > spike_s, (result["device_used_peak_bytes"], result["max_gap_s"], spike_s)
    assert result["interval_s"] == 0.2
    assert [d["uuid"] for d in result["devices"]] == [DEVICE_0]
    # The driver's high-water mark does not depend on the polling.
    assert result["accounting_max_bytes"] == 9 * GIB
    assert device(result, 0)["accounting_by_pid"] == {str(out["child_pid"]): 9 * GIB}


def test_accounting_unreadable_is_null_with_a_reason_per_device(fake_nvml_dir: Path, tmp_path: Path) -> None:
    used_file = tmp_path / "used"
    env = fake_env(
        fake_nvml_dir, used_file, FAKE_NVML_DEVICE_COUNT="3", FAKE_NVML_ACCOUNTING="0,unsupported,nopermission"
    )

    out = run_sampler(env=env, child=spike_child(used_file, "--before-s", "0", "--spike-s", "0.03", "--after-s", "0"))

    reasons = [d["accounting_reason"] for d in out["result"]["devices"]]
    assert [d["accounting_max_bytes"] for d in out["result"]["devices"]] == [None, None, None]
    assert out["result"]["accounting_max_bytes"] is None
    assert "accounting mode is disabled" in reasons[0] and "nvidia-smi -am 1" in reasons[0]
    assert "NOT_SUPPORTED" in reasons[1]
    assert "NO_PERMISSION" in reasons[2]
    assert out["result"]["device_used_peak_bytes"] == 9 * GIB  # polling still worked (30 ms spike, 2 ms polls)


def test_a_driver_without_memory_v2_falls_back_to_v1_and_says_so(fake_nvml_dir: Path, tmp_path: Path) -> None:
    used_file = tmp_path / "used"
    env = fake_env(fake_nvml_dir, used_file, FAKE_NVML_MEMORY_V2_RESULT="13")  # FUNCTION_NOT_FOUND

    out = run_sampler("--uuid", DEVICE_0, env=env, child=spike_child(used_file, "--spike-s", "0.03"))

    result = out["result"]
    assert result["device_available"] is True
    assert result["memory_info_version"] == 1
    first = device(result, 0)
    assert first["reserved_bytes"] is None  # v1 has no reserve apart …
    assert first["baseline_used_bytes"] == RESERVED_BYTES  # … and its used includes it
    assert first["peak_used_bytes"] == RESERVED_BYTES + 9 * GIB
    assert result["device_used_peak_delta_bytes"] == 9 * GIB
    assert result["device_errors"] == 0


def test_memory_not_supported_gives_no_device_figures_and_a_reason(fake_nvml_dir: Path, tmp_path: Path) -> None:
    env = fake_env(fake_nvml_dir, tmp_path / "used", FAKE_NVML_MEMORY_RESULT="3", FAKE_NVML_ACCOUNTING="1")

    out = run_sampler(env=env, child=[sys.executable, "-c", "x = bytearray(50 * 2**20)"])

    result = out["result"]
    assert result["device_available"] is False
    assert "NOT_SUPPORTED" in result["device_reason"]
    assert result["memory_info_version"] is None and result["max_gap_s"] is None
    assert result["device_used_peak_bytes"] is None and result["device_used_peak_delta_bytes"] is None
    assert result["device_samples"] == 0 and result["device_errors"] == 0
    for reading in result["devices"]:  # the devices are named, their figures are not invented
        assert reading["uuid"].startswith("GPU-")
        for key in ("total_bytes", "baseline_used_bytes", "peak_used_bytes", "final_used_bytes"):
            assert reading[key] is None, key
        assert "NOT_SUPPORTED" in reading["memory_reason"]
        assert reading["accounting_max_bytes"] is None and reading["accounting_reason"]
    assert result["checkpoints"]["idle"] == [None, None]
    assert result["driver_version"] == "550.54.15"
    assert result["host_rss_peak_bytes"] is not None


@pytest.mark.parametrize(
    ("fake", "reason"),
    [
        ({"FAKE_NVML_INIT_RESULT": "9"}, "Driver Not Loaded"),
        ({"FAKE_NVML_DEVICE_COUNT": "0"}, "NVML is present but reports no devices"),
    ],
)
def test_nvml_that_cannot_be_used_gives_the_probes_reason(
    fake_nvml_dir: Path, tmp_path: Path, fake: dict[str, str], reason: str
) -> None:
    out = run_sampler(env=fake_env(fake_nvml_dir, tmp_path / "used", **fake), child=[sys.executable, "-c", "pass"])

    assert out["result"]["device_available"] is False
    assert reason in out["result"]["device_reason"]
    assert out["result"]["devices"] == []


def test_a_device_that_is_not_there_is_no_device_view(fake_nvml_dir: Path, tmp_path: Path) -> None:
    env = fake_env(fake_nvml_dir, tmp_path / "used")

    out = run_sampler("--uuid", "GPU-00000000-dead-beef-0000-000000000000", env=env, child=[sys.executable, "-c", ""])

    assert out["result"]["device_available"] is False
    assert "none of the requested devices" in out["result"]["device_reason"]


def test_processes_present_at_start_mark_the_run_contended(fake_nvml_dir: Path, tmp_path: Path) -> None:
    env = fake_env(fake_nvml_dir, tmp_path / "used", FAKE_NVML_PROCESSES=f"1:4242:{GIB}")

    out = run_sampler(env=env, child=[sys.executable, "-c", ""])

    result = out["result"]
    assert result["contended"] is True
    assert result["processes_before"] == [{"device_index": 1, "pid": 4242, "used_bytes": GIB}]
    assert device(result, 1)["baseline_used_bytes"] == GIB
    assert result["busiest_device_index"] == 1 and result["device_used_peak_delta_bytes"] == 0


def test_nvml_errors_mid_run_are_counted_and_sampling_goes_on(fake_nvml_dir: Path, tmp_path: Path) -> None:
    used_file = tmp_path / "used"
    env = fake_env(fake_nvml_dir, used_file)

    out = run_sampler(
        "--uuid",
        DEVICE_0,
        env=env,
        child=spike_child(used_file, "--spike-s", "0.03", "--after-s", "0.03", "--error-s", "0.05"),
    )

    result = out["result"]
    assert result["device_errors"] > 0
    assert "GPU is lost" in result["device_error"]
    first = device(result, 0)
    assert first["errors"] == result["device_errors"]
    assert first["peak_used_bytes"] == 9 * GIB
    assert first["final_used_bytes"] == 0  # read again after the errors stopped
    assert result["max_gap_s"] >= 0.04  # the failing stretch is a gap in what was observed


# --- the timeline (pure, no NVML) ---------------------------------------------------------------------
def test_the_timeline_keeps_a_one_sample_spike_through_downsampling(tmp_path: Path) -> None:
    timeline = Timeline(max_points=100, resolution_s=0.001)
    for i in range(20_000):  # 20 s at 1 ms: 200× more samples than points
        timeline.add(i * 0.001, 9 * GIB if i == 12_345 else 3 * GIB, 100 * MIB if i % 50 == 0 else None)
    timeline.add(20.0, None, 700 * MIB)
    timeline.add(20.0005, None, None)  # nothing read: nothing added

    points = timeline.points()

    assert len(points) <= 100
    assert max(p[1] or 0 for p in points) == 9 * GIB
    assert sum(1 for p in points if p[1] == 9 * GIB) == 1  # the spike is one bucket, not smeared into others
    assert {p[1] for p in points} <= {3 * GIB, 9 * GIB, None}  # maxima, never averages
    assert max(p[2] or 0 for p in points) == 700 * MIB
    assert [p[0] for p in points] == sorted(p[0] for p in points)
    spike_point = next(p for p in points if p[1] == 9 * GIB)
    width = points[1][0] - points[0][0]
    assert spike_point[0] <= 12.345 < spike_point[0] + width + 1e-9  # the bucket that holds the spike's time

    path = tmp_path / "timeline.csv"
    write_timeline_csv(path, [(0.0, 3 * GIB, None), (0.5, None, 100 * MIB)])
    rows = list(csv.reader(path.open()))
    assert tuple(rows[0]) == TIMELINE_CSV_HEADER == ("t_seconds", "device_used_bytes", "host_rss_bytes")
    assert rows[1:] == [["0.0", str(3 * GIB), ""], ["0.5", "", str(100 * MIB)]]  # unread: empty, not 0


def test_the_sampler_timeline_is_bounded_and_written_as_csv(fake_nvml_dir: Path, tmp_path: Path) -> None:
    used_file = tmp_path / "used"
    csv_path = tmp_path / "timeline.csv"
    env = fake_env(fake_nvml_dir, used_file)

    out = run_sampler(
        "--interval",
        "0.001",
        "--timeline-points",
        "20",
        "--timeline-csv",
        str(csv_path),
        "--uuid",
        DEVICE_0,
        env=env,
        child=spike_child(used_file, "--spike-s", "0.02", "--after-s", "0.1"),
    )

    timeline = out["result"]["timeline"]
    assert len(timeline) <= 20
    assert max(p[1] or 0 for p in timeline) == out["result"]["device_used_peak_bytes"] == 9 * GIB
    rows = list(csv.reader(csv_path.open()))
    assert tuple(rows[0]) == TIMELINE_CSV_HEADER and len(rows) == len(timeline) + 1


def test_the_used_file_is_written_whole(tmp_path: Path) -> None:
    path = tmp_path / "used"
    write_used_file(path, [UsedLine(0, GIB, 2 * GIB, 42), UsedLine(1, 5), UsedLine(2, error=15)])

    assert path.read_text() == f"0 {GIB} {2 * GIB} 42\n1 5 5 0\n2 error 15\n"
    assert [p.name for p in tmp_path.iterdir()] == ["used"]  # the temporary file was renamed, not left


# --- a real GPU -----------------------------------------------------------------------------------------
@pytest.mark.gpu
def test_real_gpu_is_sampled_with_the_v2_struct() -> None:
    require_real_gpu()

    out = run_sampler(
        "--interval", "0.002", env=clean_env(), child=[sys.executable, "-c", "import time; time.sleep(0.3)"]
    )

    result = out["result"]
    assert result["device_available"] is True, result["device_reason"]
    assert result["memory_info_version"] in (1, 2)
    assert result["device_samples"] >= 10 and result["max_gap_s"] is not None
    for reading in result["devices"]:
        if reading["memory_reason"] is None:
            assert reading["baseline_used_bytes"] is not None and reading["peak_used_bytes"] is not None
            assert reading["accounting_max_bytes"] is not None or reading["accounting_reason"]
