"""Latency and cost of serving a workload, as roofline estimates. Pure: no Django.

Estimates, not measurements, and labelled so:

- prefill time = FLOPs / (dense FLOP/s at the compute precision × matmul efficiency), FLOPs per token =
  2 × active parameters + 4 × layers × attention dim × attended positions (Chowdhery et al. 2022, "PaLM",
  Appendix B: 6N + 12·L·H·Q·T per token for training, of which the forward pass is a third);
- time per output token at the asked concurrency = one decode step, the larger of its memory time
  (bytes read: the weights on the device + the KV of every session, over bandwidth × an achievable
  fraction) and its compute time, plus the tensor-parallel all-reduces (over NVLink, inside the scale-up
  domain), the pipeline's activations passed between stages on different nodes (over one GPU's scale-out NIC),
  and expert parallelism's all-to-all per MoE layer (over NVLink inside the domain; DeepEP's measured RDMA
  latency across domains); none of it overlapped;
- cost per hour is the configuration's price; per million output tokens at the plan's throughput.

Every efficiency is a published measurement, given as low / expected / high; acceptance measurements
correct the expected figure (``measurements.calibration``, view ``ms_per_output_token``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from budgets.engine import ModelSpec, parameter_count
from budgets.engine.parallel import routed_expert_parameters


@dataclass(frozen=True, slots=True)
class Efficiency:
    """A fraction of a peak rate that real kernels reach: low ≤ expected ≤ high (dimensionless)."""

    low: float
    expected: float
    high: float


# Fraction of peak dense FLOP/s that matrix multiplies reach, from Azure's published microbenchmarks
# (github.com/Azure/AI-benchmarking-guide, "Azure Results/ND_H100_v5_results.md" and
# "Azure_Results/ND_A100_v4_results.md"):
#   low      0.33  = FlashAttention-2 on H100, "Flash Attention 2.0 | 327.9" TFLOPS of 989 (long prompts,
#                    where attention dominates);
#   expected 0.615 = cuBLASLt FP8 GEMM 4096×4096×4096 on H100, "1216.9" TFLOPS of 1979 (the GEMM sizes of
#                    a few-thousand-token prompt through a 4096-wide model; the file has no H100 BF16 GEMM);
#   high     0.822 = cuBLASLt FP16 GEMM 16384³ on A100, "256.5" TFLOPS of 312 (the largest GEMMs).
MATMUL_EFFICIENCY = Efficiency(low=0.33, expected=0.615, high=0.822)

# Fraction of peak memory bandwidth one decode step reaches:
#   low      0.557 = gpt-fast Llama-2-70B bf16, 8×A100-80GB tensor parallel, batch 1: "1135.29" GB/s of
#                    2039 (github.com/pytorch-labs/gpt-fast README, "Tensor Parallelism" table);
#   expected 0.685 = gpt-fast Llama-2-7B bf16, 1×A100-80GB (power-limited to 330 W), batch 1: "104.9"
#                    tokens/s, "1397.31" GB/s of 2039 (same README, "Benchmarks" table);
#   high     0.887 = STREAM triad on H100 SXM: "Triad | 2.97" TB/s of 3.35 (Azure ND H100 v5 results,
#                    "HBM Bandwidth"), what a kernel that only streams memory reaches.
DECODE_BANDWIDTH_FRACTION = Efficiency(low=0.557, expected=0.685, high=0.887)

# One small all-reduce among 8 GPUs, seconds: NCCL AllReduce of 1 KB, bus bandwidth "0.07" GB/s on
# ND H100 v5 and "0.04" GB/s on ND A100 v4 (the Azure results above, "NCCL Bandwidth"); time = size /
# algbw, algbw = busbw × n / (2(n − 1)) (NCCL's docs/PERFORMANCE.md): 25.6 µs (H100), 44.8 µs (A100).
ALL_REDUCE_LATENCY_S = 25.6e-6
ALL_REDUCE_LATENCY_HIGH_S = 44.8e-6
# Megatron-LM tensor parallelism all-reduces twice per transformer layer in the forward pass
# (Shoeybi et al. 2019, "Megatron-LM", §3: the MLP block and the self-attention block each need one).
ALL_REDUCES_PER_LAYER = 2

# Expert parallelism's all-to-all in one decode step, per MoE layer: DeepEP's low-latency dispatch + combine
# (github.com/deepseek-ai/DeepEP docs/legacy.md at 0297fc8, "Low-latency kernels with pure RDMA": H800, one CX7
# InfiniBand 400 Gb/s NIC per GPU, 128 tokens per batch, 7168 hidden, top-8 experts, FP8 dispatch, BF16 combine),
# microseconds by EP size: dispatch 77 / 118 / 155 / 173 / 192 / 194, combine 114 / 195 / 273 / 314 / 369 / 360.
# An EP size between two rows takes the larger one's figure; below 8, the EP 8 row (measured over RDMA: an NVLink
# path is faster, so this is the slow end there); above 256, the 256 row. More than 128 tokens per rank scale it.
ALL_TO_ALL_US = {8: 77 + 114, 16: 118 + 195, 32: 155 + 273, 64: 173 + 314, 128: 192 + 369, 256: 194 + 360}
ALL_TO_ALL_TOKENS = 128  # the tokens per rank of those measurements

# The catalog's tensor-core TFLOPS keys by compute precision (fixtures/catalog/accelerators.json).
TENSOR_TFLOPS_KEY = {"bf16": "bf16_tensor", "fp16": "fp16_tensor", "fp8": "fp8_tensor", "fp32": "tf32_tensor"}


@dataclass(frozen=True, slots=True)
class ModelLoad:
    """What one device of a plan computes and reads, from the budget engine's figures."""

    active_parameters: int  # parameters one token passes through (a MoE model: its routed experts only)
    num_layers: int
    hidden_size: int  # width of the activations the tensor-parallel all-reduces carry
    attention_dim: int  # query heads × head dim
    weight_bytes_per_device: int  # bytes, the budget's weights component
    kv_bytes_per_token_per_device: float  # bytes per token of context, all layers of the device
    expert_weight_bytes_per_device: int = 0  # bytes of routed-expert weights within weight_bytes_per_device
    experts_per_token_fraction: float = 1.0  # experts per token / experts (1.0 for a dense model)
    activation_bytes: int = 2  # bytes per element of the all-reduced activations (bf16)
    expert_group: int = 1  # ranks whose tokens reach this device's experts (the EP size; 1 without expert parallel)


