"""The price behind every recommendation: per hour, per month and per million output tokens, with the offer it is
(provider, region, the day read, the file it was read from), stale after 90 days, "no price" explicit; the ranking
reads only the figure."""

from __future__ import annotations

import dataclasses
import json
import re
from datetime import date, timedelta
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from budgets.engine import Workload
from catalog.models import Configuration, Price
from catalog.units import HOURS_PER_MONTH
from recommendations.management.commands.recommend import render_table
from recommendations.plans import ConfigurationView
from recommendations.recommend import recommend
from recommendations.views_data import configuration_views
from tests.recommendations.catalog_views import llama70b, view
from tests.recommendations.test_api import LLAMA_70B, by_slug
from tests.recommendations.test_api import recommend as recommend_api

WORKLOADS = Path(__file__).resolve().parents[2] / "fixtures" / "workloads"
DGX = "h100-sxm-80gb-x8-r550"
SLUGS = [DGX, "h100-sxm-80gb-x4-r550", "a100-80gb-sxm4-x8-r550", "h200-nvl-141gb-x2-r570", "l40s-x8-r550"]


def test_the_cost_names_its_offer_and_comes_per_hour_month_and_million_tokens() -> None:
    dgx = view(DGX)
    (entry,) = recommend(llama70b(), [dgx])
    cost = entry.as_dict()["cost"]
    assert cost["usd_per_hour"] == dgx.hourly_price_usd and cost["usd_per_month"] == dgx.hourly_price_usd * 730
    assert (cost["provider"], cost["region"], cost["source_url"]) == (
        dgx.price_provider,
        dgx.price_region,
        dgx.price_source_url,
    )
    assert cost["read_on"] == dgx.price_read_on.isoformat() and cost["stale"] is False
    assert cost["usd_per_million_output_tokens"] > 0
    text = entry.as_dict()["price_basis"]["text"]
    expected = (
        f"${cost['usd_per_million_output_tokens']:,.2f} per million output tokens at {dgx.price_provider} "
        f"{dgx.price_region} on-demand, read {dgx.price_read_on.isoformat()}"
    )
    assert text == expected


def test_a_stale_price_says_so_and_a_price_without_an_offer_says_it_has_no_source() -> None:
    stale = dataclasses.replace(view(DGX), price_stale=True)
    (entry,) = recommend(llama70b(), [stale])
    assert entry.as_dict()["cost"]["stale"] is True
    assert entry.price_basis.text.endswith("(stale: read more than 90 days ago)")
    by_hand = dataclasses.replace(
        view(DGX), price_provider="", price_region="", price_read_on=None, price_source_url=""
    )
    (entry,) = recommend(llama70b(), [by_hand])
    assert entry.price_basis.text.endswith("per million output tokens (set in the catalog without a source)")
    assert entry.as_dict()["cost"]["read_on"] is None


def test_no_price_stays_explicit() -> None:
    (entry,) = recommend(llama70b(), [view("h200-nvl-141gb-x2-r570")])
    assert entry.cost is None and entry.as_dict()["cost"] is None
    assert entry.as_dict()["price_basis"] == {
        "basis": "no_price",
        "value": None,
        "text": "no price in the catalog: ranked after the priced",
    }


def test_training_is_priced_per_hour_and_month_only() -> None:
    # no cost per run: the roofline gives no training step time and the workload schema no token count
    training = json.loads((WORKLOADS / "train-llama-3.2-1b-full-bf16-adamw.json").read_text())
    entries = [e for e in recommend(Workload.model_validate(training), [view(DGX)]) if e.cost is not None]
    assert entries
    cost = entries[0].cost
    assert cost.usd_per_million_output_tokens is None and cost.usd_per_month == cost.usd_per_hour * HOURS_PER_MONTH
    assert entries[0].price_basis.basis == "usd_per_hour" and " per hour at " in entries[0].price_basis.text


def _order(views: list[ConfigurationView]) -> list[str]:
    return [e.configuration["slug"] for e in recommend(llama70b(), views)]


