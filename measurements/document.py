"""The measurement document: what ``vramplan-measure`` prints and uploads, and what a job stores.

Pure (pydantic, no Django): the upload endpoint validates a body with it, so every bad field is a 400
that names the field. Free-form sections (versions, conditions, …) are bounded JSON objects, and every
number in them is bounded by what its key says it is (``NUMBER_BOUNDS``): a byte count, a time, a ratio, a
count of tokens, else a 64-bit integer. Readers compute with these figures (sums, ratios, floats), so an
unbounded one would turn into an OverflowError where it is read, long after it was stored.
"""

from __future__ import annotations

import json
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic_core import InitErrorDetails, PydanticCustomError, ValidationError

SCHEMA_ID: Final = "vramplan-measurement/1"
MAX_BYTES: Final = 2**50  # 1 PiB: more than any device or host holds; sums and ratios of figures stay exact floats
MAX_SECONDS: Final = 30 * 86_400  # the longest run a document describes
MAX_MS: Final = MAX_SECONDS * 1000  # the slowest latency figure (ms): the whole run for one token
MAX_COUNT: Final = 2**40  # tokens, blocks
MAX_NUMBER: Final = 2**63 - 1  # any other number in a free-form section: a signed 64-bit integer
MAX_SECTION_CHARS = 200_000  # a free-form section's JSON text
MAX_TIMELINE_POINTS = 5_000

#: (key suffix, low, high, what it is) for the numbers in free-form sections, first match wins. Byte figures
#: may be negative there: vLLM prints differences (a KV cache budget with no room left is negative) and the
#: sampler reports the device's peak over its baseline; the typed peaks and the timeline are 0 to MAX_BYTES.
NUMBER_BOUNDS: Final[tuple[tuple[str, float, float, str], ...]] = (
    ("_bytes", -MAX_BYTES, MAX_BYTES, "a number of bytes (at most 1 PiB, 2**50)"),
    ("_per_s", 0, MAX_NUMBER, "a rate"),
    ("_seconds", 0, MAX_SECONDS, "seconds"),
    ("_s", 0, MAX_SECONDS, "seconds"),
    ("_ms", 0, MAX_MS, "milliseconds"),
    ("ms_per_output_token", 0, MAX_MS, "milliseconds"),
    ("_tokens", 0, MAX_COUNT, "a number of tokens"),
    ("_blocks", 0, MAX_COUNT, "a number of blocks"),
    ("_utilization", 0, 1, "a fraction"),
    ("_fraction", 0, 1, "a fraction"),
)

Outcome = Literal["succeeded", "failed", "oom", "timeout", "signalled", "cancelled"]
ByteCount = int


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class Peaks(_Strict):
    """Each view's peak in bytes, or null with the reason in ``reasons``."""

    device_used_bytes: int | None = Field(None, ge=0, le=MAX_BYTES, description="NVML device used (v2), busiest device")
    framework_allocated_bytes: int | None = Field(None, ge=0, le=MAX_BYTES, description="PyTorch allocated peak")
    framework_reserved_bytes: int | None = Field(None, ge=0, le=MAX_BYTES, description="PyTorch reserved peak")
    host_rss_bytes: int | None = Field(None, ge=0, le=MAX_BYTES, description="RSS of the process tree")
    reasons: dict[str, str] = Field(default_factory=dict, description="why each null view could not be read")

    @field_validator("reasons")
    @classmethod
    def _bounded(cls, value: dict[str, str]) -> dict[str, str]:
        if len(value) > 16 or any(len(k) > 64 or len(v) > 2000 for k, v in value.items()):
            raise ValueError("at most 16 reasons, keys up to 64 and texts up to 2000 characters")
        return value

    def by_view(self) -> dict[str, int | None]:
        return {
            "device_used": self.device_used_bytes,
            "framework_reserved": self.framework_reserved_bytes,
            "framework_allocated": self.framework_allocated_bytes,
            "host_rss": self.host_rss_bytes,
        }


def _number_bound(key: str) -> tuple[float, float, str]:
    for suffix, low, high, what in NUMBER_BOUNDS:
        if key.endswith(suffix):
            return low, high, what
    return -MAX_NUMBER, MAX_NUMBER, "a number"


