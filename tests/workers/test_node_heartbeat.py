"""node_heartbeat_record: an inventory becomes the node's row, matched to a configuration when clear."""

from __future__ import annotations

import socket
from dataclasses import replace
from datetime import timedelta

import pytest
from django.utils import timezone

from catalog.choices import ConfigurationKind, CpuArchitecture, ProbeKind
from catalog.models import Configuration, Node
from tests.factories import AcceleratorFactory, ArchitectureFactory, ConfigurationFactory
from workers import agent, tasks
from workers.services import node_configuration_match, node_heartbeat_record

from .inventories import H100_TOTAL_BYTES, RESERVED_BYTES, gpu, host_inventory, nvml_inventory

pytestmark = pytest.mark.django_db


def cpu_configuration(
    slug: str = "cpu", architecture: str = CpuArchitecture.X86_64, vcpus: int = 192, ram: int = 2 * 10**12
):
    """A CPU-only configuration; by default the host of ``host_inventory()`` (192 logical CPUs, 2 TB)."""
    return ConfigurationFactory(
        slug=slug, kind=ConfigurationKind.CPU, accelerator=None, device_count=1, nvlink_domain_size=1,
        host_cpu_architecture=architecture, driver_version="", vcpus=vcpus, host_ram_bytes=ram,
    )  # fmt: skip


def test_gpu_node_is_recorded_with_its_verified_memory() -> None:
    inventory = nvml_inventory(gpu(0), gpu(1, total_bytes=H100_TOTAL_BYTES - 2**20))
    before = timezone.now()

    node = node_heartbeat_record("gpu-node-a", inventory)

    node.refresh_from_db()
    assert node.probe == ProbeKind.NVML
    assert node.hostname == "gpu-box-7"
    assert node.device_count == 2
    # the smallest device's total less the driver's reserve (nvmlMemory_v2_t reports it)
    assert node.verified_usable_memory_bytes == H100_TOTAL_BYTES - 2**20 - RESERVED_BYTES
    assert node.inventory["usable_memory_basis"] == "total-reserved"
    assert node.inventory["usable_memory_bytes"] == node.verified_usable_memory_bytes
    assert node.inventory["nvml"]["devices"][0]["usable_memory_bytes"] == H100_TOTAL_BYTES - RESERVED_BYTES
    assert node.driver_version == "550.54.15"
    assert node.cuda_driver_version == "12.4"
    assert node.last_heartbeat_at >= before
    assert node.inventory == inventory.as_dict()
    assert node.inventory["nvml"]["devices"][1]["uuid"] == "GPU-fa4e0000-0000-4000-8000-000000000001"
    assert node.configuration is None  # no catalog


def test_driver_before_r510_gives_the_total_and_says_so() -> None:
    """The v1 memory struct has no reserve apart: the usable figure is the total, labelled as such."""
    node = node_heartbeat_record("old-driver", nvml_inventory(gpu(0, memory_info_version=1), driver="470.256.02"))

    node.refresh_from_db()
    assert node.verified_usable_memory_bytes == H100_TOTAL_BYTES
    assert node.inventory["usable_memory_basis"] == "total (driver before R510 reports no reserve)"


def test_host_node_is_labelled_and_has_no_gpu_figures() -> None:
    node = node_heartbeat_record("cpu-node", host_inventory())

    node.refresh_from_db()
    assert node.probe == ProbeKind.HOST
    assert node.device_count == 0
    assert node.verified_usable_memory_bytes is None
    assert node.inventory["usable_memory_basis"] is None
    assert node.driver_version == ""
    assert node.cuda_driver_version == ""
    assert node.inventory["probe"] == "host"
    assert node.inventory["nvml_unavailable_reason"].startswith("NVML library")


def test_heartbeat_updates_the_node_and_keeps_its_configuration() -> None:
    first = node_heartbeat_record("gpu-node-a", nvml_inventory(gpu(0)))
    staff_choice = ConfigurationFactory(device_count=4, nvlink_domain_size=4)
    Node.objects.filter(pk=first.pk).update(configuration=staff_choice)

    second = node_heartbeat_record("gpu-node-a", nvml_inventory(gpu(0), gpu(1), driver="560.35.03"))

    assert second.pk == first.pk
    assert Node.objects.count() == 1
    second.refresh_from_db()
    assert second.device_count == 2
    assert second.driver_version == "560.35.03"
    assert second.last_heartbeat_at > first.last_heartbeat_at
    assert second.configuration == staff_choice


def test_new_gpu_node_matches_the_one_configuration_with_its_count_and_memory() -> None:
    h100 = AcceleratorFactory(name="H100 SXM5 80GB", marketed_memory_bytes=80 * 10**9)
    expected = ConfigurationFactory(accelerator=h100, device_count=2, nvlink_domain_size=2)
    ConfigurationFactory(accelerator=h100, device_count=8)  # other count
    ConfigurationFactory(  # same count, 94 GB: more than 7% away from 85.5e9
        accelerator=AcceleratorFactory(marketed_memory_bytes=94 * 10**9), device_count=2, nvlink_domain_size=2
    )

    node = node_heartbeat_record("gpu-node-a", nvml_inventory(gpu(0), gpu(1)))

    assert node.configuration == expected


