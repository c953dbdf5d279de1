"""Python values to tensors, with TensorFlow's rules: int -> int32 (int64
when it does not fit), float -> float32, bool, str/bytes -> string, complex
-> complex128; nested lists must be rectangular (ValueError otherwise);
numpy arrays keep their dtype and are viewed without a copy when
C-contiguous and aligned (`convert_to_tensor`), copied by `constant`."""

from __future__ import annotations

import numpy as np

from . import _C, dtypes
from ._C import Tensor
from ._symbolic import SymbolicTensor

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1


def _check_rectangular(value, path="value"):
    """The shape of a nested list; ValueError if ragged."""
    if isinstance(value, (list, tuple)):
        if not value:
            return (0,)
        shapes = [_check_rectangular(v, f"{path}[{i}]") for i, v in enumerate(value)]
        first = shapes[0]
        for i, s in enumerate(shapes):
            if s != first:
                raise ValueError(
                    f"Can't convert a non-rectangular Python sequence to a Tensor: "
                    f"{path}[0] has shape {first} but {path}[{i}] has shape {s}"
                )
        return (len(value),) + first
    return ()


def _flatten(value, out):
    if isinstance(value, (list, tuple)):
        for v in value:
            _flatten(v, out)
    else:
        out.append(value)
    return out


def _infer_python(flat):
    """TensorFlow's dtype for a flat list of Python scalars."""
    kinds = set()
    for v in flat:
        if isinstance(v, Tensor):
            raise TypeError("a nested list holding Tensors: stack them with opforge.stack")
        if isinstance(v, (bool, np.bool_)):
            kinds.add("bool")
        elif isinstance(v, (int, np.integer)):
            kinds.add("int")
        elif isinstance(v, (float, np.floating)):
            kinds.add("float")
        elif isinstance(v, (complex, np.complexfloating)):
            kinds.add("complex")
        elif isinstance(v, (str, bytes)):
            kinds.add("string")
        else:
            raise TypeError(f"cannot convert {type(v).__name__} {v!r} to a Tensor")
    if not kinds:
        return dtypes.float32
    if "string" in kinds:
        if kinds != {"string"}:
            raise TypeError("cannot mix strings with numbers in one Tensor")
        return dtypes.string
    if "complex" in kinds:
        return dtypes.complex128
    if "float" in kinds:
        return dtypes.float32
    if "int" in kinds:
        ints = [int(v) for v in flat if not isinstance(v, (bool, np.bool_))]
        if all(_INT32_MIN <= v <= _INT32_MAX for v in ints):
            return dtypes.int32
        return dtypes.int64
    return dtypes.bool


def _strings(shape, flat):
    items = [v.encode("utf-8") if isinstance(v, str) else bytes(v) for v in flat]
    return _C.from_strings(list(shape), items)


def _from_array(a: np.ndarray, copy: bool) -> Tensor:
    """A tensor of a numpy array (zero-copy unless `copy`)."""
    if a.dtype.kind in ("S", "U", "O"):
        return _strings(a.shape, a.reshape(-1).tolist())
    d = dtypes.as_dtype(a.dtype)
    if copy:
        a = np.array(a, order="C", copy=True)
    if d is dtypes.bfloat16:
        return _C.from_numpy(a.view(np.uint16), dtypes.bfloat16.as_datatype_enum)
    return _C.from_numpy(a)


def _cast_array(a: np.ndarray, d: dtypes.DType, original) -> np.ndarray:
    """`a` as dtype `d`, refusing lossy conversions TensorFlow refuses."""
    if d is dtypes.string:
        if a.dtype.kind not in ("S", "U", "O"):
            raise TypeError(f"cannot convert {original!r} to a string Tensor")
        return a
    if d is dtypes.bfloat16:
        npt = d.as_numpy_dtype
        if npt is None:
            raise TypeError("bfloat16 values need the ml_dtypes package (pip install ml_dtypes)")
        return a.astype(npt)
    target = np.dtype(d.as_numpy_dtype)
    if a.dtype.kind in ("S", "U", "O") and a.size:
        raise TypeError(f"cannot convert strings to a {d.name} Tensor")
    if a.dtype.kind == "c" and target.kind != "c":
        raise TypeError(f"cannot convert complex values to a {d.name} Tensor")
    if a.dtype.kind == "f" and target.kind in ("i", "u", "b"):
        if not np.all(np.isfinite(a)) or not np.all(a == np.round(a)):
            raise TypeError(f"Cannot convert {original!r} to Tensor of dtype {d.name}")
    if target.kind in ("i", "u") and a.dtype.kind in ("i", "u", "f"):
        info = np.iinfo(target)
        if a.size and (a.min() < info.min or a.max() > info.max):
            raise ValueError(f"{original!r} is out of range for dtype {d.name}")
    return a.astype(target, copy=False)


