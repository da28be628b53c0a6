"""loadcatalog and the catalog services: a full, idempotent, validated load of fixtures/catalog."""

from __future__ import annotations

import copy
import importlib.util
import json
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command

from catalog.choices import ConfigurationKind, CpuArchitecture, PrecisionSlug
from catalog.models import (
    Accelerator,
    Architecture,
    Configuration,
    CudaToolkit,
    Node,
    Precision,
    PyTorchWheel,
    Vendor,
)
from catalog.services import (
    CREATED,
    UNCHANGED,
    UPDATED,
    CatalogDataError,
    catalog_load,
    catalog_read,
    vendor_upsert,
)
from catalog.units import version_key

CATALOG = Path(settings.BASE_DIR) / "fixtures" / "catalog"
SHARED_DATA = Path(settings.BASE_DIR) / "fixtures" / "source"


@pytest.fixture
def data() -> dict[str, list[dict]]:
    return catalog_read(CATALOG)


@pytest.fixture
def loaded(catalog, data) -> dict[str, list[dict]]:
    """The files' data, with the catalog loaded from them (once per session: tests/conftest.py)."""
    return data


def _load(*args: str) -> str:
    out = StringIO()
    call_command("loadcatalog", *args, stdout=out)
    return out.getvalue()


@pytest.mark.django_db
def test_loadcatalog_loads_the_whole_catalog() -> None:
    output = _load()
    assert "configurations: 147 created, 0 updated, 0 unchanged" in output
    assert Configuration.objects.count() >= 80
    assert Vendor.objects.count() == 2
    assert sorted(Precision.objects.values_list("slug", flat=True)) == sorted(PrecisionSlug.values)
    assert CudaToolkit.objects.count() == 55
    assert PyTorchWheel.objects.count() >= 20
    accelerators = set(Accelerator.objects.values_list("slug", flat=True))
    assert len(accelerators) == 37
    gpus_json = SHARED_DATA / "gpus.json"
    if gpus_json.exists():  # the shared research data sits beside the clone (CI has a copy)
        assert accelerators == {g["id"] for g in json.loads(gpus_json.read_text())["gpus"]}
    assert not Accelerator.objects.filter(configurations=None).exists()  # each one is orderable


@pytest.mark.django_db
def test_second_run_changes_nothing() -> None:
    _load()
    output = _load()
    for kind in ["vendors", "precisions", "architectures", "accelerators", "configurations", "cuda_toolkits"]:
        assert f"{kind}: 0 created, 0 updated," in output
    assert "configurations: 0 created, 0 updated, 147 unchanged" in output


def test_refresh_updates_a_changed_field(loaded, data) -> None:
    changed = copy.deepcopy(data)
    h100 = next(r for r in changed["accelerators.json"] if r["slug"] == "h100-sxm-80gb")
    h100["usable_memory_bytes"] = 85_000_000_000
    h100["notes"] += " Verified on a node."
    config = next(r for r in changed["configurations.json"] if r["slug"] == "h100-sxm-80gb-x8-r550")
    config["driver_version"] = "550.163.02"

    report = catalog_load(changed)

    assert report.updated == {"accelerators": 1, "configurations": 1}
    assert report.created == {}
    assert "accelerators h100-sxm-80gb: usable_memory_bytes, notes" in report.changes
    accelerator = Accelerator.objects.get(slug="h100-sxm-80gb")
    assert accelerator.usable_memory_bytes == 85_000_000_000
    configuration = Configuration.objects.get(slug="h100-sxm-80gb-x8-r550")
    assert configuration.driver_version_key == version_key("550.163.02")  # derived key kept in step


def test_refresh_updates_architecture_precisions(loaded, data) -> None:
    changed = copy.deepcopy(data)
    turing = next(r for r in changed["architectures.json"] if r["slug"] == "turing-sm75")
    turing["precisions"] = ["fp16", "int8"]
    report = catalog_load(changed)
    assert report.changes == ["architectures turing-sm75: precisions"]
    assert set(Architecture.objects.get(slug="turing-sm75").precisions.values_list("slug", flat=True)) == {
        "fp16",
        "int8",
    }


