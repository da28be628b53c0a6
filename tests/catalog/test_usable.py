"""Usable memory per device, best evidence first: verified > observed > derived (catalog.usable).

The pure rule needs no database; the last tests check that the SQL annotation (``with_memory()``), the
model, the API and the admin all give the same answer over the real catalog.
"""

from __future__ import annotations

from decimal import Decimal

import pytest

from catalog.models import Configuration
from catalog.selectors import configuration_candidates
from catalog.usable import (
    DERIVATION_RULES,
    OBSERVED_PAIRS,
    UsableBasis,
    accelerator_usable_memory,
    derived_usable_bytes,
    host_usable_memory,
    memory_class,
)
from tests.catalog.compat_facts import records
from tests.factories import ConfigurationFactory, NodeFactory

H100 = 85_029_615_043  # 79.19 GiB as vLLM's profiler printed it (fixtures: h100-sxm-80gb)


def test_the_best_evidence_wins() -> None:
    facts = {"marketed_bytes": 80 * 10**9, "memory_type": "HBM3"}
    derived = accelerator_usable_memory(**facts)
    observed = accelerator_usable_memory(**facts, observed_bytes=H100, observed_source="vLLM log")
    verified = accelerator_usable_memory(
        **facts, observed_bytes=H100, observed_source="vLLM log", verified_bytes=H100 - 1, verified_source="node a"
    )
    assert (derived.basis, observed.basis, verified.basis) == ("derived", "observed", "verified")
    assert (observed.bytes, observed.source) == (H100, "vLLM log")
    assert (verified.bytes, verified.source) == (H100 - 1, "node a")
    assert derived.bytes == derived_usable_bytes(80 * 10**9, "HBM3") and "HBM" in derived.source
    assert host_usable_memory(64 * 10**9).basis == UsableBasis.HOST_RAM


def test_a_memory_type_without_a_rule_keeps_the_marketed_size_and_says_so() -> None:
    usable = accelerator_usable_memory(marketed_bytes=64 * 10**9, memory_type="LPDDR5X")
    assert (usable.bytes, usable.basis) == (64 * 10**9, "marketed")
    assert "no derivation rule for memory type 'LPDDR5X'" in usable.source


def test_each_rule_is_the_smallest_observed_ratio_of_its_memory_type() -> None:
    for kind, rule in DERIVATION_RULES.items():
        ratios = [p.ratio for p in OBSERVED_PAIRS if memory_class(p.memory_type) == kind]
        assert rule.ratio <= min(ratios) < rule.ratio + Decimal("0.000001"), kind
    assert DERIVATION_RULES["HBM"].ratio == Decimal("1.057367")  # A100 40GB PCIe: 39.39 GiB of 40 GB
    assert DERIVATION_RULES["GDDR"].ratio == Decimal("0.983815")  # A10 (ECC on): 21.99 GiB of 24 GB


def test_derived_never_exceeds_what_cuda_reported() -> None:
    for pair in OBSERVED_PAIRS:
        assert derived_usable_bytes(pair.marketed_bytes, pair.memory_type) <= pair.observed_bytes, pair.slug


def test_the_observed_pairs_are_the_catalogs() -> None:
    """The rule's inputs are the committed fixtures' figures; a rebuild that changes them fails here."""
    by_slug = {r["slug"]: r for r in records("accelerators.json")}
    for pair in OBSERVED_PAIRS:
        row = by_slug[pair.slug]
        assert (row["marketed_memory_bytes"], row["usable_memory_bytes"]) == (pair.marketed_bytes, pair.observed_bytes)
        assert row["memory_type"] == pair.memory_type and row["usable_memory_source"]


@pytest.mark.parametrize(
    ("memory_type", "kind"),
    [("HBM3e", "HBM"), ("HBM3 or HBM3e", "HBM"), ("GDDR6 (ECC)", "GDDR"), ("GDDR7", "GDDR"), ("", "")],
)
def test_memory_class(memory_type: str, kind: str) -> None:
    assert memory_class(memory_type) == kind


@pytest.mark.django_db
def test_sql_and_python_agree_on_every_configuration(catalog) -> None:
    h100 = Configuration.objects.filter(accelerator__slug="h100-sxm-80gb").first()
    NodeFactory(configuration=h100, verified_usable_memory_bytes=H100 - 2**20, name="h100-box")
    NodeFactory(configuration=h100, verified_usable_memory_bytes=H100, name="h100-box-2")
    ConfigurationFactory(accelerator__memory_type="", device_count=1, nvlink_domain_size=1)
    rows = list(Configuration.objects.with_memory().select_related("accelerator"))
    for row in rows:
        assert row.usable_memory_bytes == row.usable_memory.bytes, row.slug
    bases = {row.usable_memory.basis for row in rows}
    assert bases == {"verified", "observed", "derived", "marketed", "host_ram"}
    verified = next(row for row in rows if row.pk == h100.pk).usable_memory
    assert (verified.bytes, verified.source) == (H100 - 2**20, "node h100-box: NVML total less the driver's reserve")
    fresh = Configuration.objects.get(pk=h100.pk)  # not annotated: the model asks its nodes
    assert fresh.usable_memory == verified


@pytest.mark.django_db
def test_the_api_says_which_evidence_it_used(api, catalog) -> None:
    h100 = api.get("/api/v1/accelerators/h100-sxm-80gb/").json()
    assert (h100["usable_bytes"], h100["usable_basis"]) == (H100, "observed")
    assert "llm-d" in h100["usable_source"]
    h200 = api.get("/api/v1/accelerators/h200-sxm-141gb/").json()
    assert h200["usable_basis"] == "derived" and h200["usable_bytes"] == derived_usable_bytes(141 * 10**9, "HBM3e")
    configs = api.get("/api/v1/configurations/?device=cpu").json()["results"]
    assert configs and all(c["usable_basis"] == "host_ram" for c in configs)


@pytest.mark.django_db
def test_candidates_carry_usable_memory_and_facts_in_a_fixed_number_of_queries(
    catalog, django_assert_max_num_queries
) -> None:
    with django_assert_max_num_queries(4):  # toolkits, wheels, configurations, precisions
        candidates = configuration_candidates()
    assert len(candidates) == Configuration.objects.count()
    b200 = next(c for c in candidates if c.configuration.accelerator and c.configuration.accelerator.slug == "b200")
    assert str(b200.facts.compute_capability) == "10.0" and "fp4" in b200.facts.native_precisions
    assert b200.usable.basis == "observed"
    assert all(c.facts.toolkits and c.facts.wheels for c in candidates)


@pytest.mark.django_db
def test_the_admin_shows_usable_memory_and_its_basis(admin_client, catalog) -> None:
    page = admin_client.get("/admin/catalog/configuration/").content.decode()
    assert "(observed)" in page and "(derived)" in page and "(host_ram)" in page
    h200 = Configuration.objects.filter(accelerator__slug="h200-sxm-141gb").first()
    form = admin_client.get(f"/admin/catalog/configuration/{h200.pk}/change/").content.decode()
    assert "derived: marketed × 1.057367" in form
