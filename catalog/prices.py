"""Loading prices: fixtures/catalog/prices.json into :class:`catalog.models.Price` rows and each configuration's price.

``manage.py loadcatalog`` loads them after the catalog itself (:func:`prices_load_path`, in the same transaction);
``manage.py loadprices`` reloads the prices alone. Running either twice changes nothing.

Per configuration the file lists each provider's cheapest offer per kind, or why there is none
(``fixtures/build_prices.py``). Loading one:

- creates or updates a :class:`catalog.models.Price` per (provider, kind) and deletes the rows the file no longer
  lists: prices are the file's data, read-only in the admin;
- sets the configuration's ``hourly_price_usd`` (what ranking compares) to its cheapest on-demand price, or to
  none with the file's ``no_price_reason``, through ``catalog.services.configuration_update`` (the one write path).

Configurations the file does not list (the CPU-only one) keep their price.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal
from pathlib import Path
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from catalog.choices import PriceKind
from catalog.models import Configuration, Price, price_is_stale
from catalog.services import DEFAULT_CATALOG_DIR, CatalogDataError, configuration_update

PRICES_FILE = "prices.json"
PRICE_FIELDS = (
    "usd_per_hour",
    "region",
    "regions",
    "instance_type",
    "vcpus",
    "host_memory_gib",
    "source_url",
    "read_on",
)


@dataclass
class PriceReport:
    """What a price load did."""

    created: int = 0
    updated: int = 0
    unchanged: int = 0
    deleted: int = 0
    priced: int = 0  # configurations with at least one on-demand price
    no_price: int = 0  # configurations the file gives a reason for
    stale: int = 0  # Price rows read more than 90 days before today
    changes: list[str] = field(default_factory=list)  # "h100-sxm-80gb-x8-r550 Lambda on_demand: usd_per_hour"

    def lines(self) -> list[str]:
        out = [
            f"prices: {self.created} created, {self.updated} updated, {self.unchanged} unchanged, "
            f"{self.deleted} deleted; {self.priced} configurations priced, {self.no_price} with no price (a reason)"
        ]
        if self.stale:
            out.append(f"prices: {self.stale} read more than 90 days ago (stale): rebuild prices.json")
        return out


def prices_read(folder: Path | str | None = None) -> dict[str, Any] | None:
    """The folder's prices.json, or None when it has none; bad JSON names the file."""
    file = Path(folder or DEFAULT_CATALOG_DIR) / PRICES_FILE
    if not file.exists():
        return None
    try:
        document = json.loads(file.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise CatalogDataError(f"{file}: not valid JSON ({exc})") from None
    if not isinstance(document, dict) or not isinstance(document.get("records"), list):
        raise CatalogDataError(f"{file}: expected an object with 'sources' and a list of 'records'")
    return document


def _offer_fields(offer: Mapping[str, Any], sources: Mapping[str, Any]) -> dict[str, Any]:
    """A Price row's fields from one offer of the file, its source's URL and date filled in."""
    source = sources.get(str(offer.get("source")))
    if source is None:
        raise CatalogDataError(f"source {offer.get('source')!r} is not in the file's sources")
    return {
        "usd_per_hour": Decimal(str(offer["usd_per_hour"])).quantize(Decimal("0.0001")),
        "region": offer["region"],
        "regions": offer.get("regions", 1),
        "instance_type": offer["instance_type"],
        "vcpus": offer.get("vcpus"),
        "host_memory_gib": offer.get("host_memory_gib"),
        "source_url": source["url"],
        "read_on": date.fromisoformat(source["read_on"]),
    }


def _save_price(
    configuration: Configuration,
    provider: str,
    kind: str,
    fields: dict[str, Any],
    found: Price | None,
    report: PriceReport,
) -> None:
    """Create or update one Price row, validated as every catalog row is (``full_clean``)."""
    if found is None:
        price = Price(configuration=configuration, provider=provider, kind=kind, **fields)
        report.created += 1
    else:
        changed = [name for name in PRICE_FIELDS if getattr(found, name) != fields[name]]
        if not changed:
            report.unchanged += 1
            return
        for name in changed:
            setattr(found, name, fields[name])
        price = found
        report.updated += 1
        report.changes.append(f"{configuration.slug} {provider} {kind}: {', '.join(changed)}")
    price.full_clean()
    price.save()


def _load_record(record: Mapping[str, Any], sources: Mapping[str, Any], report: PriceReport) -> None:
    """One configuration's offers (or its reason) into Price rows and its ranking price."""
    slug = record.get("configuration")
    configuration = Configuration.objects.filter(slug=slug).first()
    if configuration is None:
        raise CatalogDataError(f"unknown configuration {slug!r}")
    existing = {(p.provider, p.kind): p for p in configuration.prices.all()}
    wanted: dict[tuple[str, str], dict[str, Any]] = {}
    for offer in record.get("offers", []):
        key = (offer["provider"], offer["kind"])
        if key in wanted:
            raise CatalogDataError(f"{offer['provider']} {offer['kind']} appears twice")
        wanted[key] = _offer_fields(offer, sources)
        _save_price(configuration, *key, wanted[key], existing.get(key), report)
    for key, price in existing.items():
        if key not in wanted:
            price.delete()
            report.deleted += 1
    on_demand = [fields["usd_per_hour"] for (_, kind), fields in wanted.items() if kind == PriceKind.ON_DEMAND]
    hourly = min(on_demand) if on_demand else None
    reason = "" if on_demand else str(record.get("no_price_reason") or "no on-demand price in the catalogs read")
    report.priced += bool(on_demand)
    report.no_price += not on_demand
    if configuration.hourly_price_usd != hourly or configuration.no_price_reason != reason:
        configuration_update(configuration=configuration, hourly_price_usd=hourly, no_price_reason=reason)


def prices_load(document: Mapping[str, Any], *, today: date | None = None) -> PriceReport:
    """Load a prices.json document in one transaction; bad data names the record and leaves the database as it
    was. ``today`` (default: the local date) counts the stale rows."""
    report = PriceReport()
    sources = document.get("sources") or {}
    with transaction.atomic():
        for index, record in enumerate(document["records"]):
            where = f"{PRICES_FILE} record {index} ({record.get('configuration', '?')})"
            try:
                _load_record(record, sources, report)
            except ValidationError as exc:
                raise CatalogDataError(f"{where}: {'; '.join(exc.messages)}") from None
            except (CatalogDataError, KeyError, TypeError, ValueError) as exc:
                raise CatalogDataError(f"{where}: {exc}") from None
    day = today or timezone.localdate()
    report.stale = sum(price_is_stale(read_on, day) for read_on in Price.objects.values_list("read_on", flat=True))
    return report


def prices_load_path(folder: Path | str | None = None, *, today: date | None = None) -> PriceReport | None:
    """Load the folder's prices.json; None when the folder has none."""
    document = prices_read(folder)
    return None if document is None else prices_load(document, today=today)
