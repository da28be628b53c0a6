"""Order, acceptance-job, measurement and program endpoints: validate, call one service, serialize.

Orders, jobs and measurements belong to their owner (another user's is a 404; staff see all).
Measurements can also be posted with an order-scoped upload token (``Authorization: Upload <token>``)
so that ``vramplan-measure`` on a GPU box never holds a user's password or API token.
"""

from __future__ import annotations

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotAuthenticated, ParseError
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response

from budgets.services import workload_validate
from recommendations.document import ReasonDocument
from recommendations.services import verdict_for
from vramplan.openapi import BAD_REQUEST, CONFLICT, FORBIDDEN, JOB_START_THROTTLED, NOT_FOUND, THROTTLED, UNAUTHORIZED
from vramplan.parsers import NulSafeJSONParser
from vramplan.permissions import IsStaffWithModelPermission
from vramplan.throttling import JobStartThrottle, throttles

from .. import services
from ..choices import MeasurementSource
from ..document import MeasurementDocument
from ..filters import AcceptanceJobFilterSet, MeasurementFilterSet, OrderFilterSet
from ..models import AcceptanceJob, Measurement, Order, RegisteredProgram
from .serializers import (
    AcceptanceJobSerializer,
    AcceptanceJobStartSerializer,
    MeasurementSerializer,
    OrderSerializer,
    RegisteredProgramSerializer,
    UploadTokenSerializer,
)

ERRORS = {400: BAD_REQUEST, 401: UNAUTHORIZED, 404: NOT_FOUND, 429: THROTTLED}
UPLOAD_KEYWORD = "Upload"


def _jobs() -> QuerySet[AcceptanceJob]:
    return AcceptanceJob.objects.select_related("program", "node", "measurement__node")