def test_h100_and_h200_configurations_have_fp8(loaded) -> None:
    for slug in ["h100-sxm-80gb-x8-r550", "h200-sxm-141gb-x8-r550", "h100-sxm-80gb-x1-r550"]:
        configuration = Configuration.objects.get(slug=slug)
        precisions = set(configuration.accelerator.architecture.precisions.values_list("slug", flat=True))
        assert {"fp8", "bf16", "fp16"} <= precisions
    fp8 = Configuration.objects.filter(accelerator__architecture__precisions__slug="fp8")
    assert fp8.filter(accelerator__slug__startswith="h100").count() >= 10
    assert fp8.filter(accelerator__slug__startswith="h200").count() >= 6
    assert not fp8.filter(accelerator__slug__startswith="a100").exists()


def test_configuration_mix(loaded) -> None:
    gpu = Configuration.objects.filter(kind=ConfigurationKind.GPU)
    assert set(gpu.filter(node_count=1).values_list("device_count", flat=True)) == {1, 2, 4, 8}
    assert set(gpu.values_list("node_count", flat=True)) == {1, 2, 4, 8, 16, 18}
    branches = {c.driver_branch for c in gpu.filter(accelerator__architecture__vendor__slug="nvidia")}
    assert branches == {"R535", "R550", "R570", "R580"}
    cpu = Configuration.objects.get(kind=ConfigurationKind.CPU)
    assert cpu.accelerator is None and cpu.device_count == 1 and cpu.driver_version == ""
    for configuration in gpu.select_related("accelerator"):
        assert configuration.devices_per_node <= configuration.accelerator.max_devices_per_node
        assert configuration.device_count == configuration.node_count * configuration.devices_per_node
        assert configuration.nvlink_domain_size <= configuration.device_count


def test_compatibility_invariants_of_the_configurations(loaded) -> None:
    blackwell = Configuration.objects.filter(accelerator__architecture__compute_capability_major__gte=10)
    assert blackwell.exists()
    assert all(c.driver_version_key >= version_key("570") for c in blackwell)
    arm = set(
        Configuration.objects.filter(host_cpu_architecture=CpuArchitecture.AARCH64).values_list(
            "accelerator__slug", flat=True
        )
    )
    assert arm == {"gh200", "gb200", "gb300"}
    assert Configuration.objects.get(slug="h100-sxm-80gb-x8-r535").nvlink_domain_size == 8
    assert Configuration.objects.get(slug="rtx-4090-x8-r570").nvlink_domain_size == 1
    assert Configuration.objects.get(slug="h100-nvl-94gb-x2-r550").nvlink_domain_size == 2


def test_memory_is_stored_in_bytes(loaded) -> None:
    h100 = Accelerator.objects.get(slug="h100-sxm-80gb")
    assert h100.marketed_memory_bytes == 80 * 10**9
    b200 = Accelerator.objects.get(slug="b200")
    assert b200.usable_memory_bytes == 179 * 2**30 and "vultr" in b200.usable_memory_source
    assert Accelerator.objects.get(slug="a100-40gb-sxm4").usable_memory_bytes == round(39.49 * 2**30)
    dgx = Configuration.objects.get(slug="h100-sxm-80gb-x8-r580")
    assert dgx.host_ram_bytes == 2048 * 2**30 and dgx.vcpus == 224


def test_ampere_is_split_by_compute_capability(loaded) -> None:
    assert Accelerator.objects.get(slug="a100-80gb-sxm4").architecture.slug == "ampere-sm80"
    assert Accelerator.objects.get(slug="a30").architecture.slug == "ampere-sm80"
    assert Accelerator.objects.get(slug="a10").architecture.slug == "ampere-sm86"
    assert Accelerator.objects.get(slug="rtx-3090").architecture.compute_capability == "8.6"
    assert Architecture.objects.get(slug="cdna3-gfx942").gfx_target == "gfx942"