def test_the_ranking_reads_the_price_not_where_it_is_from() -> None:
    views = [view(slug) for slug in SLUGS]
    elsewhere = [
        dataclasses.replace(
            v, price_provider="Elsewhere", price_region="far-1", price_stale=True, price_read_on=date(2020, 1, 1)
        )
        for v in views
    ]
    assert _order(elsewhere) == _order(views)


def test_configurations_whose_cheapest_price_did_not_change_keep_their_order() -> None:
    views = [view(slug) for slug in SLUGS]
    before = _order(views)
    cheaper = [dataclasses.replace(v, hourly_price_usd=v.hourly_price_usd / 100) if v.slug == DGX else v for v in views]
    after = _order(cheaper)
    assert [s for s in after if s != DGX] == [s for s in before if s != DGX]
    assert after.index(DGX) <= before.index(DGX)


def test_the_table_prints_cost_per_hour_month_and_million_tokens_and_no_price() -> None:
    entries = recommend(llama70b(), [view(slug) for slug in SLUGS])
    lines = render_table(entries).splitlines()
    assert re.search(r"USD/h\s+USD/month\s+USD/Mtok\s+price from", lines[0])
    dgx = next(e for e in entries if e.configuration["slug"] == DGX)
    line = lines[1 + entries.index(dgx)]
    assert f"{dgx.cost.usd_per_hour:,.2f}" in line and f"{dgx.cost.usd_per_month:,.0f}" in line
    assert f"{dgx.cost.usd_per_million_output_tokens:,.2f}" in line and dgx.cost.offer_text() in line
    unpriced = next(e for e in entries if e.cost is None)
    assert "no price" in lines[1 + entries.index(unpriced)]


# --- with the database: the views, the API and the command ----------------------------------------------


@pytest.mark.django_db
def test_views_carry_the_offer_and_its_staleness_on_the_day_given(catalog) -> None:
    dgx = Configuration.objects.with_price_offer().get(slug=DGX)
    offer = dgx.price_offer
    fresh = {v.slug: v for v in configuration_views(today=offer.read_on + timedelta(days=90))}[DGX]
    assert (fresh.price_provider, fresh.price_region, fresh.price_instance_type) == (
        offer.provider,
        offer.region,
        offer.instance_type,
    )
    assert fresh.price_read_on == offer.read_on and fresh.price_source_url == offer.source_url and not fresh.price_stale
    old = {v.slug: v for v in configuration_views(today=offer.read_on + timedelta(days=91))}[DGX]
    assert old.price_stale
    unpriced = {v.slug: v for v in configuration_views()}["t4-x1-r535"]
    assert unpriced.hourly_price_usd is None and unpriced.price_provider == "" and unpriced.price_read_on is None


@pytest.mark.django_db
def test_the_api_answer_carries_the_offer_and_flags_a_stale_one(api, catalog) -> None:
    Price.objects.filter(configuration__slug=DGX).update(read_on=date.today() - timedelta(days=91))
    entries = by_slug(recommend_api(api, LLAMA_70B))
    cost = entries[DGX]["cost"]
    assert cost["stale"] is True and cost["read_on"] == (date.today() - timedelta(days=91)).isoformat()
    assert cost["source_url"].startswith("https://github.com/skypilot-org/skypilot-catalog/blob/")
    assert "(stale: read more than 90 days ago)" in entries[DGX]["price_basis"]["text"]
    fresh = entries["h100-sxm-80gb-x4-r550"]["cost"]
    assert fresh["stale"] is False and fresh["provider"] and fresh["usd_per_month"] == fresh["usd_per_hour"] * 730


@pytest.mark.django_db
def test_the_command_table_shows_the_price_columns(catalog, tmp_path) -> None:
    path = tmp_path / "llama.json"
    path.write_text(json.dumps(LLAMA_70B))
    out = StringIO()
    call_command("recommend", str(path), "--top", "200", stdout=out)  # every configuration: priced and not
    lines = out.getvalue().splitlines()
    assert "USD/month" in lines[0] and "USD/Mtok" in lines[0] and "price from" in lines[0]
    assert any(re.search(r" on-demand, read \d{4}-\d\d-\d\d", line) for line in lines[1:])
    assert any("no price" in line for line in lines[1:])
