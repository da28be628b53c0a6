"""Multi-node configurations (issue 18): the committed rows, the model's fields and checks, the API, the admin,
the recommender's view of them and their prices (node_count × the single-node offer)."""

from __future__ import annotations

import copy
import importlib.util
import json
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from benchmarks.recommend_speed import fixture_views
from catalog import services
from catalog.models import Configuration
from catalog.selectors import configuration_candidates
from recommendations.views_data import configuration_view
from tests.factories import AcceleratorFactory, ConfigurationFactory

FIXTURES = Path(settings.BASE_DIR) / "fixtures"
CATALOG = FIXTURES / "catalog"
MULTI_NODE = {
    "h100-sxm-80gb-2x8-r570": (2, 8, 8, "hgx-h100-8gpu"),
    "h100-sxm-80gb-4x8-r570": (4, 8, 8, "hgx-h100-8gpu"),
    "h100-sxm-80gb-8x8-r570": (8, 8, 8, "hgx-h100-8gpu"),
    "h100-sxm-80gb-16x8-r570": (16, 8, 8, "hgx-h100-8gpu"),
    "h200-sxm-141gb-2x8-r570": (2, 8, 8, "hgx-h200-8gpu"),
    "h200-sxm-141gb-4x8-r570": (4, 8, 8, "hgx-h200-8gpu"),
    "b200-2x8-r570": (2, 8, 8, "hgx-b200-8gpu"),
    "b200-4x8-r570": (4, 8, 8, "hgx-b200-8gpu"),
    "gb200-nvl72-r580": (18, 4, 72, "gb200-nvl72"),
    "gb300-nvl72-r580": (18, 4, 72, "gb300-nvl72"),
}  # slug: (nodes, devices per node, NVLink domain, fabrics.json platform)


