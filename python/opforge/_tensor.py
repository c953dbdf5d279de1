"""The Python half of `opforge.Tensor` (a native class): what its
`numpy()`, `__array__`, `__repr__`, indexing and operators do. Registered
with the native module by `opforge/__init__.py`."""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _C, dtypes
from ._C import Tensor

# opforge._ops, set by opforge/__init__.py (it imports this module).
_ops: Any = None


def numpy(t: Tensor) -> np.ndarray:
    """A read-only numpy view of `t`'s memory (no copy), or an object array
    of bytes for string tensors."""
    d = t.dtype
    if d is dtypes.string:
        return np.array(t._strings(), dtype=object).reshape(t.shape)
    if d is dtypes.bfloat16:
        bits = np.asarray(memoryview(t))
        npt = d.as_numpy_dtype
        if npt is not None:
            return bits.view(npt)
        # Without ml_dtypes numpy has no bfloat16: widen to float32 (a copy).
        return (bits.astype(np.uint32) << 16).view(np.float32)
    if d.size == 0:
        raise TypeError(f"a {d.name} tensor has no numpy value")
    return np.asarray(memoryview(t))


def array(t: Tensor, dtype=None, copy=None) -> np.ndarray:
    a = numpy(t)
    if dtype is not None and np.dtype(dtype) != a.dtype:
        if copy is False:
            raise ValueError("converting the Tensor to another dtype needs a copy")
        return a.astype(dtype)
    if copy:
        return a.copy()
    return a


def repr_(t: Tensor) -> str:
    try:
        value = repr(numpy(t))
    except TypeError:
        value = "..."
    return f"<opforge.Tensor: shape={t.shape}, dtype={t.dtype.name}, numpy={value}>"


def str_(t: Tensor) -> str:
    try:
        value = str(numpy(t))
    except TypeError:
        value = "..."
    return f"opforge.Tensor({value}, shape={t.shape}, dtype={t.dtype.name})"


def scalar(t: Tensor):
    a = numpy(t)
    if a.size != 1:
        raise ValueError(
            "The truth value (or scalar value) of a Tensor with more than one element is "
            f"ambiguous: it has shape {t.shape}"
        )
    return a.reshape(()).item()


def getitem(t: Tensor, key):
    """`t[key]`: TensorFlow's basic indexing as one `StridedSlice` op
    (recorded by active tapes, so gradients flow through it; see
    `_indexing`). Keys TensorFlow's `__getitem__` does not take -- lists,
    non-scalar integer arrays or tensors, bools and boolean masks -- fall
    back to numpy's advanced indexing of a copy: a new constant, which no
    tape records (no gradient flows through it)."""
    from . import _indexing

    try:
        return _indexing.slice_helper(t, key)
    except _indexing.Advanced:
        pass
    from ._convert import constant

    if isinstance(key, Tensor):
        key = numpy(key)
    elif isinstance(key, tuple):
        key = tuple(numpy(k) if isinstance(k, Tensor) else k for k in key)
    return constant(numpy(t)[key], dtype=t.dtype)


def _other(t: Tensor, other):
    if type(other) is Tensor:
        return other
    from ._convert import convert_to_tensor

    return convert_to_tensor(other, dtype_hint=t.dtype)


def binary(op: str, t: Tensor, other, reflected: bool):
    try:
        o = _other(t, other)
    except (TypeError, ValueError):
        return NotImplemented
    x, y = (o, t) if reflected else (t, o)
    return _ops.execute(op, [x, y], {})


def unary(op: str, t: Tensor):
    return _ops.execute(op, [t], {})


def reduce(t: Tensor):
    """Pickling: a Tensor pickles as its values (rebuilt with `constant`)."""
    from ._convert import constant

    if t.dtype is dtypes.string:
        return (_rebuild_strings, (t._strings(), t.shape))
    return (constant, (np.array(numpy(t)), t.dtype))


def _rebuild_strings(items, shape):
    return _C.from_strings(list(shape), list(items))


def dlpack(t: Tensor, stream=None, max_version=None, dl_device=None, copy=None):
    """`t.__dlpack__(...)`: numpy's exporter over the zero-copy view.

    A consumer that asks for DLPack 1.0 or later (`max_version`) gets the
    tensor's memory, flagged read-only. An older consumer (no
    `max_version`: JAX, for one) cannot be told the memory is read-only,
    so it gets a copy: a Tensor never changes under its holders."""
    kw = {}
    if stream is not None:
        kw["stream"] = stream
    if max_version is not None:
        kw["max_version"] = max_version
    if dl_device is not None:
        kw["dl_device"] = dl_device
    if copy is not None:
        kw["copy"] = copy
    view = numpy(t)
    if max_version is None or tuple(max_version)[:1] < (1,):
        if copy is False:
            raise BufferError(
                "a Tensor's memory is read-only, which DLPack before 1.0 cannot signal: "
                "pass max_version=(1, 0) or allow a copy"
            )
        view = np.array(view, copy=True)
    return view.__dlpack__(**kw)


def _grad_op(op_type, inputs, outputs, attrs):
    from .framework import GradOp

    return GradOp(op_type, inputs, outputs, attrs)


def _call_gradient(f, args, num_inputs):
    from .framework import _call_gradient

    return _call_gradient(f, args, num_inputs)


def _run_paused(f, args):
    from ._pykernel import run_paused

    return run_paused(f, args)


def _sync_tapes():
    from ._tape import _sync

    _sync()


HOOKS = {
    "sync_tapes": _sync_tapes,
    "run_paused": _run_paused,
    "grad_op": _grad_op,
    "call_gradient": _call_gradient,
    "dlpack": dlpack,
    "dtypes": dtypes.BY_ENUM,
    "numpy": numpy,
    "array": array,
    "repr": repr_,
    "str": str_,
    "scalar": scalar,
    "getitem": getitem,
    "binary": binary,
    "unary": unary,
    "reduce": reduce,
}
