"""`python manage.py localconfiguration`: the CPU-only configuration this machine is, added when the catalog has none.

A worker's host-probe node counts as a configuration only when its inventory is that configuration (same CPU
architecture, vCPUs, RAM within 7 %: ``workers.services.host_configuration_match``); the catalog's CPU entry is a
16-vCPU, 64 GiB machine, so a laptop or a 2-core VM running ``make run`` gets its own entry here, which its local
worker then matches and orders name. Prints the slug; idempotent.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from catalog.choices import ConfigurationKind
from catalog.services import configuration_create
from workers.probes.host import probe_host
from workers.services import host_configuration_match

GIB = 2**30


class Command(BaseCommand):
    help = "Add the CPU-only configuration this machine is to the catalog (when none matches it); print its slug."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--disk-path", default="/", help="where model files live (its size is the disk figure)")

    def handle(self, *args: Any, **options: Any) -> None:
        host = probe_host(options["disk_path"])
        configuration = host_configuration_match(host)
        if configuration is None:
            ram_gib = round(host.ram_total_bytes / GIB)
            configuration = configuration_create(
                slug=f"cpu-{host.architecture.replace('_', '-')}-{host.logical_cpus}vcpu-{ram_gib}gib-local",
                name=f"This machine ({host.logical_cpus} vCPU, {ram_gib} GiB, {host.architecture})",
                kind=ConfigurationKind.CPU,
                device_count=1,
                nvlink_domain_size=1,
                host_cpu_architecture=host.architecture,
                vcpus=host.logical_cpus,
                host_ram_bytes=host.ram_total_bytes,
                disk_bytes=host.disk_total_bytes,
                driver_version="",
                notes=f"Added by `manage.py localconfiguration` from the host probe of {host.hostname}"
                f" ({host.cpu_model}): the configuration this machine's worker matches.",
            )
            self.stderr.write(f"added configuration {configuration.slug} for this machine")
        self.stdout.write(configuration.slug)