@extend_schema_view(
    list=extend_schema(responses={200: OrderSerializer(many=True), **ERRORS}),
    retrieve=extend_schema(responses={200: OrderSerializer, **ERRORS}),
    create=extend_schema(responses={201: OrderSerializer, **ERRORS}),
    destroy=extend_schema(responses={204: None, 409: CONFLICT, **ERRORS}),
)
@extend_schema(tags=["orders"])
class OrderViewSet(
    mixins.CreateModelMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):  # fmt: skip
    """Your orders: a workload on a configuration, decided by a measurement."""

    serializer_class = OrderSerializer
    parser_classes = [NulSafeJSONParser]
    filterset_class = OrderFilterSet  # only your workloads: another user's id is as unknown as a missing one
    ordering_fields = ["created_at", "status"]

    def get_queryset(self) -> QuerySet[Order]:
        if getattr(self, "swagger_fake_view", False):
            return Order.objects.none()
        return Order.objects.visible_to(self.request.user).select_related("owner", "configuration", "workload")

    def perform_create(self, serializer: OrderSerializer) -> None:  # type: ignore[override]
        data = serializer.validated_data
        spec = workload_validate(data["workload"].description)
        entry = verdict_for(spec, data["configuration"].slug, self.request.user)
        serializer.instance = services.order_create(
            owner=self.request.user,
            workload=data["workload"],
            configuration=data["configuration"],
            recommended_verdict=entry.verdict.value if entry is not None else "",
            recommended_reasons=[ReasonDocument.of(reason).dump() for reason in entry.reasons]
            if entry is not None
            else [],
            override_reason=data.get("override_reason", ""),
        )

    def perform_destroy(self, instance: Order) -> None:
        if instance.status == "confirmed":
            raise services.ServiceError("a confirmed order is kept; it cannot be deleted", conflict=True)
        for job in instance.jobs.filter(status__in=["queued", "running"]):
            services.acceptance_job_cancel(job)
        instance.delete()  # its jobs, measurements and timelines go with it (they belong to the owner)

    @extend_schema(request=None, responses={200: OrderSerializer, 409: CONFLICT, **ERRORS})
    @action(detail=True, methods=["post"])
    def confirm(self, request: Request, pk: str | None = None) -> Response:
        """Confirm an accepted order (final)."""
        return Response(self.get_serializer(services.order_confirm(self.get_object())).data)

    @extend_schema(request=None, responses={200: OrderSerializer, 409: CONFLICT, **ERRORS})
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str | None = None) -> Response:
        """Cancel the order and any job of it still queued or running (final)."""
        return Response(self.get_serializer(services.order_cancel(self.get_object())).data)

    @extend_schema(request=None, responses={201: UploadTokenSerializer, **ERRORS})
    @action(detail=True, methods=["post"], url_path="upload-token")
    def upload_token(self, request: Request, pk: str | None = None) -> Response:
        """A new order-scoped upload token for vramplan-measure (the previous one stops working)."""
        order = self.get_object()
        token = services.order_upload_token_issue(order)
        return Response({"token": token, "order": order.pk}, status=status.HTTP_201_CREATED)

    @extend_schema(
        methods=["POST"],
        operation_id="orders_acceptance_jobs_create",
        request=AcceptanceJobStartSerializer,
        responses={
            202: AcceptanceJobSerializer,
            409: OpenApiResponse(AcceptanceJobSerializer, description="No live node: the job, failed as no_node."),
            **ERRORS,
            429: JOB_START_THROTTLED,
        },
    )
    @extend_schema(methods=["GET"], operation_id="orders_acceptance_jobs_list",
                   responses={200: AcceptanceJobSerializer(many=True), **ERRORS})  # fmt: skip
    @action(detail=True, methods=["get", "post"], url_path="acceptance-jobs",
            throttle_classes=throttles(JobStartThrottle))  # fmt: skip
    def acceptance_jobs(self, request: Request, pk: str | None = None) -> Response:
        """Queue an acceptance job on a live node of the order's configuration (POST), or list the order's jobs."""
        order = self.get_object()
        if request.method == "GET":
            return self._page(_jobs().filter(order=order), AcceptanceJobSerializer)
        serializer = AcceptanceJobStartSerializer(data=_body(request))
        serializer.is_valid(raise_exception=True)
        try:
            job = services.acceptance_job_start(order, **serializer.validated_data)
        except services.ConcurrentStart:
            JobStartThrottle().refund(request, self)  # it started nothing: it spends none of the job-start quota
            raise
        code = status.HTTP_409_CONFLICT if job.failure_kind == "no_node" else status.HTTP_202_ACCEPTED
        return Response(AcceptanceJobSerializer(_jobs().get(pk=job.pk)).data, status=code)

    @extend_schema(
        methods=["POST"],
        operation_id="orders_measurements_create",
        request=MeasurementDocument,
        responses={201: MeasurementSerializer, 200: MeasurementSerializer, **ERRORS},
        description="Attach a vramplan-measure result. Authenticate as the owner, or with the order's upload "
        "token (`Authorization: Upload <token>`). The same run (run_id) posted again returns the stored one (200).",
    )
    @extend_schema(methods=["GET"], operation_id="orders_measurements_list",
                   responses={200: MeasurementSerializer(many=True), **ERRORS})  # fmt: skip
    @action(detail=True, methods=["get", "post"], permission_classes=[AllowAny])
    def measurements(self, request: Request, pk: str | None = None) -> Response:
        order = self._order_for_upload(request, pk) if request.method == "POST" else self._owned(request)
        if request.method == "GET":
            rows = Measurement.objects.filter(order=order).select_related("node", "review")
            return self._page(rows, MeasurementSerializer)
        document = MeasurementDocument.model_validate(_body(request))
        measurement, created = services.measurement_record(order, document, source=MeasurementSource.UPLOAD)
        return Response(MeasurementSerializer(measurement).data, status=201 if created else 200)

    def _page(self, rows: QuerySet, serializer: type) -> Response:
        page = self.paginate_queryset(rows)
        return self.get_paginated_response(serializer(page, many=True).data)

    def _owned(self, request: Request) -> Order:
        if not request.user.is_authenticated:
            raise NotAuthenticated()
        return self.get_object()

    def _order_for_upload(self, request: Request, pk: str | None) -> Order:
        header = request.headers.get("Authorization", "")
        if header.startswith(f"{UPLOAD_KEYWORD} "):
            order = Order.objects.filter(pk=pk).first() if pk is not None and _is_id(pk) else None
            token = header[len(UPLOAD_KEYWORD) + 1 :]
            if order is None or not services.order_upload_token_matches(order, token):
                raise NotAuthenticated(services.upload_token_refusal(token, pk))
            return order
        return self._owned(request)


