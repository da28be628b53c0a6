"""The catalog API: who may read and write, the filters, and the 400s for bad filter values."""

from __future__ import annotations

import dataclasses

import pytest
from rest_framework.test import APIClient

from catalog.models import Accelerator, Configuration, CudaToolkit, Node
from tests.factories import AcceleratorFactory, ArchitectureFactory, ConfigurationFactory, NodeFactory, VendorFactory
from tests.workers.inventories import gpu, host_info, nvml_inventory
from workers.probes.model import GpuProcess

pytestmark = pytest.mark.django_db

CONFIGS = "/api/v1/configurations/"


def _all(client, url: str) -> list[dict]:
    """Every object of a paginated list, following ``next`` links."""
    items: list[dict] = []
    while url:
        response = client.get(url)
        assert response.status_code == 200, response.content
        items += response.json()["results"]
        url = response.json()["next"]
    return items


def test_everything_requires_login(anon_api, catalog) -> None:
    for url in (CONFIGS, "/api/v1/accelerators/", "/api/v1/architectures/", "/api/v1/nodes/", "/api/schema/"):
        assert anon_api.get(url).status_code == 401, url


def test_min_memory_and_fp8_returns_hopper_class_and_no_a100(api, catalog) -> None:
    configs = _all(api, f"{CONFIGS}?min_memory=80GB&precision=fp8")
    names = {c["accelerator"]["name"] for c in configs}
    assert any("H100" in n for n in names)
    assert any("H200" in n for n in names)
    assert not any("A100" in n for n in names)
    assert all(c["per_device_memory_bytes"] >= 80 * 10**9 for c in configs)
    first = configs[0]
    for key in (
        "id",
        "slug",
        "accelerator",
        "device_count",
        "per_device_memory_bytes",
        "total_memory_bytes",
        "driver_version",
    ):
        assert key in first
    assert first["total_memory_bytes"] == first["per_device_memory_bytes"] * first["device_count"]


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("min_memory=banana", "min_memory"),
        ("max_memory=12XB", "max_memory"),
        ("min_total_memory=-5GB", "min_total_memory"),
        ("precision=fp7", "precision"),
        ("vendor=acme", "vendor"),
        ("device_count=0", "device_count"),
        ("device_count=two", "device_count"),
        ("min_compute_capability=high", "min_compute_capability"),
        ("cuda=twelve", "cuda"),
        ("cuda=%25", "cuda"),
        ("min_memory=5%25GB", "min_memory"),
        ("nvlink=100%25", "nvlink"),
        ("min_compute_capability=%25d", "min_compute_capability"),
        ("nvlink=maybe", "nvlink"),
        ("device=tpu", "device"),
        ("driver_branch=Rxyz", "driver_branch"),
        # Each of these passed the field's own validation, then raised in the filter (a 500):
        ("min_compute_capability=v8.9", "min_compute_capability"),
        ("min_compute_capability=%3E%3D8.0", "min_compute_capability"),  # >=8.0
        ("min_compute_capability=8.9.1", "min_compute_capability"),
        ("min_compute_capability=8.9%20x", "min_compute_capability"),
        ("min_compute_capability=%D9%A8.%D9%A9", "min_compute_capability"),  # Arabic-Indic digits
        ("cuda=v12.4", "cuda"),
        ("cuda=%3E%3D12.4", "cuda"),  # >=12.4
        ("cuda=12.4%20x", "cuda"),
        ("driver_branch=R%C2%B2", "driver_branch"),  # R² (str.isdigit() is true for ²)
        ("driver_branch=" + "5" * 5000, "driver_branch"),
        ("min_memory=" + "9" * 4301, "min_memory"),
        ("min_memory=1." + "5" * 4301 + "GB", "min_memory"),
    ],
)
def test_bad_filter_values_are_400s_that_say_what_was_expected(api, catalog, query, field) -> None:
    response = api.get(f"{CONFIGS}?{query}")
    assert response.status_code == 400, response.content
    body = response.json()
    assert field in body, body
    assert body[field][0]  # a message, not an empty list


def test_min_memory_units_agree(api, catalog) -> None:
    in_gb = {c["id"] for c in _all(api, f"{CONFIGS}?min_memory=85899345920")}
    in_gib = {c["id"] for c in _all(api, f"{CONFIGS}?min_memory=80GiB")}
    in_mib = {c["id"] for c in _all(api, f"{CONFIGS}?min_memory=81920MiB")}
    assert in_gb == in_gib == in_mib
    assert {c["id"] for c in _all(api, f"{CONFIGS}?min_memory=80GB")} > in_gib  # 80 GB < 80 GiB


