"""The `generic` implementation profile: the general model (`components/`) and nothing on top.

A profile says what one library version allocates beyond what any implementation of the model must
hold: the bookkeeping of its generate loop, the positions its preallocated cache reserves, its
sampling buffers. This base adds none of it; `transformers.py` overrides it. For training the general
model's layers are transformers' (+ peft's adapters); `litgpt.py` replaces them with lit-gpt's.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..components import activations as act
from ..models.spec import ModelSpec


@dataclass(frozen=True, slots=True)
class GenericProfile:
    """The general model only. Every method returns what the library adds, in bytes or positions."""

    name: str = "generic"
    summary: str = (
        "the general model only: no library's generate bookkeeping; sampling holds the logits and one fp32 copy"
    )

    def static_cache_slots(self, longest: int) -> int:
        """Positions a preallocated contiguous cache reserves for the longest request."""
        return longest

    def prefill_loop_bytes(self, tokens: int) -> float:
        """Held by the generate loop during the prefill forward, beyond the model's input and position ids."""
        return 0

    def generation_ids_bytes(self, b: int, s: int, longest: int) -> float:
        """Token-id tensors the generate loop holds at its end (b sequences, s prompt tokens)."""
        return 0

    def previous_scores_bytes(self, b: int, vocab: int, eos_token: bool) -> float:
        """The previous step's scores still alive during a decode forward."""
        return 0

    def sample_bytes(self, b: int, vocab: int, d: float, eos_token: bool) -> tuple[float, float, float]:
        """(low, expected, high) bytes between two forwards, while the next token is chosen."""
        scores = act.sampling_scores(b, vocab, d)
        return scores, scores, scores

    # --- training: the general model's operators (transformers' layers, peft's adapters) ---------------

    def training_layer_saved(
        self, spec: ModelSpec, x: act.Shape, attention: str, gqa_copies: bool, mode: str, sp_t: int, kept: act.Kept
    ) -> float:
        """Bytes one decoder layer keeps for backward, per micro-batch (`mode` none: everything)."""
        return act.training_saved_per_layer(spec, x, attention, gqa_copies, mode, sp_t, kept)

    def final_norm_saved(self, spec: ModelSpec, x: act.Shape, output_saved: bool, weight_trained: bool) -> float:
        return act._norm_saved(spec, x, output_saved=output_saved, weight_trained=weight_trained)

    def lora_dropout_widths(self, adapted: set[str], x: act.Shape) -> list[int]:
        """Input width of each LoRA dropout: peft gives every adapted module its own."""
        widths = {"q_proj": x.h, "k_proj": x.h, "v_proj": x.h, "o_proj": x.q}
        return [widths.get(name, x.inter if name == "down_proj" else x.h) for name in sorted(adapted)]

    def loss_forward(self, x: act.Shape, spec: ModelSpec, chunks: int) -> float:
        return act.loss_forward(x, spec, chunks)

    def loss_peak(self, x: act.Shape, spec: ModelSpec, chunks: int) -> float:
        return act.loss_peak(x, spec, chunks)

    def loss_saved(self, x: act.Shape, spec: ModelSpec) -> float:
        """What of the loss is still alive while the layers' backward runs: nothing. The training loop keeps only
        `.loss`; the fp32 log_softmax output (and a soft-cap's tanh output) are freed by their own backward nodes,
        which run before the final norm's and the layers' (measured: round 13's checkpointed bf16 cases, the last
        layer's recompute starts after LogSoftmaxBackward0 has freed them)."""
        return 0.0

    def describe(self, version: str | None, generate: bool, moe: bool) -> tuple[str, ...]:
        """The budget's assumption lines naming the profile (and the version it stands for)."""
        out = [f"implementation profile {self.name}: {self.summary}"]
        if moe:
            out.append("MoE experts batched: all routed rows at once")
        return tuple(out)


GENERIC = GenericProfile()
