"""Budget endpoints: stateless estimate, owner-scoped stored workloads, and the model presets.

Thin adapters: the request body is validated by the engine's pydantic ``Workload`` (errors become
400s naming each field, see vramplan.api.exception_handler); the services do the rest.
"""

from __future__ import annotations

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ParseError, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from budgets.engine.device import NO_DEVICE, Device
from catalog.units import UnitError, parse_device_memory
from vramplan.openapi import BAD_REQUEST, CONFLICT, ESTIMATE_THROTTLED, NOT_FOUND, THROTTLED, UNAUTHORIZED
from vramplan.parsers import NulSafeJSONParser
from vramplan.throttling import EstimateThrottle, throttles

from .. import services
from ..engine import Workload as WorkloadSpec
from ..engine import load_presets
from ..engine.document import BudgetDocument
from ..models import Workload
from .serializers import ModelPresetSerializer, WorkloadSerializer


def _body(request: Request) -> object:
    if not isinstance(request.data, dict):
        raise ParseError("The body must be a JSON object: a workload description (see /api/docs/).")
    return request.data


def _device(request: Request) -> Device:
    """``?device_memory=79.19GiB`` or ``?configuration=SLUG`` (one of them), as bytes; a 400 naming the parameter."""
    size, slug = request.query_params.get("device_memory"), request.query_params.get("configuration")
    if size is not None and slug is not None:
        raise ValidationError({"device_memory": ["give device_memory or configuration, not both"]})
    try:
        if size is not None:
            return Device(parse_device_memory(size))
        if slug is not None:
            return services.configuration_device(slug)
    except UnitError as exc:
        raise ValidationError({"device_memory": [str(exc)]}) from None
    except LookupError as exc:
        raise ValidationError({"configuration": [str(exc)]}) from None
    return NO_DEVICE


class EstimateView(APIView):
    parser_classes = [NulSafeJSONParser]  # a workload is JSON; form bodies would reach pydantic as a QueryDict
    throttle_classes = throttles(EstimateThrottle)

    @extend_schema(
        operation_id="estimate",
        tags=["budgets"],
        request=WorkloadSpec,
        parameters=[
            OpenApiParameter(
                "device_memory",
                str,
                description="Usable memory of one device (79.19GiB, 80GB, bytes): "
                "vLLM workloads then get their KV pool and concurrency in `serving`.",
            ),
            OpenApiParameter(
                "configuration",
                str,
                description="A catalog configuration's slug, for its usable "
                "memory per device (instead of device_memory).",
            ),
        ],
        responses={200: BudgetDocument, 400: BAD_REQUEST, 401: UNAUTHORIZED, 429: ESTIMATE_THROTTLED},
        description="Budget a workload without storing it: per-device memory by component, at the peak.",
    )
    def post(self, request: Request) -> Response:
        device = _device(request)
        spec = services.workload_validate(_body(request))
        return Response(services.budget_estimate(spec, device))


@extend_schema(tags=["budgets"])
class WorkloadViewSet(
    mixins.CreateModelMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    """Your stored workloads (staff see everyone's); each keeps its latest budget."""

    serializer_class = WorkloadSerializer
    parser_classes = [NulSafeJSONParser]
    throttle_classes = throttles(EstimateThrottle)  # POST only: storing a workload runs the estimate too
    filterset_fields = ["task"]
    ordering_fields = ["created_at", "peak_bytes", "name"]

    def get_queryset(self) -> QuerySet[Workload]:
        if getattr(self, "swagger_fake_view", False):  # schema generation has no user
            return Workload.objects.none()
        return Workload.objects.visible_to(self.request.user).select_related("owner")

    @extend_schema(
        request=WorkloadSpec,
        responses={201: WorkloadSerializer, 400: BAD_REQUEST, 401: UNAUTHORIZED, 429: ESTIMATE_THROTTLED},
    )
    def create(self, request: Request, *args, **kwargs) -> Response:
        workload = services.workload_create(owner=request.user, data=_body(request))
        return Response(self.get_serializer(workload).data, status=status.HTTP_201_CREATED)

    @extend_schema(responses={200: WorkloadSerializer(many=True), 400: BAD_REQUEST, 401: UNAUTHORIZED, 429: THROTTLED})
    def list(self, request: Request, *args, **kwargs) -> Response:
        return super().list(request, *args, **kwargs)

    @extend_schema(responses={200: WorkloadSerializer, 401: UNAUTHORIZED, 429: THROTTLED, 404: NOT_FOUND})
    def retrieve(self, request: Request, *args, **kwargs) -> Response:
        return super().retrieve(request, *args, **kwargs)

    @extend_schema(responses={204: None, 401: UNAUTHORIZED, 429: THROTTLED, 404: NOT_FOUND, 409: CONFLICT})
    def destroy(self, request: Request, *args, **kwargs) -> Response:
        return super().destroy(request, *args, **kwargs)

    @extend_schema(
        operation_id="workloads_budget",
        responses={
            200: BudgetDocument,
            401: UNAUTHORIZED,
            429: THROTTLED,
            404: OpenApiResponse(description="Not yours, or none."),
        },
    )
    @action(detail=True, methods=["get"])
    def budget(self, request: Request, pk: str | None = None) -> Response:
        return Response(self.get_object().budget)


@extend_schema(tags=["budgets"])
class ModelPresetViewSet(viewsets.ViewSet):
    """The model presets shipped in fixtures/model_presets.json, with exact parameter counts and sources."""

    lookup_value_regex = r"[a-z0-9][a-z0-9.\-_]*"

    @staticmethod
    def _row(preset) -> dict:
        return {
            "id": preset.id,
            "display_name": preset.display_name,
            "model_type": preset.spec.model_type,
            "parameter_count": preset.parameter_count,
            "hf_repo": preset.hf_repo,
            "source": preset.source,
            "config_verbatim_status": preset.config_verbatim_status,
        }

    @extend_schema(responses={200: ModelPresetSerializer(many=True), 401: UNAUTHORIZED, 429: THROTTLED})
    def list(self, request: Request) -> Response:
        return Response([self._row(p) for p in load_presets().values()])

    @extend_schema(responses={200: ModelPresetSerializer, 401: UNAUTHORIZED, 429: THROTTLED, 404: NOT_FOUND})
    def retrieve(self, request: Request, pk: str | None = None) -> Response:
        preset = load_presets().get(pk or "")
        if preset is None:
            return Response({"detail": f"No model preset {pk!r}."}, status=status.HTTP_404_NOT_FOUND)
        return Response(self._row(preset))