def _is_id(text: str) -> bool:
    """ASCII digits only: ``str.isdigit`` also accepts "¹" and "٣", which ``int`` then refuses (a 500)."""
    return text.isascii() and text.isdigit()


def _body(request: Request) -> dict:
    if not isinstance(request.data, dict):
        raise ParseError("The body must be a JSON object.")
    return request.data


@extend_schema_view(
    list=extend_schema(responses={200: AcceptanceJobSerializer(many=True), **ERRORS}),
    retrieve=extend_schema(responses={200: AcceptanceJobSerializer, **ERRORS}),
)
@extend_schema(tags=["orders"])
class AcceptanceJobViewSet(viewsets.ReadOnlyModelViewSet):
    """Acceptance jobs of your orders: status, progress while it runs, node, and the measurement."""

    serializer_class = AcceptanceJobSerializer
    filterset_class = AcceptanceJobFilterSet
    ordering_fields = ["queued_at", "finished_at"]

    def get_queryset(self) -> QuerySet[AcceptanceJob]:
        if getattr(self, "swagger_fake_view", False):
            return AcceptanceJob.objects.none()
        return _jobs().filter(pk__in=AcceptanceJob.objects.visible_to(self.request.user).values("pk"))

    @extend_schema(request=None, responses={202: AcceptanceJobSerializer, 409: CONFLICT, **ERRORS})
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str | None = None) -> Response:
        """Cancel: a queued job at once; a running one is stopped by its worker (its process group killed)."""
        job = services.acceptance_job_cancel(self.get_object())
        return Response(self.get_serializer(_jobs().get(pk=job.pk)).data, status=status.HTTP_202_ACCEPTED)


@extend_schema_view(
    list=extend_schema(responses={200: MeasurementSerializer(many=True), **ERRORS}),
    retrieve=extend_schema(responses={200: MeasurementSerializer, **ERRORS}),
)
@extend_schema(tags=["orders"])
class MeasurementViewSet(viewsets.ReadOnlyModelViewSet):
    """Measurements of your orders (immutable)."""

    serializer_class = MeasurementSerializer
    filterset_class = MeasurementFilterSet
    ordering_fields = ["created_at"]

    def get_queryset(self) -> QuerySet[Measurement]:
        if getattr(self, "swagger_fake_view", False):
            return Measurement.objects.none()
        return Measurement.objects.visible_to(self.request.user).select_related("node", "review")


PROGRAM_ERRORS = {**ERRORS, 403: FORBIDDEN}


@extend_schema_view(
    list=extend_schema(responses={200: RegisteredProgramSerializer(many=True), **PROGRAM_ERRORS}),
    retrieve=extend_schema(responses={200: RegisteredProgramSerializer, **PROGRAM_ERRORS}),
    create=extend_schema(responses={201: RegisteredProgramSerializer, **PROGRAM_ERRORS}),
    update=extend_schema(responses={200: RegisteredProgramSerializer, **PROGRAM_ERRORS}),
    partial_update=extend_schema(responses={200: RegisteredProgramSerializer, **PROGRAM_ERRORS}),
    destroy=extend_schema(responses={204: None, 409: CONFLICT, **PROGRAM_ERRORS}),
)
@extend_schema(tags=["orders"])
class RegisteredProgramViewSet(viewsets.ModelViewSet):
    """Programs staff registered for acceptance jobs (users choose one by slug; they never send a command).
    Registering one decides what a GPU node runs: it needs the model permission, as in the admin."""

    serializer_class = RegisteredProgramSerializer
    permission_classes = [IsStaffWithModelPermission]
    parser_classes = [NulSafeJSONParser]
    lookup_field = "slug"

    def get_queryset(self) -> QuerySet[RegisteredProgram]:
        return RegisteredProgram.objects.prefetch_related("allowed_configurations")
