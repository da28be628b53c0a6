"""Library workspaces and communication buffers, by architecture and parallel plan.

cuBLAS and cuBLASLt: one workspace each per (handle, stream), sized by PyTorch from the compute capability
(pytorch/pytorch@26a3905 aten/src/ATen/cuda/CublasHandlePool.cpp). The engine counts one pair, the
compute stream. NCCL: buffers per communicator; each parallel dimension of degree > 1 (tensor, pipeline,
data) is one communicator. ZeRO-3's gathered layers are in `training_stage.py`. Sources and quotes:
`budgets/engine/CUDA_TERMS.md`.
"""

from __future__ import annotations

from functools import lru_cache

from ..budget import ZERO, Range
from .runtime import architecture

MB = 10**6
MIB = 2**20

# parseChosenWorkspaceSize(): "/* :4096:2:16:8 default, 32MiB for Hopper */"
#   default_size = sm90 ? 4096 * 8 * 1024 : 4096 * 1024 * 2 + 16 * 1024 * 8
CUBLAS_DEFAULT = 4096 * 1024 * 2 + 16 * 1024 * 8  # 8,519,680 B (pytorch#95668 saw exactly this left allocated)
CUBLAS_32MIB = 4096 * 8 * 1024  # Hopper (sm_90); Blackwell (sm_100/120) too since pytorch PR #175344
CUBLAS_WORKSPACE: dict[str, Range] = {
    "hopper": Range.exact(CUBLAS_32MIB),
    "blackwell": Range(CUBLAS_DEFAULT, CUBLAS_32MIB, CUBLAS_32MIB),  # 8 MiB before PR #175344, 32 MiB after
}
# parseCUDABlasLtWorkspaceSize(): "size_t workspace_size = 1024; /* default size in KiB according to #73328 */"
CUBLASLT_DEFAULT = 1024 * 1024
# PR #120925 (merged 2024-03, reverted "a few times" since, pytorch#139300) used the cuBLAS recommendation:
# "the recommended workspace size for Hopper is 32 MiB and for the rest architectures 4 MiB"
CUBLASLT_RAISED_OTHER = 4 * MIB

# NCCL per communicator on one device (NVIDIA/nccl#964, 4×A100 NVLink, after a 4 MB all-reduce):
# "for group with only 2 devices, it requires 544 MB. And for group with more than 2 devices, it requires
# 688 MB"; NVIDIA/nccl#864: "when an NCCL communicator is established and allreduce communication is
# performed, the memory occupies about 1.6GB"
NCCL_PAIR = 544 * MB
NCCL_GROUP = 688 * MB
NCCL_HIGH = 1600 * MB


@lru_cache(maxsize=256)
def cublas(device: str, device_name: str | None = None, compute_capability: tuple[int, int] | None = None) -> Range:
    """cuBLAS + cuBLASLt workspaces of one (handle, stream) pair on this device's architecture."""
    if device == "cpu":
        return ZERO
    arch = architecture(device_name, compute_capability)
    if arch.known:
        blas = CUBLAS_WORKSPACE.get(arch.family, Range.exact(CUBLAS_DEFAULT))
    else:
        blas = Range(CUBLAS_DEFAULT, CUBLAS_DEFAULT, CUBLAS_32MIB)
    # low: TORCH_CUBLASLT_UNIFIED_WORKSPACE=1 shares the cuBLAS workspace; high: PR #120925's sizes
    lt_high = CUBLASLT_RAISED_OTHER if arch.family in ("ampere", "ada", "turing", "volta") else CUBLAS_32MIB
    return blas + Range(0, CUBLASLT_DEFAULT, lt_high)


def communicators(tensor: int, pipeline: int, data: int, context: int = 1) -> tuple[int, ...]:
    """The sizes of the NCCL communicators one device belongs to: one per parallel degree above 1; under context
    parallelism the data-parallel one spans data × context (FSDP's mesh) and the context ranks have their own."""
    return tuple(size for size in (tensor, pipeline, data * context, context if context > 1 else 1) if size > 1)


