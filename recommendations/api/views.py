"""Recommendation endpoints: a stored workload's recommendations, and a workload sent in the body.

Thin adapters: the query parameters are validated by ``RecommendQuerySerializer``, the body by the engine's
pydantic ``Workload`` (400s naming each field, see vramplan.api.exception_handler); ``services.recommend_for``
does the rest.
"""

from __future__ import annotations

from typing import Any

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework.exceptions import ParseError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from budgets.engine import Workload as WorkloadSpec
from budgets.models import Workload
from budgets.services import workload_validate
from vramplan.openapi import BAD_REQUEST, NOT_FOUND, RECOMMEND_THROTTLED, UNAUTHORIZED
from vramplan.parsers import NulSafeJSONParser
from vramplan.renderers import EncodedJSON
from vramplan.throttling import RecommendThrottle, one_at_a_time, throttles

from .. import services
from ..document import RecommendationsDocument
from .serializers import RecommendQuerySerializer

DESCRIPTION = (
    "Every catalog configuration judged for the workload and ranked, feasible first: its verdict "
    "(fits, tight, does_not_fit, unsupported) with the reasons, the parallel plan, per-device need against "
    "usable memory, the margin and what set it, the evidence (acceptance measurements you can see, linked to "
    "their order, job and measurement), suggested settings, roofline latency and cost."
)


def _filters(request: Request) -> dict[str, Any]:
    query = RecommendQuerySerializer(data=request.query_params)
    query.is_valid(raise_exception=True)
    return dict(query.validated_data)


class WorkloadRecommendationsView(APIView):
    throttle_classes = throttles(RecommendThrottle)

    @extend_schema(
        operation_id="workloads_recommendations",
        tags=["recommendations"],
        parameters=[RecommendQuerySerializer],
        responses={
            200: RecommendationsDocument,
            400: BAD_REQUEST,
            401: UNAUTHORIZED,
            404: NOT_FOUND,
            429: RECOMMEND_THROTTLED,
        },
        description=DESCRIPTION + " The workload must be yours (staff: anyone's).",
    )
    def get(self, request: Request, id: int) -> Response:
        workload = get_object_or_404(Workload.objects.visible_to(request.user), pk=id)
        filters = _filters(request)
        spec = workload_validate(workload.description)
        with one_at_a_time(request, "recommendation"):
            entries = services.recommend_for(spec, user=request.user, **filters)
        return Response(EncodedJSON(services.recommendations_json(spec, entries, workload.pk)))


class RecommendView(APIView):
    parser_classes = [NulSafeJSONParser]  # a workload is JSON; form bodies would reach pydantic as a QueryDict
    throttle_classes = throttles(RecommendThrottle)

    @extend_schema(
        operation_id="recommend",
        tags=["recommendations"],
        request=WorkloadSpec,
        parameters=[RecommendQuerySerializer],
        responses={200: RecommendationsDocument, 400: BAD_REQUEST, 401: UNAUTHORIZED, 429: RECOMMEND_THROTTLED},
        description=DESCRIPTION + " The workload is not stored.",
    )
    def post(self, request: Request) -> Response:
        if not isinstance(request.data, dict):
            raise ParseError("The body must be a JSON object: a workload description (see /api/docs/).")
        filters = _filters(request)
        spec = workload_validate(request.data)
        with one_at_a_time(request, "recommendation"):
            entries = services.recommend_for(spec, user=request.user, **filters)
        return Response(EncodedJSON(services.recommendations_json(spec, entries)))
