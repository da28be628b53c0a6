"""Error responses every endpoint documents, so the schema tells clients what a 4xx looks like."""

from typing import Any

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
THROTTLED = OpenApiResponse(
    ERROR_DETAIL,
    description="Too many requests from this account (API_THROTTLE_RATE per user); the `Retry-After` header and "
    "the detail give the seconds to wait.",
)


def throttled(what: str, variable: str) -> OpenApiResponse:
    """The 429 of an endpoint with its own rate limit (``vramplan.throttling``), naming the limit's variable."""
    return OpenApiResponse(
        ERROR_DETAIL,
        description=f"Too many {what} from this account ({variable} per user, besides API_THROTTLE_RATE); "
        "the `Retry-After` header and the detail give the seconds to wait.",
    )


ESTIMATE_THROTTLED = throttled("estimates", "API_THROTTLE_ESTIMATE_RATE")
RECOMMEND_THROTTLED = throttled("recommendations", "API_THROTTLE_RECOMMEND_RATE")
JOB_START_THROTTLED = throttled("acceptance-job starts", "API_THROTTLE_JOB_START_RATE")

READ_ERRORS = {400: BAD_REQUEST, 401: UNAUTHORIZED, 403: FORBIDDEN, 404: NOT_FOUND, 429: THROTTLED}


RETRY_AFTER_HEADER = {
    "description": "Seconds until the rate limit lets this account through again.",
    "schema": {"type": "integer", "minimum": 1},
}
PAYLOAD_TOO_LARGE = {
    "description": "The body is larger than DATA_UPLOAD_MAX_MEMORY_SIZE (1 MiB unless configured); "
    "the detail names the limit.",
    "content": {
        "application/json": {
            "schema": {"type": "object", "properties": {"detail": {"type": "string"}}, "required": ["detail"]}
        }
    },
}


def document_limits(result: dict[str, Any], generator: Any, **kwargs: Any) -> dict[str, Any]:
    """drf-spectacular postprocessing hook: every 429 has a ``Retry-After`` header, and every operation that
    takes a body may answer 413 (``vramplan.api``)."""
    for operations in result.get("paths", {}).values():
        for operation in operations.values():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue
            responses = operation["responses"]
            if "429" in responses:
                responses["429"].setdefault("headers", {})["Retry-After"] = RETRY_AFTER_HEADER
            if "requestBody" in operation:
                responses.setdefault("413", PAYLOAD_TOO_LARGE)
    return result