def _module(name: str):
    spec = importlib.util.spec_from_file_location(name, FIXTURES / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the class is built
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[name]
    return module


bp = _module("build_prices")


def _records(name: str) -> list[dict]:
    return json.loads((CATALOG / name).read_text())["records"]


PLATFORMS = {p["id"]: p for p in json.loads((FIXTURES / "source" / "fabrics.json").read_text())["platforms"]}


# --- The committed fixtures -------------------------------------------------------------------------------------


def test_the_multi_node_rows_span_nodes_of_a_single_node_kind() -> None:
    configurations = {c["slug"]: c for c in _records("configurations.json")}
    multi = {slug: c for slug, c in configurations.items() if c["node_count"] > 1}
    assert set(multi) == set(MULTI_NODE)
    for slug, (nodes, per_node, domain, platform_id) in MULTI_NODE.items():
        row, platform = multi[slug], PLATFORMS[platform_id]
        assert (row["node_count"], row["device_count"], row["nvlink_domain_size"]) == (nodes, nodes * per_node, domain)
        assert row["accelerator"] in platform["accelerators"]
        assert row["scale_out_fabric"] == platform["scale_out_fabric"]
        assert row["scale_out_gbps_per_device"] == platform["scale_out_gbps_per_device"]
        assert platform["source"] in row["notes"]
        assert f"{nodes} nodes × {per_node}" in row["name"]
        # the host fields are per node: those of a single-node row of the same accelerator, per-node count and host
        single = [
            c
            for c in configurations.values()
            if c["node_count"] == 1 and c["accelerator"] == row["accelerator"] and c["device_count"] == per_node
        ]
        assert any((c["vcpus"], c["host_ram_bytes"]) == (row["vcpus"], row["host_ram_bytes"]) for c in single), slug
    assert {s: c["scale_out_gbps_per_device"] for s, c in multi.items() if "b" in s.split("-")[0]} == {
        "b200-2x8-r570": 400,
        "b200-4x8-r570": 400,
        "gb200-nvl72-r580": 400,
        "gb300-nvl72-r580": 800,
    }


def test_single_node_rows_have_one_node_and_no_scale_out_network() -> None:
    single = [c for c in _records("configurations.json") if c["node_count"] == 1]
    assert len(single) == 137  # 133 before issue 18 (the CPU-only one included), then h20 x8, l20 x1/x4, gb300 x4
    for row in single:
        assert (row["scale_out_fabric"], row["scale_out_gbps_per_device"]) == ("", None), row["slug"]
    assert {"h20-x8-r570", "l20-x1-r550", "l20-x4-r550", "gb300-x4-r580"} <= {c["slug"] for c in single}


def test_the_new_accelerators_keep_their_sources_and_uncertain_fields() -> None:
    accelerators = {a["slug"]: a for a in _records("accelerators.json")}
    for slug in ("h20", "l20", "gb300"):
        row = accelerators[slug]
        assert row["source_url"].startswith("https://") and row["uncertain_fields"], slug
        assert "Cross-checked in: https://" in row["notes"]
    assert accelerators["gb300"]["architecture"] == accelerators["b300"]["architecture"] == "blackwell-ultra-sm103"
    assert accelerators["h20"]["architecture"] == "hopper-sm90"
    assert accelerators["l20"]["architecture"] == "ada-lovelace-sm89"


# --- The model -------------------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_database_refuses_devices_that_do_not_divide_among_the_nodes() -> None:
    row = ConfigurationFactory(device_count=16, nvlink_domain_size=8, node_count=2)
    for fields in ({"device_count": 12, "node_count": 8}, {"node_count": 0}, {"scale_out_gbps_per_device": 0.0}):
        with pytest.raises(IntegrityError), transaction.atomic():
            Configuration.objects.filter(pk=row.pk).update(**fields)


@pytest.mark.django_db
def test_the_services_check_the_nodes_each_error_on_its_field() -> None:
    accelerator = AcceleratorFactory(max_devices_per_node=8)
    common = {"accelerator": accelerator, "vcpus": 8, "host_ram_bytes": 10**11, "disk_bytes": 10**12}
    with pytest.raises(ValidationError) as excinfo:
        services.configuration_create(slug="a", name="A", device_count=12, node_count=8, **common)
    assert "not a multiple of node_count=8" in excinfo.value.message_dict["node_count"][0]
    with pytest.raises(ValidationError) as excinfo:
        services.configuration_create(slug="b", name="B", device_count=32, node_count=2, **common)
    assert "16 devices per node" in excinfo.value.message_dict["device_count"][0]
    with pytest.raises(ValidationError) as excinfo:
        services.configuration_create(slug="c", name="C", device_count=8, scale_out_gbps_per_device=400, **common)
    assert "scale_out_fabric" in excinfo.value.message_dict
    cluster = services.configuration_create(
        slug="d", name="D", device_count=16, node_count=2, nvlink_domain_size=8,
        scale_out_fabric="InfiniBand NDR", scale_out_gbps_per_device=400, **common,
    )  # fmt: skip
    assert cluster.devices_per_node == 8
    assert cluster.topology == "2 nodes × 8, InfiniBand NDR, 400 Gb/s per GPU"


def test_loaded_rows_carry_the_nodes_and_the_network(catalog) -> None:
    rack = Configuration.objects.get(slug="gb200-nvl72-r580")
    assert (rack.device_count, rack.node_count, rack.devices_per_node, rack.nvlink_domain_size) == (72, 18, 4, 72)
    assert rack.topology.startswith("18 nodes × 4, ") and rack.topology.endswith(", 400 Gb/s per GPU")
    assert Configuration.objects.get(slug="h100-sxm-80gb-x8-r570").topology == "1 node"
    assert Configuration.objects.filter(node_count__gt=1).count() == len(MULTI_NODE)


# --- API, admin, the recommender's view --------------------------------------------------------------------------


def test_the_api_shows_the_nodes_and_the_network(api, catalog) -> None:
    body = api.get("/api/v1/configurations/h100-sxm-80gb-2x8-r570/").json()
    assert (body["device_count"], body["node_count"], body["devices_per_node"]) == (16, 2, 8)
    assert body["scale_out_gbps_per_device"] == 400
    assert body["scale_out_fabric"] == PLATFORMS["hgx-h100-8gpu"]["scale_out_fabric"]
    assert body["topology"] == f"2 nodes × 8, {body['scale_out_fabric']}, 400 Gb/s per GPU"
    assert body["hourly_price_usd"] is not None


def test_the_admin_lists_and_shows_the_nodes(client, admin_user, catalog) -> None:
    client.force_login(admin_user)
    fabric = PLATFORMS["hgx-h100-8gpu"]["scale_out_fabric"]
    page = client.get("/admin/catalog/configuration/?q=2x8").content.decode()
    assert "x16, 2 nodes × 8" in page  # the list's name says the nodes; the page says the network
    pk = Configuration.objects.get(slug="h100-sxm-80gb-2x8-r570").pk
    detail = client.get(f"/admin/catalog/configuration/{pk}/change/").content.decode()
    assert "Nodes and scale-out network" in detail and f"2 nodes × 8, {fabric}" in detail


def test_the_recommender_sees_the_nodes_from_the_database_and_the_fixtures(catalog) -> None:
    candidates = configuration_candidates(Configuration.objects.filter(slug__in=["gb300-nvl72-r580", "t4-x1-r535"]))
    views = {c.configuration.slug: configuration_view(c) for c in candidates}
    rack = views["gb300-nvl72-r580"]
    assert (rack.node_count, rack.devices_per_node, rack.nvlink_domain_size, rack.scale_out_gbps_per_device) == (
        18,
        4,
        72,
        800,
    )
    assert rack.scale_out_fabric == PLATFORMS["gb300-nvl72"]["scale_out_fabric"]
    assert (views["t4-x1-r535"].node_count, views["t4-x1-r535"].scale_out_gbps_per_device) == (1, None)
    from_fixtures = {v.slug: v for v in fixture_views()}["gb300-nvl72-r580"]
    assert (from_fixtures.node_count, from_fixtures.scale_out_gbps_per_device) == (18, 800)


# --- Prices ----------------------------------------------------------------------------------------------------


def test_a_cluster_costs_its_nodes_times_the_single_node_offer() -> None:
    records = {r["configuration"]: r for r in json.loads((CATALOG / "prices.json").read_text())["records"]}
    single = {(o["provider"], o["kind"]): o for o in records["h100-sxm-80gb-x8-r535"]["offers"]}
    for slug, nodes in (("h100-sxm-80gb-2x8-r570", 2), ("h100-sxm-80gb-16x8-r570", 16)):
        record = records[slug]
        assert record["note"].startswith(f"{nodes} × the single-node offer of 8 × ")
        assert {(o["provider"], o["kind"]) for o in record["offers"]} == set(single)
        for offer in record["offers"]:
            base = single[(offer["provider"], offer["kind"])]
            assert offer["usd_per_hour"] == round(nodes * base["usd_per_hour"], 4)
            assert offer["usd_per_gpu_hour"] == base["usd_per_gpu_hour"]
            assert (offer["region"], offer["regions"], offer["vcpus"]) == (
                base["region"],
                base["regions"],
                base["vcpus"],
            )
            assert offer["instance_type"] == f"{nodes} × {base['instance_type']}"
    assert records["gb200-nvl72-r580"]["no_price_reason"].startswith("no offer of one node (4 × NVIDIA GB200")
    assert "gb300-x4-r580" in records["gb300-nvl72-r580"]["no_price_reason"]


def test_the_committed_multi_node_prices_are_what_the_derive_step_gives(tmp_path) -> None:
    out = tmp_path / "prices.json"
    out.write_text((CATALOG / "prices.json").read_text())
    assert bp.main(["--derive", "--out", str(out), "--check"]) == 0
    document = json.loads(out.read_text())
    edited = copy.deepcopy(document)
    dgx = next(r for r in edited["records"] if r["configuration"] == "h100-sxm-80gb-x8-r535")
    dgx["offers"][0]["usd_per_hour"] += 1.0
    out.write_text(bp.render(edited))
    assert bp.main(["--derive", "--out", str(out), "--check"]) == 1  # the clusters no longer match their node
    assert bp.main(["--derive", "--out", str(out)]) == 0
    derived = {r["configuration"]: r for r in json.loads(out.read_text())["records"]}
    assert derived["h100-sxm-80gb-2x8-r570"]["offers"][0]["usd_per_hour"] == round(
        2 * dgx["offers"][0]["usd_per_hour"], 4
    )


def test_a_cluster_without_a_single_node_configuration_of_its_nodes_is_an_error() -> None:
    configurations = _records("configurations.json")
    accelerators = {a["slug"]: a for a in _records("accelerators.json")}
    document = json.loads((CATALOG / "prices.json").read_text())
    without = [c for c in configurations if not (c["accelerator"] == "b200" and c["node_count"] == 1)]
    document["records"] = [r for r in document["records"] if not r["configuration"].startswith("b200-x8")]
    with pytest.raises(bp.BuildError, match="no single-node configuration of 8 × b200"):
        bp.with_multi_node(document, without, accelerators)