@dataclass(frozen=True, slots=True)
class DeviceSpeed:
    memory_bandwidth_bytes_per_s: float  # peak, bytes/s
    dense_flops_per_s: float  # peak dense tensor FLOP/s at the compute precision
    link_bandwidth_bytes_per_s: float | None = None  # GPU-to-GPU, one direction, bytes/s; None = no link
    scale_out_bytes_per_s: float | None = None  # per GPU between nodes, one direction, bytes/s; None = one node


@dataclass(frozen=True, slots=True)
class Communication:
    """How a plan's devices talk beyond tensor parallelism (``estimate_latency``)."""

    pipeline: int = 1  # pipeline stages of a replica
    pipeline_across_nodes: bool = False  # its stage boundaries cross the scale-out network
    expert: int = 1  # devices the routed experts are split over (expert parallel)
    expert_across_domains: bool = False  # the expert group spans more than one NVLink domain (scale-out all-to-all)
    moe_layers: int = 0
    experts_per_token: int = 1


@dataclass(frozen=True, slots=True)
class Latency:
    """Roofline estimates for one replica serving ``sessions`` sessions together."""

    sessions: int
    tensor_parallel: int
    prefill_ms: float  # one prompt, expected efficiency
    prefill_ms_low: float  # at the high efficiency
    prefill_ms_high: float  # at the low efficiency
    ms_per_output_token: float  # one decode step, expected efficiency
    ms_per_output_token_low: float
    ms_per_output_token_high: float
    all_reduce_ms: float  # the tensor-parallel part of a decode step (0 without tensor parallelism)
    bound: str  # "memory" or "compute": which roof sets the decode step
    decode_bytes_per_device: int  # bytes one decode step reads on each device
    pipeline_transfer_ms: float = 0.0  # a decode step's activations passed between stages over the scale-out network
    all_to_all_ms: float = 0.0  # a decode step's expert-parallel dispatch and combine (DeepEP's measured latency)

    @property
    def output_tokens_per_s(self) -> float:
        """Tokens the replica generates per second while all its sessions decode."""
        return self.sessions * 1000.0 / self.ms_per_output_token


@dataclass(frozen=True, slots=True)
class Cost:
    usd_per_hour: float
    usd_per_million_output_tokens: float
    output_tokens_per_s: float  # the plan's throughput: every replica decoding


