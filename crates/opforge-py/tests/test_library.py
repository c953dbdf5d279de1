"""`load_op_library` with the zero_out example library: TensorFlow's
`zero_out_op_test.py` flows (issue 15 part 4)."""

from __future__ import annotations

import inspect
import copy
import pickle
import types
import shutil

import numpy as np
import pytest

import opforge as of
from opforge import errors


def test_zero_out(zero_out_lib):
    # TensorFlow's ZeroOutTest.testZeroOut.
    result = zero_out_lib.zero_out([5, 4, 3, 2, 1])
    np.testing.assert_array_equal(result.numpy(), [5, 0, 0, 0, 0])
    assert result.dtype == of.int32


def test_zero_out_polymorphic(zero_out_lib):
    for dtype in (np.float32, np.float64, np.int64, np.uint8):
        x = np.array([[1, 2], [3, 4]], dtype=dtype)
        y = zero_out_lib.zero_out(x)
        assert y.dtype == of.as_dtype(dtype)
        np.testing.assert_array_equal(y.numpy(), [[1, 0], [0, 0]])
    with pytest.raises(errors.InvalidArgumentError):
        zero_out_lib.zero_out(np.array([True, False]))


def test_preserve_index(zero_out_lib):
    y = zero_out_lib.zero_out([5, 4, 3, 2, 1], preserve_index=3)
    np.testing.assert_array_equal(y.numpy(), [0, 0, 0, 2, 0])
    with pytest.raises(errors.InvalidArgumentError, match="Need preserve_index >= 0, got -1"):
        zero_out_lib.zero_out([5, 4], preserve_index=-1)
    with pytest.raises(errors.InvalidArgumentError, match="preserve_index out of range"):
        zero_out_lib.zero_out([5, 4], preserve_index=7)


def test_the_other_variants(zero_out_lib):
    np.testing.assert_array_equal(zero_out_lib.zero_out_int32([3, 2, 1]).numpy(), [3, 0, 0])
    outs = zero_out_lib.zero_out_list([[1, 2, 3], [4, 5]])
    assert isinstance(outs, list) and len(outs) == 2
    np.testing.assert_array_equal(outs[0].numpy(), [1, 0, 0])
    np.testing.assert_array_equal(outs[1].numpy(), [4, 0])


def test_the_module(zero_out_lib, zero_out_path):
    assert zero_out_lib.__name__ == "zero_out"
    assert zero_out_lib.__opforge_library__["name"] == "zero_out"
    assert set(zero_out_lib.__all__) >= {"zero_out", "zero_out_int32", "zero_out_list",
                                        "multiple_ins_and_outs"}
    assert str(inspect.signature(zero_out_lib.zero_out)) == "(to_zero, preserve_index=0, name=None)"
    doc = zero_out_lib.zero_out.__doc__
    assert doc.startswith("Zeros out every element of the input except one.")
    assert "to_zero: A `Tensor`. Must be one of the following types: `float32`, `float64`, `int32`" in doc
    assert "preserve_index: An optional `int`. Defaults to `0`." in doc
    assert "A `Tensor`. Has the same type as `to_zero`." in doc
    assert isinstance(zero_out_lib.OP_LIST, bytes) and b"ZeroOut" in zero_out_lib.OP_LIST
    # Loading again (same file, or a copy) returns the same module.
    assert of.load_op_library(zero_out_path) is zero_out_lib
    # The library's ops are in of.ops and of.raw_ops too.
    np.testing.assert_array_equal(of.ops.zero_out([1, 2]).numpy(), [1, 0])
    np.testing.assert_array_equal(of.raw_ops.ZeroOut(to_zero=[1, 2]).numpy(), [1, 0])
    # The module pickles by path, and copies as itself; it is a plain
    # module (CPython reads a module subclass's attributes more slowly).
    assert pickle.loads(pickle.dumps(zero_out_lib)) is zero_out_lib
    assert copy.copy(zero_out_lib) is zero_out_lib
    assert type(zero_out_lib) is types.ModuleType


def test_a_copy_of_the_library_is_the_same_library(zero_out_lib, zero_out_path, tmp_path):
    copy = tmp_path / "libzero_out_copy.so"
    shutil.copy(zero_out_path, copy)
    assert of.load_op_library(copy) is zero_out_lib


def test_declaration_only_ops_have_signatures(zero_out_lib):
    sig = inspect.signature(zero_out_lib.attr_default_example_for_all_types)
    params = sig.parameters
    assert list(params) == ["s", "i", "f", "b", "ty", "sh", "te", "l_empty", "l_int", "name"]
    assert params["s"].default == "foo"
    assert params["i"].default == 0
    assert params["b"].default is True
    assert params["ty"].default is of.int32
    assert params["l_int"].default == [2, 3, 5, 7]
    assert str(inspect.signature(zero_out_lib.same_list_input_example)) == "(in_, name=None)"


def _apply(f, x):
    return f(x).numpy().tolist()


def test_library_ops_run_in_a_multiprocessing_pool(zero_out_lib):
    import multiprocessing

    # A fresh interpreter (spawn): the worker loads the library when it
    # unpickles the function, and the Tensor arguments travel by value.
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(2) as pool:
        results = pool.starmap(
            _apply,
            [(zero_out_lib.zero_out, [1, 2, 3]), (zero_out_lib.zero_out, of.constant([4, 5]))],
        )
    assert results == [[1, 0, 0], [4, 0]]
    # Functions, tensors and dtypes round-trip through pickle.
    f = pickle.loads(pickle.dumps(zero_out_lib.zero_out))
    assert f is zero_out_lib.zero_out
    assert pickle.loads(pickle.dumps(of.ops.add_v2)) is of.ops.add_v2
