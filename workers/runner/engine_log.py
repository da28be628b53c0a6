"""What the engine-log parsers share (``vllm_log``, ``sglang_log``): how much of a log they read.

A serving engine's log can grow without bound (a request line per request, a traceback per rank); the
start-up report is at its head and the fatal error at its tail, so a very long log is read as its first
:data:`HEAD_CHARS` and its last ``MAX_LOG_CHARS − HEAD_CHARS`` characters, and the report says so.
Pure: standard library only, no I/O.
"""

from __future__ import annotations

#: Longest log read: the head (where the start-up report is) and the tail (where the fatal error is).
MAX_LOG_CHARS = 4_000_000
HEAD_CHARS = 3_000_000


def bounded_log(log_text: object, warnings: list[str]) -> str | None:
    """The part of the log a parser reads (None when it is not text); what was left out goes to ``warnings``."""
    if not isinstance(log_text, str):
        warnings.append("the log is not text")
        return None
    if len(log_text) <= MAX_LOG_CHARS:
        return log_text
    warnings.append(
        f"the log has {len(log_text)} characters: read its first {HEAD_CHARS} and last {MAX_LOG_CHARS - HEAD_CHARS}"
    )
    return log_text[:HEAD_CHARS] + "\n" + log_text[-(MAX_LOG_CHARS - HEAD_CHARS) :]
