"""Prices a buyer can check: the Price rows loadcatalog loads from prices.json, staleness, and the admin."""

from __future__ import annotations

import copy
import re
from datetime import date, timedelta
from decimal import Decimal
from io import StringIO

import pytest
from django.core.management import call_command

from catalog.choices import PriceKind
from catalog.models import Configuration, Price, price_is_stale
from catalog.prices import prices_load, prices_read
from catalog.services import CatalogDataError, configuration_update

TODAY = date(2026, 12, 2)
DGX = "h100-sxm-80gb-x8-r550"


@pytest.mark.parametrize(("days", "stale"), [(89, False), (90, False), (91, True)])
def test_a_price_read_more_than_90_days_ago_is_stale(days: int, stale: bool) -> None:
    assert price_is_stale(TODAY - timedelta(days=days), TODAY) is stale


def test_every_gpu_configuration_has_a_price_with_its_offer_or_a_reason(catalog) -> None:
    gpu = Configuration.objects.filter(kind="gpu").with_price_offer()
    priced = 0
    for configuration in gpu:
        if configuration.hourly_price_usd is None:
            # no offer in the catalogs read; or added after they were read (fixtures/build_prices.py --derive)
            assert configuration.no_price_reason.startswith(("no offer of", "not priced:")), configuration.slug
            assert not configuration.prices.filter(kind=PriceKind.ON_DEMAND).exists()
            continue
        priced += 1
        on_demand = configuration.prices.filter(kind=PriceKind.ON_DEMAND)
        assert configuration.hourly_price_usd == min(p.usd_per_hour for p in on_demand)
        offer = configuration.price_offer
        assert offer is not None and offer.provider and offer.region and offer.read_on
        assert offer.source_url.startswith("https://github.com/skypilot-org/skypilot-catalog/blob/")
        assert not configuration.no_price_reason
    listed = [r for r in prices_read()["records"] if "offers" in r]
    assert listed and priced == len(listed)


def test_loading_the_prices_again_changes_nothing(catalog) -> None:
    report = prices_load(prices_read(), today=TODAY)
    assert (report.created, report.updated, report.deleted) == (0, 0, 0)
    assert report.unchanged == Price.objects.count() > 0
    assert report.priced + report.no_price == Configuration.objects.filter(kind="gpu").count()


def test_an_offer_the_file_drops_is_deleted_and_the_ranking_price_follows(catalog) -> None:
    document = copy.deepcopy(prices_read())
    record = next(r for r in document["records"] if r["configuration"] == DGX)
    on_demand = sorted((o for o in record["offers"] if o["kind"] == "on_demand"), key=lambda o: o["usd_per_hour"])
    record["offers"].remove(on_demand[0])
    report = prices_load(document, today=TODAY)
    assert report.deleted == 1 and report.created == 0
    dgx = Configuration.objects.get(slug=DGX)
    assert dgx.hourly_price_usd == Decimal(str(on_demand[1]["usd_per_hour"]))
    assert not dgx.prices.filter(provider=on_demand[0]["provider"], kind="on_demand").exists()

    record.pop("offers")
    record["no_price_reason"] = "no offer of 8 × NVIDIA H100 SXM5 80GB in the catalogs read"
    prices_load(document, today=TODAY)
    dgx.refresh_from_db()
    assert dgx.hourly_price_usd is None and dgx.no_price_reason.startswith("no offer of 8 ×")
    assert not dgx.prices.exists() and dgx.price_offer is None


def test_a_changed_price_is_updated_in_place_and_reported(catalog) -> None:
    document = copy.deepcopy(prices_read())
    record = next(r for r in document["records"] if r["configuration"] == DGX)
    offer = record["offers"][0]
    offer["usd_per_hour"] = round(offer["usd_per_hour"] - 0.5, 4)
    report = prices_load(document, today=TODAY)
    assert report.updated == 1 and report.changes == [f"{DGX} {offer['provider']} {offer['kind']}: usd_per_hour"]
    assert Configuration.objects.get(slug=DGX).hourly_price_usd == Decimal(str(offer["usd_per_hour"]))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda r: r.update(configuration="no-such-configuration"), "unknown configuration 'no-such-configuration'"),
        (lambda r: r["offers"][0].update(usd_per_hour=-1), "price_usd_positive"),
        (lambda r: r["offers"][0].update(source="nowhere"), "source 'nowhere' is not in the file's sources"),
        (lambda r: r["offers"].append(dict(r["offers"][0])), "appears twice"),
    ],
)
def test_bad_price_data_names_the_record_and_changes_nothing(catalog, change, message) -> None:
    document = copy.deepcopy(prices_read())
    index = next(i for i, r in enumerate(document["records"]) if r["configuration"] == DGX)
    change(document["records"][index])
    before = list(Price.objects.values_list("pk", "usd_per_hour"))
    with pytest.raises(CatalogDataError, match=re.escape(f"prices.json record {index} (")) as error:
        prices_load(document, today=TODAY)
    assert message in str(error.value)
    assert list(Price.objects.values_list("pk", "usd_per_hour")) == before


