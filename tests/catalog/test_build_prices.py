"""fixtures/build_prices.py: which catalog row is which vramplan accelerator, and the prices.json it writes."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

FIXTURES = Path(settings.BASE_DIR) / "fixtures"
CATALOG = FIXTURES / "catalog"


def _builder():
    spec = importlib.util.spec_from_file_location("build_prices", FIXTURES / "build_prices.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["build_prices"] = module  # dataclasses look their module up while the class is built
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules["build_prices"]
    return module


bp = _builder()
MARKETED = {
    a["slug"]: a["marketed_memory_bytes"] / 1e9
    for a in json.loads((CATALOG / "accelerators.json").read_text())["records"]
}


def slug(provider: str, instance: str, name: str, count: float = 1, memory: float | None = None, **kw) -> str | None:
    row = bp.Row(provider=provider, instance_type=instance, accelerator=name, count=count, gpu_memory_gib=memory, **kw)
    return bp.match_accelerator(row, MARKETED).slug


@pytest.mark.parametrize(
    ("provider", "instance", "name", "memory", "expected"),
    [
        # A100: 40 or 80 GB from the name or GpuInfo, SXM4 or PCIe from the names
        ("lambda", "gpu_1x_a100_sxm4", "A100", 40.0, "a100-40gb-sxm4"),
        ("lambda", "gpu_8x_a100_80gb_sxm4", "A100-80GB", 80.0, "a100-80gb-sxm4"),
        ("cudo", "epyc-genoa-a100-pcie_1x2v4gb", "A100", 80.0, "a100-80gb-pcie"),  # the memory says 80 GB
        ("cudo", "intel-ice-lake-a100-pci_1x2v4gb", "A100", 80.0, "a100-80gb-pcie"),
        ("hyperstack", "n3-A100x8-NVLink", "A100-80G-PCIe-NVLink", 80.0, "a100-80gb-pcie"),  # NVLink bridges: PCIe
        ("runpod", "1x_A100-80GB_SECURE", "A100-80GB", None, "a100-80gb-pcie"),  # RunPod's A100-80GB is its PCIe
        ("runpod", "1x_A100-80GB-SXM_SECURE", "A100-80GB-SXM", None, "a100-80gb-sxm4"),
        ("verda", "8A100.40S.176V", "A100", 40.0, "a100-40gb-sxm4"),  # Verda's "S": SXM
        ("lambda", "gpu_8x_a100", "A100", 40.0, "a100-40gb-sxm4"),  # the catalog's own Lambda 8x A100 host
        # H100: SXM, PCIe or NVL
        ("lambda", "gpu_1x_h100_pcie", "H100", 80.0, "h100-pcie-80gb"),
        ("nebius", "gpu-h100-sxm_8gpu-128vcpu-1600gb", "H100", 80.0, "h100-sxm-80gb"),
        ("cudo", "sapphire-rapids-h100_1x2v4gb", "H100-SXM", 80.0, "h100-sxm-80gb"),
        ("runpod", "1x_H100_SECURE", "H100", None, "h100-pcie-80gb"),
        ("runpod", "1x_H100-NVL_SECURE", "H100-NVL", None, "h100-nvl-94gb"),
        ("verda", "1H100.80S.32V", "H100", 80.0, "h100-sxm-80gb"),
        # H200, L40 and L40S, the RTX names
        ("runpod", "1x_H200-SXM_SECURE", "H200-SXM", None, "h200-sxm-141gb"),
        ("runpod", "1x_L40_SECURE", "L40", None, "l40"),
        ("runpod", "1x_L40S_SECURE", "L40S", None, "l40s"),
        ("runpod", "1x_RTX6000-Ada_SECURE", "RTX6000-Ada", None, "rtx-6000-ada"),
        ("lambda", "gpu_1x_a6000", "A6000", 48.0, "rtx-a6000"),
        ("cudo", "ice-lake-rtx-a6000_1x2v4gb", "RTXA6000", 48.0, "rtx-a6000"),
        ("verda", "1RTXPRO6000.30V", "RTX-PRO-6000", 96.0, "rtx-pro-6000-blackwell"),
        ("yotta", "1x14v119g_NVIDIA_GeForce_RTX_5090_32G_SECURE", "RTX5090", 31.84, "rtx-5090"),
        ("runpod", "1x_MI300X_SECURE", "MI300X", None, "mi300x"),
    ],
)
def test_a_row_is_the_accelerator_its_names_and_memory_say(provider, instance, name, memory, expected) -> None:
    assert slug(provider, instance, name, memory=memory) == expected


@pytest.mark.parametrize(
    ("provider", "instance", "name", "memory", "why"),
    [
        ("lambda", "gpu_4x_a100", "A100", 40.0, "does not say which A100"),  # SXM4 or PCIe: not stated
        ("do", "gpu-h100x1-80gb", "H100", 79.6, "does not say which H100"),
        ("jarvislabs", "1x_H200_28V_300G", "H200", 141.0, "does not say which H200"),
        ("fluidstack", "H100_NVLINK_80GB::8", "H100-NVLINK", 80.0, "does not say which H100"),  # NVLink is not NVL
        ("cudo", "intel-broadwell-v100_1x2v4gb", "V100", 16.0, "does not say which V100"),  # PCIe or SXM2
        ("lambda", "gpu_1x_rtx6000", "RTX6000", 24.0, "no such GPU"),  # the Turing Quadro RTX 6000, not the Ada
        ("cudo", "epyc-genoa-a100-pcie_1x2v4gb", "A100-80GB", 16.0, "GpuInfo says 16 GiB"),  # memory disagrees
        ("hyperstack", "n3-H100-SXM5-PCIe", "H100", 80.0, "two form factors"),
    ],
)
def test_a_row_that_does_not_say_which_part_matches_nothing(provider, instance, name, memory, why) -> None:
    row = bp.Row(provider=provider, instance_type=instance, accelerator=name, count=1, gpu_memory_gib=memory)
    found = bp.match_accelerator(row, MARKETED)
    assert found.slug is None and why in found.reason


def test_an_l40_row_whose_upstream_instance_is_an_l40s_matches_neither() -> None:
    # Prime Intellect lists latitude's "g3-l40s-large" as an L40
    row = bp.Row("primeintellect", "latitude__8xL40_48GB__128__1536", "L40", 8, upstream="g3-l40s-large")
    found = bp.match_accelerator(row, MARKETED)
    assert found.slug is None and "names L40S" in found.reason


def test_memory_is_read_per_gpu_or_as_the_rows_total() -> None:
    # Prime Intellect writes the row's total in the per-GPU field; Shadeform writes GB where MiB is meant
    assert slug("primeintellect", "x", "A100-80GB", count=8, memory=640.0, upstream="gpu_8x_a100_80gb_sxm4")
    assert bp._gpu_info("{'Gpus': [{'Name': 'L4', 'MemoryInfo': {'SizeInMiB': 24}}]}") == ("L4", 24.0)
    assert bp._gpu_info("{'gpus': [{'name': 'h100', 'memoryinfo': {'sizeinmib': 81920}}]}") == ("h100", 80.0)
    assert bp._gpu_info("H100") == ("H100", None)  # Paperspace writes the bare name


def _source(key: str, rows: list[str]) -> object:
    header = "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,Price,Region,GpuInfo,SpotPrice"
    return bp.Source(key, key.title(), f"catalogs/v8/{key}/vms.csv", "c0ffee", "2026-12-02", "\n".join([header, *rows]))


def test_offers_keep_the_count_the_cheapest_region_per_provider_and_drop_a_spot_above_on_demand() -> None:
    rows = [
        "gpu_8x_h100_sxm5,H100,8.0,208,1800,31.92,us-east-1,,",
        "gpu_8x_h100_sxm5,H100,8.0,208,1800,30.00,us-west-1,,12.0",
        "gpu_4x_h100_sxm5,H100,4.0,104,900,16.36,us-east-1,,",  # another count: another configuration's
        "gpu_8x_h100_sxm5,H100,8.0,208,1800,20.00,eu-1,,25.0",  # spot above on-demand: the row is not kept
    ]
    shapes, _ = bp._offers_by_shape([_source("lambda", rows)], MARKETED)
    offers = bp.cheapest_per_provider(shapes[("h100-sxm-80gb", 8)], 8)
    assert [(o["kind"], o["usd_per_hour"], o["region"], o["regions"]) for o in offers] == [
        ("on_demand", 30.0, "us-west-1", 2),
        ("spot", 12.0, "us-west-1", 1),
    ]
    assert offers[0]["usd_per_gpu_hour"] == 3.75 and offers[0]["vcpus"] == 208
    assert ("h100-sxm-80gb", 4) in shapes


def test_aggregators_name_the_upstream_cloud_and_excluded_providers_give_no_offer() -> None:
    resold = _source("shadeform", ["lambdalabs_H100-sxm5x2,H100,2.0,52,450,8.38,austin-usa-1,,"])
    auction = _source("mithril", ["h100-80gb.sxm.8x,H100,8,168,1814,8.0,us-central2-a,,8.0"])
    shapes, _ = bp._offers_by_shape([resold, auction], MARKETED)
    assert [o["provider"] for o in shapes[("h100-sxm-80gb", 2)]] == ["Shadeform (lambdalabs)"]
    assert ("h100-sxm-80gb", 8) not in shapes


def test_the_committed_prices_cover_every_gpu_configuration_with_an_offer_or_a_reason() -> None:
    document = json.loads((CATALOG / "prices.json").read_text())
    configurations = json.loads((CATALOG / "configurations.json").read_text())["records"]
    gpu = {c["slug"] for c in configurations if c["accelerator"]}
    records = {r["configuration"]: r for r in document["records"]}
    assert set(records) == gpu
    for record in records.values():
        assert bool(record.get("offers")) != bool(record.get("no_price_reason")), record
        for offer in record.get("offers", []):
            source = document["sources"][offer["source"]]
            assert offer["usd_per_hour"] > 0 and offer["kind"] in ("on_demand", "spot") and offer["region"]
            assert source["url"] == f"https://github.com/{bp.REPOSITORY}/blob/{source['commit']}/{source['path']}"
    assert document["stale_after_days"] == 90


def test_a_tree_builds_and_check_says_whether_the_file_is_current(tmp_path) -> None:
    tree = tmp_path / "skypilot-catalog"
    (tree / "catalogs/v8/nebius").mkdir(parents=True)
    header = "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,Price,Region,GpuInfo,SpotPrice"
    row = "gpu-h100-sxm_8gpu-128vcpu-1600gb,H100,8,128,1600,23.60,eu-north1,,10.00"
    (tree / "catalogs/v8/nebius/vms.csv").write_text(f"{header}\n{row}\n")
    manifest = {"read_on": "2026-12-02", "files": {"catalogs/v8/nebius/vms.csv": {"commit": "0082b043"}}}
    (tree / "SOURCES.json").write_text(json.dumps(manifest))
    out = tmp_path / "prices.json"
    assert bp.main(["--tree", str(tree), "--out", str(out)]) == 0
    assert bp.main(["--tree", str(tree), "--out", str(out), "--check"]) == 0
    document = json.loads(out.read_text())
    dgx = next(r for r in document["records"] if r["configuration"] == "h100-sxm-80gb-x8-r550")
    assert [(o["provider"], o["kind"], o["usd_per_hour"]) for o in dgx["offers"]] == [
        ("Nebius", "on_demand", 23.6),
        ("Nebius", "spot", 10.0),
    ]
    assert document["sources"]["nebius"]["read_on"] == "2026-12-02"
    assert (
        "no offer of" in next(r for r in document["records"] if r["configuration"] == "t4-x1-r535")["no_price_reason"]
    )
    out.write_text(out.read_text().replace("23.6", "23.5"))
    assert bp.main(["--tree", str(tree), "--out", str(out), "--check"]) == 1


def test_a_git_snapshot_is_read_at_its_commit_and_dated_by_it(tmp_path) -> None:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    work = tmp_path / "skypilot-catalog"
    (work / "catalogs/v8/nebius").mkdir(parents=True)
    header = "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,Price,Region,GpuInfo,SpotPrice"
    row = "gpu-h200-sxm_8gpu-128vcpu-1600gb,H200,8,128,1600,28.00,eu-north1,,11.60"
    (work / "catalogs/v8/nebius/vms.csv").write_text(f"{header}\n{row}\n")
    env = {**os.environ, "GIT_AUTHOR_DATE": "2026-11-20T12:00:00", "GIT_COMMITTER_DATE": "2026-11-20T12:00:00"}

    def git(*args: str) -> str:
        command = ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args]
        return subprocess.run(command, cwd=work, check=True, capture_output=True, text=True, env=env).stdout

    git("init", "-q")
    git("add", ".")
    git("commit", "-q", "-m", "catalog")
    (source,) = bp.read_mirror(work / ".git", "HEAD")
    assert (source.key, source.read_on, source.commit) == ("nebius", "2026-11-20", git("rev-parse", "HEAD").strip())
    assert source.url.endswith(f"/blob/{source.commit}/catalogs/v8/nebius/vms.csv")
