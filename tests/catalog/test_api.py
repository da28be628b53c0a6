"""The catalog API: who may read and write, the filters, and the 400s for bad filter values."""

from __future__ import annotations

import pytest

from catalog.models import Configuration

pytestmark = pytest.mark.django_db

CONFIGS = "/api/v1/configurations/"


def _all(client, url: str) -> list[dict]:  # type: ignore[no-untyped-def]
    """Every object of a paginated list, following ``next`` links."""
    items: list[dict] = []
    while url:
        response = client.get(url)
        assert response.status_code == 200, response.content
        items += response.json()["results"]
        url = response.json()["next"]
    return items


def test_everything_requires_login(anon_api, catalog) -> None:  # type: ignore[no-untyped-def]
    for url in (CONFIGS, "/api/v1/accelerators/", "/api/v1/architectures/", "/api/v1/nodes/", "/api/schema/"):
        assert anon_api.get(url).status_code == 401, url


def test_min_memory_and_fp8_returns_hopper_class_and_no_a100(api, catalog) -> None:  # type: ignore[no-untyped-def]
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
        ("nvlink=maybe", "nvlink"),
        ("device=tpu", "device"),
        ("driver_branch=Rxyz", "driver_branch"),
    ],
)
def test_bad_filter_values_are_400s_that_say_what_was_expected(api, catalog, query, field) -> None:  # type: ignore[no-untyped-def]
    response = api.get(f"{CONFIGS}?{query}")
    assert response.status_code == 400, response.content
    body = response.json()
    assert field in body, body
    assert body[field][0]  # a message, not an empty list


def test_min_memory_units_agree(api, catalog) -> None:  # type: ignore[no-untyped-def]
    in_gb = {c["id"] for c in _all(api, f"{CONFIGS}?min_memory=85899345920")}
    in_gib = {c["id"] for c in _all(api, f"{CONFIGS}?min_memory=80GiB")}
    in_mib = {c["id"] for c in _all(api, f"{CONFIGS}?min_memory=81920MiB")}
    assert in_gb == in_gib == in_mib
    assert {c["id"] for c in _all(api, f"{CONFIGS}?min_memory=80GB")} > in_gib  # 80 GB < 80 GiB


def test_min_total_memory_counts_all_devices(api, catalog) -> None:  # type: ignore[no-untyped-def]
    configs = _all(api, f"{CONFIGS}?min_total_memory=640GB")
    assert configs
    assert all(c["total_memory_bytes"] >= 640 * 10**9 for c in configs)
    assert any(c["per_device_memory_bytes"] < 640 * 10**9 for c in configs)


def test_filters_by_device_count_vendor_nvlink_and_capability(api, catalog) -> None:  # type: ignore[no-untyped-def]
    eights = _all(api, f"{CONFIGS}?device_count=8&vendor=nvidia&nvlink=true&min_compute_capability=9.0")
    assert eights
    for c in eights:
        assert c["device_count"] == 8
        assert c["nvlink_domain_size"] > 1
        assert c["accelerator"]["vendor"] == "nvidia"
    amd = _all(api, f"{CONFIGS}?vendor=amd")
    assert amd and all(c["accelerator"]["vendor"] == "amd" for c in amd)


def test_device_cpu_returns_the_cpu_configuration(api, catalog) -> None:  # type: ignore[no-untyped-def]
    cpus = _all(api, f"{CONFIGS}?device=cpu")
    assert cpus
    assert all(c["kind"] == "cpu" and c["accelerator"] is None for c in cpus)


def test_cuda_filter_keeps_drivers_that_support_it(api, catalog) -> None:  # type: ignore[no-untyped-def]
    cuda13 = _all(api, f"{CONFIGS}?cuda=13.0")
    assert cuda13
    assert all(int(c["driver_version"].split(".")[0]) >= 580 for c in cuda13)
    cuda12 = _all(api, f"{CONFIGS}?cuda=12.4")
    assert len(cuda12) > len(cuda13)
    assert all(c["driver_version"] for c in cuda12)


def test_catalog_writes_need_staff(api, staff_api, catalog) -> None:  # type: ignore[no-untyped-def]
    config = Configuration.objects.filter(kind="gpu").select_related("accelerator").first()
    payload = {
        "slug": "test-box",
        "name": "Test box",
        "kind": "gpu",
        "accelerator_slug": config.accelerator.slug,
        "device_count": 2,
        "nvlink_domain_size": 1,
        "vcpus": 32,
        "host_ram_bytes": 256 * 10**9,
        "disk_bytes": 2 * 10**12,
        "driver_version": "550.54.15",
    }
    assert api.post(CONFIGS, payload, format="json").status_code == 403
    response = staff_api.post(CONFIGS, payload, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["total_memory_bytes"] == 2 * config.accelerator.marketed_memory_bytes
    assert api.delete(f"{CONFIGS}test-box/").status_code == 403


def test_invalid_writes_are_400_not_500(staff_api, catalog) -> None:  # type: ignore[no-untyped-def]
    config = Configuration.objects.filter(kind="gpu").select_related("accelerator").first()
    payload = {
        "slug": "bad-box",
        "name": "Bad box",
        "kind": "gpu",
        "accelerator_slug": config.accelerator.slug,
        "device_count": 2,
        "nvlink_domain_size": 4,  # more NVLink peers than devices: a schema constraint
        "vcpus": 32,
        "host_ram_bytes": 256 * 10**9,
        "disk_bytes": 2 * 10**12,
    }
    response = staff_api.post(CONFIGS, payload, format="json")
    assert response.status_code == 400, response.content
    payload.update(nvlink_domain_size=1, kind="cpu")  # a CPU configuration cannot carry an accelerator
    assert staff_api.post(CONFIGS, payload, format="json").status_code == 400
    payload.update(kind="gpu", host_ram_bytes=-1)
    response = staff_api.post(CONFIGS, payload, format="json")
    assert response.status_code == 400 and "host_ram_bytes" in response.json()


def test_detail_by_slug_and_404(api, catalog) -> None:  # type: ignore[no-untyped-def]
    slug = Configuration.objects.first().slug
    assert api.get(f"{CONFIGS}{slug}/").json()["slug"] == slug
    assert api.get(f"{CONFIGS}no-such-box/").status_code == 404


def test_accelerators_carry_sources_and_uncertainty(api, catalog) -> None:  # type: ignore[no-untyped-def]
    accelerators = _all(api, "/api/v1/accelerators/")
    assert len(accelerators) >= 30
    assert all(a["source_url"].startswith("http") for a in accelerators)
    assert any(a["uncertain_fields"] for a in accelerators)
    h100 = next(a for a in accelerators if a["slug"].startswith("h100-sxm"))
    assert "fp8" in h100["precisions"]
