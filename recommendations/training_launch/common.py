"""What the training launches of every framework share: the draft a command is built in, the check a
command passes, the environment it sets and how notes name what holds less than the budget."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ..launch import Launch, LaunchError

#: The workload's 4-bit weight formats a torchtune QLoRA run replaces with torchao's NF4 (``quantize_base``:
#: torchtune/modules/peft/lora.py ``to_nf4``).
FOUR_BIT = ("nf4", "int4")
#: How a note ends that names a setting the command replaces by one holding less memory than the budget assumed.
LESS = "less than the budget's"
ALLOCATOR = "PYTORCH_CUDA_ALLOC_CONF"
EXPANDABLE = "expandable_segments:True"


def split_env(argv: Sequence[str]) -> tuple[list[tuple[str, str]], list[str]]:
    """A command's ``env NAME=VALUE …`` prefix (the variables, in order) and the command after it."""
    rest = list(argv)
    env: list[tuple[str, str]] = []
    if rest[:1] == ["env"]:
        rest.pop(0)
        while rest and "=" in rest[0] and not rest[0].startswith("-"):
            name, _, value = rest.pop(0).partition("=")
            env.append((name, value))
    return env, rest


def _value(value: object) -> str:
    """A value as an OmegaConf dotlist reads it (``True``, ``None``, ``[q_proj,v_proj]``)."""
    if isinstance(value, list | tuple):
        return "[" + ",".join(map(str, value)) + "]"
    return str(value)


@dataclass
class _Draft:
    """A command being built: overrides in order, removals, notes, and why it cannot be (``refusal``)."""

    overrides: list[tuple[str, str]] = field(default_factory=list)
    removals: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    refusal: str | None = None

    def set(self, key: str, value: object) -> None:
        self.overrides.append((key, _value(value)))

    def refuse(self, reason: str) -> None:
        self.refusal = self.refusal or reason


def _checked(
    engine: str,
    release: str | None,
    argv: tuple[str, ...],
    notes: Sequence[str],
    problems: Sequence[str],
    checked_against: str | None = None,
    files: tuple[tuple[str, str], ...] = (),
) -> Launch:
    """The launch of a command its release's check found no ``problems`` in (``checked_against``: what passed it, by
    default "<engine> <release>"); a problem is a bug in this module, never the user's input, and raises."""
    if problems:
        raise LaunchError("; ".join(problems))
    return Launch(engine, checked_against or f"{engine} {release}", argv, tuple(notes), files)


def _flag(value: str) -> bool:
    return value == "True"
