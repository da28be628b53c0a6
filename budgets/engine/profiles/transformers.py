"""transformers' implementation profiles: what its `generate` loop allocates on top of the general model, by release.

The transformers 5 profile was read from transformers 5.24.0 (generation/utils.py, generation/logits_process.py; its
generate rules also at 5.0.0) and measured with it by the CPU accuracy benchmark (benchmarks/accuracy/RESULTS.md:
"torch 2.13.0+cpu, transformers 5.24.0"). Older releases differ in what `generate` keeps alive; those differences were
read from the release wheels (`RELEASES` below, file:line inside each wheel) and are `GenerateRules`: the budget of a
release is computed under its rules. A release that was read gets its own rules; one between two read releases gets
the older one's rules as the expected figure and a range spanning both (each end computed under the rules that hold
the least and the most); releases before 4.34 and after 5.24 are refused (`version_refusal`), as nothing here says what
changed there.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

from ..vllm import parse_version
from . import transformers_releases as rel
from .generic import GenericProfile

DEFAULT_TRANSFORMERS_VERSION = "5.24.0"
FIRST_RELEASE = (4, 34)  # the oldest release budgeted: 4.34.1's published peaks equal 4.35.2's (peaks.json, HOLDOUT.md)
NEWEST_RELEASE = (5, 24)  # the newest release read; its patch releases are budgeted by it

# MinLengthLogitsProcessor and MinNewTokensLengthLogitsProcessor (generation/logits_process.py), added
# when generate is forced to its full length (min_new_tokens = max_new_tokens, so min_length is set
# too) and the model has an eos token (`_get_logits_processor` adds them only when
# `generation_config._eos_token_tensor is not None`): each makes a `clone` and a `torch.where` of the
# fp32 [b, V] scores
EOS_SUPPRESSING_PROCESSORS = 2
ALL = frozenset({"*"})  # every model type


@dataclass(frozen=True, slots=True)
class GenerateRules:
    """What a transformers release's `generate` holds that changes its peak; the defaults are transformers 5's."""

    # the previous step's whole KV cache (generate's legacy tuple) stays alive through each decode forward while the
    # model builds the next one by torch.cat, and through the logits processing after it
    previous_cache: bool = False
    # the prefill computes logits for every prompt position (no `num_logits_to_keep` / `logits_to_keep`)
    prompt_logits: bool = False
    # the model's forward returns fp32 logits (`logits.float()`) beside its compute-dtype LM-head output
    upcast_logits: bool = False
    # the prefill's output (its logits) stays alive through the first decode forward (no `del outputs`)
    prompt_logits_kept: bool = False
    # a dynamic cache keeps sliding-window layers to their window (transformers 5 DynamicSlidingWindowLayer)
    windowed_dynamic: bool = True
    # every attention layer holds cos/sin tables of max_position_embeddings × rotary dims (4.35's rotary_emb buffers)
    rope_tables: bool = False
    # 4-bit GPTQ runs auto-gptq's exllama kernels through optimum (their scratch buffers); 4-bit bitsandbytes
    # dequantizes a whole weight for every matmul of more than one token
    quantized_kernels: bool = False


# the rules that hold the least (low end) and the most (high end) of two sets, flag by flag
_LEAST = {"windowed_dynamic"}  # True holds less


def least(a: GenerateRules, b: GenerateRules) -> GenerateRules:
    return GenerateRules(**{f: (x or y) if f in _LEAST else (x and y) for f, x, y in _pairs(a, b)})


def most(a: GenerateRules, b: GenerateRules) -> GenerateRules:
    return GenerateRules(**{f: (x and y) if f in _LEAST else (x or y) for f, x, y in _pairs(a, b)})


def _pairs(a: GenerateRules, b: GenerateRules) -> list[tuple[str, bool, bool]]:
    return [(f.name, getattr(a, f.name), getattr(b, f.name)) for f in fields(GenerateRules)]


@dataclass(frozen=True, slots=True)
class Release:
    """One release read: its rules, by model type where they depend on it, and where they were read."""

    version: tuple[int, ...]
    cache_types: frozenset[str]  # model types generate keeps one cache object for (the rest: the legacy tuple)
    logits_types: frozenset[str]  # model types whose prefill computes the last position's logits only
    upcast: bool  # the models read upcast their logits to fp32 in their forward
    kept: bool  # the prefill's logits alive through the first decode forward
    windowed: bool
    windowed_low: bool  # Mistral's flash-attention-2 path cuts the cache to the window (the low end keeps it)
    rope_tables: bool
    quantized_kernels: bool
    source: str  # file:line of each rule, inside the release's wheel

    @property
    def name(self) -> str:
        return ".".join(map(str, self.version))

    def rules(self, model_type: str) -> tuple[GenerateRules, GenerateRules, GenerateRules]:
        """(low, expected, high) for a model type. The upcast and the rope tables are model code (read for Llama and
        Mistral): the low end leaves them out. Mistral under flash-attention-2 cuts its cache to the window up to 4.45
        (models/mistral/modeling_mistral.py:363-365 at 4.35.2, :389-395 at 4.36.0, :388 at 4.41.2, :360-366 at
        4.42.0, :328 at 4.44.2, :330 at 4.45.0; gone at 4.46.0): those releases' low end keeps the window."""
        prompt = not _has(self.logits_types, model_type)
        expected = GenerateRules(
            previous_cache=not _has(self.cache_types, model_type),
            prompt_logits=prompt,
            upcast_logits=self.upcast,
            prompt_logits_kept=self.kept and prompt,
            windowed_dynamic=self.windowed,
            rope_tables=self.rope_tables,
            quantized_kernels=self.quantized_kernels,
        )
        low = replace(expected, upcast_logits=False, rope_tables=False, windowed_dynamic=self.windowed_low)
        return low, expected, expected


