"""The recommender in the admin: a workload's recommendations with evidence links and budget bars, the
calibration page, the branding, and the pure SVG charts behind them."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest

from budgets.models import Workload
from budgets.services import workload_create
from recommendations.charts import Point, budget_bar_svg, scatter_svg

from .measured import H100_X1, measured_workload

GIB = 2**30
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "workloads"


def _rects(svg: str) -> list[tuple[float, float]]:
    """(x, width) of each filled component segment of a bar."""
    segment = r'<rect x="([\d.]+)" y="\d+" width="([\d.]+)" height="\d+" fill="#\w+"><title>'
    return [(float(x), float(w)) for x, w in re.findall(segment, svg)]


def test_the_bar_stacks_components_in_proportion_and_marks_usable_limit_and_need() -> None:
    svg = budget_bar_svg(
        [("weights", 30 * GIB), ("kv_cache", 10 * GIB), ("activations", 0)],
        usable_bytes=80 * GIB,
        need_bytes=40 * GIB,
        margin_bytes=8 * GIB,
        colours={"weights": "#4e79a7", "kv_cache": "#e15759"},
        title="<h100>",
    )
    (x1, w1), (x2, w2) = _rects(svg)  # the empty component draws nothing
    assert w1 == pytest.approx(3 * w2, rel=0.01) and x2 == pytest.approx(x1 + w1, abs=0.1)
    lines = {t: float(x) for x, t in re.findall(r'<line x1="([\d.]+)"[^>]*><title>([^<]+)</title>', svg)}
    usable, limit, need = lines["usable 80.00 GiB"], lines["usable − margin 72.00 GiB"], lines["need 40.00 GiB"]
    assert need == pytest.approx(x2 + w2, abs=0.2)  # the need equals the components' sum here
    assert (usable - x1) == pytest.approx(2 * (need - x1), rel=0.01) and need < limit < usable
    assert "&lt;h100&gt;" in svg and "<h100>" not in svg


def test_the_bar_axis_grows_to_a_need_beyond_usable_memory() -> None:
    svg = budget_bar_svg([("weights", 160 * GIB)], usable_bytes=80 * GIB, need_bytes=160 * GIB)
    ((x, width),) = _rects(svg)
    usable = float(re.search(r'<line x1="([\d.]+)"[^>]*><title>usable', svg).group(1))
    assert usable - x == pytest.approx(width / 2, rel=0.01)


def test_the_scatter_puts_points_on_equal_axes_with_the_identity_line_and_links() -> None:
    svg = scatter_svg(
        [Point(10 * GIB, 10 * GIB, "on the line", "/m/1/"), Point(10 * GIB, 15 * GIB, "<above>", "/m/2/?a=1&b=2")],
        title="device_used",
    )
    identity = re.search(r'<line x1="([\d.]+)" y1="([\d.]+)" x2="([\d.]+)" y2="([\d.]+)"', svg)
    x0, y0, x1, y1 = map(float, identity.groups())
    circles = [tuple(map(float, c)) for c in re.findall(r'<circle cx="([\d.]+)" cy="([\d.]+)"', svg)]
    (cx, cy), (dx, dy) = circles
    assert cy == pytest.approx(y0 + (y1 - y0) * (cx - x0) / (x1 - x0), abs=0.2)  # on y = x
    assert dx == cx and dy < cy  # measured more: higher on the chart
    assert 'href="/m/2/?a=1&amp;b=2"' in svg and "&lt;above&gt;" in svg
    assert "estimated (GiB)" in svg and "estimated (ms)" in scatter_svg([Point(1, 2, "x")], unit="ms")
    assert "no measurements" in scatter_svg([], title="empty")


@pytest.mark.django_db
def test_a_workload_page_lists_its_recommendations_with_evidence_links_and_bars(admin_client, user, catalog) -> None:
    workload, measurement = measured_workload(user, ratio=1.5)
    page = admin_client.get(f"/admin/budgets/workload/{workload.pk}/change/").content.decode()
    section = page[page.index('class="recommendations"') :]
    assert section.count('<tr class="recommendation verdict-') == 10  # services.DEFAULT_TOP
    assert re.search(r"verdict-fits|verdict-tight", section)
    row = section[section.index(f">{H100_X1}</a>") :]
    row = row[: row.index('<tr class="recommendation verdict-')]
    assert "measured_here" in row and "set by calibration spread" in row
    assert f'href="/admin/measurements/measurement/{measurement.pk}/change/"' in row
    assert f'href="/admin/measurements/order/{measurement.order_id}/change/"' in row
    assert f'href="/admin/measurements/acceptancejob/{measurement.job_id}/change/"' in row
    assert 'role="img"' in row and "budget per device against usable memory" in row
    assert 'fill="#4e79a7"' in row  # the weights segment, in the budget bar's colours


@pytest.mark.parametrize(
    "example,command",
    [("vllm-llama-3.1-8b-chat", "vllm serve "), ("sglang-qwen3-30b-a3b-chat", "python -m sglang.launch_server ")],
)
def test_a_serving_workloads_runnable_rows_show_their_launch_with_a_copy_button(
    admin_client, user, catalog, example, command
) -> None:
    from html import escape

    from recommendations import services
    from recommendations.verdicts import Verdict

    data = json.loads((FIXTURES / f"{example}.json").read_text())
    workload = workload_create(owner=user, data=data)
    page = admin_client.get(f"/admin/budgets/workload/{workload.pk}/change/").content.decode()
    # as stored: every field written out (an SGLang budget then reads kv_block_tokens 16 as --page-size)
    entries = services.recommend_for(services.workload_validate(workload.description), top=services.DEFAULT_TOP)
    runnable = [e for e in entries if e.verdict in (Verdict.FITS, Verdict.TIGHT)]
    assert runnable and all(e.launch is not None and e.launch.text.startswith(command) for e in runnable)
    for entry in runnable:
        assert f'<code class="launch-command">{escape(entry.launch.text)}</code>' in page
        assert f'data-command="{escape(entry.launch.text)}"' in page
    assert page.count('class="copy-launch"') == len(runnable)


def test_a_launchs_files_show_beside_it_each_with_a_copy_button(admin_client, user, catalog) -> None:
    """The ZeRO paper's 7.5B names no checkpoint: its launch reads the accelerate config, the config.json of the model
    built from its numbers and init_model.py, and the page shows each, escaped, with its own copy button."""
    from html import escape

    from recommendations import services

    data = json.loads((FIXTURES / "train-zero3-dp64-7.5b.json").read_text())
    workload = workload_create(owner=user, data=data)
    page = admin_client.get(f"/admin/budgets/workload/{workload.pk}/change/").content.decode()
    entries = services.recommend_for(services.workload_validate(workload.description), top=services.DEFAULT_TOP)
    launched = [e.launch for e in entries if e.launch is not None]
    assert launched
    for launch in launched:
        assert [path for path, _ in launch.files] == ["accelerate_config.json", "model/config.json", "init_model.py"]
        for path, content in launch.files:
            assert f"<summary>{path}, which the command reads" in page
            assert f'data-content="{escape(content)}"' in page and f"<pre>{escape(content)}</pre>" in page
    assert page.count('class="copy-launch-file"') == sum(len(launch.files) for launch in launched)


@pytest.mark.django_db
def test_a_workload_whose_description_no_longer_validates_says_why(admin_client, user, catalog) -> None:
    workload, _ = measured_workload(user)
    Workload.objects.filter(pk=workload.pk).update(description={**workload.description, "model": {"preset": "gone"}})
    page = admin_client.get(f"/admin/budgets/workload/{workload.pk}/change/").content.decode()
    assert "No recommendations: model: unknown preset &#x27;gone&#x27;" in page


@pytest.mark.django_db
def test_the_calibration_page_plots_each_view_and_lists_corrections(admin_client, user, catalog) -> None:
    ids = [measured_workload(user, ratio=ratio)[1].pk for ratio in (1.1, 1.2, 1.6)]
    listing = admin_client.get("/admin/measurements/measurement/").content.decode()
    assert 'href="/admin/measurements/calibration/"' in listing
    page = admin_client.get("/admin/measurements/calibration/").content.decode()
    device_chart = re.search(r"<svg[^>]*><title>device_used</title>.*?</svg>", page, re.S).group(0)
    assert device_chart.count("<circle") == 3
    assert all(f'href="/admin/measurements/measurement/{i}/change/"' in device_chart for i in ids)
    row = re.search(r"<td>device_used</td>.*?</tr>", page, re.S).group(0)
    assert "× 1.200" in row and "±40.0%" in row  # the median of 1.1, 1.2, 1.6 and the worst miss


@pytest.mark.django_db
def test_the_calibration_page_needs_staff_and_says_when_nothing_was_measured(client, admin_client, user) -> None:
    assert client.get("/admin/measurements/calibration/").status_code == 302  # to the login page
    page = admin_client.get("/admin/measurements/calibration/").content.decode()
    assert "No acceptance measurement has been compared" in page


@pytest.mark.django_db
def test_the_admin_is_branded_and_names_toolkits_and_wheels(admin_client) -> None:
    page = admin_client.get("/admin/").content.decode()
    assert "Django administration" not in page and "Django site admin" not in page
    assert ">vramplan</a>" in page and "<title>Catalog, workloads, orders and measurements | vramplan admin" in page
    assert "CUDA toolkits" in page and "PyTorch wheels" in page


@pytest.mark.django_db
def test_the_table_shows_the_price_each_entry_was_ranked_on_its_latency_and_its_launch_flags(
    admin_client, user, catalog
) -> None:
    data = json.loads((FIXTURES / "vllm-llama-3.1-8b-chat.json").read_text())
    workload = workload_create(owner=user, data=data)
    page = admin_client.get(f"/admin/budgets/workload/{workload.pk}/change/").content.decode()
    section = page[page.index('class="recommendations"') :]
    assert "ranked on price" in section and "latency (roofline)" in section and "suggested settings" in section
    prices = re.findall(r'<td class="price">([^<]*)</td>', section)
    latencies = re.findall(r'<td class="latency">([^<]*)</td>', section)
    settings = re.findall(r'<td class="settings">(.*?)</td>', section, re.S)
    assert len(prices) == len(latencies) == len(settings) == 10
    # each price names the offer it is: provider, region, the day it was read
    offer = r" at .+ on-demand, read \d{4}-\d\d-\d\d( \(stale: read more than 90 days ago\))?"
    shown = rf"\$[\d,]+\.\d\d per (million output tokens|hour){offer}|no price in the catalog: ranked after the priced"
    assert all(re.fullmatch(shown, html.unescape(p)) for p in prices), prices
    assert any("per million output tokens at " in p for p in prices)
    # within the fitting entries of one evidence level, the priced come first, cheapest per million tokens first
    ranks = [0 if "million" in p else 1 if "hour" in p else 2 for p in prices]
    assert ranks == sorted(ranks)
    assert all(re.fullmatch(r"[\d.]+ ms/token \([\d.]+–[\d.]+\), (memory|compute)-bound", x) for x in latencies)
    assert all("--tensor-parallel-size" in s and "--gpu-memory-utilization" in s for s in settings)


@pytest.mark.django_db
def test_the_table_shows_cost_per_month_and_per_million_tokens_and_no_price_explicitly(
    admin_client, user, catalog
) -> None:
    data = json.loads((FIXTURES / "vllm-llama-3.1-8b-chat.json").read_text())
    workload = workload_create(owner=user, data=data)
    page = admin_client.get(f"/admin/budgets/workload/{workload.pk}/change/").content.decode()
    section = page[page.index('class="recommendations"') :]
    assert "<th>USD per month</th>" in section and "<th>USD per million output tokens</th>" in section
    months = re.findall(r'<td class="per-month">([^<]*)</td>', section)
    millions = re.findall(r'<td class="per-million">([^<]*)', section)
    assert len(months) == len(millions) == 10
    assert all(re.fullmatch(r"\$[\d,]+|no price", m) for m in months), months
    assert all(re.fullmatch(r"\$[\d,]+\.\d\d|no price", m) for m in millions), millions
    assert any(m != "no price" for m in months)
    # a priced entry links the catalog file its price was read from
    assert 'class="price-source" href="https://github.com/skypilot-org/skypilot-catalog/blob/' in section
