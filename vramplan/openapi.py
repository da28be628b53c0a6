"""Error responses every endpoint documents, so the schema tells clients what a 4xx looks like."""

from drf_spectacular.utils import OpenApiResponse, inline_serializer
from rest_framework import serializers

ERROR_DETAIL = inline_serializer("ErrorDetail", fields={"detail": serializers.CharField()})

# A 400 is an object keyed by field (dotted paths for nested workload fields) whose values are lists
# of messages, or nested objects for nested serializers; parse errors carry a single "detail" string.
FIELD_ERRORS_SCHEMA = {
    "type": "object",
    "description": "Each offending field (or `detail`) with what was expected.",
    "additionalProperties": {
        "oneOf": [
            {"type": "array", "items": {"type": "string"}},
            {"type": "string"},
            {"type": "object"},
        ]
    },
    "example": {"min_memory": ["'banana' is not a memory size; expected ... e.g. 80GB, 79GiB or 81920MiB."]},
}

BAD_REQUEST = OpenApiResponse(
    FIELD_ERRORS_SCHEMA, description="Invalid input: each offending field with what was expected."
)
UNAUTHORIZED = OpenApiResponse(ERROR_DETAIL, description="No or invalid credentials (token or session).")
FORBIDDEN = OpenApiResponse(ERROR_DETAIL, description="Authenticated, but not allowed (writes need staff).")
NOT_FOUND = OpenApiResponse(ERROR_DETAIL, description="No such object, or not yours.")
CONFLICT = OpenApiResponse(ERROR_DETAIL, description="Still referenced by other objects (named in the message).")
THROTTLED = OpenApiResponse(ERROR_DETAIL, description="Too many requests; retry after the Retry-After header.")

READ_ERRORS = {400: BAD_REQUEST, 401: UNAUTHORIZED, 403: FORBIDDEN, 404: NOT_FOUND, 429: THROTTLED}