def _has(types: frozenset[str], model_type: str) -> bool:
    return types is ALL or model_type in types


_LEGACY = (
    "the legacy tuple cache: the model cats past and new K/V into new tensors while generate's model_kwargs still hold"
    " the previous step's tuple"
)


def _releases(first: Release, *changes: dict[str, Any]) -> tuple[Release, ...]:
    """The releases read, oldest first, each written as what changed from the one before it, with its sources."""
    out = [first]
    for change in changes:
        out.append(replace(out[-1], **change))
    return tuple(out)


RELEASES: tuple[Release, ...] = _releases(
    Release(
        version=(4, 35, 2),
        cache_types=frozenset(),
        logits_types=frozenset(),
        upcast=True,
        kept=True,
        windowed=False,
        windowed_low=True,
        rope_tables=True,
        quantized_kernels=True,
        source=f"{_LEGACY} (models/llama/modeling_llama.py:382-385; generation/utils.py:2521, 2567, 776); logits of"
        " every prompt position, upcast (modeling_llama.py:1052-1053), kept through the first decode forward as"
        " `next_token_logits` is a view of them (utils.py:2531); per-layer rotary cos/sin tables of"
        " max_position_embeddings (modeling_llama.py:125-135, 303)",
    ),
    dict(
        version=(4, 36, 0),
        source=f"{_LEGACY}: the model wraps it in a DynamicCache and returns a tuple again (models/llama/"
        "modeling_llama.py:998-1000, 1086; cache_utils.py:127); logits of every prompt position, upcast"
        " (modeling_llama.py:1192-1193), kept (generation/utils.py:2579, 2589, 2625); rotary tables (modeling_llama.py:"
        "135-145, 323)",
    ),
    dict(
        version=(4, 41, 2),
        rope_tables=False,
        source=f"{_LEGACY} (models/llama/modeling_llama.py:930, 994); logits of every prompt position, upcast"
        " (modeling_llama.py:1183-1184), kept (generation/utils.py:2397, 2407, 2449); no rotary tables",
    ),
    dict(
        version=(4, 42, 0),
        cache_types=rel.cache_class("4.42.0"),
        kept=False,
        source="one DynamicCache kept by generate for the models that support it (generation/utils.py:1775-1777;"
        " cache_utils.py:363), the legacy tuple for the rest; logits of every prompt position, upcast"
        " (models/llama/modeling_llama.py:1193-1194), freed before the first decode forward (utils.py:2663 clones"
        " the last position, :2716 `del outputs`)",
    ),
    dict(
        version=(4, 44, 2),
        cache_types=rel.cache_class("4.44.2"),
        source="one DynamicCache for the models that support it (generation/utils.py:1852-1854); logits of every"
        " prompt position, upcast (models/llama/modeling_llama.py:1208-1209), freed before the first decode forward"
        " (utils.py:2989, 3044)",
    ),
    dict(
        version=(4, 45, 0),
        cache_types=rel.cache_class("4.45.0"),
        logits_types=rel.logits_to_keep("4.45.0"),
        source="one DynamicCache for the models that support it (generation/utils.py:1602); the last position's"
        " logits for the models that take num_logits_to_keep (utils.py:1900-1904), upcast in the forward"
        " (models/llama/modeling_llama.py:1214), every prompt position for the rest; freed before the first decode"
        " forward (utils.py:3015, 3068)",
    ),
    dict(
        version=(4, 46, 0),
        cache_types=rel.cache_class("4.46.0"),
        logits_types=rel.logits_to_keep("4.46.0"),
        windowed_low=False,
        source="one DynamicCache for the models that support it (generation/utils.py:1767); the last position's"
        " logits for the models that take num_logits_to_keep (utils.py:2062-2066) in the compute dtype"
        " (models/llama/modeling_llama.py:1210), copied and upcast by generate (utils.py:3219), every prompt position"
        " for the rest; freed before the first decode forward (utils.py:3268)",
    ),
    dict(
        version=(5, 0, 0),
        cache_types=ALL,
        logits_types=ALL,
        upcast=False,
        windowed=True,
        windowed_low=True,
        quantized_kernels=False,
        source="a DynamicCache for every model (generation/utils.py:2038-2040; no legacy tuple path left), sliding"
        " layers to their window (cache_utils.py:167 DynamicSlidingWindowLayer); logits_to_keep = 1 (utils.py:2617),"
        " one fp32 copy of the last position (:2886), `del outputs` (:2934)",
    ),
    dict(
        version=(5, 24, 0),
        source="measured by benchmarks/accuracy; generation/utils.py:2955-2956 (logits_to_keep), 3248"
        " (fp32 copy), 3293 (`del outputs`)",
    ),
)


