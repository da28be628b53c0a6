"""``manage.py estimate FILE [--format json|table] [--device-memory SIZE | --configuration SLUG]``.

Prints the budget of the workload in FILE. ``json`` prints exactly the contract's budget object,
alone, on stdout; errors go to stderr with the field that is wrong, and the exit status is non-zero.
``--device-memory`` (``79.19GiB``, ``80GB``, bytes) or ``--configuration`` (a catalog slug) gives the
usable memory of one device, so that a vLLM workload gets its KV pool and concurrency (``serving``).
The same 1 EiB guard as the API applies (``budgets.services.budget_compute``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from pydantic import ValidationError

from budgets.engine.device import NO_DEVICE, Device
from catalog.units import UnitError, parse_device_memory

from ...engine import render_table, validation_errors
from ...services import BudgetOutOfRange, budget_compute, configuration_device, workload_validate


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


def validated(path: str):
    try:
        return workload_validate(read_workload_file(path))
    except ValidationError as exc:
        lines = [f"  {message}" for messages in validation_errors(exc).values() for message in messages]
        raise CommandError(f"{path} is not a valid workload:\n" + "\n".join(lines)) from None


class Command(BaseCommand):
    help = "Print the memory budget of the workload described in FILE (JSON, see WORKLOAD.md)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("file", help="workload JSON file, or - for standard input")
        parser.add_argument("--format", choices=["json", "table"], default="json")
        memory = parser.add_mutually_exclusive_group()
        memory.add_argument("--device-memory", metavar="SIZE", help="usable memory per device: 79.19GiB, 80GB, bytes")
        memory.add_argument(
            "--configuration", metavar="SLUG", help="a catalog configuration's usable memory per device"
        )

    def handle(self, *args, file: str, format: str, **options) -> None:
        device = device_option(options.get("device_memory"), options.get("configuration"))
        try:
            budget = budget_compute(validated(file), device)
        except BudgetOutOfRange as exc:
            raise CommandError(f"{file}: {exc}") from None
        if format == "json":
            self.stdout.write(json.dumps(budget.as_contract(), indent=2))
        else:
            self.stdout.write(render_table(budget))


def device_option(size: str | None, configuration: str | None) -> Device:
    try:
        if size is not None:
            return Device(parse_device_memory(size))
        if configuration is not None:
            return configuration_device(configuration)
    except UnitError as exc:
        raise CommandError(f"--device-memory: {exc}") from None
    except LookupError as exc:
        raise CommandError(f"--configuration: {exc}") from None
    return NO_DEVICE