def test_min_total_memory_counts_all_devices(api, catalog) -> None:
    configs = _all(api, f"{CONFIGS}?min_total_memory=640GB")
    assert configs
    assert all(c["total_memory_bytes"] >= 640 * 10**9 for c in configs)
    assert any(c["per_device_memory_bytes"] < 640 * 10**9 for c in configs)


def test_filters_by_device_count_vendor_nvlink_and_capability(api, catalog) -> None:
    eights = _all(api, f"{CONFIGS}?device_count=8&vendor=nvidia&nvlink=true&min_compute_capability=9.0")
    assert eights
    for c in eights:
        assert c["device_count"] == 8
        assert c["nvlink_domain_size"] > 1
        assert c["accelerator"]["vendor"] == "nvidia"
    amd = _all(api, f"{CONFIGS}?vendor=amd")
    assert amd and all(c["accelerator"]["vendor"] == "amd" for c in amd)


def test_device_cpu_returns_the_cpu_configuration(api, catalog) -> None:
    cpus = _all(api, f"{CONFIGS}?device=cpu")
    assert cpus
    assert all(c["kind"] == "cpu" and c["accelerator"] is None for c in cpus)


def test_cuda_filter_keeps_drivers_that_support_it(api, catalog) -> None:
    cuda13 = _all(api, f"{CONFIGS}?cuda=13.0")
    assert cuda13
    assert all(int(c["driver_version"].split(".")[0]) >= 580 for c in cuda13)
    cuda12 = _all(api, f"{CONFIGS}?cuda=12.4")
    assert len(cuda12) > len(cuda13)
    assert all(c["driver_version"] for c in cuda12)


def _config_payload(accelerator_slug: str, **changes) -> dict:
    payload = {
        "slug": "test-box",
        "name": "Test box",
        "kind": "gpu",
        "accelerator_slug": accelerator_slug,
        "device_count": 2,
        "nvlink_domain_size": 1,
        "vcpus": 32,
        "host_ram_bytes": 256 * 10**9,
        "disk_bytes": 2 * 10**12,
        "driver_version": "550.54.15",
    }
    return {**payload, **changes}


