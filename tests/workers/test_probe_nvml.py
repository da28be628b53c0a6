"""The NVML probe, exercised through the real nvidia-ml-py bindings against the fake libnvidia-ml.so.1.

What these prove: the probe reads NVML's calls, structs and errors correctly (the fake is compiled
against the official nvml.h). What they do not prove: anything about a real GPU; see test_probe_gpu.py.
"""

from __future__ import annotations

import ctypes
import json
import subprocess
from pathlib import Path

import pynvml
import pytest

from .conftest import FAKE_NVML_BUILD, build_fake_nvml, probe_with_fake_nvml

pytestmark = pytest.mark.slow  # compiles the fake NVML; probes in a child interpreter

H100_TOTAL_BYTES = 85_520_809_984
FAKE_RESERVED_BYTES = 566_231_040  # the fake's default driver reserve per device


def test_default_fake_reads_as_two_h100(fake_nvml_dir: Path) -> None:
    inventory = probe_with_fake_nvml(fake_nvml_dir)

    assert inventory["probe"] == "nvml"
    assert inventory["device_type"] == "gpu"
    assert inventory["nvml_unavailable_reason"] is None
    assert inventory["device_count"] == 2
    nvml = inventory["nvml"]
    assert nvml["driver_version"] == "550.54.15"
    assert nvml["cuda_driver_version"] == "12.4"
    assert nvml["cuda_driver_version_int"] == 12040
    assert nvml["bindings_version"] == pynvml_version()
    assert [d["index"] for d in nvml["devices"]] == [0, 1]
    assert len({d["uuid"] for d in nvml["devices"]}) == 2
    for device in nvml["devices"]:
        assert device["name"] == "NVIDIA H100 80GB HBM3"
        assert device["uuid"].startswith("GPU-")
        assert device["total_memory_bytes"] == H100_TOTAL_BYTES
        assert device["memory_info_version"] == 2
        assert device["reserved_memory_bytes"] == FAKE_RESERVED_BYTES
        assert device["used_memory_bytes"] == 0
        assert device["free_memory_bytes"] == H100_TOTAL_BYTES - FAKE_RESERVED_BYTES
        assert device["usable_memory_bytes"] == H100_TOTAL_BYTES - FAKE_RESERVED_BYTES
        assert device["compute_capability"] == "9.0"
        assert device["mig_mode"] == "disabled"
        assert device["processes"] == []
    assert inventory["host"]["logical_cpus"] >= 1  # the host is probed on GPU nodes too
    assert inventory["usable_memory_bytes"] == H100_TOTAL_BYTES - FAKE_RESERVED_BYTES
    assert inventory["usable_memory_basis"] == "total-reserved"


def test_usable_memory_is_the_smallest_total_less_its_reserve(fake_nvml_dir: Path) -> None:
    inventory = probe_with_fake_nvml(
        fake_nvml_dir,
        FAKE_NVML_MEMORY_TOTAL_BYTES="85899345920,42949672960",
        FAKE_NVML_MEMORY_RESERVED_BYTES="1000000,2000000",
    )

    devices = inventory["nvml"]["devices"]
    assert [d["reserved_memory_bytes"] for d in devices] == [1_000_000, 2_000_000]
    assert [d["usable_memory_bytes"] for d in devices] == [85_899_345_920 - 1_000_000, 42_949_672_960 - 2_000_000]
    assert inventory["usable_memory_bytes"] == 42_949_672_960 - 2_000_000
    assert inventory["usable_memory_basis"] == "total-reserved"


def test_configured_devices_processes_and_memory(fake_nvml_dir: Path) -> None:
    inventory = probe_with_fake_nvml(
        fake_nvml_dir,
        FAKE_NVML_DEVICE_COUNT="3",
        FAKE_NVML_DEVICE_NAMES="NVIDIA A100-SXM4-80GB|NVIDIA A100-SXM4-40GB",
        FAKE_NVML_MEMORY_TOTAL_BYTES="85899345920,42949672960",
        FAKE_NVML_MEMORY_RESERVED_BYTES="0",
        FAKE_NVML_PROCESSES="0:4242:1073741824,0:4343:2147483648,2:99:512",
        FAKE_NVML_DRIVER_VERSION="535.104.05",
        FAKE_NVML_CUDA_DRIVER_VERSION="12020",
        FAKE_NVML_COMPUTE_CAPABILITY="8.0",
    )

    devices = inventory["nvml"]["devices"]
    assert [d["name"] for d in devices] == ["NVIDIA A100-SXM4-80GB"] + ["NVIDIA A100-SXM4-40GB"] * 2
    assert [d["total_memory_bytes"] for d in devices] == [85_899_345_920, 42_949_672_960, 42_949_672_960]
    assert devices[0]["processes"] == [
        {"pid": 4242, "used_memory_bytes": 1_073_741_824},
        {"pid": 4343, "used_memory_bytes": 2_147_483_648},
    ]
    assert devices[0]["used_memory_bytes"] == 3 * 2**30
    assert devices[0]["free_memory_bytes"] == 85_899_345_920 - 3 * 2**30
    assert devices[1]["processes"] == []
    assert devices[2]["processes"] == [{"pid": 99, "used_memory_bytes": 512}]
    assert {d["compute_capability"] for d in devices} == {"8.0"}
    assert inventory["nvml"]["cuda_driver_version"] == "12.2"
    assert inventory["nvml"]["driver_version"] == "535.104.05"


