"""Request parsers that refuse NUL characters, naming the field.

PostgreSQL text and jsonb cannot hold a NUL, and no vramplan field needs one: refusing it here turns
what would be a database error (a 500) into a 400 that says where it was.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from rest_framework.exceptions import ParseError
from rest_framework.parsers import FormParser, JSONParser, MultiPartParser

NUL = "\x00"


def _nul_paths(value: Any, path: str = "") -> Iterator[str]:
    if isinstance(value, str):
        if NUL in value:
            yield path or "body"
    elif isinstance(value, dict):
        for key, item in value.items():
            child = f"{path}.{key}" if path else str(key)
            if NUL in str(key):
                yield child
            yield from _nul_paths(item, child)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _nul_paths(item, f"{path}.{index}" if path else str(index))


def reject_nul(data: Any) -> Any:
    fields = list(_nul_paths(data))
    if fields:
        raise ParseError(f"NUL characters are not allowed (in {', '.join(fields[:5])}).")
    return data


class NulSafeJSONParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):  # type: ignore[no-untyped-def]
        return reject_nul(super().parse(stream, media_type, parser_context))


class NulSafeFormParser(FormParser):
    def parse(self, stream, media_type=None, parser_context=None):  # type: ignore[no-untyped-def]
        parsed = super().parse(stream, media_type, parser_context)
        reject_nul(dict(parsed.lists()))
        return parsed


class NulSafeMultiPartParser(MultiPartParser):
    def parse(self, stream, media_type=None, parser_context=None):  # type: ignore[no-untyped-def]
        parsed = super().parse(stream, media_type, parser_context)
        reject_nul(dict(parsed.data.lists()))
        return parsed