@lru_cache(maxsize=256)
def nccl(device: str, tensor: int, pipeline: int, data: int, context: int = 1) -> Range:
    """NCCL buffers of every communicator this device belongs to (nccl#986: "More communicators = more
    memory used")."""
    if device == "cpu":
        return ZERO
    total = ZERO
    for size in communicators(tensor, pipeline, data, context):
        total = total + Range(NCCL_PAIR, NCCL_PAIR if size == 2 else NCCL_GROUP, NCCL_HIGH)
    return total


@lru_cache(maxsize=256)
def library_note(
    device: str,
    device_name: str | None,
    tensor: int,
    pipeline: int,
    data: int,
    compute_capability: tuple[int, int] | None = None,
    context: int = 1,
) -> str:
    """What the workspace component's library part holds, in words."""
    if device == "cpu":
        return "cpu device: no library workspaces"
    arch = architecture(device_name, compute_capability)
    blas = cublas(device, device_name, compute_capability)
    family = arch.family if arch.known else "architecture not known: range over architectures"
    note = f"cuBLAS + cuBLASLt workspaces of the compute stream ({family}): {blas.bytes / MIB:g} MiB"
    comms = communicators(tensor, pipeline, data, context)
    if comms:
        note += f"; NCCL buffers of {len(comms)} communicator(s) of {', '.join(map(str, comms))} devices"
    return note


@lru_cache(maxsize=256)
def attention_backend(device: str, attention: str) -> Range:
    if device == "cpu":
        return ZERO
    if attention == "flash":
        return Range(0, 4 * MIB, 64 * MIB)
    return Range(0, 0, 32 * MIB)


def dequantized_weight(hidden: int, widest: int, d: float) -> float:
    """bitsandbytes' 4-bit linear, for an input of more than one token or one that needs a gradient,
    dequantizes its whole weight to the compute dtype before `linear` (bitsandbytes@a06a0f6 = 0.41.0,
    bitsandbytes/autograd/_functions.py:516 `F.dequantize_4bit(B, state).to(A.dtype)`; the `gemv_4bit`
    path only for one token without grad, :568-574), and again in backward for the input's gradient
    (:547): one decoder matrix (hidden × the widest projection) at a time."""
    return hidden * widest * d


# auto-gptq (v0.5.1, the kernels transformers 4.x loads GPTQ checkpoints with through optimum: optimum v1.14.1
# gptq/quantizer.py:555 `autogptq_post_init(model, use_act_order=self.desc_act)`): exllama (v1) keeps one temp_state
# of max_input_len × the widest in/out features and one temp_dq of the largest quantized matrix, fp16, per device
# (auto_gptq/modeling/_utils.py:306-309, 320-335), max_input_len 2048 with act-order (_const.py:33
# EXLLAMA_DEFAULT_MAX_INPUT_LENGTH), else 1; exllama v2 one scratch per device of the largest module's
# temp_dq_size + temp_fwd_size(2048, 8) (_utils.py:358-366; nn_modules/qlinear/qlinear_exllamav2.py:160-167)
EXLLAMA_MAX_INPUT_LEN = 2048
EXLLAMAV2_MAX_BATCH = 8
FP16 = 2


def exllama_buffers(matrices: tuple[tuple[int, int], ...], act_order: bool) -> int:
    """auto-gptq's exllama (v1) buffers for the quantized (in, out) matrices of a device: temp_state and temp_dq."""
    rows = EXLLAMA_MAX_INPUT_LEN if act_order else 1
    widest = max(max(m) for m in matrices)
    return rows * widest * FP16 + max(i * o for i, o in matrices) * FP16


def exllamav2_scratch(matrices: tuple[tuple[int, int], ...]) -> int:
    """auto-gptq's exllama v2 scratch: the largest module's in × out × 2 + 128 (temp_dq) plus out × 2048 × 8 × 4 + 128
    (temp_fwd), allocated at the first forward and kept (ExLlamaV2DeviceTensors)."""
    return max(i * o * FP16 + 128 + o * EXLLAMA_MAX_INPUT_LEN * EXLLAMAV2_MAX_BATCH * 4 + 128 for i, o in matrices)
