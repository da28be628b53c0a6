"""``manage.py recommend FILE [--format json|table] [--top N]``.

Ranks the catalog's configurations for the workload in FILE (``-`` for standard input) through the same
service as the API (``recommendations.services.recommend_for``), with every acceptance measurement as
calibration (no user: the command line sees all). ``json`` prints exactly the API's answer on stdout.
A file that cannot be read, is not JSON or is not a valid workload exits with status 2 and a message on
stderr naming each wrong field.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable

from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError

from budgets.engine import Workload
from budgets.management.commands.estimate import validated
from budgets.services import BudgetOutOfRange

from ...recommend import Entry, no_launch_reason
from ...services import MAX_TOP, recommend_for, recommendations_payload

BAD_INPUT = 2  # exit status for a file that is not a valid workload (argparse uses 2 for bad arguments too)
GIB = 2**30


def top_value(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= MAX_TOP:
        raise argparse.ArgumentTypeError(f"--top must be a whole number from 1 to {MAX_TOP}, not {text!r}")
    return value


def _gib(value: int | None) -> str:
    return "-" if value is None else f"{value / GIB:,.2f}"


def launch_lines(workload: Workload, entries: Iterable[Entry]) -> str:
    """Each entry's launch command, with what to know about it; why an entry has none."""
    lines = ["", "Launch commands:"]
    for entry in entries:
        slug = entry.configuration["slug"]
        if entry.launch is None:
            why = no_launch_reason(workload, entry) or "not runnable"
            lines.append(f"# {slug}: {why}")
            continue
        lines.append(f"# {slug} ({entry.plan.label() if entry.plan else ''}; flags of {entry.launch.checked_against})")
        lines.extend(f"#   {note}" for note in entry.launch.notes)
        lines.append(entry.launch.text)
        for path, content in entry.launch.files:  # as a shell here-document, to write before running the command
            folder = path.rpartition("/")[0]
            lines += [
                f"# {path}, which the command reads:",
                *([f"mkdir -p {folder}"] if folder else []),
                f"cat > {path} <<'EOF'",
                *content.rstrip("\n").split("\n"),
                "EOF",
            ]
    return "\n".join(lines)


def render_table(entries: Iterable[Entry]) -> str:
    """One line per configuration, ranked: verdict, plan, need and usable memory per device, evidence, the price per
    hour, per month (730 h) and per million output tokens (inference) with the offer it is, or "no price"; why."""
    header = (
        f"{'#':>3}  {'configuration':<28}{'verdict':<14}{'plan':<22}{'need GiB':>10}{'usable GiB':>12}"
        f"{'headroom GiB':>14}  {'evidence':<22}{'USD/h':>9}{'USD/month':>11}{'USD/Mtok':>10}  {'price from':<46}  why"
    )
    lines = [header]
    for rank, e in enumerate(entries, start=1):
        plan = e.plan.label() if e.plan else "-"
        cost = e.cost
        hour, month, per_million, offer = "no price", "-", "-", "-"
        if cost is not None:
            hour, month, offer = f"{cost.usd_per_hour:,.2f}", f"{cost.usd_per_month:,.0f}", cost.offer_text()
            if cost.usd_per_million_output_tokens is not None:
                per_million = f"{cost.usd_per_million_output_tokens:,.2f}"
        why = e.reasons[0].message if e.reasons else (f"margin set by {e.margin.set_by}" if e.margin else "")
        lines.append(
            f"{rank:>3}  {e.configuration['slug']:<28}{e.verdict.value:<14}{plan:<22}{_gib(e.per_device_bytes):>10}"
            f"{_gib(e.usable_bytes):>12}{_gib(e.headroom_bytes):>14}  {e.evidence.label:<22}{hour:>9}{month:>11}"
            f"{per_million:>10}  {offer:<46}  {why}"
        )
    return "\n".join(lines)


class Command(BaseCommand):
    help = "Rank the catalog's configurations for the workload described in FILE (JSON, see WORKLOAD.md)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("file", help="workload JSON file, or - for standard input")
        parser.add_argument("--format", choices=["json", "table"], default="table")
        parser.add_argument("--top", type=top_value, default=10, help=f"entries to print (1–{MAX_TOP})")
        parser.add_argument(
            "--launch",
            action="store_true",
            help="after the table, each runnable entry's launch command (vLLM: vllm serve …); in JSON, always there",
        )

    def handle(self, *args, file: str, format: str, top: int, launch: bool = False, **options) -> None:
        try:
            spec = validated(file)
            entries = recommend_for(spec, top=top)
        except CommandError as exc:
            raise CommandError(str(exc), returncode=BAD_INPUT) from None
        except BudgetOutOfRange as exc:
            raise CommandError(f"{file}: {exc}", returncode=BAD_INPUT) from None
        except DatabaseError as exc:  # a fresh checkout: no tables, or no catalog in them
            raise CommandError(
                f"the catalog cannot be read ({exc}); load it first: `make catalog`"
                " (manage.py migrate && manage.py loadcatalog)"
            ) from None
        if not entries:
            raise CommandError("the catalog has no configurations to rank; load it first: `make catalog`")
        if format == "json":
            self.stdout.write(json.dumps(recommendations_payload(spec, entries), indent=2))
        else:
            self.stdout.write(render_table(entries))
        if launch and format == "table":  # the JSON carries each entry's launch already
            self.stdout.write(launch_lines(spec, entries))
