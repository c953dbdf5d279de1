"""`@opforge.function` (TensorFlow's `tf.function`): traces a Python
function into an opforge graph and runs the graph with the executor.

    @of.function
    def f(x, n):
        return of.reduce_sum(x * n)

    f(of.constant([1.0, 2.0]), 3)       # traced for (float32 [2], n=3), run
    f(of.constant([5.0, 1.0]), 3)       # same signature: the cached graph runs

A call's signature is the dtypes and shapes of its tensor arguments (numpy
arrays count as tensors), the identity of its variables and other objects,
and the values of its Python scalars, strings and None; each new signature
traces once more (`experimental_get_tracing_count()` counts them).
`input_signature=[of.TensorSpec(shape, dtype), ...]` fixes the signature
(dims may be None): one trace, and calls whose tensors do not fit raise.

While tracing, a `GradientTape` or `of.gradients` inside the function
builds graph gradients. (A tape inside a trace differentiates along every
path of the graph from the sources: `stop_recording` and the difference
between watched and unwatched tensors have no effect there; variables
read in the block are its sources as usual.) A `GradientTape` recording around a call
differentiates through it: the call then fetches every intermediate value
of the graph and records the graph's nodes on the tape, so the tape's
gradient is the one the same ops run eagerly would give (Python gradients,
variables and higher order included). Inside another trace (a function
calling a function), the call is traced inline into the caller's graph.
"""

from __future__ import annotations

import functools
import threading
import weakref
from typing import Any, Callable, Sequence

import numpy as np

from . import _graph, _tape, dtypes
from ._C import Tensor
from ._symbolic import Operation, SymbolicTensor

__all__ = ["function", "Function", "ConcreteFunction", "TensorSpec"]


class TensorSpec:
    """The dtype and (partially known) shape of a tensor argument
    (`tf.TensorSpec`): `shape` a list with None for unknown dims, or None
    for an unknown rank."""

    __slots__ = ("shape", "dtype", "name")

    def __init__(
        self, shape: Sequence[int | None] | None = None, dtype: Any = dtypes.float32,  # type: ignore[attr-defined]
        name: str | None = None,
    ) -> None:
        self.shape = None if shape is None else tuple(None if d is None else int(d) for d in shape)
        self.dtype = dtypes.as_dtype(dtype)
        self.name = name

    @classmethod
    def from_tensor(cls, t: Any, name: str | None = None) -> TensorSpec:
        return cls(t.shape, t.dtype, name)

    def is_compatible_with(self, t: Any) -> bool:
        """Whether tensor (or spec) `t` has this dtype and a fitting shape."""
        if getattr(t, "dtype", None) != self.dtype:
            return False
        return _shape_fits(self.shape, getattr(t, "shape", None))

    def __eq__(self, other):
        return (isinstance(other, TensorSpec) and self.shape == other.shape
                and self.dtype == other.dtype and self.name == other.name)

    def __hash__(self):
        return hash((self.shape, self.dtype, self.name))

    def __repr__(self):
        return f"TensorSpec(shape={self.shape}, dtype=of.{self.dtype.name}, name={self.name!r})"


def _shape_fits(spec_shape, shape) -> bool:
    if spec_shape is None:
        return True
    if shape is None or len(shape) != len(spec_shape):
        return False
    return all(s is None or d == s for s, d in zip(spec_shape, shape))


# -- arguments ----------------------------------------------------------------

def _is_tensor_leaf(v) -> bool:
    return isinstance(v, (Tensor, np.ndarray))