def device_speed(
    memory_bandwidth_gbps: float,
    dense_tflops: Mapping[str, float | None],
    compute_precision: str,
    nvlink_bandwidth_gbps: float | None = None,
    scale_out_gbps_per_device: float | None = None,
) -> DeviceSpeed | None:
    """From the catalog's figures (decimal GB/s, TFLOPS, Gbit/s); None when the precision has no tensor-core figure.

    The catalog quotes NVLink as NVIDIA does, bidirectional total; an all-reduce ring sends one way. The scale-out
    figure is per GPU and one way already (a 400 Gb/s NIC: 50 GB/s).
    """
    key = TENSOR_TFLOPS_KEY.get(compute_precision)
    tflops = dense_tflops.get(key) if key else None
    if not tflops or not memory_bandwidth_gbps:
        return None
    link = nvlink_bandwidth_gbps * 1e9 / 2 if nvlink_bandwidth_gbps else None
    scale_out = scale_out_gbps_per_device * 1e9 / 8 if scale_out_gbps_per_device else None
    return DeviceSpeed(memory_bandwidth_gbps * 1e9, tflops * 1e12, link, scale_out)


def model_load(
    spec: ModelSpec,
    *,
    weight_bytes_per_device: int,
    kv_bytes_per_token_per_device: float,
    tensor: int = 1,
    expert_parallel: int = 1,
) -> ModelLoad:
    """A ``ModelLoad`` from the engine's model and its budget's per-device weights and KV bytes per token. Under
    expert parallel e a device holds 1/e of the routed experts and 1/tensor of the rest, and the tokens of all e
    ranks reach its experts."""
    total = parameter_count(spec).total
    expert = routed_expert_parameters(spec)
    idle_experts = expert * (spec.num_experts - spec.experts_per_token) // spec.num_experts if spec.is_moe else 0
    if expert_parallel > 1:
        share = (expert / expert_parallel) / (expert / expert_parallel + (total - expert) / tensor)
    else:
        share = expert / total
    return ModelLoad(
        active_parameters=total - idle_experts,
        num_layers=spec.num_layers,
        hidden_size=spec.hidden_size,
        attention_dim=spec.q_dim,
        weight_bytes_per_device=weight_bytes_per_device,
        kv_bytes_per_token_per_device=kv_bytes_per_token_per_device,
        expert_weight_bytes_per_device=int(weight_bytes_per_device * share),
        experts_per_token_fraction=spec.experts_per_token / spec.num_experts,
        expert_group=expert_parallel,
    )


def decode_bytes(load: ModelLoad, sessions: int, context_tokens: int) -> int:
    """Bytes one decode step reads per device: the weights it touches and the KV of every session.

    The weights count whole, embedding table included, as the bandwidth fraction's source counts them
    (gpt-fast's "Memory Bandwidth" is model size × tokens/s).

    A MoE step reads the experts some session routes to: with uniform, independent routing an expert is
    untouched by all ``sessions`` tokens with probability (1 − k/E)^sessions (under expert parallel, the tokens of
    every rank of the group: (1 − k/E)^(sessions × e)).
    """
    dense = load.weight_bytes_per_device - load.expert_weight_bytes_per_device
    touched = 1.0 - (1.0 - load.experts_per_token_fraction) ** (sessions * load.expert_group)
    kv = load.kv_bytes_per_token_per_device * context_tokens * sessions
    return int(dense + load.expert_weight_bytes_per_device * touched + kv)


def _flops_per_device(load: ModelLoad, tokens: int, attended: float, tensor_parallel: int) -> float:
    """2 × active parameters per token + 4 × layers × attention dim per attended position per token."""
    flops = 2.0 * load.active_parameters * tokens + 4.0 * load.num_layers * load.attention_dim * attended
    return flops / tensor_parallel


def _all_reduce_s(load: ModelLoad, device: DeviceSpeed, tokens: int, tensor_parallel: int, latency_s: float) -> float:
    """The all-reduces of one forward pass over ``tokens`` tokens: latency + ring traffic over the link."""
    if tensor_parallel == 1:
        return 0.0
    if device.link_bandwidth_bytes_per_s is None:
        raise ValueError("tensor parallelism needs the devices' link bandwidth (nvlink_bandwidth_gbps)")
    message = tokens * load.hidden_size * load.activation_bytes
    ring = 2 * (tensor_parallel - 1) / tensor_parallel * message / device.link_bandwidth_bytes_per_s
    return load.num_layers * ALL_REDUCES_PER_LAYER * (latency_s + ring)


