"""What the measuring services refuse with: a request the current state does not allow, named by field."""

from __future__ import annotations

from pydantic import ValidationError


class ServiceError(Exception):
    """A request the current state does not allow; ``field`` names what to change (a 400 or 409)."""

    def __init__(self, message: str, *, field: str = "detail", conflict: bool = False) -> None:
        super().__init__(message)
        self.field = field
        self.conflict = conflict


class ConcurrentStart(ServiceError):
    """Another request changed the order while this one was starting a job on it: nothing was started."""

    def __init__(self, message: str) -> None:
        super().__init__(message, conflict=True)


def validation_message(exc: ValidationError) -> dict[str, list[str]]:
    from budgets.engine import validation_errors

    return validation_errors(exc)