def _key(v):
    """The part of a call's signature `v` contributes."""
    if isinstance(v, Tensor):
        return ("T", v.dtype.as_datatype_enum, v.shape)
    if isinstance(v, np.ndarray):
        return ("T", dtypes.as_dtype(v.dtype).as_datatype_enum, v.shape)
    if isinstance(v, _tape.Variable):
        return ("V", id(v))
    if v is None or isinstance(v, (bool, int, float, complex, str, bytes)):
        return ("P", type(v).__name__, v)
    if isinstance(v, (list, tuple)):
        return (type(v).__name__, tuple(_key(x) for x in v))
    if isinstance(v, dict):
        return ("dict", tuple((k, _key(v[k])) for k in sorted(v, key=repr)))
    try:
        hash(v)
    except TypeError:
        return ("O", id(v))
    return ("H", type(v).__name__, v)


def _tensors_key(args) -> tuple | None:
    """The (dtype, shape) of each argument when all are Tensors (their
    trace is then the one `_key` would find), else None."""
    key = []
    for a in args:
        if type(a) is not Tensor:
            return None
        key.append((a.dtype, a.shape))
    return tuple(key)


def _map_leaves(v, f):
    """`v` with `f` applied to its tensor leaves (in a fixed order)."""
    if _is_tensor_leaf(v):
        return f(v)
    if isinstance(v, tuple) and hasattr(v, "_fields"):
        return type(v)(*(_map_leaves(x, f) for x in v))
    if isinstance(v, (list, tuple)):
        return type(v)(_map_leaves(x, f) for x in v)
    if isinstance(v, dict):
        return {k: _map_leaves(v[k], f) for k in sorted(v, key=repr)}
    return v


def _tensor_leaves(v, out):
    _map_leaves(v, out.append)
    return out


def _output_leaves(v, out):
    if isinstance(v, (SymbolicTensor, Operation)):
        out.append(v)
    elif isinstance(v, tuple) and hasattr(v, "_fields"):
        for x in v:
            _output_leaves(x, out)
    elif isinstance(v, (list, tuple)):
        for x in v:
            _output_leaves(x, out)
    elif isinstance(v, dict):
        for k in sorted(v, key=repr):
            _output_leaves(v[k], out)
    return out


def _pack_outputs(v, it):
    if isinstance(v, (SymbolicTensor, Operation)):
        return next(it)
    if isinstance(v, tuple) and hasattr(v, "_fields"):
        return type(v)(*(_pack_outputs(x, it) for x in v))
    if isinstance(v, (list, tuple)):
        return type(v)(_pack_outputs(x, it) for x in v)
    if isinstance(v, dict):
        return {k: _pack_outputs(v[k], it) for k in sorted(v, key=repr)}
    return v


# -- graphs and concrete functions -------------------------------------------

class FuncGraph(_graph.Graph):
    """The graph of one trace of an `opforge.function`: its stateful ops
    keep program order per resource, as in TensorFlow (see
    `Graph._stateful_deps`)."""

    def __init__(self, name: str):
        super().__init__()
        self.name = name
        self._auto_control_deps = True
        self.inputs: list = []
        self.structured_outputs = None