def test_sources_and_uncertainty_are_kept(loaded) -> None:
    assert all(a.source_url.startswith("https://") for a in Accelerator.objects.all())
    a10g = Accelerator.objects.get(slug="a10g")
    assert "tdp_w" in a10g.uncertain_fields
    assert "FNUZ" in Accelerator.objects.get(slug="mi300x").notes
    assert "partial" in Accelerator.objects.get(slug="rtx-5090").notes
    priced = Configuration.objects.exclude(hourly_price_usd=None)
    # every price is an offer a buyer can check: provider, region, the catalog file at its commit, the day read
    assert priced.exists() and all(c.price_offer and c.price_offer.source_url.startswith("https://") for c in priced)
    dgx = Configuration.objects.get(slug="h100-sxm-80gb-x8-r550")
    assert dgx.hourly_price_usd == min(p.usd_per_hour for p in dgx.prices.filter(kind="on_demand"))
    toolkit = CudaToolkit.objects.get(version="12.4.0")
    assert (toolkit.min_driver_linux, toolkit.minor_compat_min_driver_linux) == ("550.54.14", "525.60.13")
    assert toolkit.min_driver_linux_key == version_key("550.54.14")
    assert CudaToolkit.objects.get(version="13.3.1").uncertain


def test_stale_rows_are_reported_and_kept_when_referenced(loaded, data) -> None:
    referenced = Configuration.objects.get(slug="t4-x1-r535")
    Node.objects.create(name="ci-t4", configuration=referenced)
    smaller = copy.deepcopy(data)
    smaller["configurations.json"] = [
        r for r in smaller["configurations.json"] if r["slug"] not in {"t4-x1-r535", "t4-x2-r550"}
    ]

    report = catalog_load(smaller)
    assert sorted(report.stale["configurations"]) == ["t4-x1-r535", "t4-x2-r550"]
    assert Configuration.objects.filter(slug__in=["t4-x1-r535", "t4-x2-r550"]).count() == 2  # nothing deleted

    report = catalog_load(smaller, prune=True)
    assert len(report.kept_referenced["configurations"]) == 1
    assert len(report.deleted["configurations"]) == 1
    assert Configuration.objects.filter(slug="t4-x1-r535").exists()
    assert not Configuration.objects.filter(slug="t4-x2-r550").exists()


@pytest.mark.django_db
def test_dry_run_reports_and_rolls_back() -> None:
    output = _load("--dry-run")
    assert "[dry run, rolled back] configurations: 147 created" in output
    assert not Configuration.objects.exists()


_PARENTS = ["vendors.json", "precisions.json", "architectures.json"]
_ACCELERATORS = [*_PARENTS, "accelerators.json"]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("files", "edit", "message"),
    [
        (_ACCELERATORS, lambda d: d["accelerators.json"][0].update(marketed_memory_bytes=-1), "record 0 (v100"),
        (_ACCELERATORS, lambda d: d["accelerators.json"][0].update(marketed_memory_bytes=-1), "bytes=-1"),
        (_ACCELERATORS, lambda d: d["accelerators.json"][1].update(architecture="kepler"), "'kepler'"),
        (_ACCELERATORS, lambda d: d["accelerators.json"][2].update(memory_in_gb=80), "field(s) memory_in_gb"),
        (_ACCELERATORS, lambda d: d["accelerators.json"][3].update(tdp_watts="hot"), "tdp_watts"),
        (_PARENTS, lambda d: d["architectures.json"][0].update(precisions=["fp3"]), "precision(s) fp3"),
        (_PARENTS, lambda d: d["architectures.json"][0].update(vendor="ibm"), "unknown vendor 'ibm'"),
        (["cuda_toolkits.json"], lambda d: d["cuda_toolkits.json"][0].update(min_driver_linux="new"), "record 0"),
        (["pytorch_wheels.json"], lambda d: d["pytorch_wheels.json"][0].pop("variant"), "natural key"),
    ],
)
def test_bad_data_names_the_file_record_and_field(data, files, edit, message) -> None:
    bad = {name: records for name, records in copy.deepcopy(data).items() if name in files}
    edit(bad)
    with pytest.raises(CatalogDataError) as excinfo:
        catalog_load(bad)
    assert message in str(excinfo.value)
    assert not Vendor.objects.exists() and not CudaToolkit.objects.exists()  # one transaction: nothing kept


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d["configurations.json"][0].update(host_ram_bytes="lots"), "host_ram_bytes: 'lots'"),
        (lambda d: d["configurations.json"][0].update(device_count=2, nvlink_domain_size=4), "nvlink_domain_size=4"),
        (lambda d: d["configurations.json"].append(dict(d["configurations.json"][0])), "appears twice"),
        (lambda d: d["configurations.json"][1].update(accelerator=None), "configuration_kind_matches_accelerator"),
    ],
)
def test_bad_configurations_are_named(loaded, data, edit, message) -> None:
    bad = {"configurations.json": copy.deepcopy(data["configurations.json"])}
    edit(bad)
    with pytest.raises(CatalogDataError, match=r"configurations\.json record \d+ \(") as excinfo:
        catalog_load(bad)
    assert message in str(excinfo.value)


