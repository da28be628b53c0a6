"""The recommendation endpoints' query parameters. The answer is defined once, as pydantic models
(``recommendations.document``), from which the OpenAPI schema is generated; tests/recommendations/test_api.py checks
that a real answer validates against that schema."""

from __future__ import annotations

from rest_framework import serializers

from catalog.choices import VendorSlug

from ..services import DEFAULT_TOP, MAX_TOP

VENDORS = ", ".join(VendorSlug.values)


class RecommendQuerySerializer(serializers.Serializer):
    """The query parameters of both recommendation endpoints."""

    top = serializers.IntegerField(
        min_value=1,
        max_value=MAX_TOP,
        default=DEFAULT_TOP,
        help_text=f"How many ranked entries to return (1–{MAX_TOP}).",
        error_messages={
            key: f"top must be a whole number from 1 to {MAX_TOP}."
            for key in ("invalid", "min_value", "max_value", "max_string_length")
        },
    )
    vendor = serializers.ChoiceField(
        choices=VendorSlug.choices,
        required=False,
        help_text="Only configurations whose accelerators are this vendor's.",
        error_messages={"invalid_choice": f"{{input}} is not one of the allowed values: {VENDORS}."},
    )
    max_devices = serializers.IntegerField(
        min_value=1,
        max_value=1024,
        required=False,
        help_text="Only configurations of at most this many devices (1–1024).",
        error_messages={
            key: "max_devices must be a whole number from 1 to 1024."
            for key in ("invalid", "min_value", "max_value", "max_string_length")
        },
    )
    max_price = serializers.DecimalField(
        max_digits=12,
        decimal_places=4,
        min_value=0,
        required=False,
        help_text="Only configurations with a catalog price of at most this many USD per hour (≥ 0).",
        error_messages={
            key: "max_price must be a number of USD per hour, at least 0, with at most 4 decimal places."
            for key in (
                "invalid",
                "min_value",
                "max_digits",
                "max_decimal_places",
                "max_whole_digits",
                "max_string_length",
            )
        },
    )
