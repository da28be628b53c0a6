"""What the training launches of every framework share: the draft a command is built in, the check a
command passes, the environment it sets and how notes name what holds less than the budget."""

from __future__ import annotations

import ast
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field

from ..launch import HEAD_NODE, Launch, LaunchError

#: The workload's 4-bit weight formats a torchtune QLoRA run replaces with torchao's NF4 (``quantize_base``:
#: torchtune/modules/peft/lora.py ``to_nf4``).
FOUR_BIT = ("nf4", "int4")
#: How a note ends that names a setting the command replaces by one holding less memory than the budget assumed.
LESS = "less than the budget's"
ALLOCATOR = "PYTORCH_CUDA_ALLOC_CONF"
EXPANDABLE = "expandable_segments:True"


#: The port torchrun's c10d rendezvous and accelerate's main process listen on, on a multi-node plan's first node
#: (torch.distributed.run's default master port; accelerate's ``main_process_port`` default).
RENDEZVOUS_PORT = 29500


def nodes_for(devices: int, settings: Mapping[str, object]) -> tuple[int, int] | str:
    """How a plan of ``devices`` processes spreads over the configuration's nodes: (nodes, processes per node), one
    node when the settings name none or it holds them all; or why it cannot (a partial node: torchrun and accelerate
    start the same number of processes on every node)."""
    per = settings.get("devices_per_node")
    if not isinstance(per, int) or devices <= per:
        return 1, devices
    if devices % per:
        return f"{devices} processes over nodes of {per} devices: the launchers start as many on every node"
    return devices // per, per


def torchrun_flags(devices: int, settings: Mapping[str, object]) -> tuple[tuple[tuple[str, str], ...], list[str]] | str:
    """torchrun's flags for a plan of ``devices`` processes (``nodes_for``): ``--nproc_per_node`` on one node; over
    several, ``--nnodes``, a node's processes and c10d's rendezvous at the first node, with the note that says to run
    the same command on each; or why not."""
    placed = nodes_for(devices, settings)
    if isinstance(placed, str):
        return placed
    nodes, per = placed
    if nodes == 1:
        return (("--nproc_per_node", str(devices)),), []
    flags = (("--nnodes", str(nodes)), ("--nproc_per_node", str(per)), ("--rdzv_backend", "c10d"),
             ("--rdzv_endpoint", f"{HEAD_NODE}:{RENDEZVOUS_PORT}"))  # fmt: skip
    note = (f"{nodes} nodes of {per} processes: run this same command on each node, with {HEAD_NODE} the first"
            f" node's address (torchrun's c10d rendezvous on port {RENDEZVOUS_PORT})")  # fmt: skip
    return flags, [note]


def torchrun_processes(torchrun: Sequence[tuple[str, str]]) -> int:
    """The processes torchrun's flags start over all nodes: ``--nnodes`` × ``--nproc_per_node``."""
    flags = dict(torchrun)
    return int(flags.get("--nnodes", 1)) * int(flags.get("--nproc_per_node", 1))


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


def call_problems(
    tree: ast.Module,
    known: Mapping[str, Sequence[str] | frozenset[str]],
    unread: str,
    value_problems: Callable[[str, str, ast.expr], list[str]],
) -> tuple[list[str], set[str]]:
    """A script's calls to the functions ``known`` lists (by their written name, ``FastLanguageModel.from_pretrained``)
    checked keyword by keyword: one the function does not read (``unread``: what that means, after ``name(kw=…): ``),
    and ``value_problems(name, keyword, value)`` for the rest; with the names of the calls found."""
    found: list[str] = []
    called: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or ast.unparse(node.func) not in known:
            continue
        name = ast.unparse(node.func)
        called.add(name)
        for keyword in node.keywords:
            if keyword.arg is None or keyword.arg not in known[name]:
                found.append(f"{name}({keyword.arg}=…): {unread}")
            else:
                found += value_problems(name, keyword.arg, keyword.value)
    return found, called


def value_problems(
    name: str, keyword: str, value: ast.expr, allowed: Mapping[str, tuple[Collection[object], str]]
) -> list[str]:
    """``name(keyword=value)``'s problem where ``allowed`` limits ``keyword`` to a set of values (with the text that
    says which) and the literal written is not one of them; a value that is no literal is not checked."""
    if keyword not in allowed:
        return []
    try:
        literal = ast.literal_eval(value)
    except ValueError:
        return []
    values, text = allowed[keyword]
    return [] if literal in values else [f"{name}({keyword}={literal!r}): {text}"]


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
