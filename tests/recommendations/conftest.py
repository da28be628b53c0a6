"""The real catalog from fixtures/, loaded by ``loadcatalog`` (as test_recommend_catalog.py does)."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from catalog.models import Configuration


@pytest.fixture
def catalog(db) -> None:
    if not Configuration.objects.exists():
        call_command("loadcatalog", verbosity=0)
