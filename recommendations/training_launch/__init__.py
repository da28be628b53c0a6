"""Launch commands for training recommendations: what to run for a training entry's plan, checked against the
framework's own definitions at the pinned release. Pure.

One module per framework, each with its release's fixture reader, command, check (``problems``), builder and
read-back, and its own account of what the command sets and where it is checked: ``torchtune`` (``tune run``),
``torchtitan`` (``torchrun -m torchtitan.train``), ``transformers`` (``accelerate launch -m trl.scripts.sft``, TRL,
PEFT and accelerate), ``litgpt`` (a wrapper around lit-gpt's finetune scripts) and ``unsloth`` (a training script);
``common`` holds what they share. A plan the framework cannot run as budgeted is refused with the reason
(``no_training_launch``).

Frameworks without a launch yet, and why: ``UNLAUNCHED_FRAMEWORKS``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from budgets.engine import Workload

from ..launch import Launch
from ..plans import Plan
from .common import LESS
from .litgpt import LIT_WRAPPER, LITGPT_RELEASE, litgpt_launch, litgpt_release
from .torchtitan import (
    TORCHTITAN_RELEASE,
    TitanCommand,
    torchtitan_launch,
    torchtitan_release,
    workload_from_torchtitan,
)
from .torchtune import TORCHTUNE_RELEASE, TuneCommand, torchtune_launch, torchtune_release, workload_from_torchtune
from .transformers import (
    ACCELERATE_CONFIG,
    HF_RELEASES,
    HfCommand,
    hf_stack,
    transformers_launch,
    workload_from_transformers,
)
from .unsloth import UNSLOTH_CALLS, UNSLOTH_RELEASE, UNSLOTH_SCRIPT, unsloth_launch, unsloth_release

__all__ = [
    "ACCELERATE_CONFIG",
    "HF_RELEASES",
    "LAUNCHERS",
    "LESS",
    "LITGPT_RELEASE",
    "LIT_WRAPPER",
    "TORCHTITAN_RELEASE",
    "TORCHTUNE_RELEASE",
    "UNLAUNCHED_FRAMEWORKS",
    "UNSLOTH_CALLS",
    "UNSLOTH_RELEASE",
    "UNSLOTH_SCRIPT",
    "HfCommand",
    "TitanCommand",
    "TuneCommand",
    "hf_stack",
    "litgpt_release",
    "no_training_launch",
    "torchtitan_release",
    "torchtune_release",
    "training_launch",
    "unsloth_release",
    "workload_from_torchtitan",
    "workload_from_torchtune",
    "workload_from_transformers",
]

#: Training frameworks that have no launch yet, and why (their recommendations carry none).
UNLAUNCHED_FRAMEWORKS: dict[str, str] = {}


LAUNCHERS: dict[str, Callable[[Workload, Mapping[str, Any], Plan], Launch | str]] = {
    "transformers": transformers_launch,
    "torchtune": torchtune_launch,
    "torchtitan": torchtitan_launch,
    "litgpt": litgpt_launch,
    "unsloth": unsloth_launch,
}


def _launch(workload: Workload, settings: Mapping[str, Any], plan: Plan) -> Launch | str:
    training = workload.training
    if workload.task != "training" or training is None:
        return "not a training workload"
    launcher = LAUNCHERS.get(training.framework)
    return UNLAUNCHED_FRAMEWORKS[training.framework] if launcher is None else launcher(workload, settings, plan)


def training_launch(workload: Workload, settings: Mapping[str, Any], plan: Plan) -> Launch | None:
    """The command that runs a training workload's ``plan`` (``settings``: the entry's suggested settings), checked
    against the framework's pinned release; None for another task, a framework without a launch
    (``UNLAUNCHED_FRAMEWORKS``) or a plan the framework cannot run as budgeted (``no_training_launch`` says why)."""
    found = _launch(workload, settings, plan)
    return found if isinstance(found, Launch) else None


def no_training_launch(workload: Workload, settings: Mapping[str, Any], plan: Plan) -> str | None:
    """Why ``training_launch`` gives no command for this plan; None when it gives one."""
    found = _launch(workload, settings, plan)
    return found if isinstance(found, str) else None
