"""factory_boy factories for the catalog (the loaded fixtures cover realistic data; these cover growth)."""

from __future__ import annotations

import factory

from catalog.choices import ConfigurationKind
from catalog.models import Accelerator, Architecture, Configuration, Node, Precision, Vendor


class VendorFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Vendor
        django_get_or_create = ("slug",)

    slug = "nvidia"
    name = "NVIDIA"


class PrecisionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Precision
        django_get_or_create = ("slug",)

    slug = "bf16"


class ArchitectureFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Architecture
        skip_postgeneration_save = True

    vendor = factory.SubFactory(VendorFactory)
    slug = factory.Sequence(lambda n: f"arch-{n}")
    name = factory.Sequence(lambda n: f"Architecture {n}")
    family = "Hopper"
    compute_capability_major = 9
    compute_capability_minor = 0

    @factory.post_generation
    def precisions(self, create, extracted, **kwargs):
        if create:
            for slug in extracted or ("bf16", "fp16"):
                self.precisions.add(PrecisionFactory(slug=slug))


class AcceleratorFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Accelerator

    architecture = factory.SubFactory(ArchitectureFactory)
    slug = factory.Sequence(lambda n: f"gpu-{n}")
    name = factory.Sequence(lambda n: f"GPU {n}")
    marketed_memory_bytes = 80 * 10**9
    source_url = "https://example.org/datasheet"


class ConfigurationFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Configuration

    slug = factory.Sequence(lambda n: f"config-{n}")
    name = factory.Sequence(lambda n: f"Configuration {n}")
    kind = ConfigurationKind.GPU
    accelerator = factory.SubFactory(AcceleratorFactory)
    device_count = 8
    nvlink_domain_size = 8
    vcpus = 192
    host_ram_bytes = 2 * 10**12
    disk_bytes = 30 * 10**12
    driver_version = "550.54.15"


class NodeFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Node

    name = factory.Sequence(lambda n: f"node-{n}")
    configuration = factory.SubFactory(ConfigurationFactory)