def test_catalog_usable_memory_is_preferred_to_marketed() -> None:
    # marketed 100 GB is 14% away, but the catalog's verified usable figure equals NVML's total
    accelerator = AcceleratorFactory(marketed_memory_bytes=100 * 10**9, usable_memory_bytes=H100_TOTAL_BYTES)
    expected = ConfigurationFactory(accelerator=accelerator, device_count=1, nvlink_domain_size=1)

    assert node_heartbeat_record("n", nvml_inventory(gpu(0))).configuration == expected


def test_ambiguous_match_leaves_configuration_empty() -> None:
    h100 = AcceleratorFactory(marketed_memory_bytes=80 * 10**9)
    # same count, memory, capability and driver branch: nothing left to tell them apart (SXM vs PCIe)
    ConfigurationFactory(accelerator=h100, device_count=2, nvlink_domain_size=2, driver_version="550.54.15")
    ConfigurationFactory(accelerator=h100, device_count=2, nvlink_domain_size=2, driver_version="550.163.01")

    assert node_heartbeat_record("gpu-node-a", nvml_inventory(gpu(0), gpu(1))).configuration is None


def test_host_node_matches_the_cpu_configuration() -> None:
    ConfigurationFactory(device_count=1, nvlink_domain_size=1)  # a GPU configuration is never a CPU match
    cpu = cpu_configuration()

    assert node_heartbeat_record("cpu-node", host_inventory()).configuration == cpu


def test_host_node_with_several_cpu_configurations_matches_by_architecture() -> None:
    cpu_configuration("cpu-x86")
    arm = cpu_configuration("cpu-arm", CpuArchitecture.AARCH64)

    assert node_heartbeat_record("arm-node", host_inventory("aarch64")).configuration == arm


def test_a_host_node_is_not_counted_as_a_cpu_configuration_it_is_not() -> None:
    # the case: 2 vCPUs and 25 GB registered as the catalog's 16-vCPU, 64 GiB configuration
    cpu_configuration("cpu-x86-16vcpu", vcpus=16, ram=64 * 2**30)
    small = host_inventory()
    small = replace(small, host=replace(small.host, logical_cpus=2, usable_cpus=2, ram_total_bytes=25 * 10**9))
    assert node_heartbeat_record("small-node", small).configuration is None
    # its own figures match: the vCPUs exactly, the RAM within 7 % (MemTotal is a little under what is sold)
    own = cpu_configuration("cpu-x86-2vcpu", vcpus=2, ram=24 * 2**30)
    assert node_configuration_match(small) == own
    assert node_configuration_match(replace(small, host=replace(small.host, ram_total_bytes=20 * 10**9))) is None


def test_localconfiguration_adds_the_configuration_this_machine_is_once(capsys) -> None:
    from django.core.management import call_command

    from workers.probes.host import probe_host

    host = probe_host()
    cpu_configuration("cpu-other", host.architecture, vcpus=host.logical_cpus + 14, ram=64 * 2**30)  # not this one
    call_command("localconfiguration")
    slug = capsys.readouterr().out.strip()
    added = Configuration.objects.get(slug=slug)
    assert (added.kind, added.vcpus, added.host_ram_bytes) == ("cpu", host.logical_cpus, host.ram_total_bytes)
    assert node_heartbeat_record("this-machine", replace(host_inventory(), host=host)).configuration == added
    call_command("localconfiguration")  # idempotent: the same one, found by the matching rule
    assert capsys.readouterr().out.strip() == slug and Configuration.objects.filter(kind="cpu").count() == 2


def test_a_bad_node_name_is_refused() -> None:
    with pytest.raises(ValueError, match="VRAMPLAN_NODE_NAME"):
        node_heartbeat_record("x" * 129, host_inventory())


def test_node_name_comes_from_settings_or_the_hostname(settings) -> None:
    settings.VRAMPLAN_NODE_NAME = "rack-3-node-2"
    assert agent.node_name() == "rack-3-node-2"
    settings.VRAMPLAN_NODE_NAME = ""
    assert agent.node_name() == socket.gethostname()


def test_task_records_this_machine(settings) -> None:
    """The Celery task, run in-process: probe this machine, record it under VRAMPLAN_NODE_NAME."""
    settings.VRAMPLAN_NODE_NAME = "task-node"

    result = tasks.node_heartbeat.apply().get()

    node = Node.objects.get(name="task-node")
    assert result == {"node": "task-node", "probe": node.probe, "device_count": node.device_count}
    assert node.inventory["host"]["hostname"] == socket.gethostname()


