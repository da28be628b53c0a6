"""Error responses every endpoint documents, so the schema tells clients what a 4xx looks like."""

from drf_spectacular.utils import OpenApiResponse, inline_serializer
from rest_framework import serializers

ERROR_DETAIL = inline_serializer("ErrorDetail", fields={"detail": serializers.CharField()})
FIELD_ERRORS = inline_serializer(
    "FieldErrors",
    fields={"field_name": serializers.ListField(child=serializers.CharField())},
)

BAD_REQUEST = OpenApiResponse(FIELD_ERRORS, description="Invalid input: each offending field with what was expected.")
UNAUTHORIZED = OpenApiResponse(ERROR_DETAIL, description="No or invalid credentials (token or session).")
FORBIDDEN = OpenApiResponse(ERROR_DETAIL, description="Authenticated, but not allowed (writes need staff).")
NOT_FOUND = OpenApiResponse(ERROR_DETAIL, description="No such object, or not yours.")

READ_ERRORS = {400: BAD_REQUEST, 401: UNAUTHORIZED, 403: FORBIDDEN, 404: NOT_FOUND}
