"""transformers 5.x config defaults per model_type: the values the configuration classes fill in when
a key is absent from config.json (configuration_<model_type>.py). `eos_token_id` is absent where the class
has none (qwen2, qwen2_moe, qwen3, qwen3_moe default to None in transformers 5.24.0). Dropout defaults are
transformers 5.24.0's (configuration_gpt2.py:84-86 0.1 each, configuration_opt.py:61 `dropout` 0.1, every
other dropout key 0.0: configuration_opt.py:62, gpt_neox:67-68, llama:81, mistral:80, mixtral:83, qwen2:77,
qwen2_moe:94, qwen3:80, qwen3_moe:96, gemma:84, gemma2:85, gemma3:91, phi3:66-68)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

HF_CONFIG_DEFAULTS: dict[str, dict[str, Any]] = {
    "llama": {
        "eos_token_id": 2,
        "vocab_size": 32000,
        "hidden_size": 4096,
        "intermediate_size": 11008,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "tie_word_embeddings": False,
        "hidden_act": "silu",
        "max_position_embeddings": 2048,
        "attention_dropout": 0.0,
    },
    "mistral": {
        "eos_token_id": 2,
        "vocab_size": 32000,
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "tie_word_embeddings": False,
        "hidden_act": "silu",
        "max_position_embeddings": 4096 * 32,
        "attention_dropout": 0.0,
    },
    "mixtral": {
        "eos_token_id": 2,
        "vocab_size": 32000,
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "num_local_experts": 8,
        "num_experts_per_tok": 2,
        "tie_word_embeddings": False,
        "hidden_act": "silu",
        "max_position_embeddings": 4096 * 32,
        "attention_dropout": 0.0,
    },
    "qwen2": {
        "vocab_size": 151936,
        "hidden_size": 4096,
        "intermediate_size": 22016,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 32,
        "tie_word_embeddings": False,
        "hidden_act": "silu",
        "max_position_embeddings": 32768,
        "attention_dropout": 0.0,
    },
    "qwen2_moe": {
        "vocab_size": 151936,
        "hidden_size": 2048,
        "intermediate_size": 5632,
        "num_hidden_layers": 24,
        "num_attention_heads": 16,
        "num_key_value_heads": 16,
        "moe_intermediate_size": 1408,
        "shared_expert_intermediate_size": 5632,
        "num_experts": 60,
        "num_experts_per_tok": 4,
        "decoder_sparse_step": 1,
        "tie_word_embeddings": False,
        "hidden_act": "silu",
        "max_position_embeddings": 32768,
        "attention_dropout": 0.0,
    },
    "qwen3": {
        "vocab_size": 151936,
        "hidden_size": 4096,
        "intermediate_size": 22016,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 32,
        "head_dim": 128,
        "tie_word_embeddings": False,
        "hidden_act": "silu",
        "max_position_embeddings": 32768,
        "attention_dropout": 0.0,
    },
    "qwen3_moe": {
        "vocab_size": 151936,
        "hidden_size": 2048,
        "intermediate_size": 6144,
        "num_hidden_layers": 24,
        "num_attention_heads": 32,
        "num_key_value_heads": 4,
        "moe_intermediate_size": 768,
        "num_experts": 128,
        "num_experts_per_tok": 8,
        "decoder_sparse_step": 1,
        "tie_word_embeddings": False,
        "hidden_act": "silu",
        "max_position_embeddings": 32768,
        "attention_dropout": 0.0,
    },
    "gemma": {
        "eos_token_id": 1,
        "vocab_size": 256000,
        "hidden_size": 3072,
        "intermediate_size": 24576,
        "num_hidden_layers": 28,
        "num_attention_heads": 16,
        "num_key_value_heads": 16,
        "head_dim": 256,
        "tie_word_embeddings": True,
        "hidden_activation": "gelu_pytorch_tanh",
        "max_position_embeddings": 8192,
        "attention_dropout": 0.0,
    },
    "gemma2": {
        "eos_token_id": 1,
        "vocab_size": 256000,
        "hidden_size": 2304,
        "intermediate_size": 9216,
        "num_hidden_layers": 26,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "head_dim": 256,
        "tie_word_embeddings": True,
        "hidden_activation": "gelu_pytorch_tanh",
        "max_position_embeddings": 8192,
        "sliding_window": 4096,
        "attention_dropout": 0.0,
    },
    "gemma3_text": {
        "eos_token_id": 1,
        "vocab_size": 262208,
        "hidden_size": 2304,
        "intermediate_size": 9216,
        "num_hidden_layers": 26,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "head_dim": 256,
        "tie_word_embeddings": True,
        "hidden_activation": "gelu_pytorch_tanh",
        "max_position_embeddings": 131072,
        "sliding_window": 4096,
        "sliding_window_pattern": 6,
        "attention_dropout": 0.0,
    },
    "phi3": {
        "eos_token_id": 32000,
        "vocab_size": 32064,
        "hidden_size": 3072,
        "intermediate_size": 8192,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "tie_word_embeddings": False,
        "hidden_act": "silu",
        "max_position_embeddings": 4096,
        "attention_dropout": 0.0,
        "resid_pdrop": 0.0,
        "embd_pdrop": 0.0,
    },
    "gpt2": {
        "eos_token_id": 50256,
        "vocab_size": 50257,
        "n_embd": 768,
        "n_layer": 12,
        "n_head": 12,
        "n_positions": 1024,
        "activation_function": "gelu_new",
        "tie_word_embeddings": True,
        "attn_pdrop": 0.1,
        "resid_pdrop": 0.1,
        "embd_pdrop": 0.1,
    },
    "gpt_neox": {
        "eos_token_id": 2,
        "vocab_size": 50432,
        "hidden_size": 6144,
        "num_hidden_layers": 44,
        "num_attention_heads": 64,
        "intermediate_size": 24576,
        "hidden_act": "gelu",
        "attention_bias": True,
        "tie_word_embeddings": False,
        "max_position_embeddings": 2048,
        "attention_dropout": 0.0,
        "hidden_dropout": 0.0,
    },
    "opt": {
        "eos_token_id": 2,
        "vocab_size": 50272,
        "hidden_size": 768,
        "num_hidden_layers": 12,
        "ffn_dim": 3072,
        "num_attention_heads": 12,
        "max_position_embeddings": 2048,
        "enable_bias": True,
        "do_layer_norm_before": True,
        "activation_function": "relu",
        "tie_word_embeddings": True,
        "attention_dropout": 0.0,
        "dropout": 0.1,
    },
}


@dataclass(frozen=True, slots=True)
class LayeredRules:
    """How one family's modules are laid out, where transformers' modeling file (not the config) decides it.
    Read by `hf_layered.py`; the config's own keys (attention_bias, mlp_bias, tie_word_embeddings, ...) win
    over these defaults wherever the config states them."""

    name: str
    attention_bias: bool = False  # default of `attention_bias` (q/k/v, and o unless o_bias is False)
    o_bias: bool = True  # o_proj takes `attention_bias` too
    gated_query: bool = False  # q_proj also emits an output gate (2 × heads × head_dim)
    qk_norm: Literal["head", "full"] | None = None  # per-head RMSNorm of q and k, or over all heads
    # implementation features of the family's modeling file: ModelSpec boolean fields, as hf_config's
    # `_FAMILY_FEATURES` for the flat families (what each means in memory is on ModelSpec)
    features: frozenset[str] = frozenset()
    sinks: bool = False  # learned attention sinks, one per head
    all_sliding: bool = False  # every attention layer slides when `sliding_window` is set (mistral-style)
    parallel_mamba: bool = False  # attention and Mamba2 side by side in every layer (Falcon-H1)
    linear_kind: Literal["linear", "mamba"] = "linear"  # what a "linear_attention" layer type is
    kimi_delta: bool = False  # linear layers are Kimi Delta Attention (else Gated DeltaNet)
    gdn_split_proj: bool = False  # Gated DeltaNet projects q/k/v, z, b, a separately (Qwen3.5), not qkvz + ba
    mamba_version: int = 2
    mamba_prefix: str = "mamba"
    mamba_heads_key: str = "mamba_n_heads"
    mamba_head_dim_key: str = "mamba_d_head"
    mamba_state_key: str = "mamba_d_state"
    mamba_groups_key: str = "mamba_n_groups"
    mamba_conv_key: str = "mamba_d_conv"
    mamba_chunk_key: str = "mamba_chunk_size"  # the PyTorch chunked scan's chunk (configuration_bamba.py:73 etc.)
    mamba_chunk_default: int = 256
    mamba_expand_key: str = "mamba_expand"
    mamba_inner_key: str = ""  # an explicit inner width (Falcon-H1 mamba_d_ssm)
    mamba_bias_key: str = "mamba_proj_bias"
    mamba_norm: bool = True  # the gated RMSNorm over the inner width
    experts_keys: tuple[str, ...] = ("num_experts", "num_local_experts", "n_routed_experts")
    moe_width_key: str = "moe_intermediate_size"  # per routed expert; absent → intermediate_size
    dense_width_key: str = ""  # dense layers' width when it differs from intermediate_size
    shared_width_key: str = "shared_expert_intermediate_size"
    shared_count_key: str = "n_shared_experts"  # shared experts × the routed width
    shared_fixed: int = 0  # shared experts the modeling file always builds (Llama 4: one)
    shared_gate: bool = False  # a sigmoid gate (1 × hidden) on the shared expert
    router_name: str = "gate"  # the router module's name (quantization ignore lists name it)
    router_bias: bool = False
    expert_bias: bool = False  # gate_up and down biases on every expert
    gated_mlp: bool = True  # gate/up/down; False: up/down (relu²)
    mlp_prefix: str = "mlp"
    norms_per_layer: int = 2
    norm_bias: bool = False  # LayerNorm with a bias
    one_block_per_layer: bool = False  # a layer is one mixer, MLP or MoE block (nemotron_h)
    block_configs: bool = False  # per-layer `block_configs` (Nemotron-NAS / DeciLM)
    tie_word_embeddings: bool = False
    extra_embed_rows: int = 0  # embedding rows beyond vocab_size (mllama: 8 image tokens)
    defaults: tuple[tuple[str, Any], ...] = ()  # the configuration class's defaults for keys a config omits
    qk_norm_weights: bool = True  # `use_qk_norm` norms carry weights (Llama 4's is a weightless L2 norm)
    # per-layer attention geometry (Gemma 4): full-attention layers `global_head_dim` wide, with
    # `num_global_key_value_heads` KV heads and no v_proj under `attention_k_eq_v`; `per_layer_config` overrides
    global_attention: bool = False
    kv_shared_key: str = ""  # the last N layers reuse an earlier layer's K/V: no k/v projections, nothing cached
    sliding_pattern: int = 0  # without layer_types: every sliding_pattern-th layer attends fully, the others slide
    last_layer_full: bool = False  # the last layer attends fully whatever layer_types says
    moe_beside_key: str = ""  # a flag adding an MoE beside every layer's dense MLP (the dense MLP stays)
    moe_prefix: str | None = None  # the MoE's module path when not mlp_prefix ("": the layer itself)
    top_k_key: str = ""  # experts per token when not num_experts_per_tok / num_experts_per_token
    router_scales: bool = False  # router.scale (hidden) and router.per_expert_scale (experts) parameters
    moe_norms: int = 0  # norms a layer with an MoE adds
    per_layer_input_key: str = ""  # per-layer embeddings (PLE) width: a packed table, a projection, per-layer gates


# transformers 5.24.0 models/<type>/modeling_<type>.py (and configuration_<type>.py for the defaults); kimi_k2,
# mimo and nemotron-nas are remote code on the Hub (their modeling files named at each rule)
LAYERED_RULES: dict[str, LayeredRules] = {
    "generic": LayeredRules("generic"),
    # modeling_deepseek_v3.py: MLA, routed + n_shared_experts shared experts, first_k_dense_replace dense layers;
    # e_score_correction_bias is a buffer; the MTP layers (num_nextn_predict_layers) are not built
    # modeling_deepseek_v3.py DeepseekV3TopkRouter: fp32 logits (F.linear of .type(torch.float32)), sigmoid,
    # grouped top-k; the top-k weights it returns stay fp32, so the experts' weighted output is fp32
    "deepseek_v3": LayeredRules("deepseek_v3", features=frozenset({"router_weights_fp32"})),
    # + the indexer (index_head_dim, index_n_heads)
    "deepseek_v32": LayeredRules("deepseek_v32", features=frozenset({"router_weights_fp32"})),
    # DeepseekV3ForCausalLM (Kimi-K2's modeling_deepseek.py)
    "kimi_k2": LayeredRules("kimi_k2", features=frozenset({"router_weights_fp32"})),
    "glm4_moe_lite": LayeredRules("glm4_moe_lite", features=frozenset({"router_weights_fp32"})),
    # modeling_glm4_moe.py Glm4MoeAttention: q/k/v take attention_bias, o_proj never; optional per-head qk norm
    # modeling_glm4_moe.py Glm4MoeTopkRouter: DeepSeek-V3's router (fp32 top-k weights)
    "glm4_moe": LayeredRules("glm4_moe", o_bias=False, features=frozenset({"router_weights_fp32"})),
    # modeling_gpt_oss.py: biased q/k/v/o, sinks, a biased router, biased experts; layer_types alternate
    "gpt_oss": LayeredRules(
        "gpt_oss",
        attention_bias=True,
        sinks=True,
        router_name="router",
        router_bias=True,
        expert_bias=True,
        moe_width_key="",
        # modeling_gpt_oss.py GptOssExperts under grouped_mm (integrations/moe.py grouped_mm_experts_forward with
        # has_bias): per-row bias gathers and `_apply_gate`'s clamps, sigmoid and products; its eager_attention_forward
        # (modeling_gpt_oss.py:250) runs the softmax over the scores and sinks in their own dtype
        features=frozenset({"moe_clamped_gate", "softmax_in_compute_dtype"}),
    ),
    # modeling_phimoe.py: LayerNorm with bias everywhere, routed experts only
    "phimoe": LayeredRules("phimoe", router_name="router", norm_bias=True, all_sliding=True, moe_width_key=""),
    "granite": LayeredRules("granite"),
    # modeling_granitemoehybrid.py: Mamba2 or attention per layer ("mamba"/"attention"), MoE + shared_mlp
    "granitemoehybrid": LayeredRules(
        "granitemoehybrid",
        linear_kind="mamba",
        router_name="router",
        moe_width_key="",
        shared_width_key="shared_intermediate_size",
    ),
    # modeling_olmo2.py: post-norms only, q/k RMSNorm over all heads
    # modeling_olmo2.py Olmo2RMSNorm: `(self.weight * hidden_states).to(input_dtype)`, the weight applied in fp32
    "olmo2": LayeredRules("olmo2", qk_norm="full", features=frozenset({"norm_weight_offset"})),
    "smollm3": LayeredRules("smollm3", tie_word_embeddings=True),
    # modeling_falcon_h1.py: attention ∥ Mamba2 (mamba_d_ssm wide, no inner norm unless mamba_rms_norm)
    "falcon_h1": LayeredRules(
        "falcon_h1", parallel_mamba=True, mamba_inner_key="mamba_d_ssm", mamba_norm=False, mlp_prefix="feed_forward"
    ),
    # modeling_cohere.py: one LayerNorm (weight only) before the parallel attention and MLP; tied embeddings
    "cohere": LayeredRules(
        "cohere",
        norms_per_layer=1,
        tie_word_embeddings=True,
        # modeling_cohere.py apply_rotary_pos_emb: q.float(), k.float(), rotate_half by torch.stack of the odd/even
        # halves, cast back at the end
        features=frozenset({"rope_fp32_interleaved"}),
    ),
    # modeling_jamba.py: Mamba1 with dt/B/C norms; attention every attn_layer_period; MoE every expert_layer_period
    "jamba": LayeredRules("jamba", mamba_version=1, router_name="router", moe_width_key="", mlp_prefix="feed_forward"),
    # modeling_nemotron_h.py: each layer is one block (Mamba2, attention, relu² MLP or relu² MoE) with one norm
    "nemotron_h": LayeredRules(
        "nemotron_h",
        one_block_per_layer=True,
        linear_kind="mamba",
        gated_mlp=False,
        mamba_prefix="mixer",
        mamba_heads_key="mamba_num_heads",
        mamba_head_dim_key="mamba_head_dim",
        mamba_state_key="ssm_state_size",
        mamba_groups_key="n_groups",
        mamba_conv_key="conv_kernel",
        mamba_chunk_key="chunk_size",
        mamba_chunk_default=128,  # configuration_nemotron_h.py:129
        mamba_expand_key="expand",
        mamba_bias_key="use_bias",
        shared_width_key="moe_shared_expert_intermediate_size",
        mlp_prefix="mixer",
    ),
    # DeciLM (Nemotron-NAS, remote code modeling_decilm.py): per-layer block_configs
    "nemotron-nas": LayeredRules("nemotron-nas", block_configs=True),
    # modeling_minimax_m2.py: q/k RMSNorm over all heads, routed experts only
    # modeling_minimax_m2.py MiniMaxM2TopKRouter: sigmoid(router_logits.float()), fp32 top-k weights
    "minimax_m2": LayeredRules(
        "minimax_m2", qk_norm="full", moe_width_key="", features=frozenset({"router_weights_fp32"})
    ),
    # MiMo (remote code modeling_mimo.py): Qwen2 layers (biased q/k/v)
    "mimo": LayeredRules("mimo", attention_bias=True, o_bias=False),
    # modeling_exaone4.py: post-norms, per-head q/k norm, layer_types for the sliding layers
    "exaone4": LayeredRules("exaone4", qk_norm="head"),
    # modeling_ernie4_5.py: `use_bias` on q/k/v/o and the MLP; tied embeddings by default
    "ernie4_5": LayeredRules("ernie4_5", tie_word_embeddings=True),
    # modeling_qwen3_next.py: gated query, per-head qk norm, GDN linear layers, MoE with a gated shared expert
    "qwen3_next": LayeredRules("qwen3_next", gated_query=True, qk_norm="head", shared_gate=True),
    "qwen3_5_text": LayeredRules(
        "qwen3_5_text", gated_query=True, qk_norm="head", shared_gate=True, gdn_split_proj=True
    ),
    "qwen3_5_moe_text": LayeredRules(
        "qwen3_5_moe_text", gated_query=True, qk_norm="head", shared_gate=True, gdn_split_proj=True
    ),
    # modeling_kimi_linear.py: KDA linear layers, MLA full layers (no q LoRA), first dense then MoE
    "kimi_linear": LayeredRules("kimi_linear", kimi_delta=True, shared_count_key="num_shared_experts"),
    # modeling_llama4.py Llama4TextModel: chunked local attention on RoPE layers, MoE every
    # interleave_moe_layer_step with one shared expert; dense layers intermediate_size_mlp wide
    "llama4_text": LayeredRules(
        "llama4_text",
        moe_width_key="",
        router_name="router",
        qk_norm_weights=False,
        shared_fixed=1,
        dense_width_key="intermediate_size_mlp",
        mlp_prefix="feed_forward",
        defaults=(("attention_chunk_size", 8192), ("no_rope_layer_interval", 4)),  # configuration_llama4.py:157-158
        # modeling_llama4.py Llama4TextMoe.forward: `hidden_states.repeat(num_experts, 1)` scaled by the router
        # scores, then Llama4TextExperts' bmm over every expert; its text eager_attention_forward (modeling_llama4.py
        # :267) runs `softmax(attn_weights, dim=-1)` in the scores' dtype, no float32 ("llama4 doesn't cast attn
        # weights to fp32", :275)
        features=frozenset({"moe_all_experts", "softmax_in_compute_dtype"}),
    ),
    "mllama_text_model": LayeredRules("mllama_text_model", extra_embed_rows=8),
    "qwen2_5_vl_text": LayeredRules("qwen2_5_vl_text", attention_bias=True, o_bias=False),
    "qwen3_vl_text": LayeredRules("qwen3_vl_text", qk_norm="head"),
    "qwen3_vl_moe_text": LayeredRules("qwen3_vl_moe_text", qk_norm="head"),
    "mistral": LayeredRules("mistral", all_sliding=True),
    # modeling_gemma4.py Gemma4TextDecoderLayer (:1331-1362): Gemma4TextAttention (:1141-1194) q/k/v/o taking
    # attention_bias, per-head q_norm/k_norm (v_norm has no weight); sliding layers head_dim wide, full layers
    # global_head_dim (per_layer_config, configuration_gemma4.py:208-221) with num_global_key_value_heads and no v_proj
    # under attention_k_eq_v; the last num_kv_shared_layers reuse K/V (no k/v projections or norms). Four norms and a
    # GeGLU MLP in every layer (2 × intermediate_size on shared layers under use_double_wide_mlp, :1051-1062); with
    # enable_moe_block an MoE beside it (Gemma4TextRouter proj + scale + per_expert_scale, :1294-1305; fused
    # Gemma4TextExperts, :1255-1265) and three more norms; per-layer embeddings when hidden_size_per_layer_input > 0
    # (Gemma4TextModel :1565-1580); tied embeddings. Defaults: configuration_gemma4.py:150-180
    "gemma4_text": LayeredRules(
        "gemma4_text",
        qk_norm="head",
        norms_per_layer=4,
        global_attention=True,
        kv_shared_key="num_kv_shared_layers",
        sliding_pattern=6,
        last_layer_full=True,
        moe_beside_key="enable_moe_block",
        moe_prefix="",
        router_name="router.proj",
        router_scales=True,
        top_k_key="top_k_experts",
        moe_norms=3,
        shared_width_key="",
        shared_count_key="",
        per_layer_input_key="hidden_size_per_layer_input",
        tie_word_embeddings=True,
        # modeling_gemma4.py: Gemma4RMSNorm._norm is x * pow(mean(x²) + eps, -0.5) and its weight multiply runs in fp32
        # (:205-214); v_norm is one without a scale (Gemma4TextAttention); an MoE layer runs the experts beside the
        # dense MLP with post_feedforward_layernorm_1/_2 and pre_feedforward_layernorm_2, and Gemma4TextRouter
        # norms, scales and projects the layer's residual (:1307-1311, :1391-1403), its top-k weights fp32
        # (`softmax(..., dtype=torch.float32)`, :1313); a layer that does not reuse shared k/v stores its own in the
        # model's `shared_kv_states` dict (kv_sharing_modes "store", :1161-1163, :1230-1231), a checkpointed layer's
        # input
        features=frozenset({"norm_weight_fp32", "v_norm", "moe_beside_dense", "router_weights_fp32", "kv_stored"}),
        defaults=(
            ("vocab_size", 262_144),
            ("hidden_size", 2304),
            ("intermediate_size", 9216),
            ("num_hidden_layers", 30),
            ("num_attention_heads", 8),
            ("num_key_value_heads", 4),
            ("head_dim", 256),
            ("hidden_activation", "gelu_pytorch_tanh"),
            ("max_position_embeddings", 131_072),
            ("sliding_window", 512),
            ("vocab_size_per_layer_input", 262_144),
            ("hidden_size_per_layer_input", 256),
            ("global_head_dim", 512),  # configuration_gemma4.py:208
            ("attention_k_eq_v", False),
            ("num_kv_shared_layers", 0),
            ("enable_moe_block", False),
            ("use_double_wide_mlp", False),
        ),
    ),
}


# multimodal wrappers → the model_type of their language model (the transformers class of `text_config`)
MULTIMODAL_TEXT: dict[str, str] = {
    "gemma3": "gemma3_text",
    "mllama": "mllama_text_model",
    "llama4": "llama4_text",
    "qwen2_5_vl": "qwen2_5_vl_text",
    "qwen3_vl": "qwen3_vl_text",
    "qwen3_vl_moe": "qwen3_vl_moe_text",
    "qwen3_5": "qwen3_5_text",
    "qwen3_5_moe": "qwen3_5_moe_text",
    "mistral3": "mistral",
    "gemma4": "gemma4_text",
}

# the wrappers' `tie_word_embeddings` defaults (configuration_mistral3.py:98, configuration_gemma3.py:212,
# configuration_gemma4.py:380; the others False: configuration_llama4.py:239, configuration_mllama.py:136,
# configuration_qwen2_5_vl.py:190, configuration_qwen3_vl.py:140)
WRAPPER_TIES_EMBEDDINGS: dict[str, bool] = {"mistral3": True, "gemma3": True, "gemma4": True}
# ModelSpec dropout field -> the config key whose dropout each model_type's modeling file applies in training
# (transformers 5.24.0). Attention probabilities: every family passes `dropout=<key> if self.training` to its
# attention function (modeling_llama.py:216,264 and the same lines of each llama-style family; gpt2:110,219;
# opt:111,175; gpt_neox:174,217). Residual branches, two per layer: gpt2 GPT2Attention.resid_dropout and
# GPT2MLP.dropout (:111,226; :238,244), opt OPTDecoderLayer's two `dropout`s (:194,228,248), gpt_neox
# post_attention_dropout / post_mlp_dropout (:234-235,258,262), phi3 resid_attn_dropout / resid_mlp_dropout
# (:286-287,312,317). Embeddings: gpt2 GPT2Model.drop (:494), gpt_neox emb_dropout with hidden_dropout
# (:299,344). Read but applied by no module: phi3 `embd_pdrop` (Phi3Model has no embedding dropout), opt
# OPTDecoder.dropout (:286, unused in its forward).
_ATTENTION_ONLY = {"attention_dropout": "attention_dropout"}
DROPOUT_KEYS: dict[str, dict[str, str]] = {
    **dict.fromkeys(
        ("llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "gemma", "gemma2", "gemma3_text"),
        _ATTENTION_ONLY,
    ),
    "gemma3": _ATTENTION_ONLY,  # the text config's key (gemma3_text)
    "phi3": {"attention_dropout": "attention_dropout", "hidden_dropout": "resid_pdrop"},
    "gpt2": {"attention_dropout": "attn_pdrop", "hidden_dropout": "resid_pdrop", "embedding_dropout": "embd_pdrop"},
    "gpt_neox": {
        "attention_dropout": "attention_dropout",
        "hidden_dropout": "hidden_dropout",
        "embedding_dropout": "hidden_dropout",
    },
    "opt": {"attention_dropout": "attention_dropout", "hidden_dropout": "dropout"},
}
# config keys a model_type's configuration class has that no module applies (named in the budget as read)
UNAPPLIED_DROPOUT_KEYS: dict[str, tuple[str, ...]] = {"phi3": ("embd_pdrop",)}


# SGLang 0.5.10.post1 by model class, read as the model_types here (budgets/engine/sglang.py uses them):
# the classes whose sliding-window layers get their own smaller pool (sglang/srt/configs/model_config.py:1438-1448:
# Llama4ForConditionalGeneration, GptOssForCausalLM, MiMoV2FlashForCausalLM, Step3p5ForCausalLM); every other model
# caches its sliding layers in full (server_args.py:1865-1894)
SGLANG_HYBRID_SWA_MODEL_TYPES = frozenset({"llama4", "gpt_oss", "mimo_v2_flash", "step3p5"})
# piecewise CUDA graphs off (configs/model_config.py:1352-1358; DSA models are found by their indexer)
SGLANG_NO_PIECEWISE_GRAPHS_MODEL_TYPES = frozenset({"qwen3_next", "glm_moe_dsa", "bailing_moe_v2_5"})
