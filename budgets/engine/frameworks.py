"""Training frameworks as profiles: what each one's own mechanisms do to the step's memory, read from its source
at one release and named in the budget's assumptions.

The layers of torchtune's, torchtitan's and Unsloth's Llama-family models save the same tensors as transformers'
(the general model, `components/activations.py`); what differs is the step around them:

- **torchtune 0.6.1** (pytorch/torchtune a6290a5): ``optimizer_in_bwd`` registers one optimizer per parameter and
  steps it, then ``zero_grad()``, in a post-accumulate-grad hook (torchtune/training/memory.py:219-242), so each
  gradient is freed as soon as it is written and the step needs no phase of its own; ``enable_activation_offloading``
  (training/_activation_offloading.py:24, defaults :66-71) moves every saved tensor over 1 KiB to host RAM in the
  forward, keeping up to ``max_fwd_stash_size=5`` on the device while their copies run, and brings them back in the
  backward; the recipe refuses it without checkpointing (recipes/full_finetune_single_device.py:166-175). Its chunked
  loss is ``CEWithChunkedOutputLoss`` (modules/loss/ce_chunked_output_loss.py:13-83, 8 chunks: ``loss_chunks``).
- **torchtitan 0.2.0** (pytorch/torchtitan 29624e3): per-op selective checkpointing saves the outputs of the ops in
  ``_op_sac_save_list`` (models/llama3/infra/parallelize.py:33-44: mm, the SDPA kernels, reduce-scatter, max) except
  every second mm (distributed/activation_checkpoint.py:104-115), and recomputes everything else
  (``activation_checkpointing: selective_op``); FSDP2 shards parameters, gradients and states (``zero_stage`` 3).
- **Unsloth 2024.12** (unslothai/unsloth 400d995, unsloth-zoo 44a919c): ``use_gradient_checkpointing="unsloth"``
  copies each decoder layer's input to host RAM in the forward (``hidden_states.to("cpu", non_blocking=True)``,
  unsloth_zoo/gradient_checkpointing.py:145-175) and back for the recompute; the Llama forward computes the loss
  with Apple's cut cross-entropy when it is installed (unsloth/models/llama.py:983-1000), so the logits are never
  materialized (``fused_loss``, on by default for Unsloth).

Offloading to the CPU (``training.cpu_offload``) follows DeepSpeed 0.16.4's own estimator of where model states live
(deepspeed/runtime/zero/stage3.py:3008-3044, ``estimate_zero3_model_states_mem_needs``; stage_1_and_2.py:2430-2447)
and FSDP's ``CPUOffload(offload_params=True)``, which keeps parameters and gradients on the CPU and runs the
optimizer step there.

A version other than the release a profile was read from is refused (the schema names ``runtime.engine_version``):
nothing here says what changed between releases, so no range could honestly cover it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class TrainingFrameworkProfile:
    name: str
    label: str
    release: str | None  # the release read; None: versions are the layer profile's (transformers) or not tracked
    fused_loss_default: bool  # whether its forward fuses the output projection and the loss unless told otherwise
    offload_stash: int  # checkpointed layer inputs the device keeps while their copies to the host run (0: none)
    summary: str
    fused_loss: bool = False  # a fused linear cross-entropy may be asked for (Unsloth's, Liger's under transformers)
    optimizer_in_backward: bool = False  # steps each parameter in its gradient hook (torchtune's optimizer_in_bwd)
    pinned_release: bool = False  # read from one release only: another version is refused
    nf4_double_quant: bool = False  # its loader asks bitsandbytes for double-quantized NF4 weights
    # the ZeRO stages its data-parallel ranks run: FSDP2's fully_shard is stage 3, with reshard_after_forward off
    # stage 2 (SHARD_GRAD_OP), DDP stage 0; None: any (DeepSpeed and FSDP strategies under transformers, lit-gpt)
    data_parallel_stages: tuple[int, ...] | None = None
    ddp_only_without_model_parallel: bool = False  # stage 0 (DDP) only when tensor = pipeline = 1
    # its tensor parallelism shards the norms' and residual activations over the sequence too (Megatron's sequence
    # parallelism), so a plan with tensor > 1 runs it; False: tensor parallel without it
    sequence_parallel_with_tensor: bool = False
    # torchao Float8 linears with FSDP float8 all-gather may be asked for (``training.float8_linear``)
    float8_linear: bool = False
    # with pipeline stages, FSDP2 keeps each stage's parameters gathered through the step and its gradients unsharded,
    # accumulated over the micro-batches in the reduce dtype, until the last backward (torch.distributed.pipelining
    # under FSDP2): ``training_stage._pipelined_fsdp``
    pipeline_keeps_fsdp_gathered: bool = False
    # splits training sequences over devices (``parallelism.context``): torchtitan's context_parallel_degree
    context_parallel: bool = False
    # runs one process on one GPU, whatever the node has (Unsloth's open-source release): its plan is that device
    one_device: bool = False
    # runs on one node, whatever the configuration spans (lit-gpt's Fabric has no num_nodes): its plans are that node's
    one_node: bool = False

    def runs_stage(self, zero_stage: int, tensor: int, pipeline: int) -> bool:
        """Whether its data-parallel ranks can run ``zero_stage`` under that tensor and pipeline split."""
        if self.data_parallel_stages is not None and zero_stage not in self.data_parallel_stages:
            return False
        return not (zero_stage == 0 and self.ddp_only_without_model_parallel and (tensor > 1 or pipeline > 1))

    @property
    def activation_offloading(self) -> bool:
        return self.offload_stash > 0

    def describe(self) -> str:
        release = f" {self.release}" if self.release else ""
        return f"training framework {self.label}{release}: {self.summary}"


FRAMEWORKS: dict[str, TrainingFrameworkProfile] = {
    "transformers": TrainingFrameworkProfile(
        "transformers",
        "transformers (+ peft)",
        None,
        False,
        0,
        "the layers and loss of transformers' models (HF Trainer and TRL run them); fused_loss means Liger's fused"
        " linear cross-entropy",
        fused_loss=True,
    ),
    "litgpt": TrainingFrameworkProfile(
        "litgpt",
        "lit-gpt",
        "8641822",
        False,
        0,
        "lit-gpt's own layers and chunked LM head (profiles/litgpt.py)",
        # finetune/lora.py:94 and full.py:73 build L.Fabric(devices=…) with no num_nodes: one node's devices
        one_node=True,
    ),
    "torchtune": TrainingFrameworkProfile(
        "torchtune",
        "torchtune",
        "0.6.1",
        False,
        5,  # OffloadActivations(max_fwd_stash_size=5), training/_activation_offloading.py:66-71
        "optimizer_in_bwd steps and frees each gradient as it is written (training/memory.py:219-242); activation"
        " offloading keeps up to 5 saved tensors on the device (training/_activation_offloading.py:66-71);"
        " CEWithChunkedOutputLoss in loss_chunks chunks (modules/loss/ce_chunked_output_loss.py:13-83)",
        optimizer_in_backward=True,
        pinned_release=True,
        # the distributed recipes shard every layer with FSDP2 (training/_distributed.py:519-568), resharding after
        # forward unless fsdp_reshard_after_forward is False, "SHARD_GRAD_OP" (recipes/full_finetune_distributed.py:55,
        # 299; lora_finetune_distributed.py:54, 280)
        data_parallel_stages=(2, 3),
    ),
    "torchtitan": TrainingFrameworkProfile(
        "torchtitan",
        "torchtitan",
        "0.2.0",
        False,
        0,
        "per-op selective checkpointing saves every other matmul's output and the attention kernel's"
        " (distributed/activation_checkpoint.py:104-115, models/llama3/infra/parallelize.py:33-44); FSDP2",
        pinned_release=True,
        # FSDP2 (HSDP with a replicate degree) with fsdp_reshard_after_forward always/never, or DDP when the data
        # degree is all replicas and the mesh is one-dimensional (models/llama3/infra/parallelize.py:112-145,
        # 284-296: "DDP has not supported > 1D parallelism")
        data_parallel_stages=(0, 2, 3),
        ddp_only_without_model_parallel=True,
        # the TP plan shards the norms' inputs over the sequence: "norm"/"attention_norm"/"ffn_norm":
        # SequenceParallel() (models/llama3/infra/parallelize.py:171, 208, 217 at v0.2.0)
        sequence_parallel_with_tensor=True,
        # torchtitan/components/quantization/float8.py:86-96 (Float8LinearConfig(enable_fsdp_float8_all_gather=...))
        float8_linear=True,
        # fsdp_reshard_after_forward "default": `reshard_after_forward = not pp_enabled` (models/llama3/infra/
        # parallelize.py:289-292 at v0.2.0); the pipeline stage turns FSDP's gradient sync and reshard after
        # backward off until the last micro-batch (torch/distributed/pipelining/stage.py `backward_maybe_with_nosync`)
        pipeline_keeps_fsdp_gathered=True,
        # parallelism.context_parallel_degree, rotate method "allgather" by default (config/job_config.py:378-385)
        context_parallel=True,
    ),
    "unsloth": TrainingFrameworkProfile(
        "unsloth",
        "Unsloth",
        "2024.12",
        True,
        1,  # one layer input in flight: `.to("cpu", non_blocking=True)` then the next layer runs
        "offloaded gradient checkpointing keeps each layer's input in host RAM (unsloth_zoo"
        " gradient_checkpointing.py:145-175); cut cross-entropy, no logits (unsloth/models/llama.py:983-1000);"
        " NF4 double-quantized (unsloth/models/llama.py:1626-1631)",
        fused_loss=True,
        pinned_release=True,
        nf4_double_quant=True,
        # "Unsloth currently does not support multi GPU setups": at 2024.12.4 (PyPI's wheel) unsloth/__init__.py:38-50
        # narrows CUDA_VISIBLE_DEVICES to its first device, and models/llama.py:1711-1712 raises when the trainer
        # finds memory in use on more than one
        one_device=True,
    ),
}


def framework_profile(name: str) -> TrainingFrameworkProfile:
    return FRAMEWORKS[name]


def names_with(capability: str) -> str:
    """The frameworks that have ``capability`` (a profile attribute), for an error message."""
    return " or ".join(repr(p.name) for p in FRAMEWORKS.values() if getattr(p, capability))


def fused_loss(name: str, given: bool | None) -> bool:
    """The workload's setting, else the framework's default."""
    return framework_profile(name).fused_loss_default if given is None else given


def saved_matmul_widths(widths: list[int]) -> list[int]:
    """torchtitan's per-op rule (distributed/activation_checkpoint.py:104-115): of a layer's matmuls in call order,
    the 1st, 3rd, 5th, … keep their outputs (the count starts at 1; an even count is recomputed)."""
    return widths[0::2]
