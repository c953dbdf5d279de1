"""Error classes (issue 15 part 5)."""

from __future__ import annotations

import pytest

import opforge as of
from opforge import errors


def test_every_code_has_its_class_and_builtin_base():
    expected = {
        errors.InvalidArgumentError: (errors.INVALID_ARGUMENT, ValueError),
        errors.NotFoundError: (errors.NOT_FOUND, LookupError),
        errors.UnimplementedError: (errors.UNIMPLEMENTED, NotImplementedError),
        errors.ResourceExhaustedError: (errors.RESOURCE_EXHAUSTED, MemoryError),
        errors.OutOfRangeError: (errors.OUT_OF_RANGE, IndexError),
        errors.FailedPreconditionError: (errors.FAILED_PRECONDITION, RuntimeError),
        errors.PermissionDeniedError: (errors.PERMISSION_DENIED, PermissionError),
        errors.DeadlineExceededError: (errors.DEADLINE_EXCEEDED, TimeoutError),
        errors.AlreadyExistsError: (errors.ALREADY_EXISTS, errors.OpError),
        errors.InternalError: (errors.INTERNAL, errors.OpError),
        errors.CancelledError: (errors.CANCELLED, errors.OpError),
        errors.AbortedError: (errors.ABORTED, errors.OpError),
        errors.UnknownError: (errors.UNKNOWN, errors.OpError),
        errors.UnavailableError: (errors.UNAVAILABLE, errors.OpError),
        errors.DataLossError: (errors.DATA_LOSS, errors.OpError),
        errors.UnauthenticatedError: (errors.UNAUTHENTICATED, errors.OpError),
    }
    for cls, (code, base) in expected.items():
        assert issubclass(cls, errors.OpError)
        assert issubclass(cls, base)
        assert cls.error_code == code
        assert errors.exception_type_from_error_code(code) is cls


def test_a_kernel_error_names_the_op_and_carries_code_and_message():
    with pytest.raises(errors.InvalidArgumentError) as e:
        of.reshape(of.constant([1, 2, 3]), [2, 2])
    err = e.value
    assert err.error_code == errors.INVALID_ARGUMENT
    assert err.op == "Reshape"
    assert "[Op:Reshape]" in err.message
    assert "3 values" in err.message
    # Plain Python code catches it as a ValueError.
    with pytest.raises(ValueError):
        of.reshape(of.constant([1, 2, 3]), [2, 2])


def test_out_of_range_and_not_found():
    with pytest.raises(errors.NotFoundError):
        of.load_op_library("/nonexistent/libnothing.so")
    with pytest.raises(LookupError):
        of.load_op_library("/nonexistent/libnothing.so")


def test_bad_arguments_are_type_or_value_errors_before_any_kernel_runs():
    with pytest.raises(TypeError, match="attr 'keep_dims' expects a bool"):
        of.ops.sum(of.constant([1.0]), [0], keep_dims="yes")
    with pytest.raises(TypeError):
        of.ops.add_v2(of.constant(1.0))  # missing y
    with pytest.raises(TypeError, match="unexpected keyword"):
        of.ops.add_v2(1.0, 2.0, z=3)
    with pytest.raises(TypeError, match="cannot convert 3.5 to an opforge dtype"):
        of.raw_ops.Cast(x=of.constant(1), DstT=3.5)
    with pytest.raises(TypeError, match="unknown dtype name"):
        of.raw_ops.Cast(x=of.constant(1), DstT="float33")
