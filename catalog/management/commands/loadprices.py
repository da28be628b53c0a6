"""``manage.py loadprices [--path DIR] [--dry-run]``: load the prices of fixtures/catalog/prices.json alone.

A thin adapter over :func:`catalog.prices.prices_load_path` (what it loads and how: ``catalog/prices.py``);
``loadcatalog`` loads them after the catalog itself. Running it twice changes nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from catalog.prices import PRICES_FILE, prices_load_path
from catalog.services import DEFAULT_CATALOG_DIR, CatalogDataError


class Command(BaseCommand):
    help = "Load or refresh the prices of fixtures/catalog/prices.json (Price rows and each configuration's price)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--path", default=str(DEFAULT_CATALOG_DIR), help=f"fixture folder (default {DEFAULT_CATALOG_DIR})"
        )
        parser.add_argument("--dry-run", action="store_true", help="report what would change, then roll back")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            with transaction.atomic():
                report = prices_load_path(options["path"])
                if options["dry_run"]:
                    transaction.set_rollback(True)
        except CatalogDataError as exc:
            raise CommandError(str(exc)) from None
        if report is None:
            raise CommandError(f"{Path(options['path']) / PRICES_FILE}: no such file")
        prefix = "[dry run, rolled back] " if options["dry_run"] else ""
        for line in report.lines():
            self.stdout.write(prefix + line)
        if options["verbosity"] >= 2:
            for change in report.changes:
                self.stdout.write(f"  updated {change}")
