"""CUDA context, library workspaces, NCCL buffers and allocator fragmentation (budgets/engine/CUDA_TERMS.md)."""

from __future__ import annotations

import pytest

from budgets.engine import Workload, estimate
from budgets.engine.budget import ZERO
from budgets.engine.components import fragmentation as frag
from budgets.engine.components import runtime as rt
from budgets.engine.components import workspace as ws

MB, MIB, GIB = 10**6, 2**20, 2**30
H100 = "NVIDIA H100 80GB HBM3"  # torch.cuda.get_device_name() spelling
A100 = "NVIDIA A100-SXM4-80GB"


@pytest.mark.parametrize(
    ("name", "family"),
    [
        ("NVIDIA H100 SXM5 80GB", "hopper"),
        (H100, "hopper"),
        ("NVIDIA GH200 Grace Hopper Superchip (GPU side)", "hopper"),
        ("NVIDIA A100 40GB PCIe", "ampere"),
        (A100, "ampere"),
        ("NVIDIA RTX A6000 48GB", "ampere"),
        ("NVIDIA GeForce RTX 3090", "ampere"),
        ("NVIDIA A10G (AWS G5)", "ampere"),
        ("NVIDIA RTX 6000 Ada Generation 48GB", "ada"),
        ("NVIDIA L40S", "ada"),
        ("NVIDIA GeForce RTX 4090 24GB", "ada"),
        ("NVIDIA B200 (HGX/DGX B200)", "blackwell"),
        ("NVIDIA RTX PRO 6000 Blackwell (Workstation/Server) 96GB", "blackwell"),
        ("NVIDIA T4", "turing"),
        ("NVIDIA V100 SXM2 32GB", "volta"),
        ("AMD Instinct MI300X 192GB", "unknown"),
        (None, "unknown"),
    ],
)
def test_architecture_from_the_device_name(name, family):
    assert rt.architecture(name).family == family


def test_hopper_cublas_workspace_is_pytorchs_32_mib_and_larger_than_amperes():
    hopper, ampere = ws.cublas("cuda", H100), ws.cublas("cuda", A100)
    # cuBLAS 4096 * 8 * 1024 on sm_90, :4096:2:16:8 elsewhere; plus cuBLASLt's 1024 KiB default
    assert hopper.bytes == 32 * MIB + 1 * MIB
    assert ampere.bytes == 8_519_680 + 1 * MIB  # 8,519,680 B is what pytorch#95668 saw left allocated
    assert hopper.bytes > ampere.bytes and hopper.high > ampere.high
    assert ws.cublas("cpu", H100) == ws.cublas("cpu", None) == ZERO


def test_without_a_device_name_the_ranges_cover_every_architecture():
    names = [H100, A100, "NVIDIA L40S", "NVIDIA B200 (HGX/DGX B200)", "NVIDIA T4"]
    unknown_blas = ws.cublas("cuda", None)
    unknown_context, _ = rt.cuda_context("cuda", (12, 4), None)
    for name in names:
        blas = ws.cublas("cuda", name)
        context, _ = rt.cuda_context("cuda", (12, 4), name)
        assert unknown_blas.low <= blas.low and blas.high <= unknown_blas.high, name
        assert unknown_context.low <= context.low and context.high <= unknown_context.high, name


def test_context_matches_the_published_figures():
    # llm-d, vLLM 0.11 TP1 on an H100: "Free memory on device: 78.57/79.18 GiB on startup"
    assert rt.cuda_context("cuda", (12, 4), H100)[0].bytes == round(0.61 * GIB)
    assert rt.cuda_context("cuda", (13, 0), "NVIDIA RTX 6000 Ada Generation")[0].bytes == 426 * MIB
    assert rt.cuda_context("cuda", (12, 8), "NVIDIA GeForce RTX 3090")[0].bytes == 256 * MIB
    # before lazy loading: 666,632,192 B (pytorch#86509) to 1343 MB (transformers docs)
    eager, note = rt.cuda_context("cuda", (11, 6), H100)
    assert (eager.low, eager.high) == (666_632_192, 1343 * MB) and "CUDA < 11.7" in note
    assert rt.cuda_context("cpu", (12, 4), H100)[0] == ZERO