def test_catalog_writes_need_the_model_permission(api, staff_api, editor_api, admin_user, catalog) -> None:
    config = Configuration.objects.filter(kind="gpu").select_related("accelerator").first()
    payload = _config_payload(config.accelerator.slug)
    assert api.post(CONFIGS, payload, format="json").status_code == 403
    # Staff without catalog.add_configuration: refused, as the admin refuses them.
    refused = staff_api.post(CONFIGS, payload, format="json")
    assert refused.status_code == 403, refused.content
    assert "permission" in refused.json()["detail"]
    assert staff_api.get(CONFIGS).status_code == 200  # reading needs no permission
    response = editor_api.post(CONFIGS, payload, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["total_memory_bytes"] == 2 * config.accelerator.marketed_memory_bytes
    assert api.delete(f"{CONFIGS}test-box/").status_code == 403
    assert staff_api.delete(f"{CONFIGS}test-box/").status_code == 403
    assert staff_api.patch(f"{CONFIGS}test-box/", {"notes": "x"}, format="json").status_code == 403
    superuser = APIClient()
    superuser.force_authenticate(admin_user)
    assert superuser.patch(f"{CONFIGS}test-box/", {"notes": "x"}, format="json").status_code == 200
    assert editor_api.delete(f"{CONFIGS}test-box/").status_code == 204


def test_invalid_writes_are_400_not_500(editor_api, catalog) -> None:
    config = Configuration.objects.filter(kind="gpu").select_related("accelerator").first()
    payload = _config_payload(config.accelerator.slug, slug="bad-box", name="Bad box", nvlink_domain_size=4)
    del payload["driver_version"]
    response = editor_api.post(CONFIGS, payload, format="json")  # more NVLink peers than devices
    assert response.status_code == 400, response.content
    assert "nvlink_domain_size" in response.json()
    payload.update(nvlink_domain_size=1, kind="cpu")  # a CPU configuration cannot carry an accelerator
    assert editor_api.post(CONFIGS, payload, format="json").status_code == 400
    payload.update(kind="gpu", host_ram_bytes=-1)
    response = editor_api.post(CONFIGS, payload, format="json")
    assert response.status_code == 400 and "host_ram_bytes" in response.json()


def test_more_devices_than_a_node_holds_is_a_400_on_device_count(editor_api, db) -> None:
    accelerator = AcceleratorFactory(max_devices_per_node=4)
    response = editor_api.post(CONFIGS, _config_payload(accelerator.slug, device_count=8), format="json")
    assert response.status_code == 400, response.content
    assert "max_devices_per_node=4" in response.json()["device_count"][0]
    assert not Configuration.objects.filter(slug="test-box").exists()
    assert editor_api.post(CONFIGS, _config_payload(accelerator.slug, device_count=4), format="json").status_code == 201


@pytest.mark.parametrize("driver", ["banana", "1000.1", "x.y", "550.54.15.1.2", "R"])
def test_unreadable_driver_versions_are_400s(editor_api, db, driver) -> None:
    accelerator = AcceleratorFactory()
    response = editor_api.post(CONFIGS, _config_payload(accelerator.slug, driver_version=driver), format="json")
    assert response.status_code == 400, response.content
    assert "driver_version" in response.json()
    assert not Configuration.objects.filter(slug="test-box").exists()
    config = ConfigurationFactory(accelerator=accelerator, device_count=2, nvlink_domain_size=1)
    response = editor_api.patch(f"{CONFIGS}{config.slug}/", {"driver_version": driver}, format="json")
    assert response.status_code == 400, response.content
    assert "driver_version" in response.json()
    config.refresh_from_db()
    assert config.driver_version == "550.54.15"


@pytest.mark.parametrize("field", ["version", "min_driver_linux", "minor_compat_min_driver_linux"])
def test_cuda_toolkit_versions_are_validated(db, field) -> None:
    from django.core.exceptions import ValidationError

    toolkit = CudaToolkit(version="12.4.1", family="12.x", min_driver_linux="550.54.15")
    toolkit.full_clean()
    setattr(toolkit, field, "twelve")
    with pytest.raises(ValidationError) as excinfo:
        toolkit.full_clean()
    assert field in excinfo.value.message_dict


ACCELERATORS = "/api/v1/accelerators/"


def _accelerator_payload(architecture: str, **changes) -> dict:
    payload = {
        "slug": "new-gpu",
        "name": "New GPU",
        "architecture": architecture,
        "marketed_memory_bytes": 80 * 10**9,
        "source_url": "https://example.org/datasheet",
    }
    return {**payload, **changes}


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"dense_tflops": [1, 2]}, "dense_tflops"),  # a list was taken for a many-to-many: a 500 after saving
        ({"dense_tflops": {"bf16": "fast"}}, "dense_tflops"),
        ({"dense_tflops": {"bf16": -1}}, "dense_tflops"),
        ({"dense_tflops": "989"}, "dense_tflops"),
        ({"uncertain_fields": [True, ""]}, "uncertain_fields"),
        ({"uncertain_fields": [{"a": 1}]}, "uncertain_fields"),
        ({"uncertain_fields": "tdp_watts"}, "uncertain_fields"),
    ],
)
def test_accelerator_json_fields_are_checked_before_saving(editor_api, db, changes, field) -> None:
    architecture = ArchitectureFactory()
    response = editor_api.post(ACCELERATORS, _accelerator_payload(architecture.slug, **changes), format="json")
    assert response.status_code == 400, response.content
    assert field in response.json(), response.json()
    assert not Accelerator.objects.filter(slug="new-gpu").exists()


