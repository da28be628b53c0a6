"""``manage.py loadcatalog [--path DIR] [--dry-run] [--prune] [--keep-edits]``: load or refresh the catalog.

A thin adapter over :func:`catalog.services.catalog_load_path`, then the folder's prices.json
(:func:`catalog.prices.prices_load_path`), in one transaction; running it twice
changes nothing. ``--keep-edits`` (what ``make run`` uses) loads an empty catalog but never overwrites a
loaded one: it reports what the files would change, so edits made in the admin survive a restart.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from catalog.models import Accelerator
from catalog.prices import PriceReport, prices_load_path
from catalog.services import DEFAULT_CATALOG_DIR, CatalogDataError, LoadReport, catalog_load_path


def catalog_and_prices_load(path: str, *, dry_run: bool, prune: bool) -> tuple[LoadReport, PriceReport | None]:
    """The catalog files, then their prices (which name configurations the files may have just created), in one
    transaction that a dry run rolls back as a whole."""
    with transaction.atomic():
        report = catalog_load_path(path, prune=prune)
        prices = prices_load_path(path)
        if dry_run:
            transaction.set_rollback(True)
    report.dry_run = dry_run
    return report, prices


class Command(BaseCommand):
    help = (
        "Load or refresh the catalog (vendors, precisions, architectures, accelerators, configurations, "
        "CUDA toolkits, PyTorch wheels) and the prices from the fixture folder, idempotently, by natural key."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--path", default=str(DEFAULT_CATALOG_DIR), help=f"fixture folder (default {DEFAULT_CATALOG_DIR})"
        )
        parser.add_argument("--dry-run", action="store_true", help="report what would change, then roll back")
        parser.add_argument(
            "--keep-edits",
            action="store_true",
            help="load only into an empty catalog; otherwise report what the files would change (dry run)",
        )
        parser.add_argument(
            "--prune",
            action="store_true",
            help="delete rows the files no longer list, unless something references them (kept and reported)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        keep_edits = options["keep_edits"] and Accelerator.objects.exists()
        try:
            report, prices = catalog_and_prices_load(
                options["path"], dry_run=options["dry_run"] or keep_edits, prune=options["prune"]
            )
        except CatalogDataError as exc:
            raise CommandError(str(exc)) from None
        verbosity = options["verbosity"]
        if verbosity >= 1:
            prefix = "[dry run, rolled back] " if report.dry_run else ""
            for line in [*report.lines(), *(prices.lines() if prices else [])]:
                self.stdout.write(prefix + line)
            if report.stale and not options["prune"]:
                self.stdout.write("Rows not in the files were kept; --prune deletes the unreferenced ones.")
            if keep_edits:
                self.stdout.write("The catalog was already loaded and was left as it is: run loadcatalog to apply.")
        if verbosity >= 2:
            for change in [*report.changes, *(prices.changes if prices else [])]:
                self.stdout.write(f"  updated {change}")
