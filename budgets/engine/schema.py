"""The workload description (WORKLOAD.md, v1) as one pydantic model.

Every field has a documented default, unknown fields are rejected, counts and sizes are bounded,
and cross-field rules (model source, tensor degree, pipeline depth, required sections) are checked
here, once, at the edge. The resolved `ModelSpec` is kept on the validated object so `estimate()`
never re-parses.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationInfo, field_validator, model_validator

from .engines import (
    DEFAULT_ENGINE,
    DEFAULT_TRAINING_FRAMEWORK,
    ENGINES,
    UNPROFILED_ENGINES,
    EngineName,
    KvCacheLayout,
    TrainingFramework,
    engine,
)
from .frameworks import FRAMEWORKS, names_with
from .models.checkpoint import CheckpointWeights, read_checkpoint
from .models.hf_config import UnsupportedModelError, from_hf_config
from .models.presets import close_preset_ids, load_presets
from .models.spec import ModelSpec, from_architecture
from .profiles import release_refusal

Precision = Literal["fp32", "bf16", "fp16", "fp8", "int8", "int4"]
# weights only: bitsandbytes NF4 (4-bit codes + an fp32 absmax per 64 weights), NVFP4 (fp4 + an fp8 scale per 16),
# MXFP4 (fp4 + an e8m0 scale per 32) — dtypes.py
WeightPrecision = Literal["fp32", "bf16", "fp16", "fp8", "int8", "int4", "nf4", "nvfp4", "mxfp4"]
FLOAT_PRECISIONS: tuple[Literal["fp32"], Literal["bf16"], Literal["fp16"]] = ("fp32", "bf16", "fp16")
QUANTIZED_PRECISIONS = ("fp8", "int8", "int4", "nf4", "nvfp4", "mxfp4")

MAX_TOKENS = 10_000_000  # longest request, prompt + output, tokens
MAX_SESSIONS = 100_000
MAX_DEGREE = 4096
MAX_BYTES = 10**15  # 1 PB: anything larger is a typo
MAX_PARAMETERS = 10**14
# a release number: "0.11.0", "0.10.1.1", "0.6.4.post1", "0.12.0rc1" (serving-stack versions, PEP 440-ish)
# what users paste: "0.11.0", "v0.11.0", "0.11.0rc1", "0.7.3.dev233+gad5a35c2", "0.10.1.1+cu128" (PEP 440 with a local
# part); the release whose rules apply is named in the budget's assumptions (vllm.release_note)
ENGINE_VERSION_PATTERN = r"^v?\d{1,3}(\.\d{1,4}){1,3}(\.?(post|rc|dev|a|b)\d{1,6})?(\+[A-Za-z0-9.]{1,64})?$"


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=False, str_strip_whitespace=True)


class Architecture(_Section):
    """Architecture numbers given directly (instead of a preset or a config.json)."""

    num_layers: int = Field(ge=1, le=1024, description="decoder layers")
    hidden_size: int = Field(ge=1, le=262_144)
    num_attention_heads: int = Field(ge=1, le=MAX_DEGREE)
    num_key_value_heads: int | None = Field(None, ge=1, le=MAX_DEGREE, description="default: attention heads")
    head_dim: int | None = Field(None, ge=1, le=4096, description="default: hidden_size / heads")
    intermediate_size: int = Field(ge=1, le=1_048_576)
    vocab_size: int = Field(ge=1, le=4_194_304)
    tie_word_embeddings: bool = False
    mlp: Literal["gated", "standard"] = "gated"
    num_experts: int = Field(1, ge=1, le=4096)
    experts_per_token: int | None = Field(None, ge=1, le=4096, description="default: min(2, num_experts)")
    moe_intermediate_size: int | None = Field(None, ge=1, le=1_048_576, description="default: intermediate_size")
    attention_bias: bool = False
    norm: Literal["rms", "layer"] = "rms"

    @model_validator(mode="after")
    def _check(self) -> Architecture:
        kv = self.num_key_value_heads or self.num_attention_heads
        if self.num_attention_heads % kv:
            raise ValueError(f"num_key_value_heads ({kv}) must divide num_attention_heads ({self.num_attention_heads})")
        if self.head_dim is None and self.hidden_size % self.num_attention_heads:
            raise ValueError("give head_dim: hidden_size is not a multiple of num_attention_heads")
        if self.experts_per_token is not None and self.experts_per_token > self.num_experts:
            raise ValueError(f"experts_per_token must be between 1 and num_experts ({self.num_experts})")
        return self


#: A Hugging Face repository id ("org/name"), matched with ``fullmatch`` (``$`` also matches before a final newline):
#: never an option (no leading "-") nor a path on a node (no "/", "..", "~" at the start).
HF_REPO = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,95}(/[A-Za-z0-9][A-Za-z0-9_.-]{0,95})?")


class ModelRef(_Section):
    """Exactly one of preset / hf_config / architecture, plus optional exact overrides."""

    preset: str | None = Field(None, min_length=1, max_length=200, description="an id from fixtures/model_presets.json")
    hf_config: dict[str, Any] | None = Field(None, description="content of a Hugging Face config.json")
    architecture: Architecture | None = None
    parameter_count: int | None = Field(None, ge=1, le=MAX_PARAMETERS, description="exact; overrides the derived count")
    weights_bytes: int | None = Field(None, ge=1, le=MAX_BYTES, description="exact on-device weight bytes")
    checkpoint: dict[str, Any] | None = Field(
        None,
        description="the checkpoint's safetensors summary: {'total_size': bytes} (model.safetensors.index.json"
        " metadata) or {'tensors': [{'name', 'dtype', 'shape'}, ...]} (the headers); exact weights for any"
        " architecture or quantization",
    )

    _spec: ModelSpec | None = PrivateAttr(default=None)
    _checkpoint: CheckpointWeights | None = PrivateAttr(default=None)

    def hf_repo(self) -> str | None:
        """The Hugging Face repository the model loads from: a preset's ``hf_repo``, or a config.json's
        ``_name_or_path`` when it reads as a repository id (a user's text: never an option, a path or ``..``)."""
        if self.preset is not None:
            return load_presets()[self.preset].hf_repo or None
        name = (self.hf_config or {}).get("_name_or_path")
        if isinstance(name, str) and HF_REPO.fullmatch(name) and ".." not in name:
            return name
        return None

    @model_validator(mode="after")
    def _resolve(self) -> ModelRef:
        given = [k for k in ("preset", "hf_config", "architecture") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(
                "give exactly one of 'preset', 'hf_config' or 'architecture'"
                + (f" (got {', '.join(given)})" if given else "")
            )
        if self.preset is not None:
            presets = load_presets()
            if self.preset not in presets:
                close = close_preset_ids(self.preset)
                hint = f"; close matches: {', '.join(close)}" if close else ""
                raise ValueError(f"unknown preset {self.preset!r}{hint} ({len(presets)} presets in fixtures)")
            self._spec = presets[self.preset].spec
        elif self.hf_config is not None:
            if len(str(self.hf_config)) > 1_000_000:
                raise ValueError("hf_config is larger than 1 MB")
            try:
                spec = from_hf_config(self.hf_config)
            except UnsupportedModelError as exc:
                raise ValueError(str(exc)) from None
            _check_spec_bounds(spec)
            self._spec = spec
        else:
            a = self.architecture
            assert a is not None
            self._spec = from_architecture(
                num_layers=a.num_layers,
                hidden_size=a.hidden_size,
                num_attention_heads=a.num_attention_heads,
                intermediate_size=a.intermediate_size,
                vocab_size=a.vocab_size,
                num_key_value_heads=a.num_key_value_heads,
                head_dim=a.head_dim,
                tie_word_embeddings=a.tie_word_embeddings,
                mlp=a.mlp,
                num_experts=a.num_experts,
                experts_per_token=a.experts_per_token,
                moe_intermediate_size=a.moe_intermediate_size,
                attention_bias=a.attention_bias,
                norm=a.norm,
            )
        if self.hf_config is not None or self.checkpoint is not None:
            assert self._spec is not None
            self._checkpoint = read_checkpoint(self.hf_config, self._spec, self.checkpoint)
        return self

    @property
    def checkpoint_weights(self) -> CheckpointWeights | None:
        """What the checkpoint (quantization_config, model.checkpoint) says of the weights."""
        value: CheckpointWeights | None = self.__pydantic_private__["_checkpoint"]  # type: ignore[index]
        return value

    @property
    def spec(self) -> ModelSpec:
        # read from pydantic's private storage directly: `self._spec` goes through BaseModel.__getattr__
        # (~3 µs a call, and the engine asks for the spec several times per estimate)
        spec: ModelSpec | None = self.__pydantic_private__["_spec"]  # type: ignore[index]  # set by __init__
        assert spec is not None
        return spec


def _check_spec_bounds(spec: ModelSpec) -> None:
    limits = {
        "num_hidden_layers": (spec.num_layers, 1, 1024),
        "hidden_size": (spec.hidden_size, 1, 262_144),
        "num_attention_heads": (spec.num_attention_heads, 1, MAX_DEGREE),
        "num_key_value_heads": (spec.num_kv_heads, 1, MAX_DEGREE),
        "head_dim": (spec.head_dim, 1, 4096),
        "intermediate_size": (spec.intermediate_size, 1, 1_048_576),
        "vocab_size": (spec.vocab_size, 1, 4_194_304),
        "num_experts": (spec.num_experts, 1, 4096),
        # 0 = not given; 2^27 tokens is over ten times the longest context published (10M, Llama 4 Scout)
        "max_position_embeddings": (spec.max_position_embeddings, 0, 2**27),
    }
    for name, (value, lo, hi) in limits.items():
        if not lo <= value <= hi:
            raise ValueError(f"hf_config {name} = {value} is outside the allowed range {lo}..{hi}")
    if spec.num_attention_heads % spec.num_kv_heads:
        raise ValueError("hf_config num_key_value_heads must divide num_attention_heads")


class PrecisionSpec(_Section):
    weights: WeightPrecision = Field(
        "bf16",
        description="weights representation on the device; nf4: bitsandbytes NF4 (QLoRA), an fp32 absmax per 64"
        " weights, the LM head kept 16-bit",
    )
    compute: Precision | None = Field(None, description="default: weights for fp32/bf16/fp16, else bf16")
    kv_cache: Precision | None = Field(None, description="default: compute")
    gradients: Precision | None = Field(None, description="training only; default: the weights' dtype")
    master_weights: Literal["fp32"] | None = Field(None, description="fp32 master copy in mixed precision, or null")

    @model_validator(mode="after")
    def _defaults(self) -> PrecisionSpec:
        if self.compute is None:
            self.compute = self.weights if self.weights in FLOAT_PRECISIONS else "bf16"
        if self.kv_cache is None:
            self.kv_cache = self.compute
        if self.gradients is None:
            self.gradients = self.weights if self.weights in FLOAT_PRECISIONS else self.compute
        if self.compute in ("int8", "int4"):
            raise ValueError("compute must be fp32, bf16, fp16 or fp8 (integer formats store, they do not compute)")
        return self


class InferenceSpec(_Section):
    max_input_tokens: int = Field(2048, ge=1, le=MAX_TOKENS, description="longest prompt, tokens")
    max_output_tokens: int = Field(512, ge=1, le=MAX_TOKENS, description="longest generated output, tokens")
    concurrent_sessions: int = Field(1, ge=1, le=MAX_SESSIONS, description="requests in flight together")
    engine: EngineName = Field(DEFAULT_ENGINE, description="the serving engine (budgets/engine/engines.py)")
    kv_cache_layout: KvCacheLayout | None = Field(
        None,
        description="default: the engine's ("
        + ", ".join(f"{e.default_layout} for {n}" for n, e in ENGINES.items())
        + ")",
    )
    kv_block_tokens: int | None = Field(
        None,
        ge=1,
        le=4096,
        description="paged layout only: tokens per KV block; vLLM's --block-size, SGLang's --page-size (the pool is"
        " rounded down to whole pages). Default: the engine's ("
        + ", ".join(f"{e.block_tokens} for {n}" for n, e in ENGINES.items())
        + "), written into the workload when it is validated",
    )
    gpu_memory_utilization: float | None = Field(
        None,
        gt=0.0,
        le=1.0,
        description="engines with a preallocated KV pool: the fraction of device memory the engine claims; default"
        " by engine and runtime.engine_version (vLLM: 0.90 before 0.21, 0.92 from 0.21). SGLang:"
        " --mem-fraction-static, the share of the memory free at start-up that weights and KV pool may take;"
        " default by GPU memory and parallelism (SGLang 0.5.10.post1 server_args.py:1281-1334, e.g. 0.830 on an"
        " H100 80GB at TP1), resolved with the device and named in the budget's assumptions",
    )
    max_model_len: int | None = Field(
        None,
        ge=1,
        le=MAX_TOKENS,
        description="the longest request the engine accepts (a pool engine must fit one at start-up);"
        " default max_input_tokens + max_output_tokens",
    )
    max_num_seqs: int | None = Field(
        None,
        ge=1,
        le=MAX_SESSIONS,
        description="requests per scheduler step; default by engine, version and GPU class (vLLM: 1024 on ≥70 GiB"
        " non-A100 GPUs, else 256). SGLang: --max-running-requests; default from the pool (clamp(pool tokens /"
        " max_model_len × 512, 2048, 4096), at most pool tokens // 2)",
    )
    max_num_batched_tokens: int | None = Field(
        None,
        ge=1,
        le=MAX_TOKENS,
        description="tokens per scheduler step (the profiling batch); default by engine, version and GPU class"
        " (vLLM: 8192 on ≥70 GiB non-A100 GPUs, 16384 on ≥160 GiB from 0.33, else 2048). SGLang:"
        " --chunked-prefill-size, default by GPU memory (2048 below 35 GiB, 4096 below 60 GiB, 8192 below 160 GiB,"
        " else 16384); it enters SGLang's default mem_fraction_static",
    )
    cuda_graph_max_bs: int | None = Field(
        None,
        ge=1,
        le=MAX_SESSIONS,
        description="SGLang only: --cuda-graph-max-bs, the largest decode batch captured in a CUDA graph; default by"
        " GPU memory and tensor degree (8 below 20 GiB; 24/80 below 35 GiB; 32/160 below 60 GiB; 256/512 below"
        " 160 GiB, for tensor < 4 / ≥ 4; else 512); it enters SGLang's default mem_fraction_static",
    )

    @field_validator("engine", mode="before")
    @classmethod
    def _unprofiled(cls, value: object) -> object:
        """A serving engine people deploy that has no profile is refused with why, not read as another."""
        if isinstance(value, str):
            name = value.lower().replace("_", "-")
            name = {"trtllm": "tensorrt-llm", "trt-llm": "tensorrt-llm", "tensorrt": "tensorrt-llm"}.get(name, name)
            if name in UNPROFILED_ENGINES:
                raise ValueError(
                    f"{UNPROFILED_ENGINES[name]} (engines with a profile: vllm, sglang, transformers, generic)"
                )
        return value

    @field_validator("max_model_len")
    @classmethod
    def _check_max_model_len(cls, value: int | None, info: ValidationInfo) -> int | None:
        longest = info.data.get("max_input_tokens", 0) + info.data.get("max_output_tokens", 0)
        if value is not None and value < longest:
            raise ValueError(
                f"max_model_len ({value}) must be at least max_input_tokens + max_output_tokens ({longest})"
            )
        return value

    @field_validator("max_num_batched_tokens")
    @classmethod
    def _check_batched_tokens(cls, value: int | None, info: ValidationInfo) -> int | None:
        # vLLM's SchedulerConfig refuses a step budget below its sequence budget (SGLang's chunk has no such rule)
        seqs = info.data.get("max_num_seqs")
        name = info.data.get("engine")
        covers = name is None or name not in ENGINES or engine(name).batched_covers_seqs
        if value is not None and seqs is not None and value < seqs and covers:
            raise ValueError(f"max_num_batched_tokens ({value}) must be at least max_num_seqs ({seqs})")
        return value

    @model_validator(mode="after")
    def _defaults(self) -> InferenceSpec:
        serving = engine(self.engine)
        if self.kv_cache_layout is None:
            self.kv_cache_layout = serving.default_layout
        if self.kv_block_tokens is None:
            self.kv_block_tokens = serving.block_tokens
        if self.max_input_tokens + self.max_output_tokens > MAX_TOKENS:
            raise ValueError(f"max_input_tokens + max_output_tokens must be at most {MAX_TOKENS}")
        if self.kv_cache_layout not in serving.layouts:
            raise ValueError(f"engine {serving.name!r} uses kv_cache_layout {' or '.join(map(repr, serving.layouts))}")
        if self.max_model_len is None:
            self.max_model_len = self.max_request_tokens
        for name in ("cuda_graph_max_bs",):
            if getattr(self, name) is not None and name not in serving.own_settings:
                owners = [e.name for e in ENGINES.values() if name in e.own_settings]
                raise ValueError(f"{name} is a setting of engine {' or '.join(map(repr, owners))} only")
        return self

    @property
    def max_request_tokens(self) -> int:
        return self.max_input_tokens + self.max_output_tokens

    @property
    def block_tokens(self) -> int:
        """``kv_block_tokens`` as validation resolved it (the workload's, else the engine's default)."""
        assert self.kv_block_tokens is not None  # set by _defaults
        return self.kv_block_tokens


LoraTarget = Literal["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "all-linear"]


def _attention_projections() -> list[LoraTarget]:
    return ["q_proj", "k_proj", "v_proj", "o_proj"]


class LoraSpec(_Section):
    rank: int = Field(16, ge=1, le=4096)
    target_modules: list[LoraTarget] = Field(default_factory=_attention_projections, min_length=1, max_length=8)
    dropout: float = Field(
        0.0,
        ge=0.0,
        lt=1.0,
        description="dropout on each adapter's input: its output and mask are kept for backward; 0.0 = peft's"
        " LoraConfig default (no dropout module); lit-gpt's finetune/lora.py uses 0.05",
    )


class TrainingSpec(_Section):
    micro_batch_size: int = Field(1, ge=1, le=MAX_SESSIONS, description="sequences per device per step")
    sequence_length: int = Field(2048, ge=1, le=MAX_TOKENS, description="tokens per sequence")
    optimizer: Literal["adamw", "adamw_8bit", "paged_adamw_8bit", "sgd", "sgd_momentum", "adafactor", "lion"] = Field(
        "adamw",
        description="paged_adamw_8bit: bitsandbytes' PagedAdamW8bit (torchtune's single-device full fine-tune"
        " default), whose 8-bit states live in CUDA managed memory outside PyTorch's allocator and page to host"
        " RAM under pressure: budgeted in host RAM, not on the device",
    )
    activation_checkpointing: Literal["none", "selective", "selective_op", "full"] = Field(
        "none",
        description="selective: Megatron's (recompute the attention core only); selective_op: torchtitan's per-op"
        " selective checkpointing (saves the outputs of every other matmul and of the attention kernel, recomputes"
        " the rest); full: every layer recomputed from its input",
    )
    method: Literal["full", "lora", "qlora"] = "full"
    lora: LoraSpec = Field(default_factory=LoraSpec)
    loss_chunks: int = Field(
        1,
        ge=1,
        le=1024,
        description="chunks the output projection and cross-entropy run in, one chunk's fp32 upcast at a time:"
        " 1 = transformers' whole-logits ForCausalLMLoss; torchtune's CEWithChunkedOutputLoss uses 8",
    )
    optimizer_impl: Literal["foreach", "fused", "for_loop"] | None = Field(
        None,
        description="torch.optim's implementation of the step (AdamW): foreach holds one parameter-sized"
        " temporary (`_foreach_sqrt(exp_avg_sqs)`, torch 2.13 adam.py:790); fused=True (`_fused_adamw_`,"
        " adam.py:877) none; foreach=False (`_single_tensor_adam`) two copies of the largest tensor"
        " (`exp_avg_sq.sqrt() / bias_correction2_sqrt`, adam.py:544); other optimizers keep their own step."
        " Default (null): as torch picks it for the device (optimizer.py:161-186 `_default_to_fused_or_foreach`:"
        " foreach on cuda, the for-loop on cpu), the range covering the other two; the budget names it",
    )
    framework: TrainingFramework = Field(
        DEFAULT_TRAINING_FRAMEWORK,
        description="the training code: transformers (+ peft for LoRA; HF Trainer and TRL run it), lit-gpt"
        " (commit 8641822: fused qkv, RMSNorm in the compute dtype, LM head in 128-position chunks), torchtune"
        " (0.6.1), torchtitan (0.2.0) or unsloth (2024.12); the budget names its profile and what each"
        " framework-specific setting below does (budgets/engine/frameworks.py)",
    )
    optimizer_in_backward: bool = Field(
        False,
        description="torchtune's optimizer_in_bwd: each parameter is stepped and its gradient freed as soon as the"
        " gradient is accumulated, so the gradients are never all alive (full fine-tuning with torchtune only)",
    )
    activation_offloading: bool = Field(
        False,
        description="with full checkpointing, every layer's checkpointed input is copied to host RAM in the forward"
        " and back in the backward (torchtune's enable_activation_offloading; Unsloth's use_gradient_checkpointing"
        " 'unsloth'): the device keeps a few, host RAM holds the rest",
    )
    fused_loss: bool | None = Field(
        None,
        description="the output projection and cross-entropy fused (Apple's cut cross-entropy, Liger's fused linear"
        " cross-entropy): no logits are materialized; default (null): Unsloth's Llama forward fuses them, others do"
        " not",
    )
    float8_linear: bool = Field(
        False,
        description="torchtitan's Float8 training (model.converters ['float8'] with"
        " quantize.linear.float8.enable_fsdp_float8_all_gather): the linear layers' weights are gathered by FSDP in"
        " float8, 1 B per element instead of the compute dtype's; the saved activations stay in the compute dtype"
        " (torchtitan only)",
    )
    cpu_offload: Literal["none", "optimizer", "parameters"] = Field(
        "none",
        description="optimizer: the optimizer states, master weights and reduced gradients in host RAM and the step"
        " on the CPU (DeepSpeed ZeRO-Offload, zero_stage ≥ 1); parameters: the parameters too, gathered to the"
        " device a layer at a time (FSDP CPUOffload(offload_params=True), ZeRO-3 offload_param; zero_stage 3)."
        " Host RAM and PCIe then carry the step: the budget's host side holds them",
    )

    @model_validator(mode="after")
    def _check(self) -> TrainingSpec:
        if self.micro_batch_size * self.sequence_length > MAX_TOKENS:
            raise ValueError(f"micro_batch_size × sequence_length must be at most {MAX_TOKENS} tokens")
        profile = FRAMEWORKS[self.framework]
        if self.optimizer_in_backward and (not profile.optimizer_in_backward or self.method != "full"):
            raise ValueError(
                "optimizer_in_backward steps each parameter in its gradient hook, for full fine-tuning: set framework"
                f" {names_with('optimizer_in_backward')} and method 'full', or leave it false"
            )
        if self.activation_offloading and (
            self.activation_checkpointing != "full" or not profile.activation_offloading
        ):
            raise ValueError(
                "activation_offloading offloads the checkpointed layer inputs: it needs activation_checkpointing"
                f" 'full' and framework {names_with('activation_offloading')} (the frameworks that implement it)"
            )
        if self.float8_linear and not profile.float8_linear:
            raise ValueError(
                "float8_linear is torchtitan's Float8 training with float8 all-gather: set framework"
                f" {names_with('float8_linear')}, or leave it false"
            )
        if self.fused_loss and not profile.fused_loss:
            raise ValueError(
                "fused_loss is a fused linear cross-entropy (Unsloth's cut cross-entropy, Liger's kernels under"
                f" transformers): set framework {names_with('fused_loss')}, or leave it unset"
            )
        return self


class ParallelismSpec(_Section):
    tensor: int = Field(1, ge=1, le=MAX_DEGREE)
    pipeline: int = Field(1, ge=1, le=MAX_DEGREE)
    data: int = Field(1, ge=1, le=MAX_DEGREE)
    zero_stage: int = Field(0, ge=0, le=3, description="0-3; FSDP full sharding is stage 3")
    sequence_parallel: bool = False
    expert: int = Field(
        1,
        ge=1,
        le=MAX_DEGREE,
        description="serving a mixture-of-experts model: the routed experts split over this many devices, whole"
        " experts each (vLLM --enable-expert-parallel, SGLang --ep-size); every other weight is split by tensor only,"
        " so with tensor 1 each device holds the attention and dense layers whole and serves its own sessions (data-"
        "parallel attention: SGLang --enable-dp-attention, vLLM --data-parallel-size). Must divide the experts",
    )

    context: int = Field(
        1,
        ge=1,
        le=MAX_DEGREE,
        description="training: context parallelism, each sequence split over this many devices (torchtitan's"
        " context_parallel_degree: PyTorch's context-parallel SDPA, each device attending its share of the queries to"
        " the all-gathered keys and values); FSDP shards over data × context",
    )

    @property
    def devices(self) -> int:
        return self.tensor * self.pipeline * self.data * self.context


class RuntimeSpec(_Section):
    device: Literal["cuda", "cpu"] = "cuda"
    framework: Literal["pytorch"] = "pytorch"
    cuda_version: str | None = Field(
        None,
        pattern=r"^\d{1,2}\.\d{1,2}$",
        description="CUDA toolkit, e.g. 12.8; not given: each configuration is judged with the newest CUDA its driver"
        " runs (the recommendation says which), and the budget assumes lazy module loading (CUDA ≥ 11.7)",
    )
    attention: Literal["eager", "sdpa", "flash"] = "sdpa"
    expandable_segments: bool = False
    compile: bool = Field(
        False,
        description="training: the model runs under torch.compile, whose partitioner saves fewer activations"
        " (modelled for full fine-tuning of SDPA, RMSNorm, dense gated-MLP layers; otherwise the eager model);"
        " the eager figure stays the high end",
    )
    engine_version: str | None = Field(
        None,
        max_length=32,
        description="version of the serving or training stack, e.g. '0.11.0' for vLLM, '5.24.0' for transformers"
        " (training runs transformers); default: the release the engine models (vLLM 0.11.0, SGLang 0.5.10.post1,"
        " transformers 5.24.0); the budget names the implementation profile it used and the releases it was read"
        " from. transformers generate: 4.34–5.24.x, each release by the rules of the releases read (4.35.2, 4.36.0,"
        " 4.41.2, 4.42.0, 4.44.2, 4.45.0, 4.46.0, 5.0.0, 5.24.0), one between two of them with a range spanning both;"
        " 4.x with the dynamic cache only. vLLM: 0.4–0.33.x (a minor release not read is said so). SGLang: 0.5.3 and"
        " later 0.5.x releases are budgeted by the 0.5.10.post1 profile (the budget says so). Other releases are"
        " refused",
    )

    bitsandbytes_version: str | None = Field(
        None,
        max_length=32,
        description="QLoRA: the bitsandbytes release; before 0.43.2 every 4-bit linear keeps its input for"
        " backward (bitsandbytes PR #1270); default: a later release",
    )

    @field_validator("engine_version", "bitsandbytes_version")
    @classmethod
    def _check_release(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is not None and not re.fullmatch(ENGINE_VERSION_PATTERN, value):
            raise ValueError(
                f"{info.field_name} {value!r} is not a release number (allowed: digits and dots such as '0.11.0',"
                " '0.10.1.1', '0.6.4.post1', '0.11.0rc1', '0.7.3.dev233+gad5a35c2')"
            )
        return value

    @property
    def cuda_version_tuple(self) -> tuple[int, int] | None:
        """(major, minor), or None when not given."""
        if self.cuda_version is None:
            return None
        major, minor = self.cuda_version.split(".")
        return int(major), int(minor)


class CustomComponent(_Section):
    name: str = Field(min_length=1, max_length=200)
    category: Literal["weights", "activations", "kv_cache", "workspace"]
    bytes: int = Field(ge=0, le=MAX_BYTES)
    per_concurrent: bool = False


class CustomSpec(_Section):
    components: list[CustomComponent] = Field(min_length=1, max_length=1000)
    concurrency: int = Field(1, ge=1, le=MAX_SESSIONS)


class AcceptanceSpec(_Section):
    min_headroom_fraction: float = Field(0.10, ge=0.0, le=0.9)
    max_ms_per_output_token: float | None = Field(None, gt=0, le=1_000_000)


class Workload(_Section):
    """A workload description (WORKLOAD.md v1)."""

    schema_version: Literal[1] = 1
    name: str = Field("workload", min_length=1, max_length=200)
    task: Literal["inference", "training", "custom"] = "inference"
    model: ModelRef | None = Field(None, description="required for inference and training")
    precision: PrecisionSpec = Field(default_factory=PrecisionSpec)
    inference: InferenceSpec | None = Field(None, description="task inference; defaulted when absent")
    training: TrainingSpec | None = Field(None, description="task training; defaulted when absent")
    parallelism: ParallelismSpec = Field(default_factory=ParallelismSpec)
    runtime: RuntimeSpec = Field(default_factory=RuntimeSpec)
    custom: CustomSpec | None = Field(None, description="task custom: required")
    acceptance: AcceptanceSpec = Field(default_factory=AcceptanceSpec)

    @property
    def nf4_double_quant(self) -> bool:
        """NF4 weights whose absmax is quantized too: what Unsloth's loader asks bitsandbytes for (``frameworks.py``);
        a checkpoint's own quantization_config is read exactly instead (`models/quantization.py`)."""
        return (
            self.precision.weights == "nf4"
            and self.training is not None
            and FRAMEWORKS[self.training.framework].nf4_double_quant
        )

    @model_validator(mode="after")
    def _cross(self) -> Workload:
        if self.task == "custom":
            if self.custom is None:
                raise ValueError("task 'custom' needs a 'custom' section with its components")
            return self
        if self.model is None:
            raise ValueError(f"task {self.task!r} needs a 'model' (preset, hf_config or architecture)")
        if self.task == "inference" and self.inference is None:
            self.inference = InferenceSpec()
        if self.inference is not None:
            _resolve_engine_defaults(self.inference, self.runtime)
            serving = engine(self.inference.engine)
            if serving.version_refusal is not None and self.runtime.engine_version is not None:
                refusal = serving.version_refusal(self.runtime.engine_version)
                if refusal:
                    raise ValueError(refusal)
            if self.runtime.engine_version is not None:
                refusal = release_refusal(
                    self.inference.engine,
                    self.runtime.engine_version,
                    self.inference.kv_cache_layout or serving.default_layout,
                )
                if refusal:
                    raise ValueError(refusal)
        if self.task == "training" and self.training is None:
            self.training = TrainingSpec()
        _apply_checkpoint(self.model, self.precision)
        spec = self.model.spec
        par = self.parallelism
        if spec.num_attention_heads % par.tensor:
            raise ValueError(
                f"parallelism.tensor ({par.tensor}) must divide the model's {spec.num_attention_heads} attention heads"
            )
        if par.pipeline > spec.num_layers:
            raise ValueError(f"parallelism.pipeline ({par.pipeline}) exceeds the model's {spec.num_layers} layers")
        if par.expert > 1:
            if not spec.is_moe:
                raise ValueError("parallelism.expert needs a mixture-of-experts model (this one has no routed experts)")
            if spec.num_experts % par.expert:
                raise ValueError(
                    f"parallelism.expert ({par.expert}) must divide the model's {spec.num_experts} routed experts"
                )
            runs_experts = self.inference is not None and ENGINES[self.inference.engine].expert_parallel
            if self.task != "inference" or par.pipeline > 1 or not runs_experts:
                raise ValueError(
                    "parallelism.expert is budgeted for serving by an engine that runs it ("
                    + ", ".join(sorted(name for name, e in ENGINES.items() if e.expert_parallel))
                    + ") without pipeline stages (expert-parallel training and expert parallel across pipeline stages"
                    " are not modelled): use task 'inference' and pipeline 1"
                )
        if par.devices > 65_536:
            raise ValueError("tensor × pipeline × data × context must be at most 65536 devices")
        if par.context > 1:
            _check_context_parallel(self)
        if self.task == "training":
            assert self.training is not None
            # ZeRO with one data-parallel replica is allowed: it shards nothing (per-device states unchanged).
            if self.training.method == "qlora" and self.precision.weights not in ("int4", "nf4"):
                raise ValueError("training.method 'qlora' needs precision.weights 'nf4' or 'int4'")
            if par.sequence_parallel and par.tensor == 1:
                raise ValueError("parallelism.sequence_parallel needs parallelism.tensor > 1")
            framework = FRAMEWORKS[self.training.framework]
            profiled, version = framework.release, self.runtime.engine_version
            if framework.pinned_release and version not in (None, profiled):
                raise ValueError(
                    f"runtime.engine_version {version!r}: {self.training.framework}'s profile was read from"
                    f" {profiled} only, and nothing here says what changed in other releases; give {profiled!r} or"
                    " leave it unset"
                )
            offload = self.training.cpu_offload
            if offload != "none" and par.zero_stage < (3 if offload == "parameters" else 1):
                raise ValueError(
                    f"training.cpu_offload {offload!r} needs parallelism.zero_stage"
                    f" {'3 (FSDP full sharding, ZeRO-3)' if offload == 'parameters' else '≥ 1 (ZeRO-Offload)'}"
                )
            if self.runtime.device == "cpu" and (
                self.training.optimizer == "paged_adamw_8bit"
                or self.training.activation_offloading
                or offload != "none"
            ):
                raise ValueError(
                    "runtime.device 'cpu' has no device memory to page or offload from: training.optimizer"
                    " paged_adamw_8bit, training.activation_offloading and training.cpu_offload are CUDA settings"
                )
        if self.runtime.device == "cpu" and par.devices > 1:
            raise ValueError("runtime.device 'cpu' budgets one process: use tensor = pipeline = data = 1")
        if self.task == "inference" and self.precision.weights in QUANTIZED_PRECISIONS and self.runtime.device == "cpu":
            raise ValueError("runtime.device 'cpu' supports fp32, bf16 and fp16 weights")
        return self

    @property
    def checkpoint_weights(self) -> CheckpointWeights | None:
        """What the checkpoint (quantization_config, model.checkpoint) says of the weights."""
        value: CheckpointWeights | None = self.__pydantic_private__["_checkpoint"]  # type: ignore[index]
        return value

    @property
    def spec(self) -> ModelSpec:
        assert self.model is not None
        return self.model.spec


def _check_context_parallel(w: Workload) -> None:
    """Context parallelism as torchtitan runs it: training only, by a framework that has it, under FSDP (its mesh is
    data × context: parallelize.py:112-121 at v0.2.0), in SDPA (PyTorch's context-parallel attention), with sequences
    that split into 2 × context chunks (the head-tail load balancer, torch 2.13
    distributed/tensor/experimental/_context_parallel/_load_balancer.py:148)."""
    par, t = w.parallelism, w.training
    if w.task != "training" or t is None or not FRAMEWORKS[t.framework].context_parallel:
        raise ValueError(
            f"parallelism.context splits training sequences: set task 'training' and framework"
            f" {names_with('context_parallel')}, or leave it 1"
        )
    if par.zero_stage < 2:
        raise ValueError("parallelism.context runs under FSDP, which shards over data × context: zero_stage 2 or 3")
    if w.runtime.attention == "eager":
        raise ValueError(
            "parallelism.context runs PyTorch's context-parallel SDPA: runtime.attention 'sdpa' or 'flash'"
        )
    if t.sequence_length % (2 * par.context):
        raise ValueError(
            f"training.sequence_length ({t.sequence_length}) must split into 2 × parallelism.context"
            f" ({2 * par.context}) equal chunks (the load balancer's)"
        )


def _apply_checkpoint(model: ModelRef, precision: PrecisionSpec) -> None:
    """A checkpoint's own figures stand where the user stated none: its stored weight bytes, and the precision of
    its quantized Linears (what compatibility is checked against)."""
    ckpt = model.checkpoint_weights
    if ckpt is None:
        return
    if model.weights_bytes is None:
        model.weights_bytes = ckpt.bytes
    if ckpt.precision is not None and "weights" not in precision.model_fields_set:
        precision.weights = ckpt.precision  # type: ignore[assignment]  # one of WeightPrecision


def _resolve_engine_defaults(inference: InferenceSpec, runtime: RuntimeSpec) -> None:
    """The engine's release and its utilization default where the workload states none."""
    serving = engine(inference.engine)
    if runtime.engine_version is None and serving.default_version is not None:
        runtime.engine_version = serving.default_version
    if inference.gpu_memory_utilization is None:
        # None for SGLang: its default depends on the GPU, resolved with the device (sglang.server_defaults)
        inference.gpu_memory_utilization = serving.default_utilization(runtime.engine_version)


def workload_json_schema() -> dict[str, Any]:
    """JSON Schema of the workload description, generated from the pydantic model."""
    return Workload.model_json_schema()


__all__ = [
    "Architecture",
    "CustomComponent",
    "CustomSpec",
    "InferenceSpec",
    "ModelRef",
    "ParallelismSpec",
    "PrecisionSpec",
    "RuntimeSpec",
    "TrainingSpec",
    "Workload",
    "workload_json_schema",
]