class ConcreteFunction:
    """One trace of an `opforge.function`: its `graph`, the placeholders
    its tensor arguments feed (`inputs`), and `structured_outputs`."""

    def __init__(self, graph: FuncGraph, inputs: Sequence[SymbolicTensor], structured_outputs: Any,
                 specs: Sequence[TensorSpec] | None = None) -> None:
        self.graph = graph
        self.inputs = list(inputs)
        self.structured_outputs = structured_outputs
        self._specs = specs
        self._leaves = _output_leaves(structured_outputs, [])
        self._fetch: list[tuple[int, int]] = []
        self._slot: list[int | None] = []
        for e in self._leaves:
            if isinstance(e, SymbolicTensor):
                self._slot.append(len(self._fetch))
                self._fetch.append((e._node, e._index))
            else:
                self._slot.append(None)
        self._fed = {(p._node, p._index) for p in self.inputs}
        self._input_refs = [(p._node, p._index) for p in self.inputs]
        # The feeds of the captured values (made on the first call).
        self._captured: list | None = None
        # Nodes run only for their effects (no outputs: variable updates).
        self._targets = [
            i for i in range(graph._num_nodes()) if not graph._outputs(i)
        ]

    @property
    def outputs(self) -> list[SymbolicTensor]:
        """The symbolic tensors a call fetches."""
        return [e for e in self._leaves if isinstance(e, SymbolicTensor)]

    def _call_flat(self, tensors):
        """Runs the graph with `tensors` fed to `inputs` (recorded on the
        active tapes); the outputs in `structured_outputs`' structure."""
        g = self.graph
        captured = self._captured
        if captured is None or len(captured) != len(g._capture_feeds):
            captured = self._captured = [((s._node, s._index), t) for s, t in g._capture_feeds]
        feeds = list(zip(self._input_refs, tensors))
        feeds += captured
        tapes = _tape.active_tapes()
        if not tapes:
            values = g._run(self._fetch, feeds, self._targets)
            results = [None if s is None else values[s] for s in self._slot]
        else:
            results = self._call_recorded(feeds, tapes)
        return _pack_outputs(self.structured_outputs, iter(results))

    def _call_recorded(self, feeds, tapes):
        g = self.graph
        fed = {r: t for r, t in feeds}
        refs = []
        for i in range(g._num_nodes()):
            for j in range(len(g._outputs(i))):
                if (i, j) not in fed:
                    refs.append((i, j))
        values = g._run(refs, feeds, self._targets)
        by_ref = dict(zip(refs, values))
        fetched = list(by_ref.items())
        for tape in tapes:
            watch, reads = [], []
            for node, v in g._variable_reads.items():
                if tape._watches(v):
                    watch.append((node, 0))
                    reads.append((v, by_ref[(node, 0)]))
            tape._ensure()
            tape._tape.record_graph(g, list(feeds), fetched, watch)
            for v, value in reads:
                tape._reads.setdefault(id(v), []).append(value)
        results = []
        for e in self._leaves:
            if isinstance(e, SymbolicTensor):
                r = (e._node, e._index)
                results.append(fed[r] if r in fed else by_ref[r])
            else:
                results.append(None)
        return results

    def __call__(self, *args: Any) -> Any:
        from ._convert import convert_to_tensor

        if len(args) != len(self.inputs):
            raise TypeError(f"this concrete function takes {len(self.inputs)} tensors, got {len(args)}")
        return self._call_flat([convert_to_tensor(a, dtype=p.dtype) for a, p in zip(args, self.inputs)])

    def __repr__(self):
        return f"<opforge.ConcreteFunction {self.graph.name} inputs={len(self.inputs)}>"


