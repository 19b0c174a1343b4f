"""Errors as exceptions, one class per WIT error code.

Every failed host call raises a `KubewasmError` subclass (`NotFound`, `Conflict`, ...), so a
controller can catch exactly what it handles:

    try:
        ctx.create(config_map)
    except AlreadyExists:
        pass

A `KubewasmError` escaping `reconcile`, `finalize` or `released` fails the call with its code
(`Conflict` retries without a Warning Event, the others with one) and its message (cut to the
64 KiB the host takes); the host retries the key with backoff. Any other exception is a bug: the
call traps, a fault, as an uncaught exception or panic is in every SDK.
"""

from __future__ import annotations

from .core import ErrorCode


class KubewasmError(Exception):
    """A failed host call or reconcile: `.code` to branch on, `.message` for humans."""

    code: ErrorCode = ErrorCode.OTHER

    def __init__(self, message: str, code: ErrorCode | str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = ErrorCode.parse(code)

    @staticmethod
    def from_code(code: ErrorCode | str, message: str) -> KubewasmError:
        """The exception of the subclass for `code`."""
        code = ErrorCode.parse(code)
        return _BY_CODE[code](message)

    def __str__(self) -> str:
        return f"{self.code.value}: {self.message}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, KubewasmError) and (self.code, self.message) == (other.code, other.message)

    def __hash__(self) -> int:
        return hash((self.code, self.message))


class NotFound(KubewasmError):
    """The object does not exist."""

    code = ErrorCode.NOT_FOUND


class AlreadyExists(KubewasmError):
    """A create found an object of that name already there."""

    code = ErrorCode.ALREADY_EXISTS


class Conflict(KubewasmError):
    """Another actor changed the object first: re-read, then retry. Raised from `reconcile`,
    it requeues the key without a Warning Event."""

    code = ErrorCode.CONFLICT


class Forbidden(KubewasmError):
    """The manifest does not grant this access, or Kubernetes RBAC refused it."""

    code = ErrorCode.FORBIDDEN


class Invalid(KubewasmError):
    """A malformed request: bad JSON, a missing name, a bad selector, an unserved resource..."""

    code = ErrorCode.INVALID


class Unavailable(KubewasmError):
    """The API server could not be reached, throttled, or this host is a standby. Retry later."""

    code = ErrorCode.UNAVAILABLE


class Other(KubewasmError):
    """Anything else; the message says what."""

    code = ErrorCode.OTHER


_BY_CODE: dict[ErrorCode, type[KubewasmError]] = {cls.code: cls for cls in (NotFound, AlreadyExists, Conflict, Forbidden, Invalid, Unavailable, Other)}


class SettingsError(ValueError):
    """Raised from a controller's `__init__` to refuse loading: the message says what is wrong
    with the settings (any other exception refuses too, prefixed with its type)."""
