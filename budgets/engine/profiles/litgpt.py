"""lit-gpt's training profile: its layers and loss in place of transformers' (the general model's).

Read from lit-gpt at commit 8641822 (2023-10-16, the commit its resource tables were measured with:
https://github.com/Lightning-AI/litgpt/blob/8641822b3249bb94f068c254aa5d13decbc9f0a0/), files
`lit_gpt/model.py`, `lit_gpt/lora.py`, `lit_gpt/rmsnorm.py`, `lit_gpt/utils.py`, `finetune/lora.py`,
and checked by saved-tensor bytes of its `Block` on torch 2.13 CPU (tests/engine/test_training_mechanisms.py).
What differs from the general model, per layer:

- RMSNorm in the compute dtype (rmsnorm.py:19-21): `x * x` and `x * rsqrt(...)` keep the input itself
  (no fp32 copy), rsqrt its output (one value per row), `weight * x_normed` keeps x_normed only for a
  trained weight;
- one fused qkv linear (model.py:196): for multi-head attention `v` is a strided view of its output
  (model.py:201-215), so SDPA keeps the whole output, besides the roped q and k (model.py:217-220, each a
  new tensor from torch.cat); with grouped queries k and v are expanded and reshaped into copies
  (model.py:208-215);
- the attention output is re-assembled by a copying reshape (model.py:229, SDPA's output transposed),
  kept only when the output projection keeps its input;
- LoRA on part of q/k/v (lora.py:372-386): `zero_pad` index_copies the B output into the qkv width
  (lora.py:290-296); autograd keeps index_copy's source (IndexCopyBackward0 holds `source_`, torch 2.13
  generated Functions.h; measured) and the int64 index per layer; one dropout serves the fused q/k/v
  adapter (lora.py:375);
- the loss: the LM head runs on 128-position chunks (finetune/lora.py:216, lora.py:500-502), and the
  cross-entropy of each chunk is taken in the compute dtype, no fp32 upcast (utils.py:256-262); the
  training loop holds the logits list through backward (finetune/lora.py:216-220).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..components import activations as act
from ..models.spec import ModelSpec
from .generic import GenericProfile

LITGPT_COMMIT = "8641822"
LM_HEAD_CHUNK = 128  # finetune/lora.py:216 `model(input_ids, lm_head_chunk_size=128)`
QKV = ("q_proj", "k_proj", "v_proj")


@dataclass(frozen=True, slots=True)
class LitGptProfile(GenericProfile):
    """lit-gpt's `GPT` / `Block` and its LoRA fine-tuning script."""

    def training_layer_saved(
        self, spec: ModelSpec, x: act.Shape, attention: str, gqa_copies: bool, mode: str, sp_t: int, kept: act.Kept
    ) -> float:
        # lit-gpt always runs F.scaled_dot_product_attention (model.py:251, dropout_p=0.0) on expanded k/v
        # (model.py:208-215); its layers have no dropout, whatever an HF config sets
        fused = replace(spec, fused_qkv=True, rope_by_cat=False, attention_dropout=0.0, hidden_dropout=0.0)
        general = act.training_saved_per_layer(fused, x, "sdpa", True, mode, sp_t, kept)
        if mode == "full":
            return general
        norms = 0.0
        if spec.norm == "rms":
            norms = _rms_norms_saved(x, kept) - act._layer_norms_saved(fused, x, kept)
        out_copy = x.tokens * x.q * x.d if kept.o_input else 0
        return general + norms / sp_t + out_copy + _zero_pad_saved(x, kept)

    def final_norm_saved(self, spec: ModelSpec, x: act.Shape, output_saved: bool, weight_trained: bool) -> float:
        if spec.norm != "rms":
            return act._norm_saved(spec, x, output_saved=output_saved, weight_trained=weight_trained)
        return _rms_saved(x, weight_trained, output_saved)

    def lora_dropout_widths(self, adapted: set[str], x: act.Shape) -> list[int]:
        # one LoRAQKVLinear (one lora_dropout) for q, k and v; the other linears have their own
        others = GenericProfile.lora_dropout_widths(self, adapted - set(QKV), x)
        return ([x.h] if adapted & set(QKV) else []) + others

    def loss_forward(self, x: act.Shape, spec: ModelSpec, chunks: int) -> float:
        # every chunk's logits and its log_softmax output, both in the compute dtype
        return 2 * x.tokens * x.vocab * x.d

    def loss_peak(self, x: act.Shape, spec: ModelSpec, chunks: int) -> float:
        # backward of the first chunk: all logits and log_softmax outputs, that chunk's nll and
        # log_softmax gradients
        rows = x.b * min(LM_HEAD_CHUNK, x.s)
        return self.loss_forward(x, spec, chunks) + 2 * rows * x.vocab * x.d

    def loss_saved(self, x: act.Shape, spec: ModelSpec) -> float:
        # the logits list, held by the training loop's `logits` through backward
        return x.tokens * x.vocab * x.d

    def describe(self, version: str | None, generate: bool, moe: bool) -> tuple[str, ...]:
        return (
            f"implementation profile {self.name}: {self.summary}",
            "lit-gpt fine-tuning: the LM head in 128-position chunks with the cross-entropy in the compute"
            " dtype; loss_chunks is not read",
        )


def _rms_saved(x: act.Shape, weight_trained: bool, output_kept: bool) -> float:
    """One lit-gpt RMSNorm (rmsnorm.py:19-21): its input and rsqrt's per-row output, x_normed for a
    trained weight, the output when its consumer keeps it; all in the compute dtype."""
    per_element = 1 + int(weight_trained) + int(output_kept)
    return x.tokens * x.h * x.d * per_element + x.tokens * x.d


def _rms_norms_saved(x: act.Shape, kept: act.Kept) -> float:
    """norm_1 (read by the qkv linear) and norm_2 (read by fc_1 / fc_2) of a sequential Llama-style Block."""
    trained = kept.norm_weights
    return _rms_saved(x, trained, kept.qkv_input) + _rms_saved(x, trained, kept.mlp_input)


def _zero_pad_saved(x: act.Shape, kept: act.Kept) -> float:
    """LoRA on some but not all of q/k/v: index_copy's source (the B output, tokens × adapted widths) and
    its int64 index (lora.py:277-296); with all three, or none, zero_pad returns its input."""
    qkv = kept.adapted & set(QKV)
    if not qkv or len(qkv) == len(QKV):
        return 0
    widths = sum(x.q if name == "q_proj" else x.kv for name in qkv)
    return x.tokens * widths * x.d + widths * 8


LITGPT = LitGptProfile(
    name=f"lit-gpt {LITGPT_COMMIT}",
    summary=f"lit-gpt's GPT and LoRA (commit {LITGPT_COMMIT}): fused qkv, RMSNorm in the compute dtype, LM head"
    " in 128-position chunks",
)
