"""Symbolic tensors and operations: what the op functions return while an
`opforge.Graph` is the default (TensorFlow's graph-mode `tf.Tensor` and
`tf.Operation`). A symbolic tensor has a dtype, the shape the op's shape
function inferred (dims None where unknown; None for an unknown rank), its
`op`, `name` (`"node:index"`) and `graph`; it has no value until the graph
runs (`graph.run(t)`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import dtypes

if TYPE_CHECKING:
    from ._graph import Graph

__all__ = ["SymbolicTensor", "Operation"]


class Operation:
    """A node of an `opforge.Graph` (`tf.Operation`)."""

    __slots__ = ("graph", "_node", "name", "type", "device", "__weakref__")

    def __init__(self, graph: Graph, node: int, name: str, op_type: str, device: str = "") -> None:
        self.graph = graph
        self._node = node
        self.name = name
        self.type = op_type
        self.device = device

    @property
    def inputs(self) -> tuple[SymbolicTensor, ...]:
        """The data inputs, as symbolic tensors."""
        _, _, inputs, _, _ = self.graph._node(self._node)
        return tuple(self.graph._tensor(n, i) for n, i in inputs)

    @property
    def control_inputs(self) -> tuple[Operation, ...]:
        """The operations that run before this one."""
        _, _, _, control, _ = self.graph._node(self._node)
        return tuple(self.graph._operation(n) for n in control)

    @property
    def outputs(self) -> tuple[SymbolicTensor, ...]:
        """The outputs, as symbolic tensors."""
        n = len(self.graph._outputs(self._node))
        return tuple(self.graph._tensor(self._node, i) for i in range(n))

    def get_attr(self, name: str) -> Any:
        """The value of attr `name` (given, inferred or defaulted)."""
        attrs = self.graph._attrs(self._node)
        if name not in attrs:
            raise ValueError(f"Operation '{self.name}' ({self.type}) has no attr named '{name}'")
        return attrs[name]

    @property
    def node_def(self) -> dict[str, Any]:
        """`{"name", "op", "input", "device", "attr"}` of the node."""
        _, _, inputs, control, device = self.graph._node(self._node)
        names = [self.graph._tensor(n, i).name for n, i in inputs]
        names += ["^" + self.graph._operation(c).name for c in control]
        return {
            "name": self.name, "op": self.type, "input": names, "device": device,
            "attr": dict(self.graph._attrs(self._node)),
        }

    def __repr__(self) -> str:
        return f"<opforge.Operation '{self.name}' type={self.type}>"


class SymbolicTensor:
    """An output of an operation in an `opforge.Graph`: a value the graph
    computes when it runs (`tf.Tensor` in graph mode). Operators build ops
    in the graph as on eager tensors."""

    __slots__ = ("graph", "_node", "_index", "dtype", "_shape", "__weakref__")

    def __init__(self, graph: Graph, node: int, index: int, dtype_enum: int, shape: Any) -> None:
        self.graph = graph
        self._node = node
        self._index = index
        self.dtype = dtypes.as_dtype(dtype_enum)
        self._shape = None if shape is None else tuple(shape)

    @property
    def shape(self) -> tuple[int | None, ...] | None:
        """The inferred shape: a tuple with None for unknown dims, or None
        when even the rank is unknown."""
        return self._shape

    def get_shape(self) -> tuple[int | None, ...] | None:
        return self._shape

    @property
    def ndim(self) -> int | None:
        """The rank, or None when unknown."""
        return None if self._shape is None else len(self._shape)

    @property
    def op(self) -> Operation:
        return self.graph._operation(self._node)

    @property
    def value_index(self) -> int:
        return self._index

    @property
    def name(self) -> str:
        return f"{self.op.name}:{self._index}"

    def __repr__(self) -> str:
        return f"<opforge.SymbolicTensor '{self.name}' shape={self._shape} dtype={self.dtype.name}>"

    def __bool__(self):
        raise TypeError(
            "Using a symbolic tensor as a Python bool is not allowed: its value exists only "
            "when the graph runs"
        )

    def __iter__(self):
        raise TypeError("Iterating over a symbolic tensor is not allowed")

    def __getitem__(self, key: Any) -> SymbolicTensor:
        """`self[key]` with TensorFlow's basic indexing (ints, slices,
        `...`, None, integer scalar tensors): one `StridedSlice` node added
        to the graph. Advanced keys (lists, index arrays, boolean masks) are
        a TypeError, as in TensorFlow: use `of.ops.gather_v2`."""
        from . import _indexing

        try:
            return _indexing.slice_helper(self, key)
        except _indexing.Advanced as a:
            raise _indexing.unsupported_key_error(key, a.part) from None

    def __len__(self):
        if self._shape is None or not self._shape or self._shape[0] is None:
            raise TypeError(f"len() of a symbolic tensor of shape {self._shape}")
        return self._shape[0]

    def numpy(self) -> Any:
        raise NotImplementedError(
            f"'{self.name}' is symbolic (it belongs to a graph): run the graph to get its "
            "value (graph.run(tensor))"
        )

    def __array__(self, dtype=None, copy=None):
        self.numpy()

    # Operators: ops added to the graph, as on eager tensors.
    def _bin(self, op, other, reflected=False):
        from . import _ops
        from ._convert import convert_to_tensor

        try:
            o = other if isinstance(other, SymbolicTensor) else convert_to_tensor(
                other, dtype_hint=self.dtype)
        except (TypeError, ValueError):
            return NotImplemented
        x, y = (o, self) if reflected else (self, o)
        return _ops.execute(op, [x, y], {})

    def _un(self, op):
        from . import _ops

        return _ops.execute(op, [self], {})

    def __add__(self, o): return self._bin("AddV2", o)
    def __radd__(self, o): return self._bin("AddV2", o, True)
    def __sub__(self, o): return self._bin("Sub", o)
    def __rsub__(self, o): return self._bin("Sub", o, True)
    def __mul__(self, o): return self._bin("Mul", o)
    def __rmul__(self, o): return self._bin("Mul", o, True)
    def __truediv__(self, o): return self._bin("RealDiv", o)
    def __rtruediv__(self, o): return self._bin("RealDiv", o, True)
    def __floordiv__(self, o): return self._bin("FloorDiv", o)
    def __rfloordiv__(self, o): return self._bin("FloorDiv", o, True)
    def __mod__(self, o): return self._bin("FloorMod", o)
    def __rmod__(self, o): return self._bin("FloorMod", o, True)
    def __matmul__(self, o): return self._bin("MatMul", o)
    def __rmatmul__(self, o): return self._bin("MatMul", o, True)
    def __pow__(self, o): return self._bin("Pow", o)
    def __rpow__(self, o): return self._bin("Pow", o, True)
    def __and__(self, o): return self._bin("LogicalAnd", o)
    def __rand__(self, o): return self._bin("LogicalAnd", o, True)
    def __or__(self, o): return self._bin("LogicalOr", o)
    def __ror__(self, o): return self._bin("LogicalOr", o, True)
    def __lt__(self, o): return self._bin("Less", o)
    def __le__(self, o): return self._bin("LessEqual", o)
    def __gt__(self, o): return self._bin("Greater", o)
    def __ge__(self, o): return self._bin("GreaterEqual", o)
    def __neg__(self): return self._un("Neg")
    def __abs__(self): return self._un("Abs")
    def __invert__(self): return self._un("Invert")

    # Identity semantics, as TensorFlow's graph tensors (usable as dict keys,
    # in feed_dict).
    __hash__ = object.__hash__

    def __eq__(self, other):
        return self is other

    def __ne__(self, other):
        return self is not other
