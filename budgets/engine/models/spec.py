"""`ModelSpec`: the architecture numbers and features a memory budget needs, and `from_architecture`
for a directly given architecture. Counts are plain integers (not bytes)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from functools import lru_cache
from typing import Literal

from .layers import LayerRun, Mixer, Mlp
from .weight_groups import WeightGroup

MlpKind = Literal["gated", "standard"]
NormKind = Literal["rms", "layer"]


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """Architecture numbers of a decoder-only transformer. Counts are plain integers (not bytes)."""

    model_type: str  # Hugging Face model_type, or "custom" for a directly given architecture
    num_layers: int
    hidden_size: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int  # dense MLP width (per expert for MoE without moe_intermediate_size)
    vocab_size: int
    tie_word_embeddings: bool = False
    mlp: MlpKind = "gated"  # gated: gate/up/down (SwiGLU/GeGLU); standard: fc1/fc2
    activation: str = "silu"  # hidden_act, used for the activation-memory model
    norm: NormKind = "rms"  # rms: weight only; layer: weight + bias
    norms_per_layer: int = 2  # gemma2/gemma3 have 4 (pre/post attention and feed-forward)
    qk_norm: bool = False  # per-head RMSNorm on q and k (qwen3, gemma3)
    qk_norm_full: bool = False  # the q/k RMSNorm spans all heads (one row per token: OLMo-2, MiniMax-M2)
    qkv_bias: bool = False
    o_bias: bool = False
    mlp_bias: bool = False
    final_norm: bool = True
    # mixture of experts; num_experts == 1 means dense
    num_experts: int = 1
    experts_per_token: int = 1
    moe_intermediate_size: int = 0  # per routed expert; 0 → intermediate_size
    shared_expert_intermediate_size: int = 0  # qwen2_moe shared expert (+ its sigmoid gate)
    num_dense_layers: int = 0  # MoE models whose first/marked layers use a dense MLP
    # embeddings
    learned_positions: int = 0  # rows of a learned position table (gpt2: n_positions; opt: max+2)
    embed_proj_dim: int = 0  # opt word_embed_proj_dim when it differs from hidden (project_in/out)
    # attention extent for the KV cache
    sliding_window: int = 0  # 0: all layers attend to the full context
    num_sliding_layers: int = 0  # layers that use the sliding window
    max_position_embeddings: int = 0
    lm_head_bias: bool = False
    # memory-relevant forward details (no effect on parameter counts)
    rotary_dim: int = 0  # rotated dims per head (partial rotary, gpt_neox/phi3); 0 → head_dim
    fused_gate_up: bool = False  # one gate_up projection, chunked into gate and up (Phi3MLP)
    parallel_residual: bool = False  # gpt_neox use_parallel_residual: both LayerNorms read the layer input
    final_logit_softcapping: bool = False  # gemma2: logits / cap → tanh → · cap before the loss
    attn_logit_softcapping: bool = False  # gemma2: the same on the eager attention scores
    # implementation features (set by the HF adapter, `_FAMILY_FEATURES`; off for an `architecture`)
    norm_weight_offset: bool = False  # RMSNorm multiplies by (1 + w) in fp32: fp32 temporaries and saved tensors
    rope_per_layer_type: bool = False  # sliding and full layers get their own (cos, sin): two rope tables
    one_mask_with_window: bool = False  # one mask carries the window: no second (full causal) mask
    sliding_mask_unread: bool = False  # a sliding mask is built though no layer slides: one more mask
    router_weights_fp32: bool = False  # top-k routing weights stay fp32: the weighted expert output is fp32
    moe_all_experts: bool = False  # every token runs through every expert, scaled by its router score (Llama 4)
    moe_clamped_gate: bool = False  # gpt-oss: biased experts (per-row bias gathers) and a clamped sigmoid-gated GLU
    # token ids: generate's eos-suppressing logits processors exist only for a model with an eos token
    eos_token: bool = True
    fused_qkv: bool = False  # one q/k/v projection output, alive whole while any of q/k/v is
    rope_by_cat: bool = False  # rope ends in torch.cat: the attention output's transpose is a copy
    mlp_input_freed: bool = False  # the normed MLP input dies at the first MLP projection: one hidden less
    attn_output_kept: bool = False  # the attention output stays alive through the MLP: one hidden more
    softmax_in_compute_dtype: bool = False  # eager attention's softmax runs in the compute dtype, not fp32
    rope_fp32_interleaved: bool = False  # q and k roped in fp32 with an interleaved rotate_half (torch.stack): Cohere
    norm_weight_fp32: bool = False  # Gemma 4: RMSNorm multiplies by w.float() (fp32, no offset), two fp32 values a row
    v_norm: bool = False  # Gemma 4: v passes a scale-free RMSNorm, which keeps its fp32 input
    moe_beside_dense: bool = False  # Gemma 4: experts beside a dense MLP, each with its norms, and a normed router
    kv_stored: bool = False  # Gemma 4: every layer stores its k and v in a dict kept until the backward's end
    # the per-layer model (layers.py): runs of identical layers. Empty: every layer is the flat fields above
    # (full attention, `num_sliding_layers` of them sliding). With `params` set on the runs the parameter count
    # is their sum (models whose layers differ); the flat fields then describe the most common layer.
    layer_runs: tuple[LayerRun, ...] = ()
    top_params: tuple[int, int, int] = (0, 0, 0)  # layered models: (embedding, LM head, final norm) parameters
    tower_params: int = 0  # vision/audio towers and their projector (multimodal checkpoints)
    towers: str = ""  # what `tower_params` counts, in words
    extra_params: int = 0  # parameters outside the decoder layers the flat formula does not know (e.g. router biases)
    # layers the checkpoint carries for multi-token prediction (`num_nextn_predict_layers`: DeepSeek-V3, GLM-4.5, MiMo):
    # transformers' own classes do not build them and vLLM's main model skips their weights, so nothing counts them;
    # the budget says so (a model run through its remote code that builds them, MiMo's, holds more)
    draft_layers: int = 0
    # the checkpoint's tensors by kind (layered models): what quantization configs price; not part of identity
    weight_groups: tuple[WeightGroup, ...] = field(default=(), compare=False, hash=False, repr=False)
    layer_model: str = ""  # how the layers were read ("generic" for a model_type the adapter has no rules for)
    # dropout probabilities the training forward applies (config keys per model_type: hf_defaults.DROPOUT_KEYS)
    attention_dropout: float = 0.0  # on the attention probabilities
    hidden_dropout: float = 0.0  # on each of a layer's two residual branches (attention and MLP outputs)
    embedding_dropout: float = 0.0  # on the embedding output
    # the dropout keys the adapter read, their values and where each came from ("" when none were read)
    dropout_read: str = field(default="", compare=False, hash=False, repr=False)
    # the hash, computed once: a spec keys the engine's caches (parameter counts, layer views, runs) and hashing its
    # ~70 fields on every lookup was a tenth of an estimate's time. Not an init field, so `replace` recomputes it
    _hash: int = field(default=0, init=False, compare=False, hash=False, repr=False)

    def __hash__(self) -> int:
        if not self._hash:
            key = tuple(getattr(self, f.name) for f in fields(self) if f.compare and f.hash is not False)
            object.__setattr__(self, "_hash", hash(key) or 1)
        return self._hash

    def __getstate__(self) -> list[object]:
        return [getattr(self, f.name) for f in fields(self)]

    def __setstate__(self, state: list[object]) -> None:
        for f, value in zip(fields(self), state, strict=True):
            object.__setattr__(self, f.name, value)
        object.__setattr__(self, "_hash", 0)  # string hashes differ between processes: recompute after unpickling

    # --- derived sizes -------------------------------------------------------------------------
    @property
    def q_dim(self) -> int:
        return self.num_attention_heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.num_kv_heads * self.head_dim

    @property
    def rope_dim(self) -> int:
        return self.rotary_dim or self.head_dim

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 1

    @property
    def expert_intermediate_size(self) -> int:
        return self.moe_intermediate_size or self.intermediate_size

    @property
    def embed_dim(self) -> int:
        return self.embed_proj_dim or self.hidden_size

    @property
    def num_moe_layers(self) -> int:
        return self.num_layers - self.num_dense_layers if self.is_moe else 0

    @property
    def mlp_matrices(self) -> int:
        return 3 if self.mlp == "gated" else 2

    @property
    def runs(self) -> tuple[LayerRun, ...]:
        """The layer runs: given, or every layer a full-attention layer of the flat fields."""
        if self.layer_runs:
            return self.layer_runs
        return _flat_runs(self)

    def run_at(self, layer: int) -> LayerRun | None:
        """The run layer `layer` belongs to (of `runs`); None past the last layer."""
        at = 0
        for run in self.runs:
            if at <= layer < at + run.count:
                return run
            at += run.count
        return None

    @property
    def counts_by_runs(self) -> bool:
        """Whether the parameter count is the sum over the layer runs (models whose layers differ)."""
        return any(run.params for run in self.layer_runs)


@lru_cache(maxsize=1024)
def _flat_runs(spec: ModelSpec) -> tuple[LayerRun, ...]:
    mixer = Mixer("full", spec.num_attention_heads, spec.num_kv_heads, spec.head_dim)
    if spec.is_moe:
        mlp = Mlp(
            "moe",
            spec.expert_intermediate_size,
            spec.num_experts,
            spec.experts_per_token,
            spec.shared_expert_intermediate_size,
        )
    else:
        mlp = Mlp("dense", spec.intermediate_size)
    return (LayerRun(spec.num_layers, mixer, mlp),)


def from_architecture(
    *,
    num_layers: int,
    hidden_size: int,
    num_attention_heads: int,
    intermediate_size: int,
    vocab_size: int,
    num_key_value_heads: int | None = None,
    head_dim: int | None = None,
    tie_word_embeddings: bool = False,
    mlp: MlpKind = "gated",
    num_experts: int = 1,
    experts_per_token: int | None = None,
    moe_intermediate_size: int | None = None,
    attention_bias: bool = False,
    norm: NormKind = "rms",
    activation: str | None = None,
) -> ModelSpec:
    """A ModelSpec from directly given numbers (the workload's `architecture` form)."""
    return ModelSpec(
        model_type="custom",
        num_layers=num_layers,
        hidden_size=hidden_size,
        num_attention_heads=num_attention_heads,
        num_kv_heads=num_key_value_heads or num_attention_heads,
        head_dim=head_dim or hidden_size // num_attention_heads,
        intermediate_size=intermediate_size,
        vocab_size=vocab_size,
        tie_word_embeddings=tie_word_embeddings,
        mlp=mlp,
        activation=activation or ("silu" if mlp == "gated" else "gelu"),
        norm=norm,
        qkv_bias=attention_bias,
        o_bias=attention_bias,
        mlp_bias=attention_bias and mlp == "standard",
        num_experts=num_experts,
        experts_per_token=(experts_per_token or min(2, num_experts)) if num_experts > 1 else 1,
        moe_intermediate_size=moe_intermediate_size or 0,
    )
