"""The session's catalog (tests/conftest.py): loaded once, seen only by the tests that ask for it, and
each test's own writes still rolled back."""

from __future__ import annotations

import pytest

from catalog.models import Configuration, Vendor
from catalog.services import catalog_read
from tests.conftest import _CatalogState

pytestmark = pytest.mark.django_db

PROBE = "zz-catalog-layer-probe"


def test_a_catalog_test_sees_the_whole_catalog_and_writes_in_its_own_savepoint(catalog, catalog_layer) -> None:
    assert catalog_layer.is_open
    assert Configuration.objects.count() == len(catalog_read()["configurations.json"])
    Vendor.objects.create(slug=PROBE, name="written by one test")
    Configuration.objects.filter(slug="h100-sxm-80gb-x8-r550").delete()


def test_the_previous_tests_writes_are_gone(catalog) -> None:
    assert not Vendor.objects.filter(slug=PROBE).exists()
    assert Configuration.objects.filter(slug="h100-sxm-80gb-x8-r550").exists()


def test_a_test_without_the_catalog_sees_an_empty_one() -> None:
    # It runs after every catalog test (pytest_collection_modifyitems), with the layer rolled back.
    assert not Configuration.objects.exists()
    assert _CatalogState.layer is None or not _CatalogState.layer.is_open


def test_the_catalog_was_loaded_once_this_session(catalog, catalog_layer) -> None:
    # The catalog tests run one after another, so however many there are, one load serves them all.
    assert catalog_layer.loads == 1


@pytest.mark.django_db(transaction=True)
def test_a_transactional_test_gets_a_committed_catalog_of_its_own(catalog, catalog_layer) -> None:
    assert not catalog_layer.is_open
    assert Configuration.objects.count() == len(catalog_read()["configurations.json"])
