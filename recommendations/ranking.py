"""The order of recommendations. Pure.

1. feasible first: ``fits``, then ``tight``, then ``does_not_fit``, then ``unsupported``; among the ``does_not_fit``,
   the closest first (the plan's need over usable memory), not the cheapest: a configuration needing 726 GiB of a
   48 GiB device is no recommendation, whatever its price;
2. better evidence first (measured here > measured on the architecture > estimate only);
3. cheaper first: by price per million output tokens where the plan's throughput is known, else by price
   per hour; configurations without a price after those with one;
4. fewer devices in the configuration;
5. less wasted memory: usable memory of every device in the configuration less what the plan needs;
6. the configuration's slug, so that equal entries keep one stable order.

Which configurations are considered at all is the caller's ``Filters`` (vendor, devices, price).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING

from .verdicts import Verdict

if TYPE_CHECKING:
    from .plans import ConfigurationView
    from .recommend import Entry

VERDICT_ORDER = {Verdict.FITS: 0, Verdict.TIGHT: 1, Verdict.DOES_NOT_FIT: 2, Verdict.UNSUPPORTED: 3}


def _cost_key(entry: Entry) -> tuple[int, float]:
    price = entry.price_basis  # what the table and the API show as the price the entry was ranked on
    return (price.rank, price.value or 0.0)


def wasted_bytes(entry: Entry) -> int:
    """Usable bytes of the configuration's devices that the plan leaves unneeded (0 without a plan)."""
    if entry.plan is None or entry.per_device_bytes is None:
        return 0
    bought = entry.usable_bytes * int(entry.configuration["device_count"])
    return bought - entry.plan.devices * entry.per_device_bytes


def overflow_ratio(entry: Entry) -> float:
    """A ``does_not_fit`` entry's need over usable memory per device (how far it is from fitting); 0 otherwise."""
    if entry.verdict != Verdict.DOES_NOT_FIT or entry.per_device_bytes is None or entry.usable_bytes <= 0:
        return 0.0
    return entry.per_device_bytes / entry.usable_bytes


def rank_key(entry: Entry) -> tuple[object, ...]:
    return (
        VERDICT_ORDER[entry.verdict],
        overflow_ratio(entry),
        -entry.evidence.level,
        _cost_key(entry),
        entry.configuration["device_count"],
        wasted_bytes(entry),
        entry.configuration["slug"],
    )


def best_possible_key(view: ConfigurationView, evidence_level: int) -> tuple[object, ...]:
    """A bound below ``rank_key`` of any entry ``view`` can give, known before its plans are searched: the best
    verdict (``fits``, nothing over), the evidence it has, the cheapest price basis its offer allows (0 USD per
    million tokens for a priced configuration; "no price" for the rest), and no memory wasted. Every part of
    the real key is at least this one's, so a configuration whose bound ranks after a full page's last entry
    cannot enter the page (``Recommender._judged_for_page``)."""
    price_rank = 0 if view.hourly_price_usd is not None else 2
    return (
        VERDICT_ORDER[Verdict.FITS],
        0.0,
        -evidence_level,
        (price_rank, 0.0),
        view.device_count,
        -math.inf,
        view.slug,
    )


@dataclass(frozen=True, slots=True)
class Filters:
    """Which configurations to consider; None means no limit."""

    vendor: str | None = None  # a catalog vendor slug ("nvidia", "amd", …)
    max_devices: int | None = None  # devices in the configuration
    max_price: Decimal | None = None  # USD per hour; configurations without a price are left out when set

    def keeps(self, view: ConfigurationView) -> bool:
        if self.vendor is not None and view.facts.vendor != self.vendor:
            return False
        if self.max_devices is not None and view.device_count > self.max_devices:
            return False
        if self.max_price is not None:
            return view.hourly_price_usd is not None and view.hourly_price_usd <= self.max_price
        return True