def _out_of_range(value: Any, loc: tuple[str | int, ...] = (), key: str = "") -> list[InitErrorDetails]:
    """Every number under ``value`` outside the bound its key gives (``NUMBER_BOUNDS``), located by its path."""
    if isinstance(value, dict):
        return [e for k, item in value.items() for e in _out_of_range(item, (*loc, str(k)), str(k))]
    if isinstance(value, list):
        return [e for i, item in enumerate(value) for e in _out_of_range(item, (*loc, i), key)]
    if isinstance(value, bool) or not isinstance(value, int | float):
        return []
    low, high, what = _number_bound(key)
    if low <= value <= high:  # NaN and ±infinity never are; neither is an integer too large for a float
        return []
    shown = _shown(value)
    message = f"{shown} is out of range: expected {what}, {_shown(low)} to {_shown(high)}"
    return [InitErrorDetails(type=PydanticCustomError("number_range", message), loc=loc, input=shown)]


def _shown(value: float) -> str:
    if isinstance(value, int) and len(str(abs(value))) > 30:
        return f"an integer of {len(str(abs(value)))} digits"
    return f"{value:,}" if isinstance(value, int) else f"{value:g}"


def _bounded_section(value: Any, name: str) -> Any:
    if value is None:
        return value
    errors = _out_of_range(value)
    if errors:  # raised as a ValidationError, so each error keeps its path below the section (peaks.x.y_bytes)
        raise ValidationError.from_exception_data("MeasurementDocument", errors[:5])
    if len(json.dumps(value, allow_nan=False)) > MAX_SECTION_CHARS:
        raise ValueError(f"{name} is larger than {MAX_SECTION_CHARS} characters of JSON")
    return value


class MeasurementDocument(_Strict):
    """One measured run (see the README's vramplan-measure section for every field)."""

    schema_id: Literal["vramplan-measurement/1"] = Field(SCHEMA_ID, alias="schema")
    run_id: str = Field(..., min_length=8, max_length=64, pattern=r"^[A-Za-z0-9_.:-]+$")
    outcome: Outcome
    exit_code: int | None = Field(None, ge=-255, le=255)
    signal: int | None = Field(None, ge=1, le=64)
    signal_name: str | None = Field(None, max_length=32)
    duration_seconds: float = Field(..., ge=0, le=MAX_SECONDS)
    command: list[str] = Field(default_factory=list, max_length=256)
    peaks: Peaks
    framework: dict[str, Any] | None = None
    sampling: dict[str, Any] = Field(default_factory=dict)
    devices: list[dict[str, Any]] = Field(default_factory=list, max_length=64)
    versions: dict[str, Any] = Field(default_factory=dict)
    conditions: dict[str, Any] = Field(default_factory=dict)
    timing: dict[str, Any] | None = None
    quality: dict[str, Any] | None = None
    program_report: dict[str, Any] | None = None
    timeline: list[tuple[float, int | None, int | None]] = Field(default_factory=list, max_length=MAX_TIMELINE_POINTS)
    error: str | None = Field(None, max_length=20_000)

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, populate_by_name=True)

    @field_validator("command")
    @classmethod
    def _command(cls, value: list[str]) -> list[str]:
        if any(len(arg) > 4096 for arg in value):
            raise ValueError("each argument is at most 4096 characters")
        return value

    @field_validator("framework", "sampling", "versions", "conditions", "timing", "quality", "program_report")
    @classmethod
    def _sections(cls, value: Any, info: Any) -> Any:
        return _bounded_section(value, info.field_name)

    @field_validator("devices")
    @classmethod
    def _devices(cls, value: list[dict[str, Any]]) -> list[dict[str, Any]]:
        devices: list[dict[str, Any]] = _bounded_section(value, "devices")
        return devices

    @field_validator("timeline")
    @classmethod
    def _timeline(cls, value: list[tuple[float, int | None, int | None]]) -> list[tuple[float, int | None, int | None]]:
        for t, device, host in value:
            if not 0 <= t <= MAX_SECONDS:
                raise ValueError("timeline times are seconds since the start, 0 to 30 days")
            for figure in (device, host):
                if figure is not None and not 0 <= figure <= MAX_BYTES:
                    raise ValueError(f"timeline figures are bytes, 0 to {MAX_BYTES}")
        return value

    @field_validator("timing")
    @classmethod
    def _latency(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        latency = (value or {}).get("ms_per_output_token")
        if latency is not None and (isinstance(latency, bool) or not isinstance(latency, int | float) or latency <= 0):
            raise ValueError("timing.ms_per_output_token is a positive number of milliseconds, or null")
        return value

    @property
    def ms_per_output_token(self) -> float | None:
        value = (self.timing or {}).get("ms_per_output_token")
        return float(value) if isinstance(value, int | float) else None

    def dump(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)
