"""`tensor[key]` as TensorFlow computes it (`_slice_helper` in TensorFlow's
`array_ops.py`): basic indexing -- ints, slices (start, stop and step,
negative or None), `...`, `None` (newaxis), tuples of these, integer
scalar tensors and numpy integers as indices or slice bounds -- becomes one
`StridedSlice` op with TensorFlow's `begin_mask`, `end_mask`,
`ellipsis_mask`, `new_axis_mask` and `shrink_axis_mask`. It runs through
`_ops.execute` like every other op: an active `GradientTape` records it
(the gradient is `StridedSliceGrad`), and on a symbolic tensor (or while a
graph is the default) it adds a node to the graph.

Keys TensorFlow's `__getitem__` does not slice with -- lists, non-scalar
integer arrays or tensors, booleans and boolean masks -- are "advanced":
`classify` reports them and the callers decide (an eager `Tensor` indexes a
numpy copy, a `SymbolicTensor` raises TypeError). Anything else that is
not an index (a float, a string) is a TypeError with TensorFlow's message.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from . import dtypes, errors
from ._C import Tensor
from ._symbolic import SymbolicTensor

__all__ = ["slice_helper", "Advanced", "InvalidIndexError", "unsupported_key_error"]

# TensorFlow's message (array_ops._SLICE_TYPE_ERROR).
SLICE_TYPE_ERROR = (
    "Only integers, slices (`:`), ellipsis (`...`), "
    "tf.newaxis (`None`) and scalar tf.int32/tf.int64 tensors are valid indices"
)

_SUPPORTED = (dtypes.int16, dtypes.int32, dtypes.int64)
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1


class InvalidIndexError(errors.InvalidArgumentError, IndexError):  # type: ignore[misc,valid-type]
    """The error of an index StridedSlice rejects (out of range on a known
    dim, too many indices, two ellipses, a zero step): TensorFlow's
    `InvalidArgumentError` (a ValueError), raised from `__getitem__` as an
    `IndexError` too, so that Python's fallback iteration over a tensor
    (`__getitem__(0)`, `(1)`, ... until IndexError) ends where the tensor
    does."""

    error_code = errors.INVALID_ARGUMENT


class Advanced(Exception):
    """Raised by `slice_helper`: `part` of the key is an advanced index (a
    list, a non-scalar integer array or tensor, a bool or boolean mask),
    which StridedSlice cannot express."""

    def __init__(self, part: Any) -> None:
        super().__init__(part)
        self.part = part


def _a(noun: str) -> str:
    return ("an " if noun[0] in "aeiou" else "a ") + noun


def _describe(v: Any) -> str:
    if isinstance(v, (Tensor, SymbolicTensor)):
        return _a(f"{v.dtype.name} tensor of shape {v.shape}")
    if isinstance(v, np.ndarray):
        return _a(f"{v.dtype} array of shape {v.shape}")
    return repr(v)


def _index(v: Any, in_slice: bool) -> tuple[Any, bool]:
    """A single index (or slice bound) `v` as a Python int or an integer
    scalar SymbolicTensor, and whether it asks for int64 begin/end/strides
    (an int64 tensor or numpy int64: TensorFlow then casts all three to
    int64).
    Raises `Advanced` for an advanced index, TypeError for what is not an
    index (TensorFlow's `_check_index`)."""
    if isinstance(v, (bool, np.bool_)):
        # A bool is an int to TensorFlow inside a tuple, a mask to numpy.
        if in_slice:
            return int(v), False
        raise Advanced(v)
    if isinstance(v, numbers.Integral):
        return int(v), isinstance(v, np.int64)
    if type(v).__name__ == "Variable" and hasattr(v, "read_value"):
        v = v.read_value()
    if isinstance(v, (Tensor, SymbolicTensor)):
        shape = v.shape
        if v.dtype is dtypes.bool or (shape is not None and len(shape) > 0):
            if in_slice:
                raise TypeError(f"{SLICE_TYPE_ERROR}, got {_describe(v)} as a slice bound")
            raise Advanced(v)
        if v.dtype not in _SUPPORTED:
            raise TypeError(f"{SLICE_TYPE_ERROR}, got {_describe(v)}")
        wide = v.dtype is dtypes.int64
        return (v if isinstance(v, SymbolicTensor) else int(v)), wide
    if isinstance(v, np.ndarray):
        if v.dtype == np.bool_ or v.ndim > 0:
            if in_slice:
                raise TypeError(f"{SLICE_TYPE_ERROR}, got {_describe(v)} as a slice bound")
            raise Advanced(v)
        if v.dtype.kind in "iu":
            return int(v), v.dtype == np.int64
        raise TypeError(f"{SLICE_TYPE_ERROR}, got {_describe(v)}")
    if isinstance(v, list) and not in_slice:
        raise Advanced(v)
    raise TypeError(f"{SLICE_TYPE_ERROR}, got {v!r}")


class _PlusOne:
    """The end of a symbolic single index `i`: `i + 1`, built (as an op)
    only once the whole key has been checked."""

    __slots__ = ("index",)

    def __init__(self, index: SymbolicTensor) -> None:
        self.index = index


class _Spec:
    """A key parsed as TensorFlow's `_slice_helper` does: one entry of
    begin, end and strides per spec item, and the five masks."""

    def __init__(self, key: Any) -> None:
        items = key if isinstance(key, tuple) else (key,)
        self.begin: list[Any] = []
        self.end: list[Any] = []
        self.strides: list[Any] = []
        self.begin_mask = self.end_mask = self.ellipsis_mask = 0
        self.new_axis_mask = self.shrink_axis_mask = 0
        self.wide = False
        for index, s in enumerate(items):
            bit = 1 << index
            if isinstance(s, slice):
                if s.start is None:
                    self.begin.append(0)
                    self.begin_mask |= bit
                else:
                    self.begin.append(self._bound(s.start))
                if s.stop is None:
                    self.end.append(0)
                    self.end_mask |= bit
                else:
                    self.end.append(self._bound(s.stop))
                self.strides.append(1 if s.step is None else self._bound(s.step))
            elif s is Ellipsis:
                self.begin.append(0)
                self.end.append(0)
                self.strides.append(1)
                self.ellipsis_mask |= bit
            elif s is None:
                self.begin.append(0)
                self.end.append(0)
                self.strides.append(1)
                self.new_axis_mask |= bit
            else:
                i, wide = _index(s, False)
                self.wide |= wide
                self.begin.append(i)
                self.end.append(i + 1 if isinstance(i, int) else _PlusOne(i))
                self.strides.append(1)
                self.shrink_axis_mask |= bit

    def _bound(self, v: Any) -> Any:
        i, wide = _index(v, True)
        self.wide |= wide
        return i

    def attrs(self) -> dict[str, int]:
        return {
            "begin_mask": self.begin_mask,
            "end_mask": self.end_mask,
            "ellipsis_mask": self.ellipsis_mask,
            "new_axis_mask": self.new_axis_mask,
            "shrink_axis_mask": self.shrink_axis_mask,
        }

    def vectors(self) -> tuple[Any, Any, Any]:
        """begin, end and strides: int32 (int64 when an index is an int64
        tensor or does not fit int32, as TensorFlow casts), numpy arrays
        when every entry is known, stacked (`Pack`) with the symbolic
        entries otherwise."""
        values = self.begin + self.end + self.strides
        wide = self.wide or any(
            isinstance(v, int) and not _INT32_MIN <= v <= _INT32_MAX for v in values
        )
        dtype = dtypes.int64 if wide else dtypes.int32
        b, e, s = (self._vector(v, dtype) for v in (self.begin, self.end, self.strides))
        return b, e, s

    @staticmethod
    def _vector(entries: list[Any], dtype: dtypes.DType) -> Any:
        if all(isinstance(v, int) for v in entries):
            return np.array(entries, dtype=dtype.as_numpy_dtype)
        from . import ops, raw_ops
        from ._convert import constant

        parts: list[Any] = []
        for v in entries:
            if isinstance(v, _PlusOne):
                v = v.index + 1
            if isinstance(v, int):
                parts.append(constant(v, dtype=dtype))
            elif v.dtype is not dtype:
                parts.append(raw_ops.Cast(x=v, DstT=dtype))
            else:
                parts.append(v)
        return ops.pack(parts, axis=0)


def slice_helper(tensor: Any, key: Any) -> Any:
    """`tensor[key]` as one `StridedSlice` op (TensorFlow's `_slice_helper`
    for basic keys). Raises `Advanced` for an advanced key, TypeError for
    a key that is not an index (both before any op is added), and
    `InvalidIndexError` (an `InvalidArgumentError`) for an index the op
    rejects."""
    from . import _ops

    spec = _Spec(key)
    begin, end, strides = spec.vectors()
    try:
        return _ops.execute(
            "StridedSlice", [tensor, begin, end, strides], spec.attrs(), "strided_slice"
        )
    except errors.InvalidArgumentError as e:
        err = InvalidIndexError(e.message, e.op)
        err.__dict__.update(e.__dict__)
        raise err from None


def _is_bool(v: Any) -> bool:
    if isinstance(v, (bool, np.bool_)):
        return True
    if isinstance(v, (Tensor, SymbolicTensor)):
        return v.dtype is dtypes.bool
    if isinstance(v, np.ndarray):
        return v.dtype == np.bool_
    return False


def unsupported_key_error(key: Any, part: Any) -> TypeError:
    """The TypeError of an advanced `key` on a symbolic tensor."""
    if _is_bool(part):
        hint = (
            "boolean masks select a data-dependent number of elements; opforge has no "
            "boolean_mask (TensorFlow builds it from Where and GatherV2, and opforge has no "
            "Where op)"
        )
    else:
        hint = (
            "to pick elements by a list or tensor of indices use of.ops.gather_v2(params, "
            "indices, axis) (of.raw_ops.GatherV2; of.ops.gather_nd for index tuples)"
        )
    return TypeError(
        f"{SLICE_TYPE_ERROR}; a symbolic tensor cannot be indexed with {_describe(part)} "
        f"(in key {key!r}): {hint}"
    )
