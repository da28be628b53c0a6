"""catalog.compat: driver ↔ CUDA, precision, kernels and PyTorch wheels. Pure: no database.

The toolkit and wheel tables come from the committed fixtures, so these tests also check the data.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from catalog import compat
from catalog.compat import CompatError, CudaSupport, Toolkit, Wheel
from catalog.units import version_key

CATALOG = Path(__file__).resolve().parents[2] / "fixtures" / "catalog"


def _records(name: str) -> list[dict]:
    return json.loads((CATALOG / name).read_text())["records"]


@pytest.fixture(scope="module")
def toolkits() -> list[Toolkit]:
    return [Toolkit.from_row(row) for row in _records("cuda_toolkits.json")]


@pytest.fixture(scope="module")
def wheels() -> list[Wheel]:
    return [Wheel.from_row(row) for row in _records("pytorch_wheels.json")]


# --------------------------------------------------------------------------------------------------
# Driver ↔ CUDA


@pytest.mark.parametrize(
    ("driver", "cuda", "support"),
    [
        ("535.247.01", "12.2", CudaSupport.FULL),  # R535 ships with 12.2
        ("535.247.01", "12.4", CudaSupport.MINOR_COMPAT),  # 12.x ≥ 525.60.13
        ("535.247.01", "12.8", CudaSupport.MINOR_COMPAT),
        ("535.247.01", "11.8", CudaSupport.FULL),  # backward compatibility
        ("535.247.01", "13.0", CudaSupport.NONE),  # 13.x needs ≥ 580
        ("550.163.01", "12.4", CudaSupport.FULL),
        ("550.163.01", "12.6", CudaSupport.MINOR_COMPAT),
        ("570.195.03", "12.8", CudaSupport.FULL),
        ("575.57.08", "13.0", CudaSupport.NONE),
        ("580.65.06", "13.0", CudaSupport.FULL),
        ("580.95.05", "13.0.2", CudaSupport.FULL),
        ("580.95.05", "13.2", CudaSupport.MINOR_COMPAT),
        ("580.95.05", "13.4", CudaSupport.MINOR_COMPAT),  # past the table: only the family floor is known
        ("525.60.13", "12.0", CudaSupport.FULL),
        ("525.60.12", "12.0", CudaSupport.NONE),
        ("520.61.05", "11.8", CudaSupport.FULL),
        ("470.82.01", "11.8", CudaSupport.MINOR_COMPAT),  # 11.x ≥ 450.80.02
        ("450.80.02", "11.4", CudaSupport.MINOR_COMPAT),
        ("450.36.06", "11.4", CudaSupport.NONE),
        ("535.247.01", "cu124", CudaSupport.MINOR_COMPAT),  # wheel tags are read too
        ("535.247.01", "cu130", CudaSupport.NONE),
    ],
)
def test_cuda_support(toolkits: list[Toolkit], driver: str, cuda: str, support: CudaSupport) -> None:
    assert compat.cuda_support(driver, cuda, toolkits) is support


def test_driver_supports_cuda_counts_minor_compat_unless_told_not_to(toolkits: list[Toolkit]) -> None:
    assert compat.driver_supports_cuda("535.247.01", "12.2", toolkits)
    assert compat.driver_supports_cuda("535.247.01", "12.4", toolkits)
    assert not compat.driver_supports_cuda("535.247.01", "12.4", toolkits, allow_minor_compat=False)
    assert compat.driver_supports_cuda("550.163.01", "12.4", toolkits, allow_minor_compat=False)
    assert not compat.driver_supports_cuda("570.195.03", "13.0", toolkits)
    assert compat.driver_supports_cuda("580.95.05", "13.0", toolkits)


def test_minor_compat_floors_fall_back_to_table_2_without_toolkit_rows() -> None:
    assert compat.cuda_support("535.247.01", "12.4", []) is CudaSupport.MINOR_COMPAT
    assert compat.cuda_support("580.0", "13.1", []) is CudaSupport.MINOR_COMPAT
    assert compat.cuda_support("450.80.01", "11.2", []) is CudaSupport.NONE


def test_min_driver_for_cuda(toolkits: list[Toolkit]) -> None:
    assert compat.min_driver_for_cuda("12.4", toolkits) == "525.60.13"
    assert compat.min_driver_for_cuda("12.4", toolkits, allow_minor_compat=False) == "550.54.14"
    assert compat.min_driver_for_cuda("12.4.1", toolkits, allow_minor_compat=False) == "550.54.15"
    assert compat.min_driver_for_cuda("13.0", toolkits) == "580"
    assert compat.min_driver_for_cuda("11.8", toolkits) == "450.80.02"


def test_min_driver_key_filters_like_driver_supports_cuda(toolkits: list[Toolkit]) -> None:
    """The key the API filter uses with driver_version_key__gte agrees with driver_supports_cuda."""
    drivers = ["450.80.02", "525.60.13", "535.247.01", "550.163.01", "570.195.03", "575.57.08", "580.95.05"]
    for cuda in ["11.8", "12.0", "12.2", "12.4", "12.8", "12.9", "13.0", "13.2", "cu130"]:
        for minor in (True, False):
            floor = compat.min_driver_key_for_cuda(cuda, toolkits, allow_minor_compat=minor)
            for driver in drivers:
                expected = compat.driver_supports_cuda(driver, cuda, toolkits, allow_minor_compat=minor)
                assert (version_key(driver) >= floor) is expected, (cuda, minor, driver)
    assert compat.drivers_supporting_cuda_min_key is compat.min_driver_key_for_cuda


def test_toolkit_from_row_takes_value_dicts_and_objects() -> None:
    row = {
        "version": "12.4.0",
        "family": "12.x",
        "min_driver_linux": "550.54.14",
        "minor_compat_min_driver_linux": "",
    }

    class Obj:
        version, family, min_driver_linux, minor_compat_min_driver_linux = "12.4.0", "12.x", "550.54.14", None

    assert Toolkit.from_row(row) == Toolkit.from_row(Obj()) == Toolkit("12.4.0", "12.x", "550.54.14")
    # the row has no floor: Table 2's is used
    assert compat.min_driver_for_cuda("12.4", [row]) == "525.60.13"


@pytest.mark.parametrize("bad", ["twelve", "12.x", "", "cu"])
def test_unreadable_cuda_versions_say_what_was_expected(toolkits: list[Toolkit], bad: str) -> None:
    with pytest.raises(CompatError, match=r"expected e\.g\. 12\.4"):
        compat.min_driver_key_for_cuda(bad, toolkits)


def test_unknown_cuda_major_and_unknown_toolkit_driver(toolkits: list[Toolkit]) -> None:
    with pytest.raises(CompatError, match="unknown major version"):
        compat.min_driver_key_for_cuda("14.0", toolkits)
    with pytest.raises(CompatError, match="no toolkit driver is known"):
        compat.min_driver_for_cuda("13.4", toolkits, allow_minor_compat=False)
    with pytest.raises(CompatError, match="not a driver version"):
        compat.cuda_support("latest", "12.4", toolkits)


def test_max_cuda_for_driver(toolkits: list[Toolkit]) -> None:
    assert compat.max_cuda_for_driver("535.247.01", toolkits) == "12.2.2"
    assert compat.max_cuda_for_driver("550.163.01", toolkits) == "12.4.1"
    assert compat.max_cuda_for_driver("570.195.03", toolkits) == "12.8.1"
    assert compat.max_cuda_for_driver("580.95.05", toolkits) == "13.0.2"
    assert compat.max_cuda_for_driver("535.247.01", toolkits, allow_minor_compat=True) == "12.9.1"
    assert compat.max_cuda_for_driver("580.95.05", toolkits, allow_minor_compat=True) == "13.3.1"
    assert compat.max_cuda_for_driver("440.0", toolkits) is None


def test_toolkit_table_has_every_row_and_both_floors() -> None:
    rows = _records("cuda_toolkits.json")
    assert len(rows) == 55
    floors = {r["family"]: r["minor_compat_min_driver_linux"] for r in rows}
    assert floors == {"13.x": "580", "12.x": "525.60.13", "11.x": "450.80.02"}
    for row in rows:
        assert version_key(row["min_driver_linux"]) >= version_key(row["minor_compat_min_driver_linux"]) or (
            row["version"].startswith("11.0")  # 11.0 shipped before the 450.80.02 recommendation
        )
        assert row["source_url"] and isinstance(row["uncertain"], bool)
    assert {r["version"] for r in rows if r["uncertain"]} == {"13.3.0", "13.3.1"}


# --------------------------------------------------------------------------------------------------
# Compute capability ↔ CUDA


def test_blackwell_needs_cuda_12_8_and_cuda_13_dropped_volta() -> None:
    assert not compat.check_cuda_for_compute_capability("12.4", "10.0")
    assert "needs CUDA ≥ 12.8" in compat.check_cuda_for_compute_capability("12.6", "12.0").reason
    assert compat.check_cuda_for_compute_capability("12.8", "10.0")
    assert not compat.check_cuda_for_compute_capability("12.8", "10.3")  # B300: 12.9
    assert compat.check_cuda_for_compute_capability("12.9", "10.3")
    assert compat.check_cuda_for_compute_capability("12.9", "7.0")
    assert not compat.check_cuda_for_compute_capability("13.0", "7.0")
    assert compat.check_cuda_for_compute_capability("13.0", "7.5")
    assert compat.min_cuda_for_compute_capability("sm_90") == "11.8"


def test_min_cuda_table_agrees_with_the_data() -> None:
    rules = json.loads((CATALOG / "cuda_rules.json").read_text())
    for row in rules["first_toolkit_supporting_compute_capability"]:
        cc = row["cc"].split(" ", 1)[0]
        assert compat.min_cuda_for_compute_capability(cc) == row["cuda_min"], row


@pytest.mark.parametrize("bad", ["", "nine", "9", "9.0.1", "sm_"])
def test_unreadable_compute_capability(bad: str) -> None:
    with pytest.raises(CompatError, match="compute capability"):
        compat.parse_compute_capability(bad)


def test_parse_compute_capability_forms() -> None:
    assert compat.parse_compute_capability("9.0a") == compat.ComputeCapability(9, 0, "a")
    assert compat.parse_compute_capability("sm_120") == compat.ComputeCapability(12, 0)
    assert compat.parse_compute_capability("86").pair == (8, 6)


# --------------------------------------------------------------------------------------------------
# Precision


def test_normalize_precision() -> None:
    assert compat.normalize_precision("fp8_e4m3") == "fp8"
    assert compat.normalize_precision("BFloat16") == "bf16"
    assert compat.normalize_precision("fp8_e4m3fnuz") == "fp8_fnuz"
    assert compat.normalize_precision("nvfp4") == "fp4"
    with pytest.raises(CompatError, match="expected one of fp32, bf16"):
        compat.normalize_precision("fp12")


def test_supports_precision() -> None:
    hopper = ["fp64", "tf32", "bf16", "fp16", "fp8", "int8"]
    ampere = ["fp64", "tf32", "bf16", "fp16", "int8", "int4"]
    cdna3 = ["fp64", "tf32", "bf16", "fp16", "fp8_fnuz", "int8"]
    assert compat.supports_precision(hopper, "fp8")
    assert compat.supports_precision(hopper, "fp8_e5m2")
    assert not compat.supports_precision(ampere, "fp8")
    assert not compat.supports_precision(hopper, "fp4")
    assert compat.supports_precision(cdna3, "fp8")  # as FNUZ…
    assert not compat.supports_precision(cdna3, "fp8", fnuz_counts_as_fp8=False)
    assert "must be converted" in compat.check_precision(cdna3, "fp8").reason  # …which needs converting
    assert not compat.check_precision(["fp16"], "bf16")
    assert "native: fp16" in compat.check_precision(["fp16"], "bf16").reason


@pytest.mark.parametrize(
    ("cc", "precision", "ok"),
    [
        ("7.0", "bf16", False),
        ("7.5", "bf16", False),
        ("8.0", "bf16", True),
        ("8.6", "fp8", False),
        ("8.9", "fp8", True),
        ("9.0", "fp8", True),
        ("9.0", "fp4", False),
        ("10.0", "fp4", True),
        ("12.0", "fp4", True),
        ("12.0", "mxfp8", False),
        ("7.0", "int8", False),
        ("9.0", "int4", False),
    ],
)
def test_cc_supports_precision(cc: str, precision: str, ok: bool) -> None:
    assert compat.cc_supports_precision(cc, precision) is ok


def test_cc_rules_agree_with_every_nvidia_architecture_in_the_catalog() -> None:
    for arch in _records("architectures.json"):
        if arch["compute_capability_major"] is None:
            continue
        cc = f"{arch['compute_capability_major']}.{arch['compute_capability_minor']}"
        by_rule = {p for p in compat.CANONICAL_PRECISIONS if compat.cc_supports_precision(cc, p)}
        assert by_rule == set(arch["precisions"]), arch["slug"]


def test_catalog_precisions_are_canonical() -> None:
    slugs = [p["slug"] for p in _records("precisions.json")]
    assert sorted(slugs) == sorted(compat.CANONICAL_PRECISIONS)


def test_precision_names_come_from_the_engine() -> None:
    """The budget engine sizes the precisions a workload may use; the catalog adds device-only formats and
    leaves out the storage-only ones (nf4), which no device computes in."""
    from budgets.engine.dtypes import BYTES_PER_ELEMENT
    from catalog.choices import PrecisionSlug

    assert tuple(BYTES_PER_ELEMENT) == compat.WORKLOAD_PRECISIONS
    assert set(PrecisionSlug.values) == set(compat.CANONICAL_PRECISIONS)
    assert set(compat.PRECISION_LABELS) == set(compat.CANONICAL_PRECISIONS) | compat.STORAGE_ONLY_PRECISIONS
    assert compat.normalize_precision("NF4") == "nf4" and "nf4" not in PrecisionSlug.values


# --------------------------------------------------------------------------------------------------
# Kernels


@pytest.mark.parametrize(
    ("version", "cc", "cuda", "ok"),
    [
        (2, "7.5", None, False),  # T4: only a separate fork
        (2, "8.0", None, True),
        (2, "8.6", "12.4", True),
        (2, "8.9", "11.8", False),  # README: CUDA ≥ 12.0
        (2, "10.0", "12.6", False),  # Blackwell builds need 12.8
        (2, "10.0", "12.8", True),
        (2, "12.0", "13.0", True),
        (3, "9.0", "12.3", True),
        (3, "9.0", "12.2", False),
        (3, "8.0", "12.8", False),
        (3, "10.0", "12.8", False),
    ],
)
def test_flash_attention_on_nvidia(version: int, cc: str, cuda: str | None, ok: bool) -> None:
    assert compat.check_flash_attention(version, compute_capability=cc, cuda_version=cuda).ok is ok


def test_flash_attention_on_amd_and_bad_input() -> None:
    assert compat.check_flash_attention(2, gfx_target="gfx942")
    assert compat.check_flash_attention(2, gfx_target="gfx90a")
    assert not compat.check_flash_attention(2, gfx_target="gfx906")
    assert not compat.check_flash_attention(3, gfx_target="gfx942")
    with pytest.raises(CompatError):
        compat.check_flash_attention(4, compute_capability="9.0")
    with pytest.raises(CompatError):
        compat.check_flash_attention(2)


def test_vllm_compute_capability_floor() -> None:
    assert not compat.check_vllm("7.0")
    assert compat.check_vllm("7.0", legacy=True)
    assert compat.check_vllm("7.5")


# --------------------------------------------------------------------------------------------------
# PyTorch wheels


def _wheel(wheels: list[Wheel], torch: str, variant: str) -> Wheel:
    return next(w for w in wheels if w.torch_versions == torch and w.variant == variant)


def test_wheel_arch_lists_follow_binary_compatibility(wheels: list[Wheel]) -> None:
    cu126 = _wheel(wheels, "2.12-2.14", "cu126")
    cu130 = _wheel(wheels, "2.12-2.14", "cu130")
    assert compat.wheel_supports_compute_capability(cu126, "8.9")  # sm_86 SASS runs on 8.9
    assert compat.wheel_supports_compute_capability(cu126, "7.0")
    assert not compat.wheel_supports_compute_capability(cu126, "10.0")  # no Blackwell in cu126
    assert not compat.wheel_supports_compute_capability(cu130, "7.0")  # Volta never in cu13x
    assert compat.wheel_supports_compute_capability(cu130, "12.1")  # GB10 runs sm_120 SASS
    assert compat.wheel_supports_compute_capability(cu130, "13.0")  # via embedded PTX
    assert not compat.wheel_supports_compute_capability(_wheel(wheels, "2.11", "cu128"), "13.0")  # no PTX
    assert not compat.wheel_supports_compute_capability(Wheel("x", "cu128", "12.8", ("8.0",)), "8.7")
    assert not compat.wheel_supports_compute_capability(Wheel("x", "cu128", "12.8", ("9.0a",)), "9.1")


@pytest.mark.parametrize(
    ("cc", "driver", "arch", "expected"),
    [
        ("8.0", "535.247.01", "x86_64", "torch 2.12-2.14+cu126"),  # cu13x needs R580
        ("8.0", "580.95.05", "x86_64", "torch 2.12-2.14+cu132"),
        ("9.0", "550.163.01", "x86_64", "torch 2.12-2.14+cu126"),
        ("10.0", "570.195.03", "x86_64", "torch 2.11+cu128"),  # Blackwell: cu128+, driver < 580
        ("10.0", "580.95.05", "x86_64", "torch 2.12-2.14+cu132"),
        ("12.0", "570.195.03", "x86_64", "torch 2.11+cu128"),
        ("7.0", "580.95.05", "x86_64", "torch 2.12-2.14+cu126"),  # Volta: cu126 only
        ("9.0", "580.95.05", "aarch64", "torch 2.12-2.14+cu132-aarch64"),  # GH200
        ("10.0", "570.195.03", "aarch64", None),  # GB200 on R570: no aarch64 cu12x wheel with sm_100
        ("11.0", "580.95.05", "aarch64", "torch 2.12-2.14+cu132-aarch64"),  # Thor
    ],
)
def test_select_pytorch_wheel(
    wheels: list[Wheel], toolkits: list[Toolkit], cc: str, driver: str, arch: str, expected: str | None
) -> None:
    chosen = compat.select_pytorch_wheel(cc, driver, wheels, toolkits, cpu_architecture=arch)
    assert (str(chosen) if chosen else None) == expected


def test_pytorch_wheels_for_lists_only_wheels_that_run(wheels: list[Wheel], toolkits: list[Toolkit]) -> None:
    found = compat.pytorch_wheels_for("7.0", "535.247.01", wheels, toolkits)
    assert all("7.0" in w.compute_capabilities for w in found)
    assert all(not w.variant.startswith("cu13") for w in found)
    assert "torch 2.9-2.10+cu128" in {str(w) for w in found}
    assert "torch 2.11+cu128" not in {str(w) for w in found}
    assert compat.pytorch_wheels_for("10.0", "550.163.01", wheels, toolkits, allow_minor_compat=False) == []


def test_compat_imports_no_django() -> None:
    """The import-linter contract, checked here too: no module of catalog.compat imports Django, DRF, Celery
    or environ (it may import the standard library, catalog.units and the pure budget engine)."""
    imported = set()
    for path in Path(compat.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imported |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                imported.add(node.module.split(".")[0])
    assert imported and not imported & {"django", "rest_framework", "celery", "environ"}


# --------------------------------------------------------------------------------------------------
# Properties

_DRIVERS = st.builds(
    lambda major, minor, patch: f"{major}.{minor}.{patch:02d}",
    st.integers(440, 620),
    st.integers(0, 250),
    st.integers(0, 99),
)
_CUDA = st.sampled_from(["11.0", "11.8", "12.0", "12.2", "12.4", "12.6", "12.8", "12.9", "13.0", "13.2", "13.4"])


@given(older=_DRIVERS, newer=_DRIVERS, cuda=_CUDA)
def test_a_newer_driver_never_supports_less(older: str, newer: str, cuda: str) -> None:
    rows = [Toolkit.from_row(row) for row in _records("cuda_toolkits.json")]
    if version_key(older) > version_key(newer):
        older, newer = newer, older
    rank = {CudaSupport.NONE: 0, CudaSupport.MINOR_COMPAT: 1, CudaSupport.FULL: 2}
    assert rank[compat.cuda_support(older, cuda, rows)] <= rank[compat.cuda_support(newer, cuda, rows)]


@given(driver=_DRIVERS)
def test_max_cuda_for_driver_is_supported_by_that_driver(driver: str) -> None:
    rows = [Toolkit.from_row(row) for row in _records("cuda_toolkits.json")]
    for minor in (False, True):
        best = compat.max_cuda_for_driver(driver, rows, allow_minor_compat=minor)
        if best is not None:
            assert compat.driver_supports_cuda(driver, best, rows, allow_minor_compat=minor)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("12.4", "12.4"), ("12.4.1", "12.4.1"), (" 12.04 ", "12.4"), ("cu124", "12.4"), ("cu130-aarch64", "13.0")],
)
def test_parse_cuda_version_returns_the_normalized_version(text: str, expected: str) -> None:
    assert compat.parse_cuda_version(text) == expected


@pytest.mark.parametrize(
    "text", ["v12.4", ">=12.4", "12.4 x", "12", "twelve", "1" * 5000 + ".1", "１２.４", "12.4.1.0"]
)
def test_parse_cuda_version_rejects_what_a_caller_could_not_split(text: str) -> None:
    with pytest.raises(compat.CompatError, match="CUDA version"):
        compat.parse_cuda_version(text)


@pytest.mark.parametrize("text", ["v8.9", ">=8.0", "8.9.1", "8.9 x", "٨.٩"])
def test_parse_compute_capability_rejects(text: str) -> None:
    with pytest.raises(compat.CompatError):
        compat.parse_compute_capability(text)