@pytest.mark.django_db
def test_command_reports_bad_files_as_command_errors(tmp_path: Path) -> None:
    (tmp_path / "vendors.json").write_text("{not json")
    with pytest.raises(CommandError, match=r"vendors\.json: not valid JSON"):
        call_command("loadcatalog", path=str(tmp_path))
    with pytest.raises(CommandError, match="no such catalog folder"):
        call_command("loadcatalog", path=str(tmp_path / "missing"))


@pytest.mark.django_db
def test_memory_fields_accept_units_in_the_files(data) -> None:
    edited = copy.deepcopy(data)
    cpu = next(r for r in edited["configurations.json"] if r["kind"] == "cpu")
    cpu["host_ram_bytes"] = "64GiB"
    cpu["disk_bytes"] = "500GB"
    catalog_load(edited)
    cpu_row = Configuration.objects.get(kind=ConfigurationKind.CPU)
    assert (cpu_row.host_ram_bytes, cpu_row.disk_bytes) == (64 * 2**30, 500 * 10**9)


@pytest.mark.django_db
def test_upsert_reports_its_action() -> None:
    assert vendor_upsert(slug="intel", name="Intel").action == CREATED
    assert vendor_upsert(slug="intel", name="Intel").action == UNCHANGED
    result = vendor_upsert(slug="intel", name="Intel Corporation")
    assert (result.action, result.changed_fields) == (UPDATED, ("name",))


def test_committed_fixtures_match_the_builder() -> None:
    """fixtures/catalog is what fixtures/build_catalog.py makes from the shared data (when it is there)."""
    if not (SHARED_DATA / "gpus.json").exists():
        pytest.skip("shared/data is not beside this clone")
    spec = importlib.util.spec_from_file_location("build_catalog", CATALOG.parent / "build_catalog.py")
    assert spec and spec.loader
    builder = importlib.util.module_from_spec(spec)
    sys.modules["build_catalog"] = builder  # dataclasses look their module up while the class is built
    try:
        spec.loader.exec_module(builder)
    finally:
        del sys.modules["build_catalog"]
    for name, document in builder.build(SHARED_DATA).items():
        assert (CATALOG / name).read_text() == builder.render(document), f"{name} is stale: rebuild it"


def test_keep_edits_loads_an_empty_catalog_and_then_leaves_edits_alone(db) -> None:
    from io import StringIO

    from django.core.management import call_command

    from catalog.models import Accelerator

    call_command("loadcatalog", "--keep-edits", stdout=StringIO())
    h100 = Accelerator.objects.get(slug__startswith="h100-sxm")
    h100.usable_memory_bytes = 85_000_000_000  # verified on a node, set in the admin
    h100.save()
    out = StringIO()
    call_command("loadcatalog", "--keep-edits", stdout=out)
    h100.refresh_from_db()
    assert h100.usable_memory_bytes == 85_000_000_000
    assert "left as it is" in out.getvalue()
    assert "accelerators: 0 created, 1 updated" in out.getvalue()  # reported, not applied