def test_compute_capability_tells_a100_from_h100() -> None:
    """Both are "80 GB" within 7%; NVML's compute capability (9.0 here) is exact and separates them."""
    ampere = ArchitectureFactory(compute_capability_major=8, compute_capability_minor=0)
    hopper = ArchitectureFactory(compute_capability_major=9, compute_capability_minor=0)
    ConfigurationFactory(accelerator=AcceleratorFactory(architecture=ampere), device_count=2, nvlink_domain_size=2)
    h100 = ConfigurationFactory(
        accelerator=AcceleratorFactory(architecture=hopper), device_count=2, nvlink_domain_size=2
    )

    assert node_heartbeat_record("gpu-node-a", nvml_inventory(gpu(0), gpu(1))).configuration == h100


def test_driver_branch_breaks_a_tie() -> None:
    h100 = AcceleratorFactory(marketed_memory_bytes=80 * 10**9)
    ConfigurationFactory(accelerator=h100, device_count=2, nvlink_domain_size=2, driver_version="535.247.01")
    r550 = ConfigurationFactory(accelerator=h100, device_count=2, nvlink_domain_size=2, driver_version="550.163.01")

    node = node_heartbeat_record("gpu-node-a", nvml_inventory(gpu(0), gpu(1), driver="550.54.15"))

    assert node.configuration == r550


def test_dispatch_probes_a_silent_node_only_when_nothing_waits_in_its_queue(monkeypatch) -> None:
    """Live nodes get a heartbeat every period; a silent one only while its queue is empty, so a gone node's
    queue holds at most one probe, and a node whose heartbeats failed for a while is asked again.

    The broker's side (what waits, what expires) is checked against Redis in test_worker_heartbeat.
    """
    period_s = tasks.heartbeat_period_s()
    limit = timedelta(seconds=tasks.SILENT_AFTER_PERIODS * period_s)
    now = timezone.now()
    Node.objects.create(name="fresh", last_heartbeat_at=now)
    Node.objects.create(name="almost-silent", last_heartbeat_at=now - limit + timedelta(seconds=30))
    Node.objects.create(name="silent-empty", last_heartbeat_at=now - limit - timedelta(seconds=1))
    Node.objects.create(name="silent-waiting", last_heartbeat_at=now - timedelta(days=3))
    Node.objects.create(name="never-heard", last_heartbeat_at=None)
    waiting = {"node.almost-silent": 2, "node.silent-waiting": 1}  # a live node is sent one all the same
    sent: list[tuple[str, float | None, float]] = []

    def apply_async(*args, queue, expires, **kwargs):
        sent.append((queue.name, queue.expires, expires))

    monkeypatch.setattr(tasks.node_heartbeat, "apply_async", apply_async)
    monkeypatch.setattr(tasks, "messages_waiting", lambda channel, queue: waiting.get(queue.name, 0))

    assert tasks.node_heartbeat_dispatch.apply().get() == 4

    queue_expires = tasks.SILENT_AFTER_PERIODS * period_s
    assert sorted(sent) == [
        ("node.almost-silent", queue_expires, period_s),
        ("node.fresh", queue_expires, period_s),
        ("node.never-heard", queue_expires, period_s),
        ("node.silent-empty", queue_expires, period_s),
    ]


def test_node_queue_expires_after_k_periods_and_routes_like_celerys_own(settings) -> None:
    settings.CELERY_BEAT_SCHEDULE = {"node-heartbeat": {"task": "x", "schedule": 20.0}}

    queue = tasks.node_queue_declaration("gpu-node-a")

    assert queue.name == queue.routing_key == queue.exchange.name == "node.gpu-node-a"
    assert queue.exchange.type == "direct"
    assert queue.expires == tasks.SILENT_AFTER_PERIODS * 20.0


def test_matching_reads_candidates_in_one_query(django_assert_num_queries) -> None:
    """Tied candidates reach the driver-branch step, which reads each one's vendor: no query per candidate."""
    h100 = AcceleratorFactory(marketed_memory_bytes=80 * 10**9)
    for driver in ("535.247.01", "550.163.01", "560.35.03", "570.86.10"):
        ConfigurationFactory(accelerator=h100, device_count=2, nvlink_domain_size=2, driver_version=driver)

    with django_assert_num_queries(1):
        match = node_configuration_match(nvml_inventory(gpu(0), gpu(1), driver="550.54.15"))

    assert match is not None
    assert match.driver_version == "550.163.01"


def test_an_unreadable_driver_version_breaks_no_tie() -> None:
    h100 = AcceleratorFactory(marketed_memory_bytes=80 * 10**9)
    ConfigurationFactory(accelerator=h100, device_count=2, nvlink_domain_size=2, driver_version="535.247.01")
    ConfigurationFactory(accelerator=h100, device_count=2, nvlink_domain_size=2, driver_version="550.163.01")

    assert node_configuration_match(nvml_inventory(gpu(0), gpu(1), driver="unknown")) is None
