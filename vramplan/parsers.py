"""Request parsers that refuse text no field can hold, naming where it was.

PostgreSQL text and jsonb cannot hold a NUL or a lone UTF-16 surrogate (``"\ud800"`` is valid JSON
but not valid UTF-8), and no vramplan field needs either: refusing them here turns what would be a
database error (a 500) into a 400. JSON nested deeper than ``MAX_DEPTH`` is refused too: no
workload or catalog object is deeper than a few levels, and Python's recursion limit is not a
validation rule.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from rest_framework.exceptions import ParseError, ValidationError
from rest_framework.parsers import FormParser, JSONParser, MultiPartParser

NUL = "\x00"
NUL_MESSAGE = "NUL characters and unpaired surrogates are not allowed."
MAX_DEPTH = 32  # nesting levels of objects and lists


def _storable(text: str) -> bool:
    if NUL in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate
        return False
    return True


def _bad_paths(value: Any, path: str = "", depth: int = 0) -> Iterator[str]:
    if depth > MAX_DEPTH:
        raise ParseError(f"The body is nested more than {MAX_DEPTH} levels deep.")
    if isinstance(value, str):
        if not _storable(value):
            yield path or "body"
    elif isinstance(value, dict):
        for key, item in value.items():
            child = f"{path}.{key}" if path else str(key)
            if not _storable(str(key)):
                yield child
            yield from _bad_paths(item, child, depth + 1)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _bad_paths(item, f"{path}.{index}" if path else str(index), depth + 1)


def reject_nul(data: Any) -> Any:
    """Refuse NUL characters and lone surrogates anywhere in ``data``: a 400 keyed by the first five fields
    that hold them (dotted paths, as every other field error), each saying what is not allowed."""
    fields = [f.encode("utf-8", "replace").decode("utf-8").replace(NUL, "\\0") for f in _bad_paths(data)]
    if fields:
        raise ValidationError({field: [NUL_MESSAGE] for field in fields[:5]})
    return data


class NulSafeJSONParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError(f"The body is nested more than {MAX_DEPTH} levels deep.") from None
        return reject_nul(data)


class NulSafeFormParser(FormParser):
    def parse(self, stream, media_type=None, parser_context=None):
        parsed = super().parse(stream, media_type, parser_context)
        reject_nul(dict(parsed.lists()))
        return parsed


class NulSafeMultiPartParser(MultiPartParser):
    def parse(self, stream, media_type=None, parser_context=None):
        parsed = super().parse(stream, media_type, parser_context)
        reject_nul(dict(parsed.data.lists()))
        return parsed
