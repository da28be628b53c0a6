"""Model states of training: gradients, optimizer state and master weights (ZeRO, arXiv:1910.02054 §3.1).

PyTorch optimizers keep their states in the parameter's dtype; with an fp32 master copy (mixed
precision) the states follow the master dtype. Per parameter: AdamW 2 states, 8-bit AdamW 2 × 1 B
(+ block scales), SGD none, SGD momentum 1, Lion 1, Adafactor factored row/column statistics.
With fp16 weights and gradients, fp32 master and Adam this is the paper's 16 B/param (K = 12).
"""

from __future__ import annotations

from ..dtypes import nbytes

STATES_PER_PARAM = {"adamw": 2.0, "sgd": 0.0, "sgd_momentum": 1.0, "lion": 1.0}


def optimizer_state_bytes_per_param(optimizer: str, weights: str, master: str | None, hidden_size: int) -> float:
    """Optimizer states + master copy, bytes per trainable parameter."""
    state_dtype = master or (weights if weights in ("fp32", "bf16", "fp16") else "fp32")
    sb = nbytes(state_dtype)
    master_b = nbytes(master) if master else 0.0
    if optimizer == "adamw_8bit":
        states = 2 * (1 + 4 / 256)  # bitsandbytes: uint8 states, one fp32 absmax per 256-block
    elif optimizer == "adafactor":
        states = 2 * sb / max(hidden_size, 1) * 2  # row + column statistics of each matrix
    else:
        states = STATES_PER_PARAM[optimizer] * sb
    return master_b + states


def adam_step_tensors_bytes(optimizer: str, param_tensors: int) -> int:
    """torch.optim.AdamW keeps a `step` fp32 scalar per parameter tensor (on the host)."""
    return 4 * param_tensors if optimizer in ("adamw",) else 0


def optimizer_step_transient_per_param(optimizer: str, weights: str, master: str | None) -> float:
    """foreach=True AdamW allocates exp_avg_sq.sqrt() for all parameters in one go (state dtype)."""
    if optimizer == "adamw":
        return nbytes(master or weights if (master or weights) in ("fp32", "bf16", "fp16") else "fp32")
    if optimizer == "lion":
        return nbytes(master or weights if (master or weights) in ("fp32", "bf16", "fp16") else "fp32")
    return 0.0


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
