"""A JSON renderer that passes an answer already encoded through unchanged.

A large answer built from pydantic documents (``recommendations.document``) is encoded by pydantic's own serializer
(``model_dump_json``, compiled) in one step, instead of being dumped to Python values and encoded again by DRF's
``json.dumps`` (a page of ten recommendations is about 70 kB). Any other answer (errors, lists, dicts) is rendered as
DRF does.
"""

from __future__ import annotations

from typing import Any

from rest_framework import renderers


class EncodedJSON(bytes):
    """A JSON document already encoded as UTF-8: a view's ``Response`` data that ``JSONRenderer`` sends as it is."""


class JSONRenderer(renderers.JSONRenderer):
    def render(self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None) -> bytes:
        if isinstance(data, EncodedJSON):
            return bytes(data)
        return super().render(data, accepted_media_type, renderer_context)