def version_rules(version: str, model_type: str) -> tuple[GenerateRules, GenerateRules, GenerateRules]:
    """(low, expected, high) rules of a release for a model type: a release read (same major.minor) gets its own;
    one between two read releases the older one's as expected, and the least and the most of both as its ends;
    4.34 (before the first read) the first read release's."""
    older, newer = neighbours(version)
    if older is None or newer is None or older is newer:
        return (older or newer or RELEASES[-1]).rules(model_type)
    a, b = older.rules(model_type), newer.rules(model_type)
    return least(a[0], b[0]), a[1], most(a[2], b[2])


def neighbours(version: str) -> tuple[Release | None, Release | None]:
    """The read releases around a version: (r, r) when its major.minor was read, else (older, newer)."""
    v = parse_version(version)
    for r in RELEASES:
        if v[:2] == r.version[:2]:
            return r, r
    older = [r for r in RELEASES if r.version < v]
    newer = [r for r in RELEASES if r.version > v]
    return (older[-1] if older else None), (newer[0] if newer else None)


def version_refusal(version: str, layout: str) -> str | None:
    """Why `generate` of a transformers release cannot be budgeted (None when it can)."""
    v = parse_version(version)
    if v[:2] < FIRST_RELEASE:
        return (
            f"runtime.engine_version {version!r}: transformers releases before 4.34 were not read (the oldest read is"
            " 4.35.2; 4.34.1's published peaks equal its own). Budget 4.34 or later, or leave engine_version out for"
            f" {DEFAULT_TRANSFORMERS_VERSION}"
        )
    if v[:2] > NEWEST_RELEASE:
        return (
            f"runtime.engine_version {version!r}: transformers {version} is newer than the newest release read"
            f" ({DEFAULT_TRANSFORMERS_VERSION}); what changed in generate since is not known here. Leave engine_version"
            f" out to budget {DEFAULT_TRANSFORMERS_VERSION}'s rules"
        )
    if v[:1] < (5,) and layout != "dynamic":
        return (
            f"runtime.engine_version {version!r} with kv_cache_layout {layout!r}: transformers 4.x was read for its"
            " default dynamic cache only (the static and paged caches are budgeted for 5.x, read at 5.0.0 and"
            " 5.24.0); use kv_cache_layout 'dynamic', or a 5.x release"
        )
    return None