def _python_to_array(value, dtype):
    shape = _check_rectangular(value)
    flat = _flatten(value, [])
    inferred = _infer_python(flat) if dtype is None else None
    d = dtype or inferred
    if d is dtypes.string or (dtype is None and inferred is dtypes.string):
        return None, shape, flat, dtypes.string
    if inferred is not None:
        npt = d.as_numpy_dtype
        return np.array(flat, dtype=npt).reshape(shape), shape, flat, d
    a = np.array(flat if flat else [], dtype=None if flat else np.float32).reshape(shape)
    return a, shape, flat, d


def convert_to_tensor(value, dtype=None, dtype_hint=None, name=None) -> Tensor | SymbolicTensor:
    """`value` as a Tensor. A Tensor is returned as is (ValueError if `dtype`
    differs); a numpy array keeps its dtype and is viewed without a copy
    when C-contiguous and aligned; Python values follow TensorFlow's rules.
    `dtype_hint` is used when the value could take it (`1` -> float32)."""
    if type(value) is np.ndarray and dtype is None and value.dtype.kind in "biufc":
        # The common case: a numeric array, viewed (or copied once) natively.
        return _C.from_numpy(value)
    want = dtypes.as_dtype(dtype) if dtype is not None else None
    if type(value).__name__ == "Variable" and hasattr(value, "read_value"):
        value = value.read_value()
    if isinstance(value, SymbolicTensor):
        if want is not None and value.dtype != want:
            raise ValueError(
                f"Tensor conversion requested dtype {want.name} for Tensor with dtype "
                f"{value.dtype.name}: {value!r}"
            )
        return value
    if isinstance(value, Tensor):
        if want is not None and value.dtype != want:
            raise ValueError(
                f"Tensor conversion requested dtype {want.name} for Tensor with dtype {value.dtype.name}"
            )
        return value
    if want is None and dtype_hint is not None:
        hint = dtypes.as_dtype(dtype_hint)
        try:
            return _convert(value, hint, copy=False)
        except (TypeError, ValueError):
            pass
    return _convert(value, want, copy=False)


def _convert(value, want, copy):
    if isinstance(value, Tensor):
        if want is not None and value.dtype != want:
            return _convert(value.numpy(), want, copy)
        return value
    if isinstance(value, np.ndarray) or isinstance(value, np.generic):
        a = np.asarray(value)
        if want is not None and dtypes.as_dtype(a.dtype) != want:
            a = _cast_array(a, want, value)
        return _from_array(a, copy)
    if hasattr(value, "__array__") and not isinstance(value, (list, tuple, str, bytes)):
        return _convert(np.asarray(value), want, copy)
    if hasattr(value, "__dlpack__") and not isinstance(value, (list, tuple)):
        return _convert(np.from_dlpack(value), want, copy)
    a, shape, flat, d = _python_to_array(value, want)
    if d is dtypes.string:
        if any(not isinstance(v, (str, bytes)) for v in flat):
            raise TypeError(f"cannot convert {value!r} to a string Tensor")
        return _strings(shape, flat)
    if want is not None:
        a = _cast_array(a, want, value)
    return _from_array(a, copy=False)


def constant(value, dtype=None, shape=None, name=None) -> Tensor | SymbolicTensor:
    """A Tensor with a copy of `value` (TensorFlow's `tf.constant`). With
    `shape`, a scalar (or one-element) value fills the shape, and a value
    with as many elements as the shape is reshaped to it. While a graph is
    the default, a `Const` node of that graph (a symbolic tensor)."""
    from . import _graph

    g = _graph.current()
    if g is not None:
        if isinstance(value, SymbolicTensor):
            raise TypeError(f"of.constant of a symbolic tensor ({value.name}): use of.identity")
        with _graph.init_scope():
            t = constant(value, dtype=dtype, shape=shape)
        assert isinstance(t, Tensor), "init_scope builds eagerly"
        return g.constant(t, name=name)
    want = dtypes.as_dtype(dtype) if dtype is not None else None
    t = _convert(value, want, copy=True)
    if isinstance(value, Tensor) and t is value:
        t = _from_array(np.asarray(t.numpy()) if t.dtype is not dtypes.string else t.numpy(), copy=True)
    if shape is None:
        return t
    shape = [int(d) for d in shape]
    n = int(np.prod(shape)) if shape else 1
    if t.size == n:
        a = t.numpy().reshape(shape)
    elif t.size == 1:
        a = np.broadcast_to(t.numpy().reshape(()), shape)
    else:
        raise TypeError(
            f"Eager execution of tf.constant with unsupported shape. Tried to convert a value "
            f"with {t.size} elements to shape {shape} ({n} elements)"
        )
    return _from_array(np.ascontiguousarray(a), copy=True) if t.dtype is not dtypes.string else _strings(
        a.shape, a.reshape(-1).tolist()
    )


def from_dlpack(x, /, *, copy=None) -> Tensor:
    """A Tensor over a DLPack producer's memory (through numpy: zero-copy for
    CPU producers whose memory is C-contiguous), or a copy with `copy=True`."""
    a = np.from_dlpack(x, copy=copy) if copy is not None else np.from_dlpack(x)
    return _from_array(a, copy=bool(copy))
