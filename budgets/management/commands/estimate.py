"""``manage.py estimate FILE [--format json|table]``: the budget of the workload in FILE.

``json`` prints exactly the contract's budget object, alone, on stdout; errors go to stderr with the
field that is wrong, and the exit status is non-zero.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from pydantic import ValidationError

from ...engine import estimate, render_table, validation_errors
from ...services import workload_validate


def read_workload_file(path: str) -> object:
    """The JSON in FILE (``-`` for standard input), or a CommandError that says what is wrong with it."""
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise CommandError(f"cannot read {path}: {exc.strerror}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise CommandError(f"{path} is not JSON: {exc}") from None


def validated(path: str):  # type: ignore[no-untyped-def]
    try:
        return workload_validate(read_workload_file(path))
    except ValidationError as exc:
        lines = [f"  {message}" for messages in validation_errors(exc).values() for message in messages]
        raise CommandError(f"{path} is not a valid workload:\n" + "\n".join(lines)) from None


class Command(BaseCommand):
    help = "Print the memory budget of the workload described in FILE (JSON, see WORKLOAD.md)."

    def add_arguments(self, parser) -> None:  # type: ignore[no-untyped-def]
        parser.add_argument("file", help="workload JSON file, or - for standard input")
        parser.add_argument("--format", choices=["json", "table"], default="json")

    def handle(self, *args, file: str, format: str, **options) -> None:  # type: ignore[no-untyped-def]
        budget = estimate(validated(file))
        if format == "json":
            self.stdout.write(json.dumps(budget.as_contract(), indent=2))
        else:
            self.stdout.write(render_table(budget))
