"""Usable memory per device, best evidence first. Pure: no Django (an import-linter contract enforces it).

1. **verified**: measured on an attached node — NVML's total less the driver's reserve (the smallest
   device of the configuration's nodes; ``catalog.models.Node.verified_usable_memory_bytes``).
2. **observed**: what CUDA reports, read in a public source (``Accelerator.usable_memory_bytes`` with
   its ``usable_memory_source``, from ``memory_gib_observed`` in the shared ``gpus.json``).
3. **derived**: the marketed size times the smallest observed/marketed ratio of devices with the same
   memory type (:data:`DERIVATION_RULES`), rounded down — conservative by construction.
4. **marketed**: a device whose memory type has no rule (none recorded, or neither HBM nor GDDR): the
   datasheet figure, flagged so, since there is nothing to derive from.
5. **host_ram**: a CPU-only configuration has no device memory; its budget is measured against host RAM.

Why marketed and usable differ. HBM and GDDR capacities are built from binary-sized parts, so "80 GB" is
about 80 GiB of DRAM; CUDA reports that less what the driver and firmware reserve ("Device memory reserved
for system use (driver or firmware)", NVML ``nvmlMemory_v2_t.reserved``). Data-center GDDR cards also run
ECC inside the DRAM by default: "When the GPU is advertised as 16GB of memory, 16GB refers to the physical
amount of memory, not the amount after ECC. After ECC overhead, there is only 15GB of usable space left"
(https://exafunction.com/blog/ecc-gpu, on a T4); "ECC is off by default for Geforce and Quadro(RTX) cards,
but for Tesla cards, it is turned on by default" (https://support.chaos.com/hc/en-us/articles/24886637113617).
The catalog does not record a card's ECC state, so the GDDR rule takes the ECC-on cards' ratio: it
understates a GeForce card (RTX 3090: derived 23.6e9 B, observed 25.3e9 B) rather than overstate a T4.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from decimal import ROUND_FLOOR, Decimal

GIB = 2**30


class UsableBasis(enum.StrEnum):
    VERIFIED = "verified"
    OBSERVED = "observed"
    DERIVED = "derived"
    MARKETED = "marketed"
    HOST_RAM = "host_ram"


@dataclass(frozen=True)
class UsableMemory:
    """Usable memory of one device and the evidence behind it."""

    bytes: int  # per device, bytes
    basis: UsableBasis
    source: str  # where the figure comes from, for a person: a node, a URL, or the rule applied


@dataclass(frozen=True)
class ObservedPair:
    """A device whose marketed size and CUDA-reported total are both known (fixtures/catalog/accelerators.json,
    from the shared gpus.json; the source of each observation is its ``usable_memory_source``)."""

    slug: str
    memory_type: str
    marketed_bytes: int  # memory_gb_marketed × 1e9
    observed_bytes: int  # memory_gib_observed × 2**30, as CUDA reported it

    @property
    def ratio(self) -> Decimal:
        return Decimal(self.observed_bytes) / Decimal(self.marketed_bytes)


# Every pair in the catalog whose observation is a CUDA or driver report (torch total_memory, deviceQuery,
# vLLM's memory profiler). Left out: V100 16GB and RTX A6000 (SkyPilot's Lambda catalog ``SizeInMiB``: a
# cloud listing of the physical size, not what CUDA reports) and B200 (Vultr's page prints "179 GB HBM3e",
# a product description).
OBSERVED_PAIRS: tuple[ObservedPair, ...] = (
    ObservedPair("a100-40gb-pcie", "HBM2", 40_000_000_000, 42_294_690_447),
    ObservedPair("a100-40gb-sxm4", "HBM2", 40_000_000_000, 42_402_064_630),
    ObservedPair("a100-80gb-sxm4", "HBM2e", 80_000_000_000, 84_986_665_370),
    ObservedPair("h100-sxm-80gb", "HBM3", 80_000_000_000, 85_029_615_043),
    ObservedPair("t4", "GDDR6", 16_000_000_000, 15_826_954_486),
    ObservedPair("a10", "GDDR6", 24_000_000_000, 23_611_582_710),
    ObservedPair("rtx-3090", "GDDR6X", 24_000_000_000, 25_318_832_210),
    ObservedPair("rtx-4090", "GDDR6X", 24_000_000_000, 25_372_519_301),
)

_RATIO_STEP = Decimal("0.000001")  # ratios are rounded down to six decimals (conservative)


def memory_class(memory_type: str) -> str:
    """``"HBM3e"`` → ``"HBM"``; ``"GDDR6 (ECC)"`` → ``"GDDR"``; anything else → ``""`` (no rule)."""
    kind = memory_type.strip().upper()
    for prefix in ("HBM", "GDDR"):
        if kind.startswith(prefix):
            return prefix
    return ""


@dataclass(frozen=True)
class DerivationRule:
    memory_class: str  # "HBM", "GDDR"
    ratio: Decimal  # usable bytes per marketed byte
    pairs: tuple[ObservedPair, ...]  # the observations it is the minimum of

    def describe(self) -> str:
        kind = f"{len(self.pairs)} {self.memory_class} devices"
        lowest = min(self.pairs, key=lambda p: p.ratio)
        return (
            f"derived: marketed × {self.ratio}, the smallest CUDA-reported/marketed ratio of {kind} "
            f"({lowest.slug}); rule in catalog/usable.py"
        )


def _rule(kind: str, pairs: tuple[ObservedPair, ...]) -> DerivationRule:
    ratio = min(p.ratio for p in pairs).quantize(_RATIO_STEP, rounding=ROUND_FLOOR)
    return DerivationRule(kind, ratio, pairs)


def _rules() -> dict[str, DerivationRule]:
    by_class = {
        kind: tuple(p for p in OBSERVED_PAIRS if memory_class(p.memory_type) == kind) for kind in ("HBM", "GDDR")
    }
    return {kind: _rule(kind, pairs) for kind, pairs in by_class.items()}


DERIVATION_RULES: dict[str, DerivationRule] = _rules()


def derived_usable_bytes(marketed_bytes: int, memory_type: str) -> int:
    """``floor(marketed × ratio)`` for the memory type's rule (the SQL annotation computes the same);
    KeyError for a memory type with no rule."""
    ratio = DERIVATION_RULES[memory_class(memory_type)].ratio
    return int((Decimal(marketed_bytes) * ratio).to_integral_value(rounding=ROUND_FLOOR))


def accelerator_usable_memory(
    *,
    marketed_bytes: int,
    memory_type: str = "",
    observed_bytes: int | None = None,
    observed_source: str = "",
    verified_bytes: int | None = None,
    verified_source: str = "",
) -> UsableMemory:
    """The best evidence there is: verified on a node > observed in a public source > derived."""
    if verified_bytes:
        return UsableMemory(verified_bytes, UsableBasis.VERIFIED, verified_source)
    if observed_bytes:
        return UsableMemory(observed_bytes, UsableBasis.OBSERVED, observed_source)
    rule = DERIVATION_RULES.get(memory_class(memory_type))
    if rule is None:
        source = f"marketed size: no derivation rule for memory type {memory_type!r} (only HBM and GDDR have one)"
        return UsableMemory(marketed_bytes, UsableBasis.MARKETED, source)
    return UsableMemory(derived_usable_bytes(marketed_bytes, memory_type), UsableBasis.DERIVED, rule.describe())


def host_usable_memory(host_ram_bytes: int) -> UsableMemory:
    """A CPU-only configuration: the budget is compared with the host's RAM."""
    return UsableMemory(host_ram_bytes, UsableBasis.HOST_RAM, "host RAM of the configuration")


def verified_source(node_name: str) -> str:
    return f"node {node_name}: NVML total less the driver's reserve"
