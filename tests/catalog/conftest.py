import pytest
from django.core.management import call_command

from catalog.models import Configuration


@pytest.fixture
def catalog(db) -> None:  # type: ignore[no-untyped-def]
    """The real catalog from fixtures/, loaded through the same services the admin uses."""
    if not Configuration.objects.exists():
        call_command("loadcatalog", verbosity=0)
