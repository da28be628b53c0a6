"""One entry point: every compatibility rule over one workload and one configuration.

``check_configuration(requirements, facts) -> list[Reason]``: empty when the configuration can run the
workload; otherwise one :class:`Reason` per failed rule, each saying what is wrong and what to do.
``Requirements.from_workload(workload)`` reads a validated ``budgets.engine.Workload``; ``Facts`` are
built from a catalog row by ``catalog.selectors.configuration_facts``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

from .base import CompatError, ComputeCapability, Reason, cuda_minor
from .cuda_arch import check_cuda_arch
from .driver import Toolkit, check_driver, max_cuda_for_driver
from .host import check_device, check_host
from .kernels import check_attention, check_engine
from .precision import check_precisions, normalize_precision
from .wheels import Wheel, check_wheels

# The precision roles a workload names (``precision.weights`` / ``compute`` / ``kv_cache``).
PRECISION_ROLES: tuple[str, ...] = ("weights", "compute", "kv_cache")


@dataclass(frozen=True)
class Requirements:
    """What a workload needs from a configuration."""

    device: str = "cuda"  # "cuda" or "cpu" (runtime.device)
    precisions: tuple[tuple[str, str], ...] = ()  # (role, canonical precision): (("weights", "fp8"), ...)
    cuda_version: str | None = None  # "12.8" (runtime.cuda_version); None on a CPU workload
    flash_attention: int | None = None  # 2 or 3; None when the workload does not use FlashAttention
    engine: str = "generic"  # "vllm", "transformers" or "generic"
    engine_version: str | None = None  # "0.11.0"
    cpu_architecture: str | None = None  # "x86_64" / "aarch64"; None = either

    @classmethod
    def from_workload(cls, workload: Any, *, cpu_architecture: str | None = None) -> Requirements:
        """From a validated ``budgets.engine.Workload``. ``runtime.attention: flash`` asks for FlashAttention-2
        (what ``attn_implementation="flash_attention_2"`` loads; FA3 is opt-in: pass ``flash_attention=3``
        through ``dataclasses.replace``). A custom task names no precisions or engine of its own."""
        runtime = workload.runtime
        on_cuda = runtime.device == "cuda"
        precisions: tuple[tuple[str, str], ...] = ()
        if workload.task != "custom":
            spec = workload.precision
            precisions = tuple((role, normalize_precision(getattr(spec, role))) for role in PRECISION_ROLES)
        engine = workload.inference.engine if workload.task == "inference" else "transformers"
        return cls(
            device=runtime.device,
            precisions=precisions,
            cuda_version=runtime.cuda_version if on_cuda else None,
            flash_attention=2 if on_cuda and runtime.attention == "flash" else None,
            engine=engine if workload.task != "custom" else "generic",
            engine_version=runtime.engine_version,
            cpu_architecture=cpu_architecture,
        )


@dataclass(frozen=True)
class Facts:
    """What a configuration offers. ``toolkits`` and ``wheels`` are the catalog's tables (shared)."""

    label: str  # "NVIDIA A100 80GB SXM4 (Ampere, CC 8.0)": how reasons name the device
    vendor: str = ""  # "nvidia", "amd"; "" for a CPU-only configuration
    compute_capability: ComputeCapability | None = None
    gfx_target: str = ""  # "gfx942" on AMD
    native_precisions: frozenset[str] = frozenset()  # canonical names: {"bf16", "fp16", "fp8", ...}
    driver_version: str = ""  # installed NVIDIA driver "570.195.03", or the ROCm version on AMD
    host_cpu_architecture: str = "x86_64"
    toolkits: tuple[Toolkit, ...] = ()
    wheels: tuple[Wheel, ...] = ()

    def __hash__(self) -> int:
        # the rules' results are remembered per (requirements, facts) (``recommendations.verdicts``); the
        # toolkit and wheel tables are long and shared by every configuration, so each is hashed once
        return hash(
            (
                self.label,
                self.vendor,
                self.compute_capability,
                self.gfx_target,
                self.native_precisions,
                self.driver_version,
                self.host_cpu_architecture,
                _table_hash(self.toolkits),
                _table_hash(self.wheels),
            )
        )

    @property
    def has_accelerator(self) -> bool:
        return bool(self.vendor)

    @property
    def is_nvidia_gpu(self) -> bool:
        return self.vendor == "nvidia"

    @classmethod
    def of_device(cls, label: str, architecture: Mapping[str, Any], **host: Any) -> Facts:
        """The facts of an accelerator from its architecture's catalog fields (``vendor``,
        ``compute_capability_major`` / ``_minor``, ``gfx_target``, ``precisions``) and the host's
        (``driver_version``, ``host_cpu_architecture``, ``toolkits``, ``wheels``): one reading for the
        database rows (``catalog.selectors``) and the fixture records (benchmarks, pure tests)."""
        major, minor = architecture["compute_capability_major"], architecture["compute_capability_minor"]
        return cls(
            label=label,
            vendor=architecture["vendor"],
            compute_capability=ComputeCapability(major, minor) if major is not None else None,
            gfx_target=architecture["gfx_target"] or "",
            native_precisions=frozenset(normalize_precision(p) for p in architecture["precisions"]),
            **host,
        )