def _pipeline_transfer_s(
    load: ModelLoad, device: DeviceSpeed, tokens: int, comm: Communication, latency_s: float
) -> float:
    """Each stage boundary passes the tokens' hidden states once per forward pass: over the scale-out network when
    the stages sit in different NVLink domains (one NCCL send per boundary: latency + bytes over one GPU's NIC);
    inside one domain the transfer is left out (a few hundred kB over NVLink), as before nodes were modelled."""
    if comm.pipeline == 1 or not comm.pipeline_across_nodes:
        return 0.0
    if device.scale_out_bytes_per_s is None:
        raise ValueError("pipeline stages across nodes need the scale-out bandwidth (scale_out_gbps_per_device)")
    message = tokens * load.hidden_size * load.activation_bytes
    return (comm.pipeline - 1) * (latency_s + message / device.scale_out_bytes_per_s)


def all_to_all_us(expert: int) -> float:
    """DeepEP's dispatch + combine for one MoE layer at this EP size, 128 tokens per rank (``ALL_TO_ALL_US``)."""
    sizes = sorted(ALL_TO_ALL_US)
    return float(ALL_TO_ALL_US[next((size for size in sizes if size >= expert), sizes[-1])])


def _all_to_all_s(
    load: ModelLoad, device: DeviceSpeed, comm: Communication, tokens_per_rank: int, latency_s: float
) -> float:
    """Expert parallel's dispatch and combine, every MoE layer. Across NVLink domains: DeepEP's measured RDMA
    latency (``ALL_TO_ALL_US``). Inside one domain: two collectives' latency (the NVLink all-reduce figure above)
    plus each token's hidden state to its experts in FP8 and back in BF16 (3 bytes per element) over the link."""
    if comm.expert == 1 or comm.moe_layers == 0:
        return 0.0
    if comm.expert_across_domains:
        scale = max(1.0, tokens_per_rank / ALL_TO_ALL_TOKENS)
        return comm.moe_layers * all_to_all_us(comm.expert) * 1e-6 * scale
    if device.link_bandwidth_bytes_per_s is None:
        raise ValueError("expert parallel inside a node needs the devices' link bandwidth (nvlink_bandwidth_gbps)")
    moved = tokens_per_rank * comm.experts_per_token * load.hidden_size * 3 * (comm.expert - 1) / comm.expert
    return comm.moe_layers * (2 * latency_s + moved / device.link_bandwidth_bytes_per_s)


def _prefill_s(load: ModelLoad, device: DeviceSpeed, prompt_tokens: int, tp: int, efficiency: float) -> float:
    attended = prompt_tokens * (prompt_tokens + 1) / 2  # causal: token i attends to i positions
    compute = _flops_per_device(load, prompt_tokens, attended, tp) / (device.dense_flops_per_s * efficiency)
    return compute + _all_reduce_s(load, device, prompt_tokens, tp, ALL_REDUCE_LATENCY_S)


@dataclass(frozen=True, slots=True)
class _Rates:
    bandwidth_fraction: float
    matmul_efficiency: float
    all_reduce_latency_s: float


_EXPECTED = _Rates(DECODE_BANDWIDTH_FRACTION.expected, MATMUL_EFFICIENCY.expected, ALL_REDUCE_LATENCY_S)
_FAST = _Rates(DECODE_BANDWIDTH_FRACTION.high, MATMUL_EFFICIENCY.high, ALL_REDUCE_LATENCY_S)
_SLOW = _Rates(DECODE_BANDWIDTH_FRACTION.low, MATMUL_EFFICIENCY.low, ALL_REDUCE_LATENCY_HIGH_S)


def _decode_step_s(
    load: ModelLoad,
    device: DeviceSpeed,
    sessions: int,
    context_tokens: int,
    tp: int,
    rates: _Rates,
    comm: Communication = Communication(),
) -> tuple[float, str]:
    memory = decode_bytes(load, sessions, context_tokens) / (
        device.memory_bandwidth_bytes_per_s * rates.bandwidth_fraction
    )
    flops = _flops_per_device(load, sessions, sessions * context_tokens, tp)
    compute = flops / (device.dense_flops_per_s * rates.matmul_efficiency)
    step = max(memory, compute) + _all_reduce_s(load, device, sessions, tp, rates.all_reduce_latency_s)
    step += _pipeline_transfer_s(load, device, sessions, comm, rates.all_reduce_latency_s)
    step += _all_to_all_s(load, device, comm, sessions, rates.all_reduce_latency_s)
    return step, "memory" if memory >= compute else "compute"