def test_nccl_only_with_a_communicator_and_growing_with_communicators():
    assert ws.nccl("cuda", 1, 1, 1) == ZERO
    assert ws.nccl("cpu", 8, 4, 2) == ZERO
    tp2, tp4 = ws.nccl("cuda", 2, 1, 1), ws.nccl("cuda", 4, 1, 1)
    # NVIDIA/nccl#964 on 4×A100: 544 MB for a 2-device group, 688 MB for more than 2
    assert (tp2.bytes, tp4.bytes) == (544 * MB, 688 * MB)
    tp_pp = ws.nccl("cuda", 2, 2, 1)
    tp_pp_dp = ws.nccl("cuda", 2, 2, 2)
    assert tp2.bytes < tp_pp.bytes < tp_pp_dp.bytes and tp_pp_dp.bytes == 3 * tp2.bytes
    # vLLM 0.11 TP2 on an H100 (llm-d): 79.18 − 77.64 GiB free at the snapshot, less the TP1 start's
    # 0.61 GiB, is 0.93 GiB of NCCL and custom all-reduce buffers: inside one communicator's range
    assert tp2.low <= (79.18 - 77.64 - 0.61) * GIB <= tp2.high


def test_estimate_adds_nccl_only_for_a_parallel_plan(example_workloads):
    payload = dict(example_workloads["train-llama-3.2-1b-full-bf16-adamw"])
    alone = estimate(Workload.model_validate(payload)).per_device.component("workspace")
    payload["parallelism"] = {"data": 2}
    ddp = estimate(Workload.model_validate(payload)).per_device.component("workspace")
    assert "NCCL" not in alone.note and "NCCL buffers of 1 communicator(s) of 2 devices" in ddp.note
    assert ddp.bytes - alone.bytes >= 544 * MB  # DDP gradient buckets come on top


def test_estimate_uses_the_device_names_architecture(example_workloads):
    w = Workload.model_validate(example_workloads["transformers-qwen2.5-7b-dynamic"])
    hopper = estimate(w, device_name=H100).per_device
    ampere = estimate(w, device_name=A100).per_device
    assert hopper.component("runtime").bytes == round(0.61 * GIB)
    assert "hopper" in hopper.component("workspace").note and "ampere" in ampere.component("workspace").note
    assert hopper.component("workspace").bytes > ampere.component("workspace").bytes


def test_fragmentation_is_zero_on_cpu_and_smaller_with_expandable_segments():
    assert frag.fragmentation("cpu", 10 * GIB, 1000, False, False) == ZERO
    plain = frag.fragmentation("cuda", 10 * GIB, 1000, False, False)
    expandable = frag.fragmentation("cuda", 10 * GIB, 1000, True, False)
    assert expandable.bytes < plain.bytes and expandable.high < plain.high


def test_rounding_follows_the_allocators_rules():
    # without expandable segments: < 2 MiB tail per tensor, plus one 20 MiB and one 2 MiB segment
    plain = frag.rounding(100, expandable_segments=False)
    assert plain.low == 0 and plain.high == 100 * (2 * MIB - 512) + 20 * MIB + 2 * MIB
    # expandable: the tails are reused; 512 B per block and one partly mapped page per pool remain
    expandable = frag.rounding(100, expandable_segments=True)
    assert expandable.high == 100 * 512 + 20 * MIB + 2 * MIB
    assert frag.rounding(200, False).bytes == 2 * plain.bytes


def test_expandable_segments_workload_has_less_fragmentation(example_workloads):
    payload = dict(example_workloads["train-llama-3.2-1b-full-bf16-adamw"])
    assert payload["runtime"]["expandable_segments"] is True
    with_es = estimate(Workload.model_validate(payload)).per_device.component("fragmentation")
    payload["runtime"] = {**payload["runtime"], "expandable_segments": False}
    without = estimate(Workload.model_validate(payload)).per_device.component("fragmentation")
    assert with_es.bytes < without.bytes and "expandable_segments" in with_es.note
