"""Exceptions with TensorFlow's names (`opforge.errors.InvalidArgumentError`,
...), all subclasses of `OpError`; several also derive from the matching
builtin exception so plain Python code can catch them
(`InvalidArgumentError` is a `ValueError`, `NotFoundError` a `LookupError`).
"""

from __future__ import annotations

from . import _C

__all__ = [
    "OpError", "CancelledError", "UnknownError", "InvalidArgumentError",
    "DeadlineExceededError", "NotFoundError", "AlreadyExistsError",
    "PermissionDeniedError", "ResourceExhaustedError", "FailedPreconditionError",
    "AbortedError", "OutOfRangeError", "UnimplementedError", "InternalError",
    "UnavailableError", "DataLossError", "UnauthenticatedError",
    "OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED",
    "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED",
    "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED",
    "exception_type_from_error_code",
]

OK = 0
CANCELLED = 1
UNKNOWN = 2
INVALID_ARGUMENT = 3
DEADLINE_EXCEEDED = 4
NOT_FOUND = 5
ALREADY_EXISTS = 6
PERMISSION_DENIED = 7
RESOURCE_EXHAUSTED = 8
FAILED_PRECONDITION = 9
ABORTED = 10
OUT_OF_RANGE = 11
UNIMPLEMENTED = 12
INTERNAL = 13
UNAVAILABLE = 14
DATA_LOSS = 15
UNAUTHENTICATED = 16


class OpError(Exception):
    """An error from running an op: `.error_code` (TensorFlow's canonical
    code), `.op` (the op's name, or None), `.message`."""

    error_code = UNKNOWN

    def __init__(self, message, op=None, error_code=None):
        super().__init__(message)
        self.message = message
        self.op = op
        if error_code is not None:
            self.error_code = error_code

    def __str__(self) -> str:
        return self.message


def _make(name, code, *bases, doc):
    cls = type(name, (OpError, *bases), {"error_code": code, "__doc__": doc, "__module__": __name__})
    return cls


CancelledError = _make("CancelledError", CANCELLED, doc="The operation was cancelled.")
UnknownError = _make("UnknownError", UNKNOWN, doc="An error with no better code.")
InvalidArgumentError = _make("InvalidArgumentError", INVALID_ARGUMENT, ValueError,
                             doc="An invalid argument (also a ValueError).")
DeadlineExceededError = _make("DeadlineExceededError", DEADLINE_EXCEEDED, TimeoutError,
                              doc="A deadline passed (also a TimeoutError).")
NotFoundError = _make("NotFoundError", NOT_FOUND, LookupError,
                      doc="Something asked for does not exist (also a LookupError).")
AlreadyExistsError = _make("AlreadyExistsError", ALREADY_EXISTS, doc="Something being created already exists.")
PermissionDeniedError = _make("PermissionDeniedError", PERMISSION_DENIED, PermissionError,
                              doc="Not allowed (also a PermissionError).")
ResourceExhaustedError = _make("ResourceExhaustedError", RESOURCE_EXHAUSTED, MemoryError,
                               doc="Memory or another resource ran out (also a MemoryError).")
FailedPreconditionError = _make("FailedPreconditionError", FAILED_PRECONDITION, RuntimeError,
                                doc="The system is not in the state the operation needs (also a RuntimeError).")
AbortedError = _make("AbortedError", ABORTED, doc="The operation was aborted.")
OutOfRangeError = _make("OutOfRangeError", OUT_OF_RANGE, IndexError,
                        doc="A value past the valid range (also an IndexError).")
UnimplementedError = _make("UnimplementedError", UNIMPLEMENTED, NotImplementedError,
                           doc="Not implemented or not supported (also a NotImplementedError).")
InternalError = _make("InternalError", INTERNAL, doc="An internal error (a bug in opforge or an op library).")
UnavailableError = _make("UnavailableError", UNAVAILABLE, doc="The service is unavailable.")
DataLossError = _make("DataLossError", DATA_LOSS, doc="Unrecoverable data loss or corruption.")
UnauthenticatedError = _make("UnauthenticatedError", UNAUTHENTICATED, doc="Not authenticated.")

_BY_CODE = {
    CANCELLED: CancelledError, UNKNOWN: UnknownError, INVALID_ARGUMENT: InvalidArgumentError,
    DEADLINE_EXCEEDED: DeadlineExceededError, NOT_FOUND: NotFoundError,
    ALREADY_EXISTS: AlreadyExistsError, PERMISSION_DENIED: PermissionDeniedError,
    RESOURCE_EXHAUSTED: ResourceExhaustedError, FAILED_PRECONDITION: FailedPreconditionError,
    ABORTED: AbortedError, OUT_OF_RANGE: OutOfRangeError, UNIMPLEMENTED: UnimplementedError,
    INTERNAL: InternalError, UNAVAILABLE: UnavailableError, DATA_LOSS: DataLossError,
    UNAUTHENTICATED: UnauthenticatedError,
}


def exception_type_from_error_code(code: int) -> type:
    """The exception class of a canonical code."""
    return _BY_CODE.get(code, UnknownError)


_C.set_error_classes(_BY_CODE)
