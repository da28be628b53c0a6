"""transformers' implementation profile: what its `generate` loop allocates on top of the general model.

Read from transformers 5.24.0 (generation/utils.py, generation/logits_process.py) and measured with it
by the CPU accuracy benchmark (benchmarks/accuracy/RESULTS.md: "torch 2.13.0+cpu, transformers
5.24.0"). Releases are matched by `since`, as vLLM's profiles are (`vllm.py`); only one is known, so
every release gets it.
"""

from __future__ import annotations

from dataclasses import dataclass

from .generic import GenericProfile

DEFAULT_TRANSFORMERS_VERSION = "5.24.0"

# MinLengthLogitsProcessor and MinNewTokensLengthLogitsProcessor (generation/logits_process.py), added
# when generate is forced to its full length (min_new_tokens = max_new_tokens, so min_length is set
# too) and the model has an eos token (`_get_logits_processor` adds them only when
# `generation_config._eos_token_tensor is not None`): each makes a `clone` and a `torch.where` of the
# fp32 [b, V] scores
EOS_SUPPRESSING_PROCESSORS = 2


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
            out.append(
                "transformers generate: logits of the last position only, fp32 next-token copies; runs to"
                " max_output_tokens (min_new_tokens set: with an eos token in the model config, two eos-suppressing"
                " logits processors, whose fp32 copies are the sampling instant; without them the low end)"
            )
        if moe:
            out.append("MoE experts batched (transformers 5 experts_implementation 'grouped_mm', the default)")
        return tuple(out)


def _sample_with_processors(b: int, vocab: int, d: float) -> float:
    """Between two forwards, at the last processor's `where` (generation/utils.py `_sample`): the
    logits (d), the new fp32 `next_token_logits`, the previous step's `next_token_scores`, the
    earlier processors' outputs and the last one's clone and where (4 B each)."""
    fp32 = 1 + 1 + EOS_SUPPRESSING_PROCESSORS + 1
    eos_mask = vocab * (8 + 1)  # the processor's arange(V) (int64) and isin mask
    return b * vocab * (d + 4 * fp32) + eos_mask


TRANSFORMERS_PROFILES: tuple[TransformersProfile, ...] = (
    TransformersProfile(
        name="transformers 5",
        summary="read from and measured on transformers 5.24.0 (benchmarks/accuracy); other releases"
        " approximated by it",
        since=(0,),
    ),
)
