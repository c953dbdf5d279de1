"""opforge: define, implement, test and ship tensor ops, from Python.

    import opforge as of
    lib = of.load_op_library("target/release/libzero_out.so")
    lib.zero_out([5, 4, 3, 2, 1])          # <opforge.Tensor: ... [5, 0, 0, 0, 0]>
    of.add(of.constant([1.0, 2.0]), 1.0)

TensorFlow's names where TensorFlow has them: `of.constant`,
`of.convert_to_tensor`, `of.raw_ops.AddV2(x=..., y=...)`, `of.ops.add_v2`,
`of.load_op_library` (and `of.unload_op_library`), `of.errors.InvalidArgumentError`, the dtypes
`of.float32`, ...
"""

from __future__ import annotations

from . import _C
from . import dtypes, errors
from ._C import Tensor
from .dtypes import (  # noqa: F401
    DType, as_dtype, bfloat16, bool, complex64, complex128, double, float16, float32,
    float64, half, int8, int16, int32, int64, qint8, qint16, qint32, quint8, quint16,
    resource, string, uint8, uint16, uint32, uint64, variant,
)
from . import _tensor

_C.set_hooks(_tensor.HOOKS)

from ._convert import constant, convert_to_tensor, from_dlpack  # noqa: E402
from ._library import UnloadReport, load_op_library, unload_op_library  # noqa: E402
from ._tape import GradientTape, Variable  # noqa: E402
from .framework import NotDifferentiable, RegisterGradient, no_gradient  # noqa: E402
from ._graph import Graph, get_default_graph, init_scope, name_scope, placeholder  # noqa: E402
from ._symbolic import Operation, SymbolicTensor  # noqa: E402
from ._graph_def import GraphDef, import_graph_def  # noqa: E402
from ._gradients import gradients  # noqa: E402
from ._function import ConcreteFunction, Function, TensorSpec, function  # noqa: E402
from . import ops, raw_ops, nn, test  # noqa: E402
from ._script_ops import numpy_function, py_function  # noqa: E402
from . import operator  # noqa: E402
from . import sysconfig  # noqa: E402
from ._ops import execute as _execute  # noqa: E402,F401
from . import _ops as _ops_module  # noqa: E402

_tensor._ops = _ops_module

__version__ = "0.1.0"


def _axes(x, axis):
    if axis is None:
        rank = convert_to_tensor(x).ndim
        if rank is None:
            # A symbolic tensor of unknown rank: every axis, computed.
            return ops.range(0, ops.rank(x), 1)
        # An int32 tensor also when empty (a scalar's axes): a bare []
        # would convert to float32, which no reduction takes.
        return constant(list(range(rank)), dtype=int32)
    return axis


def add(x, y, name=None):
    """x + y, element-wise with broadcasting (`AddV2`)."""
    return ops.add_v2(x, y, name=name)


def subtract(x, y, name=None):
    """x - y, element-wise with broadcasting."""
    return ops.sub(x, y, name=name)


def multiply(x, y, name=None):
    """x * y, element-wise with broadcasting."""
    return ops.mul(x, y, name=name)


def divide(x, y, name=None):
    """x / y, element-wise (`RealDiv`)."""
    return ops.real_div(x, y, name=name)


def matmul(a, b, transpose_a=False, transpose_b=False, name=None):
    """The matrix product of `a` and `b` (batched for rank > 2)."""
    a = convert_to_tensor(a)
    if (a.ndim or 2) > 2:
        return ops.batch_mat_mul_v2(a, b, adj_x=transpose_a, adj_y=transpose_b, name=name)
    return ops.mat_mul(a, b, transpose_a=transpose_a, transpose_b=transpose_b, name=name)


def reduce_sum(input_tensor, axis=None, keepdims=False, name=None):
    """The sum over `axis` (all axes by default)."""
    return ops.sum(input_tensor, _axes(input_tensor, axis), keep_dims=keepdims, name=name)


def reduce_mean(input_tensor, axis=None, keepdims=False, name=None):
    """The mean over `axis` (all axes by default)."""
    return ops.mean(input_tensor, _axes(input_tensor, axis), keep_dims=keepdims, name=name)


def reduce_max(input_tensor, axis=None, keepdims=False, name=None):
    """The maximum over `axis` (all axes by default)."""
    return ops.max(input_tensor, _axes(input_tensor, axis), keep_dims=keepdims, name=name)


def reduce_min(input_tensor, axis=None, keepdims=False, name=None):
    """The minimum over `axis` (all axes by default)."""
    return ops.min(input_tensor, _axes(input_tensor, axis), keep_dims=keepdims, name=name)


def reshape(tensor, shape, name=None):
    """`tensor` with the same values in shape `shape` (one -1 is inferred)."""
    return ops.reshape(tensor, convert_to_tensor(shape, dtype_hint=int32), name=name)


def transpose(a, perm=None, name=None):
    """`a` with its axes permuted (reversed by default)."""
    if perm is None:
        rank = convert_to_tensor(a).ndim
        if rank is None:
            r = ops.rank(a)
            perm = ops.sub(ops.sub(r, 1), ops.range(0, r, 1))
        else:
            perm = list(reversed(range(rank)))
    return ops.transpose(a, perm, name=name)


def cast(x, dtype, name=None):
    """`x` converted to `dtype`."""
    return raw_ops.Cast(x=x, DstT=dtype, name=name)


def concat(values, axis, name=None):
    """`values` joined along `axis`."""
    return ops.concat_v2(list(values), axis, name=name)


def stack(values, axis=0, name=None):
    """`values` stacked along a new axis."""
    return ops.pack(list(values), axis=axis, name=name)


def zeros(shape, dtype=float32, name=None):
    """A tensor of zeros."""
    return ops.fill(convert_to_tensor(list(shape), dtype=int32), constant(0, dtype=dtype), name=name)


def ones(shape, dtype=float32, name=None):
    """A tensor of ones."""
    return ops.fill(convert_to_tensor(list(shape), dtype=int32), constant(1, dtype=dtype), name=name)


def identity(input, name=None):  # noqa: A002
    """`input` itself, as an op."""
    return ops.identity(input, name=name)


def abs(x, name=None):  # noqa: A001
    return ops.abs(x, name=name)


def exp(x, name=None):
    return ops.exp(x, name=name)


def log(x, name=None):
    return ops.log(x, name=name)


def sqrt(x, name=None):
    return ops.sqrt(x, name=name)


def square(x, name=None):
    return ops.square(x, name=name)


def equal(x, y, name=None):
    return ops.equal(x, y, name=name)


def maximum(x, y, name=None):
    return ops.maximum(x, y, name=name)


def minimum(x, y, name=None):
    return ops.minimum(x, y, name=name)


# The aliases that are one op with its op function's parameters run
# natively too (`_ops.alias`).
for _f, _op in (
    (add, "AddV2"), (subtract, "Sub"), (multiply, "Mul"), (divide, "RealDiv"),
    (identity, "Identity"), (abs, "Abs"), (exp, "Exp"), (log, "Log"), (sqrt, "Sqrt"),
    (square, "Square"), (equal, "Equal"), (maximum, "Maximum"), (minimum, "Minimum"),
):
    globals()[_f.__name__] = _ops_module.alias(_f, _op)
del _f, _op