class Function:
    """A Python function traced into graphs (`tf.function`'s result)."""

    def __init__(self, python_function: Callable[..., Any],
                 input_signature: Sequence[TensorSpec] | None = None,
                 name: str | None = None) -> None:
        self.python_function = python_function
        self.input_signature = None if input_signature is None else tuple(
            s if isinstance(s, TensorSpec) else TensorSpec(*s) for s in input_signature
        )
        self._name: str = name or str(getattr(python_function, "__name__", "function"))
        self._cache: dict = {}
        # Calls whose arguments are all positional Tensors: the trace by
        # the arguments' (dtype, shape), found without `_key`.
        self._by_tensors: dict = {}
        self._trace_count = 0
        # One trace per signature, also when threads call at once.
        self._lock = threading.RLock()
        functools.update_wrapper(self, python_function)

    def experimental_get_tracing_count(self) -> int:
        """How many times the function was traced."""
        return self._trace_count

    def __get__(self, instance, owner):
        if instance is None:
            return self
        # A method: one Function per instance, so the instance is part of it.
        bound = self.__dict__.setdefault("_bound", weakref.WeakKeyDictionary())
        f = bound.get(instance)
        if f is None:
            f = Function(self.python_function.__get__(instance, owner), self.input_signature,
                         self._name)
            bound[instance] = f
        return f

    # -- tracing ----------------------------------------------------------

    def _trace(self, args, kwargs, specs=None) -> ConcreteFunction:
        graph = FuncGraph(self._name)
        placeholders = []
        with graph.as_default():
            if specs is not None:
                sym_args = []
                for i, s in enumerate(specs):
                    p = _graph.placeholder(s.dtype, s.shape, name=s.name or f"args_{i}")
                    placeholders.append(p)
                    sym_args.append(p)
                sym_kwargs = {}
            else:
                counter = [0]

                def make(v):
                    d = v.dtype if isinstance(v, Tensor) else dtypes.as_dtype(v.dtype)
                    p = _graph.placeholder(d, list(v.shape), name=f"args_{counter[0]}")
                    counter[0] += 1
                    placeholders.append(p)
                    return p

                sym_args = _map_leaves(list(args), make)
                sym_kwargs = _map_leaves(dict(kwargs), make)
            out = self.python_function(*sym_args, **sym_kwargs)
        self._trace_count += 1
        return ConcreteFunction(graph, placeholders, out, specs)

    def get_concrete_function(self, *args: Any, **kwargs: Any) -> ConcreteFunction:
        """The trace for these arguments (tracing if needed)."""
        if self.input_signature is not None:
            return self._signature_function()
        key = (_key(list(args)), _key(dict(kwargs)))
        cf = self._cache.get(key)
        if cf is None:
            with self._lock:
                cf = self._cache.get(key)
                if cf is None:
                    cf = self._trace(args, kwargs)
                    self._cache[key] = cf
        return cf

    def _signature_function(self) -> ConcreteFunction:
        cf = self._cache.get("signature")
        if cf is None:
            with self._lock:
                cf = self._cache.get("signature")
                if cf is None:
                    cf = self._trace((), {}, self.input_signature)
                    self._cache["signature"] = cf
        return cf

    # -- calling ----------------------------------------------------------

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if _graph.current() is not None:
            # Inside another trace (or a default graph): inline.
            return self.python_function(*args, **kwargs)
        fast = None
        if not kwargs and self.input_signature is None:
            fast = _tensors_key(args)
            if fast is not None:
                cf = self._by_tensors.get(fast)
                if cf is not None:
                    return cf._call_flat(args)
        from ._convert import convert_to_tensor

        if self.input_signature is not None:
            if kwargs:
                raise TypeError(f"{self._name}: keyword arguments with an input_signature")
            if len(args) != len(self.input_signature):
                raise TypeError(
                    f"{self._name} takes {len(self.input_signature)} positional arguments "
                    f"(its input_signature), got {len(args)}"
                )
            tensors = []
            for i, (a, s) in enumerate(zip(args, self.input_signature)):
                try:
                    t = convert_to_tensor(a, dtype=s.dtype)
                except (TypeError, ValueError) as e:
                    raise TypeError(f"{self._name}: argument {i} does not match {s}: {e}") from None
                if not _shape_fits(s.shape, t.shape):
                    raise ValueError(
                        f"{self._name}: argument {i} has shape {t.shape}, which does not fit "
                        f"the input_signature's {s}"
                    )
                tensors.append(t)
            return self._signature_function()._call_flat(tensors)
        cf = self.get_concrete_function(*args, **kwargs)
        if fast is not None:
            self._by_tensors[fast] = cf
        tensors = _tensor_leaves(list(args), []) + _tensor_leaves(dict(kwargs), [])
        tensors = [t if isinstance(t, Tensor) else convert_to_tensor(t) for t in tensors]
        return cf._call_flat(tensors)

    def __repr__(self):
        return f"<opforge.function {self._name}: {self._trace_count} traces>"


def function(
    func: Callable[..., Any] | None = None,
    input_signature: Sequence[TensorSpec] | None = None,
    name: str | None = None,
) -> Any:
    """Traces `func` into graphs run by opforge's executor (`tf.function`);
    as a decorator with or without arguments."""
    if func is None:
        return lambda f: Function(f, input_signature, name)
    return Function(func, input_signature, name)