def estimate_latency(
    load: ModelLoad,
    device: DeviceSpeed,
    *,
    sessions: int,
    prompt_tokens: int,
    context_tokens: int,
    tensor_parallel: int = 1,
    communication: Communication = Communication(),
) -> Latency:
    """Prefill of one prompt and one decode step with ``sessions`` sessions of ``context_tokens`` each.

    ``context_tokens`` is what each session's step attends to; the longest request (prompt + output)
    gives the slowest step of the run. ``communication``: the pipeline's transfers across nodes and the experts'
    all-to-all, added to each step (not overlapped with compute: the slow end of what engines do).
    """
    if sessions < 1 or prompt_tokens < 1 or context_tokens < 1 or tensor_parallel < 1:
        raise ValueError("sessions, prompt_tokens, context_tokens and tensor_parallel must be at least 1")
    tp, comm = tensor_parallel, communication
    step, bound = _decode_step_s(load, device, sessions, context_tokens, tp, _EXPECTED, comm)
    return Latency(
        sessions=sessions,
        tensor_parallel=tp,
        prefill_ms=1000 * _prefill_s(load, device, prompt_tokens, tp, MATMUL_EFFICIENCY.expected),
        prefill_ms_low=1000 * _prefill_s(load, device, prompt_tokens, tp, MATMUL_EFFICIENCY.high),
        prefill_ms_high=1000 * _prefill_s(load, device, prompt_tokens, tp, MATMUL_EFFICIENCY.low),
        ms_per_output_token=1000 * step,
        ms_per_output_token_low=1000 * _decode_step_s(load, device, sessions, context_tokens, tp, _FAST, comm)[0],
        ms_per_output_token_high=1000 * _decode_step_s(load, device, sessions, context_tokens, tp, _SLOW, comm)[0],
        all_reduce_ms=1000 * _all_reduce_s(load, device, sessions, tp, ALL_REDUCE_LATENCY_S),
        bound=bound,
        decode_bytes_per_device=decode_bytes(load, sessions, context_tokens),
        pipeline_transfer_ms=1000 * _pipeline_transfer_s(load, device, sessions, comm, ALL_REDUCE_LATENCY_S),
        all_to_all_ms=1000 * _all_to_all_s(load, device, comm, sessions, ALL_REDUCE_LATENCY_S),
    )


def decode_step_ms(
    load: ModelLoad,
    device: DeviceSpeed,
    *,
    sessions: int,
    context_tokens: int,
    tensor_parallel: int = 1,
    communication: Communication = Communication(),
) -> float:
    """The expected time per output token (one decode step), milliseconds."""
    return 1000 * _decode_step_s(load, device, sessions, context_tokens, tensor_parallel, _EXPECTED, communication)[0]


def max_sessions_within(
    load: ModelLoad,
    device: DeviceSpeed,
    *,
    max_ms_per_output_token: float,
    context_tokens: int,
    tensor_parallel: int = 1,
    upper: int = 100_000,
    correction: float = 1.0,
    communication: Communication = Communication(),
) -> int:
    """The most sessions (≤ ``upper``) whose corrected time per output token meets the target; 0 if none.

    ``correction`` multiplies the estimate (the calibration's ms_per_output_token factor). The step time
    grows with sessions, so a bisection finds the boundary.
    """
    tp = tensor_parallel

    def meets(sessions: int) -> bool:
        step = decode_step_ms(
            load,
            device,
            sessions=sessions,
            context_tokens=context_tokens,
            tensor_parallel=tp,
            communication=communication,
        )
        return step * correction <= max_ms_per_output_token

    if not meets(1):
        return 0
    good, bad = 1, upper + 1
    while bad - good > 1:
        middle = (good + bad) // 2
        good, bad = (middle, bad) if meets(middle) else (good, middle)
    return good


def serving_cost(hourly_price_usd: float | None, output_tokens_per_s: float) -> Cost | None:
    """Cost per hour and per million output tokens at ``output_tokens_per_s``; None without a price."""
    if hourly_price_usd is None or output_tokens_per_s <= 0:
        return None
    price = float(hourly_price_usd)
    per_million = price / (output_tokens_per_s * 3600) * 1e6
    return Cost(usd_per_hour=price, usd_per_million_output_tokens=per_million, output_tokens_per_s=output_tokens_per_s)
