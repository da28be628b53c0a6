"""What a checkpoint says about the weights: its `quantization_config` (exact quantized bytes over the weight
groups, `quantization.py`) and, when the user gives one, its safetensors summary (`model.checkpoint`: the
index's `metadata.total_size` or the tensor headers). A summary is the checkpoint itself, so it wins; when it
disagrees with what the config implies by more than `CONTRADICTION`, the answer says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .parameters import parameter_count, weight_groups
from .quantization import QuantizationConfigError, checkpoint_bytes, quantized_weight_bytes
from .spec import ModelSpec

CONTRADICTION = 0.02  # relative gap between a checkpoint summary and the config's figure that is reported

# the weight precision a quantization method stores its quantized Linears in (what compatibility checks)
_METHOD_PRECISION: dict[str, str] = {
    "fp8": "fp8",
    "modelopt-fp8": "fp8",
    "modelopt-nvfp4": "nvfp4",
    "mxfp4": "mxfp4",
    "bitsandbytes-4bit": "nf4",
    "bitsandbytes-8bit": "int8",
}


@dataclass(frozen=True, slots=True)
class CheckpointWeights:
    """The whole model's weight bytes as the checkpoint stores them, and where the figure came from."""

    bytes: int
    precision: str | None  # the stored precision of the quantized Linears; None: the config states no quantization
    notes: tuple[str, ...]


def _bits_precision(cfg: Mapping[str, Any], method: str) -> str:
    """int4 / int8 / fp8 / nvfp4 for the integer-or-float schemes whose width is a config field."""
    if method in _METHOD_PRECISION:
        return _METHOD_PRECISION[method]
    bits = cfg.get("bits", cfg.get("w_bit"))
    groups = cfg.get("config_groups")
    if isinstance(groups, Mapping):
        for group in groups.values():
            weights = group.get("weights") if isinstance(group, Mapping) else None
            if isinstance(weights, Mapping):
                bits = weights.get("num_bits", bits)
                if weights.get("type") == "float":
                    return "nvfp4" if bits == 4 else "fp8"
    return "int8" if bits == 8 else "int4"


def read_checkpoint(
    config: Mapping[str, Any] | None, spec: ModelSpec, summary: Mapping[str, Any] | None
) -> CheckpointWeights | None:
    """The checkpoint's weights from its quantization_config and/or a summary; None when neither is given.
    Raises ValueError naming the field when either does not read."""
    qcfg = config.get("quantization_config") if config is not None else None
    quantized = None
    if qcfg is not None:
        try:
            quantized = quantized_weight_bytes(weight_groups(spec), qcfg)
        except QuantizationConfigError as exc:
            raise ValueError(f"hf_config.{exc}" if not str(exc).startswith("hf_config") else str(exc)) from None
    if quantized is None and summary is None:
        return None
    notes: list[str] = []
    precision = _bits_precision(qcfg, quantized.method) if quantized is not None and qcfg is not None else None
    config_bytes = quantized.total_bytes if quantized is not None else None
    if quantized is not None:
        notes.append(
            f"weights from quantization_config ({quantized.method}): {quantized.total_bytes:,} B as the checkpoint"
            f" stores them; " + "; ".join(quantized.assumptions[:3])
        )
    if summary is None:
        assert config_bytes is not None
        return CheckpointWeights(config_bytes, precision, tuple(notes))
    try:
        given = checkpoint_bytes(summary)
    except QuantizationConfigError as exc:
        raise ValueError(str(exc)) from None
    notes.append(f"weights from model.checkpoint: {given.total_bytes:,} B (exact)")
    implied = config_bytes if config_bytes is not None else parameter_count(spec).total * 2
    gap = (given.total_bytes - implied) / implied if implied else 0.0
    if abs(gap) > CONTRADICTION:
        what = "quantization_config" if config_bytes is not None else "the config's parameters at 2 B (bf16)"
        notes.append(
            f"model.checkpoint ({given.total_bytes:,} B) contradicts {what} ({implied:,} B) by {gap:+.1%}:"
            " the checkpoint is taken as the truth; check that the config and the checkpoint are the same model"
        )
    return CheckpointWeights(given.total_bytes, precision, tuple(notes))