#: id(table) → (the table, its hash). The entry holds the table, so its id is not reused while it is cached.
_TABLE_HASHES: dict[int, tuple[tuple[Any, ...], int]] = {}
_TABLE_HASHES_KEPT = 64


def _table_hash(table: tuple[Any, ...]) -> int:
    found = _TABLE_HASHES.get(id(table))
    if found is not None and found[0] is table:
        return found[1]
    if len(_TABLE_HASHES) >= _TABLE_HASHES_KEPT:
        _TABLE_HASHES.clear()
    value = hash(table)
    _TABLE_HASHES[id(table)] = (table, value)
    return value


Rule = Callable[[Requirements, Facts], list[Reason]]

# (rule name, rule) in the order a person fixes things: the device, then what runs on it.
RULES: tuple[tuple[str, Rule], ...] = (
    ("device", check_device),
    ("host", check_host),
    ("precision", check_precisions),
    ("cuda_arch", check_cuda_arch),
    ("driver", check_driver),
    ("wheels", check_wheels),
    ("flash_attention", check_attention),
    ("vllm", check_engine),
)


def assumed_cuda(requirements: Requirements, facts: Facts) -> str | None:
    """The CUDA version a workload that names none is judged with on this configuration: the newest toolkit its
    driver fully runs (``max_cuda_for_driver``); None when the workload names one, runs on the CPU, the device is no
    NVIDIA GPU, or the driver is unknown (then the driver rule says so)."""
    if requirements.cuda_version is not None or requirements.device != "cuda" or not facts.is_nvidia_gpu:
        return None
    if not facts.driver_version:
        return None
    return _newest_full_cuda(facts)


@lru_cache(maxsize=4096)
def _newest_full_cuda(facts: Facts) -> str | None:
    """The newest CUDA (major.minor) the configuration's driver fully runs: remembered per configuration's facts, as
    every check and every entry's settings ask for it (uncached it was half of a catalog-wide recommendation)."""
    try:
        newest = max_cuda_for_driver(facts.driver_version, facts.toolkits)
    except CompatError:
        return None
    return cuda_minor(newest) if newest else None


def check_configuration(requirements: Requirements, facts: Facts) -> list[Reason]:
    """Every failed rule, in :data:`RULES` order; empty when the configuration can run the workload.

    A workload that names no CUDA version is judged with the newest one the configuration's driver runs
    (``assumed_cuda``). A rule that cannot read its input (an unknown CUDA major, an unreadable driver version) fails
    with that message rather than passing silently.
    """
    assumed = assumed_cuda(requirements, facts)
    if assumed is not None:
        requirements = replace(requirements, cuda_version=assumed)
    reasons: list[Reason] = []
    for name, rule in RULES:
        try:
            reasons += rule(requirements, facts)
        except CompatError as exc:
            reasons.append(Reason(name, f"{facts.label}: {exc}", "correct the catalog entry or the workload"))
    return reasons
