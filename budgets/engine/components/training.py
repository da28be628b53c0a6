"""Model states of training: gradients, optimizer state and master weights (ZeRO, arXiv:1910.02054 §3.1).

PyTorch optimizers keep their states in the parameter's dtype; with an fp32 master copy (mixed
precision) the states follow the master dtype. Per parameter: AdamW 2 states, 8-bit AdamW 2 × 1 B
(+ block scales), SGD none, SGD momentum 1, Lion 1, Adafactor factored row/column statistics.
With fp16 weights and gradients, fp32 master and Adam this is the paper's 16 B/param (K = 12).
"""

from __future__ import annotations

from ..dtypes import nbytes
from ..vllm import parse_version
from .activations import ALL_TRAINED, Kept, dropout_mask_bytes

# bitsandbytes MatMul4Bit (the 4-bit linear's autograd function) kept its input for backward whenever an
# input needed a gradient (bitsandbytes@a06a0f6 = 0.41.0, bitsandbytes/autograd/_functions.py:522-523
# `if any(ctx.needs_input_grad[:2]): ctx.tensors = (A, B)`; 0.43.1 the same); PR #1270 ("fix QLoRA mem
# bug: delete useless buffered activation", commit 9e75374) keeps `(None, B)` from 0.43.2 on
BNB_KEEPS_INPUT_BEFORE = (0, 43, 2)
PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")

STATES_PER_PARAM = {"adamw": 2.0, "sgd": 0.0, "sgd_momentum": 1.0, "lion": 1.0}


def optimizer_state_bytes_per_param(optimizer: str, weights: str, master: str | None, hidden_size: int) -> float:
    """Optimizer states + master copy, bytes per trainable parameter."""
    state_dtype = master or (weights if weights in ("fp32", "bf16", "fp16") else "fp32")
    sb = nbytes(state_dtype)
    master_b = nbytes(master) if master else 0.0
    if optimizer in ("adamw_8bit", "paged_adamw_8bit"):
        states = 2 * (1 + 4 / 256)  # bitsandbytes: uint8 states, one fp32 absmax per 256-block
    elif optimizer == "adafactor":
        states = 2 * sb / max(hidden_size, 1) * 2  # row + column statistics of each matrix
    else:
        states = STATES_PER_PARAM[optimizer] * sb
    return master_b + states


def adam_step_tensors_bytes(optimizer: str, param_tensors: int) -> int:
    """torch.optim.AdamW keeps a `step` fp32 scalar per parameter tensor (on the host)."""
    return 4 * param_tensors if optimizer in ("adamw",) else 0


OPTIMIZER_IMPLS = ("foreach", "fused", "for_loop")


def default_optimizer_impl(device: str) -> str:
    """torch.optim's step when neither `foreach` nor `fused` is given (torch 2.13 torch/optim/adam.py:937-947,
    sgd.py:279-292): `_default_to_fused_or_foreach` (optimizer.py:161-186) turns foreach on only when every
    parameter is a plain tensor on a foreach device (torch/utils/_foreach_utils.py:8-10: cuda, xpu, mtia, the
    privateuse1 backend) and never fused, so CUDA parameters get the foreach step and CPU ones the for-loop
    (`_single_tensor_adam`); the accuracy harness records the one torch resolved (`optimizer_impl`)."""
    return "foreach" if device == "cuda" else "for_loop"


def optimizer_step_transient(
    optimizer: str, impl: str, weights: str, master: str | None, trainable: float, largest_tensor: float
) -> float:
    """Bytes the optimizer step allocates beyond its states, in the state dtype (torch 2.13
    torch/optim/adam.py). AdamW: foreach `_foreach_sqrt(exp_avg_sqs)` (:790) is parameter-sized; fused
    `_fused_adamw_` (:877) allocates nothing; the for-loop step's `exp_avg_sq.sqrt() / bias_correction2_sqrt`
    (:544) holds two copies of one tensor at a time, the largest. Measured on torch 2.13 CPU with the
    profiler (tests/engine/test_training_mechanisms.py). Lion: a parameter-sized temporary."""
    state_dtype = master or weights
    sb = nbytes(state_dtype if state_dtype in ("fp32", "bf16", "fp16") else "fp32")
    if optimizer == "lion":
        return trainable * sb
    if optimizer != "adamw" or impl == "fused":
        return 0.0
    return trainable * sb if impl == "foreach" else 2 * largest_tensor * sb


