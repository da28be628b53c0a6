"""Serving engines behind one small interface: the registry the general schema, the plans and the verdicts ask,
so that none of them names an engine.

An engine says which KV layouts it runs, whether it preallocates a KV pool from the device at start-up (its pool
arithmetic then lives in its own module: vLLM's in `vllm.py`), the release whose rules apply when the workload
names none, its memory-utilization default by release, and the measurement view its runs are judged by. Adding an
engine is a new entry here plus its stage; an unknown engine name is a 400 that lists these.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from . import sglang, vllm

EngineName = Literal["vllm", "sglang", "transformers", "generic"]
# the training code whose layers are modelled (profiles/: transformers + peft, lit-gpt at 8641822)
TrainingFramework = Literal["transformers", "litgpt", "torchtune", "torchtitan", "unsloth"]
DEFAULT_TRAINING_FRAMEWORK: TrainingFramework = "transformers"
KvCacheLayout = Literal["paged", "contiguous", "dynamic"]
DEFAULT_ENGINE: EngineName = "vllm"
PLAIN_UTILIZATION = 0.9  # engines without a pool of their own: the share of the device a fit may use

#: Serving engines people deploy that have no profile here yet, each refused with why (a 400 naming
#: ``inference.engine``) rather than budgeted as "generic", whose contiguous cache and plain 0.9 share are neither.
UNPROFILED_ENGINES: dict[str, str] = {
    "tensorrt-llm": (
        "TensorRT-LLM has no profile here: its paged KV pool is free_gpu_memory_fraction (default 0.9) of the memory"
        " free after the engine is built and loaded (https://nvidia.github.io/TensorRT-LLM/llm-api/reference/"
        "KvCacheConfig.html), not of the device's total as vLLM's is, and its activation memory is fixed when the"
        " engine is built, from the build's maximum batch and token counts (reference/memory.md). "
        "'vllm' budgets a paged-KV server of the same model and settings; its pool differs"
    ),
    "nim": (
        "NVIDIA NIM for LLMs launches one backend per model profile, chosen at container start-up: vllm, sglang or"
        " trtllm, named first in the profile (<backend>-<precision>-tp<N>-pp1; https://docs.nvidia.com/nim/"
        "large-language-models/latest/deployment/model-profiles-and-selection.html). Name that backend as the engine:"
        " 'vllm' for a vllm-* profile, 'sglang' for an sglang-* profile; TensorRT-LLM has no profile here yet"
    ),
}


@dataclass(frozen=True, slots=True)
class ServingEngine:
    name: str
    label: str  # how answers name it ("vLLM")
    default_layout: KvCacheLayout
    layouts: tuple[KvCacheLayout, ...]  # the KV layouts it runs
    preallocated_pool: bool  # sizes a KV pool from the device at start-up (`vllm.py`, `sglang.py`)
    need_view: str  # the measurement view (measurements.acceptance.VIEWS) a run on CUDA is judged by
    default_version: str | None  # the release whose rules apply when runtime.engine_version is absent
    # gpu_memory_utilization default for a release; None: it depends on the device, resolved by the stage
    utilization: Callable[[str], float | None]
    # the vLLM rule max_num_batched_tokens ≥ max_num_seqs applies (SGLang's chunk has no such rule)
    batched_covers_seqs: bool = True
    own_settings: tuple[str, ...] = ()  # inference fields only this engine reads ("cuda_graph_max_bs")
    # tokens per KV block (page) when the workload names none: vLLM's --block-size default (vllm/config/cache.py),
    # SGLang's --page-size default 1 (server_args.py)
    block_tokens: int = 16
    # why a runtime.engine_version cannot be budgeted (None: it can); None: every release is
    version_refusal: Callable[[str], str | None] | None = None
    # runs a MoE model's experts split whole over devices with data-parallel attention (parallelism.expert): vLLM
    # --enable-expert-parallel with --data-parallel-size (vllm/config/parallel.py), SGLang --ep-size with
    # --enable-dp-attention (server_args.py)
    expert_parallel: bool = False
    # its launch runs only some plans (a generate script, vramplan's synthetic run): where the others run, for a
    # recommendation that leaves them out (recommendations.verdicts.launchable_plans); None: it launches every plan
    plan_bound_launch: str | None = None

    def default_utilization(self, version: str | None) -> float | None:
        return self.utilization(version or self.default_version or "")


def _generate_engine(name: str, label: str, default_layout: KvCacheLayout, elsewhere: str) -> ServingEngine:
    """An engine that runs `generate` over a cache of any layout, without a pool of its own; ``elsewhere``: where
    the plans its launch cannot run do run."""
    return ServingEngine(
        name=name,
        label=label,
        default_layout=default_layout,
        layouts=("paged", "contiguous", "dynamic"),
        preallocated_pool=False,
        need_view="device_used",
        default_version=None,
        utilization=lambda _version: PLAIN_UTILIZATION,
        plan_bound_launch=elsewhere,
    )


ENGINES: dict[str, ServingEngine] = {
    "vllm": ServingEngine(
        name="vllm",
        label="vLLM",
        default_layout="paged",
        layouts=("paged",),
        preallocated_pool=True,
        need_view="vllm_need",
        default_version=vllm.DEFAULT_VLLM_VERSION,
        utilization=vllm.default_gpu_memory_utilization,
        expert_parallel=True,
    ),
    # mem_fraction_static by GPU memory and parallelism (sglang.server_defaults), so no default here
    "sglang": ServingEngine(
        name="sglang",
        label="SGLang",
        default_layout="paged",
        layouts=("paged",),
        preallocated_pool=True,
        need_view="sglang_need",
        default_version=sglang.SGLANG_VERSION,
        utilization=lambda _version: None,
        batched_covers_seqs=False,
        own_settings=("cuda_graph_max_bs",),
        block_tokens=1,
        version_refusal=sglang.version_refusal,
        expert_parallel=True,
    ),
    # the transformers profiles pick their own default release (profiles/transformers.py)
    "transformers": _generate_engine(
        "transformers",
        "transformers",
        "dynamic",
        "choose engine vllm or sglang, which launch every tensor and pipeline plan",
    ),
    "generic": _generate_engine(
        "generic",
        "the generic engine",
        "contiguous",
        "choose engine vllm, sglang or transformers, which launch tensor and pipeline plans",
    ),
}


def engine(name: str) -> ServingEngine:
    """The registered engine of that name (the schema admits only these)."""
    return ENGINES[name]
