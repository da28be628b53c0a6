"""Catalog endpoints: readable by any signed-in user, writable by staff holding the model permission (as in
the admin). Thin: FilterSet + serializer for reads; writes validate the body with the serializer and call the
catalog services (``catalog.services.<entity>_create`` / ``_update``), the path the admin and loadcatalog take."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import serializers, viewsets

from vramplan.openapi import CONFLICT, READ_ERRORS

from ..filters import AcceleratorFilterSet, ArchitectureFilterSet, ConfigurationFilterSet, NodeFilterSet
from ..models import Accelerator, Architecture, Configuration, Node
from .permissions import CatalogPermission
from .serializers import AcceleratorSerializer, ArchitectureSerializer, ConfigurationSerializer, NodeSerializer


def _errors(viewset):
    """Document 400/401/403/404 on every action of a catalog viewset."""
    serializer = viewset.serializer_class
    ok = {
        "list": {200: serializer(many=True)},
        "retrieve": {200: serializer},
        "create": {201: serializer},
        "update": {200: serializer},
        "partial_update": {200: serializer},
        "destroy": {204: None, 409: CONFLICT},
    }
    return extend_schema_view(
        **{action: extend_schema(tags=["catalog"], responses={**codes, **READ_ERRORS}) for action, codes in ok.items()}
    )(viewset)


class CatalogViewSet(viewsets.ModelViewSet):
    permission_classes = [CatalogPermission]
    lookup_field = "slug"

    def _write(self, serializer: serializers.BaseSerializer, write: Any) -> None:
        """Call the service; its validation errors (the model's and its own rules) become a 400 per field."""
        try:
            instance = write()
        except DjangoValidationError as exc:
            raise serializers.ValidationError(serializers.as_serializer_error(exc)) from None
        serializer.instance = self.get_queryset().get(pk=instance.pk)  # re-read with annotations

    def perform_create(self, serializer) -> None:
        self._write(serializer, serializer.save)

    def perform_update(self, serializer) -> None:
        self._write(serializer, serializer.save)


@_errors
class ArchitectureViewSet(CatalogViewSet):
    serializer_class = ArchitectureSerializer
    filterset_class = ArchitectureFilterSet
    ordering_fields = ["name", "compute_capability_major"]

    def get_queryset(self) -> QuerySet[Architecture]:
        return Architecture.objects.select_related("vendor").prefetch_related("precisions")


@_errors
class AcceleratorViewSet(CatalogViewSet):
    serializer_class = AcceleratorSerializer
    filterset_class = AcceleratorFilterSet
    ordering_fields = ["name", "marketed_memory_bytes", "memory_bandwidth_gbps", "release_year"]

    def get_queryset(self) -> QuerySet[Accelerator]:
        return Accelerator.objects.select_related("architecture__vendor").prefetch_related("architecture__precisions")


@_errors
class ConfigurationViewSet(CatalogViewSet):
    serializer_class = ConfigurationSerializer
    filterset_class = ConfigurationFilterSet
    ordering_fields = ["name", "device_count", "per_device_memory_bytes", "total_memory_bytes", "hourly_price_usd"]

    def get_queryset(self) -> QuerySet[Configuration]:
        return Configuration.objects.with_memory().select_related("accelerator__architecture__vendor")


@_errors
class NodeViewSet(CatalogViewSet):
    serializer_class = NodeSerializer
    filterset_class = NodeFilterSet
    lookup_field = "name"
    lookup_value_regex = r"[^/]+"
    ordering_fields = ["name", "last_heartbeat_at"]

    def get_queryset(self) -> QuerySet[Node]:
        return Node.objects.select_related("configuration")