def lora_parameters(spec_h: int, q: int, kv: int, inter: int, layers: int, rank: int, targets: list[str]) -> int:
    """LoRA A (r × in) and B (out × r) per targeted linear layer."""
    dims = {
        "q_proj": (spec_h, q),
        "k_proj": (spec_h, kv),
        "v_proj": (spec_h, kv),
        "o_proj": (q, spec_h),
        "gate_proj": (spec_h, inter),
        "up_proj": (spec_h, inter),
        "down_proj": (inter, spec_h),
    }
    names = list(dims) if "all-linear" in targets else targets
    return layers * sum(rank * (dims[n][0] + dims[n][1]) for n in dict.fromkeys(names))


def adapted_projections(targets: list[str]) -> set[str]:
    return set(PROJECTIONS) if "all-linear" in targets else set(targets)


def lora_dropout_bytes(input_widths: list[int], d: float, cuda: bool) -> float:
    """Per token: what the adapters' dropouts keep for backward, one dropout per entry of `input_widths`
    (peft: one nn.Dropout per adapted module, peft v0.20.0 src/peft/tuners/lora/layer.py:251-254, applied
    as `lora_B(lora_A(dropout(x)))`, :1058): its output (d), saved by A's matmul in place of x, and its
    mask (`activations.dropout_mask_bytes`: bool on CUDA, the noise in the input dtype elsewhere)."""
    return sum(input_widths) * (d + dropout_mask_bytes(d, cuda))


def lora_input_bytes(input_widths: list[int], adapter_d: float, compute_d: float, dropout: float, cuda: bool) -> float:
    """Per token: what the adapters keep of their inputs other than the projection input itself, one entry of
    `input_widths` per adapter input. With LoRA dropout, the dropout's output and mask in the adapters' dtype
    (`lora_dropout_bytes`). Without it, adapters in another dtype than the compute (PEFT's fp32 adapters on a 16-bit
    base) keep each projection's input cast to theirs: `x = self._cast_input_dtype(x, lora_A.weight.dtype)` before
    `lora_A` (peft 0.21.2 tuners/lora/layer.py:1099-1101, tuners/tuners_utils.py:2220-2235), one copy per adapted
    projection; else nothing (A keeps the projection input itself)."""
    if dropout > 0:
        return lora_dropout_bytes(input_widths, adapter_d, cuda)
    return sum(input_widths) * adapter_d if adapter_d != compute_d else 0.0


def kept_inputs(
    method: str,
    targets: list[str],
    rank: int,
    bitsandbytes_version: str | None,
    dropout: float = 0.0,
    dropout_bytes: float = 0.0,
    adapter_d: float | None = None,
) -> Kept:
    """Which layer inputs the training step keeps for backward: all of them in full fine-tuning; with
    frozen base weights (LoRA, QLoRA) only those of the adapted projections (each adapter's A keeps the
    projection input; with LoRA dropout, or adapters in another dtype than the compute (`adapter_d`, bytes), what
    `lora_input_bytes` gives instead (`dropout_bytes` per token); its B A's rank-wide output in the adapters' dtype)
    and no norm's normalized tensor; QLoRA on bitsandbytes before 0.43.2 also every 4-bit projection's input."""
    if method == "full":
        return ALL_TRAINED
    adapted = adapted_projections(targets)
    old_bnb = bitsandbytes_version is not None and parse_version(bitsandbytes_version) < BNB_KEEPS_INPUT_BEFORE
    every_input = method == "qlora" and old_bnb
    # an adapter keeps its raw input only without dropout and in the compute dtype
    by_adapter = adapted if dropout == 0 and adapter_d is None else set()
    return Kept(
        norm_weights=False,
        qkv_input=every_input or bool(by_adapter & {"q_proj", "k_proj", "v_proj"}),
        mlp_input=every_input or bool(by_adapter & {"gate_proj", "up_proj"}),
        down_input=every_input or "down_proj" in by_adapter,
        o_input=every_input or "o_proj" in by_adapter,
        adapter_outputs=rank * len(adapted),
        adapted=frozenset(adapted),
        dropout_bytes=dropout_bytes if dropout > 0 or adapter_d is not None else 0.0,
        adapter_d=adapter_d,
    )
