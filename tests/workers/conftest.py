"""Fixtures for the worker side: the fake NVML library, and running the probe in a fresh process."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import skip_or_fail

REPO_ROOT = Path(__file__).resolve().parents[2]
FAKE_NVML_BUILD = REPO_ROOT / "tools" / "fake_nvml" / "build.sh"


@pytest.fixture(scope="session")
def fake_nvml_dir() -> Path:
    """A directory holding the fake libnvidia-ml.so.1 (and nvml_abi_check), built once and then reused.

    ``build.sh --cached`` compiles into tools/fake_nvml/build/KEY/ only when no build of the same inputs
    (script, sources, nvml.h, compiler, flags) is there. Skipped without gcc or the nvml.h header (PyPI
    nvidia-nvml-dev-cu12); failed under REQUIRE_SERVICES=1.
    """
    cc = os.environ.get("CC", "gcc")
    if shutil.which(cc) is None:
        skip_or_fail(f"the fake NVML needs a C compiler and {cc!r} is not on PATH")
    result = build_fake_nvml("--cached")
    if result.returncode in (2, 3):  # no compiler, no header
        skip_or_fail(f"cannot build the fake NVML: {result.stderr.strip()}")
    if result.returncode != 0:
        pytest.fail(f"building the fake NVML failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    built = Path(result.stdout.strip().splitlines()[-1])
    assert (built / "libnvidia-ml.so.1").is_file() and (built / "nvml_abi_check").is_file(), result.stdout
    return built


def require_real_gpu() -> None:
    """Skip unless NVIDIA's NVML answers and reports a GPU (the ``gpu``-marked tests)."""
    import pynvml

    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        pytest.skip(f"no usable NVML here ({type(exc).__name__}: {exc})")
    try:
        if pynvml.nvmlDeviceGetCount() == 0:
            pytest.skip("NVML reports no GPU")
    finally:
        pynvml.nvmlShutdown()


def build_fake_nvml(out: Path | str, **env: str) -> subprocess.CompletedProcess[str]:
    """``tools/fake_nvml/build.sh OUT`` (always compiles), or ``--cached`` for the reused build."""
    return subprocess.run(
        ["sh", str(FAKE_NVML_BUILD), str(out)],
        env={**os.environ, "PYTHON": sys.executable, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without FAKE_NVML_* settings or a library path, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAKE_NVML_") and k != "LD_LIBRARY_PATH"}
    env.update(extra)
    return env


def probe_with_fake_nvml(lib_dir: Path, **fake: str) -> dict[str, Any]:
    """Run ``probe_inventory()`` in a fresh interpreter that loads the fake library.

    A subprocess because pynvml loads libnvidia-ml.so.1 once per process and keeps it.
    """
    result = subprocess.run(
        [sys.executable, "-m", "workers.probes.inventory"],
        env=clean_env(LD_LIBRARY_PATH=str(lib_dir), **fake),
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, f"probe failed:\n{result.stdout}\n{result.stderr}"
    return json.loads(result.stdout)


# The real-worker fixture, for every test here (imported last: realworker reads REPO_ROOT and clean_env above).
from .realworker import start_beat, start_worker  # noqa: E402, F401