def test_accelerator_json_lists_and_objects_round_trip(editor_api, db) -> None:
    architecture = ArchitectureFactory()
    payload = _accelerator_payload(
        architecture.slug, uncertain_fields=[], dense_tflops={"bf16": 989.5, "fp64": None, "int8": 1979}
    )
    response = editor_api.post(ACCELERATORS, payload, format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["uncertain_fields"] == [] and body["dense_tflops"] == {"bf16": 989.5, "fp64": None, "int8": 1979}
    response = editor_api.patch(f"{ACCELERATORS}new-gpu/", {"uncertain_fields": ["tdp_watts"]}, format="json")
    assert response.status_code == 200, response.content
    assert Accelerator.objects.get(slug="new-gpu").uncertain_fields == ["tdp_watts"]


def test_detail_by_slug_and_404(api, catalog) -> None:
    slug = Configuration.objects.first().slug
    assert api.get(f"{CONFIGS}{slug}/").json()["slug"] == slug
    assert api.get(f"{CONFIGS}no-such-box/").status_code == 404


def test_accelerators_carry_sources_and_uncertainty(api, catalog) -> None:
    accelerators = _all(api, "/api/v1/accelerators/")
    assert len(accelerators) >= 30
    assert all(a["source_url"].startswith("http") for a in accelerators)
    assert any(a["uncertain_fields"] for a in accelerators)
    h100 = next(a for a in accelerators if a["slug"].startswith("h100-sxm"))
    assert "fp8" in h100["precisions"]


def test_cuda_filter_is_nvidia_only_whatever_a_rocm_version_reads_as(api, db) -> None:
    CudaToolkit.objects.create(version="12.4.0", family="12.x", min_driver_linux="550.54.14")
    nvidia = ConfigurationFactory(driver_version="550.54.15")
    amd = ConfigurationFactory(
        accelerator__architecture__vendor=VendorFactory(slug="amd", name="AMD"), driver_version="700.1"
    )  # a (future) ROCm version whose key passes the CUDA 12.4 floor
    found = {c["slug"] for c in _all(api, f"{CONFIGS}?cuda=12.4")}
    assert nvidia.slug in found and amd.slug not in found
    assert {c["slug"] for c in _all(api, f"{CONFIGS}?cuda=cu124")} == found


@pytest.mark.parametrize("query", ["driver_branch=550", "driver_branch=R550", "driver_branch=r550"])
def test_driver_branch_filter_uses_the_version_key(api, db, query) -> None:
    in_branch = ConfigurationFactory(driver_version="550.54.15")
    short = ConfigurationFactory(driver_version="550")
    ConfigurationFactory(driver_version="55.1")  # 55.x is not 550.x
    ConfigurationFactory(driver_version="")
    ConfigurationFactory(driver_version="570.195.03")
    ConfigurationFactory(
        accelerator__architecture__vendor=VendorFactory(slug="amd", name="AMD"), driver_version="550.1"
    )
    found = {c["slug"] for c in _all(api, f"{CONFIGS}?{query}")}
    assert found == {in_branch.slug, short.slug}
    rows = {c["slug"]: c["driver_branch"] for c in _all(api, CONFIGS)}
    assert rows[in_branch.slug] == rows[short.slug] == "R550"


def test_min_compute_capability_accepts_the_spellings_it_documents(api, db) -> None:
    ada = ConfigurationFactory(
        accelerator__architecture__compute_capability_major=8, accelerator__architecture__compute_capability_minor=9
    )
    ampere = ConfigurationFactory(
        accelerator__architecture__compute_capability_major=8, accelerator__architecture__compute_capability_minor=6
    )
    for value in ("8.9", "89", "sm_89"):
        found = {c["slug"] for c in _all(api, f"{CONFIGS}?min_compute_capability={value}")}
        assert ada.slug in found and ampere.slug not in found, value


NODES = "/api/v1/nodes/"
# A real inventory as the heartbeat stores it (NodeInventory.as_dict), with a process on the first device.
_BUSY = dataclasses.replace(gpu(0), processes=(GpuProcess(pid=4242, used_memory_bytes=70 * 10**9),))
INVENTORY = dataclasses.replace(
    nvml_inventory(_BUSY, gpu(1)),
    host=dataclasses.replace(host_info(), hostname="secret-box.internal"),
).as_dict()


def test_node_inventory_and_hostname_are_for_staff_only(api, staff_api, db) -> None:
    node = NodeFactory(
        hostname="secret-box.internal",
        inventory=INVENTORY,
        device_count=2,
        probe="nvml",
        driver_version="550.54.15",
        cuda_driver_version="12.4",
    )
    seen = api.get(f"{NODES}{node.name}/").json()
    assert seen["hostname"] is None and seen["inventory"] is None
    text = api.get(NODES).content.decode()
    assert "secret-box" not in text and "4242" not in text and "processes" not in text
    summary = seen["inventory_summary"]
    assert summary == {
        "probe": "nvml",
        "device_count": 2,
        "devices": [
            {
                "name": "NVIDIA H100 80GB HBM3",
                "total_memory_bytes": 85_520_809_984,
                "usable_memory_bytes": 84_954_578_944,
            }
        ]
        * 2,
        "total_device_memory_bytes": 2 * 85_520_809_984,
        "host_ram_total_bytes": 2 * 10**12,
        "driver_version": "550.54.15",
        "cuda_driver_version": "12.4",
    }
    full = staff_api.get(f"{NODES}{node.name}/").json()
    assert full["hostname"] == "secret-box.internal"
    assert full["inventory"]["nvml"]["devices"][0]["processes"][0]["pid"] == 4242
    assert full["inventory_summary"] == summary


def test_node_summary_of_an_empty_inventory(api, db) -> None:
    node = Node.objects.create(name="bare", inventory={})
    summary = api.get(f"{NODES}{node.name}/").json()["inventory_summary"]
    assert summary["devices"] == [] and summary["total_device_memory_bytes"] == 0
    assert summary["host_ram_total_bytes"] is None


@pytest.mark.parametrize("ordering", ["hourly_price_usd", "-hourly_price_usd"])
def test_ordering_by_price_puts_configurations_without_a_price_last_either_way(api, catalog, ordering) -> None:
    priced = Configuration.objects.filter(hourly_price_usd__isnull=False).count()
    assert 0 < priced < Configuration.objects.count()  # the fixture has both
    prices = [c["hourly_price_usd"] for c in _all(api, f"{CONFIGS}?ordering={ordering}")]
    assert all(p is not None for p in prices[:priced]) and all(p is None for p in prices[priced:])
    values = [float(p) for p in prices[:priced]]
    assert values == sorted(values, reverse=ordering.startswith("-"))