def test_driver_without_memory_v2_falls_back_to_v1(fake_nvml_dir: Path) -> None:
    """Before R510 there is no nvmlDeviceGetMemoryInfo_v2; v1's ``used`` includes the reserve."""
    inventory = probe_with_fake_nvml(fake_nvml_dir, FAKE_NVML_MEMORY_V2_RESULT="13", FAKE_NVML_PROCESSES="0:7:1000")

    device = inventory["nvml"]["devices"][0]
    assert device["memory_info_version"] == 1
    assert device["reserved_memory_bytes"] is None
    assert device["used_memory_bytes"] == FAKE_RESERVED_BYTES + 1000
    assert device["total_memory_bytes"] == H100_TOTAL_BYTES
    assert device["usable_memory_bytes"] == H100_TOTAL_BYTES  # no reserve reported: the total, labelled so
    assert inventory["usable_memory_bytes"] == H100_TOTAL_BYTES
    assert inventory["usable_memory_basis"] == "total (driver before R510 reports no reserve)"


@pytest.mark.parametrize(("mode", "expected"), [("1", "enabled"), ("unsupported", "unsupported")])
def test_mig_mode(fake_nvml_dir: Path, mode: str, expected: str) -> None:
    inventory = probe_with_fake_nvml(fake_nvml_dir, FAKE_NVML_MIG_MODE=mode)

    assert {d["mig_mode"] for d in inventory["nvml"]["devices"]} == {expected}


def test_driver_not_loaded_falls_back_to_host_probe(fake_nvml_dir: Path) -> None:
    inventory = probe_with_fake_nvml(fake_nvml_dir, FAKE_NVML_INIT_RESULT="9")  # NVML_ERROR_DRIVER_NOT_LOADED

    assert inventory["probe"] == "host"
    assert inventory["device_type"] == "cpu"
    assert inventory["nvml"] is None
    assert inventory["device_count"] == 0
    assert "Driver Not Loaded" in inventory["nvml_unavailable_reason"]


def test_no_devices_falls_back_to_host_probe(fake_nvml_dir: Path) -> None:
    inventory = probe_with_fake_nvml(fake_nvml_dir, FAKE_NVML_DEVICE_COUNT="0")

    assert inventory["probe"] == "host"
    assert inventory["nvml_unavailable_reason"] == "NVML is present but reports no devices"


def test_pynvml_structs_match_the_official_header(fake_nvml_dir: Path) -> None:
    """nvidia-ml-py's ctypes structs have the sizes and offsets nvml.h gives (measurement.md §5.3)."""
    header = json.loads(subprocess.check_output([str(fake_nvml_dir / "nvml_abi_check")], text=True))

    assert pynvml.nvmlMemory_v2 == header["nvmlMemory_v2"]
    for constant in (
        "NVML_DEVICE_NAME_V2_BUFFER_SIZE",
        "NVML_DEVICE_UUID_V2_BUFFER_SIZE",
        "NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE",
    ):
        assert getattr(pynvml, constant) == header[constant], constant
    for struct_name, layout in header["structs"].items():
        struct = getattr(pynvml, struct_name)
        assert ctypes.sizeof(struct) == layout.pop("size"), struct_name
        for field, offset in layout.items():
            assert getattr(struct, field).offset == offset, f"{struct_name}.{field}"


def test_a_prototype_that_disagrees_with_nvml_h_does_not_compile(fake_nvml_dir: Path, tmp_path: Path) -> None:
    """The fake's signatures are the header's: change one and the build fails (what makes the fake honest)."""
    source = (FAKE_NVML_BUILD.parent / "fake_nvml.c").read_text()
    correct = "nvmlDeviceGetCount_v2(unsigned int *deviceCount)"
    assert correct in source
    wrong = tmp_path / "fake_nvml_wrong.c"
    wrong.write_text(source.replace(correct, "nvmlDeviceGetCount_v2(unsigned long long *deviceCount)"))

    result = build_fake_nvml(tmp_path / "out", FAKE_NVML_SOURCE=str(wrong))

    assert result.returncode == 1, result.stderr
    assert "conflicting types" in result.stderr
    assert "nvmlDeviceGetCount_v2" in result.stderr


def test_the_cached_build_is_reused_until_an_input_changes(fake_nvml_dir: Path, tmp_path: Path) -> None:
    """``build.sh --cached`` compiles once per set of inputs: the same inputs give the same folder, untouched."""
    cache = tmp_path / "cache"
    first = build_fake_nvml("--cached", FAKE_NVML_CACHE_DIR=str(cache))
    assert first.returncode == 0, first.stderr
    built = Path(first.stdout.splitlines()[-1])
    assert built.parent == cache and (built / "libnvidia-ml.so.1").is_file()
    assert "fake_nvml: built" in first.stdout
    stamp = (built / "libnvidia-ml.so.1").stat().st_mtime_ns

    again = build_fake_nvml("--cached", FAKE_NVML_CACHE_DIR=str(cache))
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines()[-1] == str(built)
    assert "fake_nvml: cached" in again.stdout and "fake_nvml: built" not in again.stdout
    assert (built / "libnvidia-ml.so.1").stat().st_mtime_ns == stamp

    edited = tmp_path / "fake_nvml_edited.c"
    edited.write_text((FAKE_NVML_BUILD.parent / "fake_nvml.c").read_text() + "\n/* an edit */\n")
    changed = build_fake_nvml("--cached", FAKE_NVML_CACHE_DIR=str(cache), FAKE_NVML_SOURCE=str(edited))
    assert changed.returncode == 0, changed.stderr
    assert changed.stdout.splitlines()[-1] != str(built)
    assert sorted(p.name for p in cache.iterdir()) == sorted([built.name, Path(changed.stdout.splitlines()[-1]).name])


def pynvml_version() -> str:
    import importlib.metadata

    return importlib.metadata.version("nvidia-ml-py")