@dataclass(frozen=True, slots=True)
class TransformersProfile(GenericProfile):
    """transformers `generate`: id copies, the previous step's scores, logits processors."""

    since: tuple[int, ...] = (0,)

    def static_cache_slots(self, longest: int) -> int:
        # generate sizes its StaticCache to max_length - 1 positions (the last token is never fed back;
        # generation/utils.py `_prepare_cache_for_generation`)
        return longest - 1

    def prefill_loop_bytes(self, tokens: int) -> float:
        # the caller's attention_mask, and the copy of the prompt ids prepare_inputs_for_generation makes
        # (`input_ids.clone(memory_format=...)`, int64)
        return 2 * tokens * 8

    def generation_ids_bytes(self, b: int, s: int, longest: int) -> float:
        # int64 ids at the end of generate: the caller's input_ids and attention_mask and the prefill
        # position_ids (b·s each), input_ids grown by cat to the longest length and position_ids to one less
        # (generation/utils.py `_update_model_kwargs_for_generation`; the all-ones mask is dropped)
        return b * (3 * s + 2 * longest - 1) * 8

    def previous_scores_bytes(self, b: int, vocab: int, eos_token: bool) -> float:
        # during a decode forward the previous step's `next_token_logits` (fp32 copy) and
        # `next_token_scores` (processors' fp32 output; without processors the same tensor) are rebound
        # only after the forward; its logits are gone (`del outputs`, generation/utils.py `_sample`)
        return b * vocab * (4 + (4 if eos_token else 0))

    def sample_bytes(self, b: int, vocab: int, d: float, eos_token: bool) -> tuple[float, float, float]:
        # with min_new_tokens = max_output_tokens (a full-length run) and an eos token the eos-suppressing
        # processors add fp32 [b, V] clones; without them only the general model's fp32 copy (the low
        # end). The high end keeps the processors either way: a caller's generation_config may name an
        # eos token the model config does not.
        low, _, _ = GenericProfile.sample_bytes(self, b, vocab, d, eos_token)
        processors = _sample_with_processors(b, vocab, d)
        return low, processors if eos_token else low, processors

    def describe(self, version: str | None, generate: bool, moe: bool) -> tuple[str, ...]:
        out = [f"implementation profile {self.name} for transformers {version}: {self.summary}"]
        if generate:
            out.append(release_line(version or DEFAULT_TRANSFORMERS_VERSION))
            out.append(
                "transformers generate: "
                + ("logits of the last position only, fp32 next-token copies; " if self.since >= (5,) else "")
                + "runs to max_output_tokens (min_new_tokens set: with an eos token in the model config, two"
                " eos-suppressing logits processors, whose fp32 copies are the sampling instant; without them the"
                " low end)"
            )
        if moe:
            out.append("MoE experts batched (transformers 5 experts_implementation 'grouped_mm', the default)")
        return tuple(out)


def release_line(version: str) -> str:
    """How the release maps to the releases read: its own, or the two around it."""
    older, newer = neighbours(version)
    if older is not None and older is newer:
        return f"transformers {version}: generate's rules as read from {older.name} ({older.source})"
    first, second = older or newer, newer or older
    assert first is not None and second is not None
    if older is None:
        return (
            f"transformers {version} was not read: budgeted by {first.name}'s rules ({first.source}); optimum-benchmark"
            " printed the same peaks for 4.34.1 and 4.35.2"
        )
    return (
        f"transformers {version} was not read: expected by {first.name}'s rules, the range widened to"
        f" {second.name}'s where they differ ({first.name}: {first.source}; {second.name}: {second.source})"
    )


def _sample_with_processors(b: int, vocab: int, d: float) -> float:
    """Between two forwards, at the last processor's `where` (generation/utils.py `_sample`): the
    logits (d), the new fp32 `next_token_logits`, the previous step's `next_token_scores`, the
    earlier processors' outputs and the last one's clone and where (4 B each)."""
    fp32 = 1 + 1 + EOS_SUPPRESSING_PROCESSORS + 1
    eos_mask = vocab * (8 + 1)  # the processor's arange(V) (int64) and isin mask
    return b * vocab * (d + 4 * fp32) + eos_mask


TRANSFORMERS_5 = TransformersProfile(
    name="transformers 5",
    summary="read from transformers 5.0.0 and 5.24.0, measured on 5.24.0 (benchmarks/accuracy); training layers"
    " read at 5.24.0 and approximated by them for every release",
    since=(5,),
)
TRANSFORMERS_PROFILES: tuple[TransformersProfile, ...] = (
    TransformersProfile(
        name="transformers 4.35",
        summary="generate read from 4.35.2, 4.36.0 and 4.41.2 (the legacy tuple cache, every prompt position's"
        " logits); the layers and the sampling as transformers 5's",
        since=FIRST_RELEASE,
    ),
    TransformersProfile(
        name="transformers 4.42",
        summary="generate read from 4.42.0 and 4.44.2 (one DynamicCache for the models that support it, every"
        " prompt position's logits); the layers and the sampling as transformers 5's",
        since=(4, 42),
    ),
    TransformersProfile(
        name="transformers 4.45",
        summary="generate read from 4.45.0 and 4.46.0 (the last position's logits for the models that support it);"
        " the layers and the sampling as transformers 5's; 4.47-4.57 not read",
        since=(4, 45),
    ),
    TRANSFORMERS_5,
)
