"""catalog.units: memory sizes and versions are parsed once and compared as integers (no database)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from catalog.units import (
    MAX_MEMORY_BYTES,
    UnitError,
    driver_branch,
    driver_branch_key_range,
    format_bytes,
    parse_driver_branch,
    parse_memory,
    version_key,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("80GB", 80 * 10**9),
        ("79GiB", 79 * 2**30),
        ("81920MiB", 80 * 2**30),
        ("1024", 1024),
        ("0", 0),
        (" 16 GB ", 16 * 10**9),
        ("80gb", 80 * 10**9),
        ("1.5GiB", 3 * 2**29),
        ("79.5GiB", 159 * 2**29),  # exact: no float rounding
        ("0.1GB", 10**8),
        ("2TB", 2 * 10**12),
        ("2TiB", 2 * 2**40),
        ("512KiB", 512 * 1024),
        ("100B", 100),
    ],
)
def test_parse_memory_reads_decimal_and_binary_units(text: str, expected: int) -> None:
    assert parse_memory(text) == expected


def test_gb_and_gib_differ_and_are_never_mixed() -> None:
    assert parse_memory("80GB") < parse_memory("80GiB")
    assert parse_memory("80GiB") - parse_memory("80GB") == 80 * (2**30 - 10**9)


@pytest.mark.parametrize("text", ["", "GB", "eighty GB", "-1GB", "1e9", "80 XB", "80 GB GB", "1,5GB", "0x10"])
def test_parse_memory_rejects_what_it_cannot_read(text: str) -> None:
    with pytest.raises(UnitError) as excinfo:
        parse_memory(text)
    message = str(excinfo.value)
    assert "GB" in message and "GiB" in message  # the message says what was expected


def test_parse_memory_names_the_allowed_units_for_an_unknown_unit() -> None:
    with pytest.raises(UnitError, match=r"unknown unit 'EiB'.*KiB, MiB, GiB, TiB"):
        parse_memory("1EiB")


def test_parse_memory_has_an_upper_bound() -> None:
    assert parse_memory(str(MAX_MEMORY_BYTES)) == MAX_MEMORY_BYTES
    with pytest.raises(UnitError, match="larger than any"):
        parse_memory("2000000TB")


@given(st.integers(min_value=0, max_value=2**40))
def test_bare_numbers_are_bytes_and_mib_is_2_to_the_20(n: int) -> None:
    assert parse_memory(str(n)) == n
    assert parse_memory(f"{n}MiB") == n * 2**20


def test_format_bytes_labels_both_conventions() -> None:
    assert format_bytes(80 * 10**9) == "80.0 GB (74.5 GiB)"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("550.54.15", 550_054_015_000),
        ("12.4", 12_004_000_000),
        ("12.4.0", 12_004_000_000),
        (">=525.60.13", 525_060_013_000),
        (">= 580", 580_000_000_000),
        ("R550", 550_000_000_000),
        ("v13.0", 13_000_000_000),
        ("525.60.13 (12.0 GA)", 525_060_013_000),
        ("1.2.3.4", 1_002_003_004),
    ],
)
def test_version_key(text: str, expected: int) -> None:
    assert version_key(text) == expected


def test_version_keys_order_like_versions() -> None:
    versions = ["450.80.02", "525.60.13", "525.85.12", "535.54.03", "535.247.01", "550.54.14", "580.95.05"]
    assert sorted(versions, key=version_key) == versions
    assert version_key("12.10") > version_key("12.9")  # numeric, not lexical


@pytest.mark.parametrize("text", ["", "abc", "12.x", "1.2.3.4.5", "1000.0", "12..4"])
def test_version_key_rejects_non_versions(text: str) -> None:
    with pytest.raises(UnitError):
        version_key(text)


@pytest.mark.parametrize("text", ["9" * 4301, "1." + "5" * 4301, "9" * 21 + "GB", "٨٠GB", "８０GB"])
def test_parse_memory_rejects_huge_and_non_ascii_numbers_with_a_unit_error(text: str) -> None:
    with pytest.raises(UnitError):
        parse_memory(text)


@pytest.mark.parametrize("text", ["9" * 5000, "1.²", "５５０.54", "R" + "1" * 30])
def test_version_key_rejects_huge_and_non_ascii_digits_with_a_unit_error(text: str) -> None:
    with pytest.raises(UnitError):
        version_key(text)


@pytest.mark.parametrize(
    ("version", "branch"),
    [("550.54.15", 550), ("550", 550), ("R550", 550), (">=580", 580), ("6.4.1", 6), ("", None), (None, None),
     ("banana", None), ("1000.1", None), ("x.y", None)],
)  # fmt: skip
def test_driver_branch(version, branch) -> None:
    assert driver_branch(version) == branch
    if branch is not None:
        low, high = driver_branch_key_range(branch)
        assert low <= version_key(version) < high


@pytest.mark.parametrize(("text", "branch"), [("550", 550), ("R550", 550), (" r570 ", 570)])
def test_parse_driver_branch(text: str, branch: int) -> None:
    assert parse_driver_branch(text) == branch


@pytest.mark.parametrize("text", ["", "R", "Rxyz", "R²", "5" * 5000, "550.54", "R 550", "٥٥٠"])
def test_parse_driver_branch_rejects(text: str) -> None:
    with pytest.raises(UnitError, match="driver branch"):
        parse_driver_branch(text)