def test_stale_rows_are_counted_against_the_day_given(catalog) -> None:
    Price.objects.filter(configuration__slug=DGX).update(read_on=TODAY - timedelta(days=91))
    report = prices_load(prices_read(), today=TODAY)  # reloads the file's dates, then counts against TODAY
    assert report.stale == 0
    read_on = Price.objects.values_list("read_on", flat=True).first()
    late = prices_load(prices_read(), today=read_on + timedelta(days=91))
    assert late.stale == Price.objects.count() and "stale" in late.lines()[-1]


def test_a_price_set_by_hand_has_no_offer_to_name(catalog) -> None:
    configuration = Configuration.objects.get(slug=DGX)
    configuration_update(configuration=configuration, hourly_price_usd=Decimal("1.2345"))
    assert Configuration.objects.with_price_offer().get(slug=DGX).price_offer is None
    assert Configuration.objects.get(slug=DGX).price_offer is None  # the same without the annotation


@pytest.mark.django_db
def test_loadcatalog_loads_the_prices_and_a_dry_run_rolls_them_back() -> None:
    out = StringIO()
    call_command("loadcatalog", "--dry-run", stdout=out)
    assert re.search(r"\[dry run, rolled back\] prices: \d+ created, 0 updated", out.getvalue())
    assert not Price.objects.exists() and not Configuration.objects.exists()
    call_command("loadcatalog", stdout=StringIO())
    count = Price.objects.count()
    assert count > 0 and Configuration.objects.exclude(hourly_price_usd=None).exists()
    out = StringIO()
    call_command("loadcatalog", stdout=out)
    assert f"prices: 0 created, 0 updated, {count} unchanged, 0 deleted" in out.getvalue()
    out = StringIO()
    call_command("loadprices", stdout=out)
    assert f"prices: 0 created, 0 updated, {count} unchanged" in out.getvalue()


# --- the admin ------------------------------------------------------------------------------------------


def test_the_configuration_list_shows_the_price_per_month_its_offer_and_no_price(admin_client, catalog) -> None:
    page = admin_client.get("/admin/catalog/configuration/?q=h100-sxm-80gb-x8-r550").content.decode()
    dgx = Configuration.objects.with_price_offer().get(slug=DGX)
    offer = dgx.price_offer
    assert f"${dgx.hourly_price_usd:,.2f} (${dgx.hourly_price_usd * 730:,.0f}/month)" in page
    assert f"{offer.provider} {offer.region}, read {offer.read_on.isoformat()}" in page
    page = admin_client.get("/admin/catalog/configuration/?q=t4-x1-r535").content.decode()
    assert "no price" in page and "no offer of NVIDIA T4" in page


def test_a_stale_price_is_flagged_with_its_date_in_the_admin(admin_client, catalog) -> None:
    old = date.today() - timedelta(days=91)
    Price.objects.filter(configuration__slug=DGX).update(read_on=old)
    page = admin_client.get(f"/admin/catalog/configuration/?q={DGX}").content.decode()
    assert f"read {old.isoformat()} (stale)" in page
    prices = admin_client.get("/admin/catalog/price/?stale=yes").content.decode()
    assert DGX in prices and f"{old.isoformat()} (stale)" in prices
    assert DGX not in admin_client.get("/admin/catalog/price/?stale=no").content.decode()


def test_the_configuration_page_lists_its_offers_read_only(admin_client, catalog) -> None:
    dgx = Configuration.objects.get(slug=DGX)
    page = admin_client.get(f"/admin/catalog/configuration/{dgx.pk}/change/").content.decode()
    for price in dgx.prices.all():
        assert price.provider in page and price.instance_type in page
    assert "skypilot-org/skypilot-catalog/blob/" in page and 'name="prices-0-provider"' not in page


def test_the_price_list_is_read_only_and_filters_by_provider_and_kind(admin_client, catalog) -> None:
    provider = Price.objects.filter(configuration__slug=DGX, kind="spot").values_list("provider", flat=True).first()
    page = admin_client.get("/admin/catalog/price/", {"provider": provider, "kind": "spot"}).content.decode()
    spot = Price.objects.filter(provider=provider, kind="spot")
    assert spot.exists() and all(p.configuration.slug in page for p in spot)
    shown = re.findall(r'<td class="field-provider">([^<]*)</td>', page)
    assert shown == [provider] * spot.count()
    kinds = re.findall(r'<td class="field-kind">([^<]*)</td>', page)
    assert set(kinds) == {"spot"}
    assert admin_client.get("/admin/catalog/price/add/").status_code == 403
    assert "USD per GPU-hour" in page and "USD per month" in page
