"""`opforge.GradientTape` and `opforge.Variable` (TensorFlow's names and
behaviour): ops run eagerly as usual; each call is also recorded on every
active tape, whose native half differentiates with opforge's backprop (the
gradients registered for the ops, in Rust, in op libraries or in Python)."""

from __future__ import annotations

import contextlib
import itertools
import threading
from typing import Any

from . import _C, _graph, dtypes
from ._C import Tensor
from ._symbolic import SymbolicTensor

_state = threading.local()


def _stack() -> list:
    s = getattr(_state, "tapes", None)
    if s is None:
        s = _state.tapes = []
    return s


def active_tapes():
    """The tapes recording on this thread (innermost last) in the current
    context: eagerly, the tapes entered eagerly; while a graph is the
    default, the tapes entered with that graph the default."""
    g = _graph.current()
    return [t for t in _stack() if t._recording and t._graph is g]


def _sync() -> None:
    """Tells the native fast path of the op functions which tapes record
    on this thread (`_C.set_recording_tapes`): called whenever what
    `active_tapes()` returns may have changed. The fast path also asks for
    it (the `sync_tapes` hook) when it is turned back on for the thread."""
    _C.set_recording_tapes([t._tape for t in active_tapes() if t._tape is not None])


def record(op: str, inputs, attrs, outputs) -> None:
    """Records one call on every active tape (called by the op functions)."""
    flat = []
    for o in outputs:
        if isinstance(o, list):
            flat.extend(o)
        else:
            flat.append(o)
    for tape in active_tapes():
        tape._tape.record(op, inputs, attrs, flat)


def _flatten(x):
    if isinstance(x, (list, tuple)):
        out = []
        for v in x:
            out.extend(_flatten(v))
        return out
    if isinstance(x, dict):
        out = []
        for k in sorted(x):
            out.extend(_flatten(x[k]))
        return out
    return [x]


def _pack(structure, flat_iter):
    if isinstance(structure, tuple):
        return tuple(_pack(s, flat_iter) for s in structure)
    if isinstance(structure, list):
        return [_pack(s, flat_iter) for s in structure]
    if isinstance(structure, dict):
        return {k: _pack(structure[k], flat_iter) for k in sorted(structure)}
    return next(flat_iter)


class GradientTape:
    """Records operations for automatic differentiation (`tf.GradientTape`).

        x = of.constant(3.0)
        with of.GradientTape() as g:
            g.watch(x)
            y = x * x
        g.gradient(y, x)            # 6.0

    `persistent=True` allows several `gradient` calls; tapes nest for
    higher-order gradients; trainable `Variable`s read inside the block are
    watched automatically unless `watch_accessed_variables=False`.
    """

    def __init__(self, persistent: bool = False, watch_accessed_variables: bool = True):
        self._persistent = persistent
        self._watch_vars = watch_accessed_variables
        self._tape: _C.Tape | None = None
        self._recording = False
        self._used = False
        # Variables watched on this tape, and the values read from each:
        # gradients flow to the reads (resource handles carry none), and a
        # variable's gradient is the sum over its reads.
        self._watched_vars: set = set()
        self._reads: dict = {}
        # The graph that was the default when the tape was entered (None:
        # eager). In a graph (an of.function being traced) the tape's
        # gradient is the graph gradient (of.gradients) through the nodes
        # added while the tape was recording: `_spans`, [start, end) node
        # index ranges (end None while open), as TensorFlow's tape in a
        # function records the ops run while it records (`stop_recording`
        # leaves the ops inside out).
        self._graph = None
        self._spans: list[list] = []

    def __enter__(self):
        self._graph = _graph.current()
        if self._tape is None:
            self._tape = _C.Tape(self._persistent)
        self._recording = True
        self._open_span()
        _stack().append(self)
        _sync()
        return self

    def __exit__(self, *exc):
        self._recording = False
        self._close_span()
        s = _stack()
        if self in s:
            s.remove(self)
        _sync()
        return False

    def _ensure(self) -> _C.Tape:
        if self._tape is None:
            self._tape = _C.Tape(self._persistent)
        return self._tape

    def watch(self, tensor) -> None:
        """Watches `tensor` (a Tensor, a Variable, or a nested list of them)."""
        tape = self._ensure()
        for t in _flatten(tensor):
            if isinstance(t, Variable):
                self._watched_vars.add(id(t))
            elif _is_symbolic(t):
                # Graph gradients follow every path: nothing to record.
                pass
            elif isinstance(t, Tensor):
                tape.watch(t)
            else:
                raise ValueError(
                    f"GradientTape.watch takes Tensors or Variables, not {type(t).__name__}"
                )

    def _watches(self, v) -> bool:
        return id(v) in self._watched_vars or (self._watch_vars and v.trainable)

    def _read(self, v, value) -> None:
        """`value` was just read from variable `v`: watch it for `v`."""
        if not _is_symbolic(value):
            self._ensure().watch(value)
        self._reads.setdefault(id(v), []).append(value)

    @contextlib.contextmanager
    def stop_recording(self):
        """Ops run inside this block are not recorded on the tape."""
        was = self._recording
        self._recording = False
        self._close_span()
        _sync()
        try:
            yield
        finally:
            self._recording = was
            if was:
                self._open_span()
            _sync()

    def reset(self) -> None:
        """Clears everything recorded so far."""
        self._tape = _C.Tape(self._persistent)
        self._used = False
        self._reads = {}
        self._spans = []
        if self._recording:
            self._open_span()
        _sync()

    def _open_span(self) -> None:
        """In a graph: ops added from now on are recorded."""
        if self._graph is not None:
            self._spans.append([self._graph._num_nodes(), None])

    def _close_span(self) -> None:
        """In a graph: ops added from now on are not recorded."""
        if self._graph is not None and self._spans and self._spans[-1][1] is None:
            self._spans[-1][1] = self._graph._num_nodes()

    def _recorded(self) -> list[tuple[int, int]]:
        """The node ranges recorded so far (an open one up to now)."""
        graph: Any = self._graph
        end = graph._num_nodes()
        return [(a, end if b is None else b) for a, b in self._spans]

    def gradient(self, target, sources, output_gradients=None, unconnected_gradients="none"):
        """The gradient of `target` (a Tensor or a list, summed) with respect
        to `sources` (a Tensor, a Variable, or a nested list/tuple/dict of
        them), in the structure of `sources`; None for a source the target
        does not depend on (`unconnected_gradients="zero"` gives zeros)."""
        if self._tape is None:
            raise RuntimeError("GradientTape.gradient on a tape that recorded nothing")
        if self._used and not self._persistent:
            raise RuntimeError(
                "A non-persistent GradientTape can only be used to compute one set of "
                "gradients (or jacobians): create it with persistent=True"
            )
        targets = _flatten(target)
        src = _flatten(sources)
        # Each variable stands for the values read from it on this tape.
        src_tensors, spans = [], []
        for s in src:
            if isinstance(s, Variable):
                reads = self._reads.get(id(s), [])
                spans.append((len(src_tensors), len(reads)))
                src_tensors.extend(reads)
            elif isinstance(s, Tensor) or _is_symbolic(s):
                spans.append((len(src_tensors), 1))
                src_tensors.append(s)
            else:
                raise TypeError(f"gradient sources must be Tensors or Variables, not {type(s).__name__}")
        if self._graph is not None:
            return self._graph_gradient(sources, src, targets, src_tensors, spans,
                                        output_gradients, unconnected_gradients)
        for t in targets:
            if not isinstance(t, Tensor):
                raise TypeError(f"gradient targets must be Tensors, not {type(t).__name__}")
        og = None
        if output_gradients is not None:
            og = [None if g is None else _as_tensor(g) for g in _flatten(output_gradients)]
        start = self._tape.num_records()
        was = self._recording
        self._recording = False
        _sync()
        try:
            flat = self._tape.gradient(targets, src_tensors, og)
            grads = []
            for first, n in spans:
                parts = [g for g in flat[first:first + n] if g is not None]
                if not parts:
                    grads.append(None)
                elif len(parts) == 1:
                    grads.append(parts[0])
                else:
                    from . import ops

                    grads.append(ops.add_n(parts))
        finally:
            self._recording = was
            _sync()
        self._used = True
        # An enclosing tape differentiates this gradient (higher order).
        for outer in active_tapes():
            if outer is not self and outer._tape is not None:
                self._tape.forward_records(outer._tape, start)
        if unconnected_gradients == "zero":
            from . import ops

            grads = [
                ops.zeros_like(s.read_value() if isinstance(s, Variable) else s) if g is None else g
                for g, s in zip(grads, src)
            ]
        elif unconnected_gradients != "none":
            raise ValueError(f"unconnected_gradients must be 'none' or 'zero', not {unconnected_gradients!r}")
        return _pack(sources, iter(grads))


    def _graph_gradient(self, sources, src, targets, src_tensors, spans, output_gradients,
                        unconnected_gradients):
        """`gradient` in a graph: the graph gradient of the targets."""
        from . import ops
        from ._gradients import gradients

        self._used = True
        sym_targets = [t for t in targets if _is_symbolic(t)]
        og = None
        if output_gradients is not None:
            og = [g for g, t in zip(_flatten(output_gradients), targets) if _is_symbolic(t)]
        connected = [s for s in src_tensors if _is_symbolic(s)]
        flat = {}
        if sym_targets and connected:
            with self._graph.as_default():
                gs = gradients(sym_targets, connected, grad_ys=og, _recorded=self._recorded())
            flat = {id(s): g for s, g in zip(connected, gs)}
        grads = []
        with self._graph.as_default():
            for start, n in spans:
                parts = [flat.get(id(s)) for s in src_tensors[start:start + n]]
                parts = [p for p in parts if p is not None]
                if not parts:
                    grads.append(None)
                elif len(parts) == 1:
                    grads.append(parts[0])
                else:
                    grads.append(ops.add_n(parts))
            if unconnected_gradients == "zero":
                grads = [
                    ops.zeros_like(s.read_value() if isinstance(s, Variable) else s)
                    if g is None else g
                    for g, s in zip(grads, src)
                ]
            elif unconnected_gradients != "none":
                raise ValueError(
                    f"unconnected_gradients must be 'none' or 'zero', not {unconnected_gradients!r}"
                )
        return _pack(sources, iter(grads))


def _is_symbolic(x) -> bool:
    return isinstance(x, SymbolicTensor)


def _as_tensor(v):
    from ._convert import convert_to_tensor

    return convert_to_tensor(v)


_var_ids = itertools.count()


class Variable:
    """A resource variable (`tf.Variable`): `assign`, `assign_add`,
    `assign_sub`, `read_value`, `numpy()`; used as a Tensor its value is
    read (and, on a recording tape, watched when trainable)."""

    def __init__(self, initial_value, trainable=True, name=None, dtype=None):
        # Created eagerly, also while a graph is the default (an
        # of.function's first trace), as TensorFlow lifts them.
        with _graph.init_scope():
            self._init(initial_value, trainable, name, dtype)

    def _init(self, initial_value, trainable, name, dtype):
        from ._convert import convert_to_tensor
        from . import raw_ops

        if _is_symbolic(initial_value):
            raise ValueError(
                "a Variable's initial value must be computed eagerly, not a symbolic tensor "
                f"({initial_value.name})"
            )
        value = convert_to_tensor(initial_value, dtype=dtype)
        self._dtype = value.dtype
        self._shape = value.shape
        self.trainable = trainable
        self.name = name or f"Variable_{next(_var_ids)}"
        self.handle = raw_ops.VarHandleOp(
            dtype=value.dtype, shape=list(value.shape),
            shared_name=f"{self.name}_{id(self)}_{next(_var_ids)}",
        )
        raw_ops.AssignVariableOp(resource=self.handle, value=value)

    @property
    def dtype(self):
        return self._dtype

    @property
    def shape(self):
        return self._shape

    def read_value(self) -> Tensor:
        """The current value (recorded on active tapes, which watch the
        variable if it is trainable)."""
        from . import raw_ops

        value = raw_ops.ReadVariableOp(resource=self.handle, dtype=self._dtype)
        if _is_symbolic(value):
            value.graph._variable_reads[value._node] = self
            if value.shape != tuple(self._shape):
                # The graph does not know the variable's shape from its
                # handle: state it, so shape inference downstream has it.
                from ._convert import convert_to_tensor

                value = raw_ops.Reshape(
                    tensor=value,
                    shape=convert_to_tensor(list(self._shape), dtype=dtypes.int32),
                )
        for tape in active_tapes():
            if tape._watches(self):
                tape._read(self, value)
        return value

    value = read_value

    def assign(self, value):
        from . import raw_ops

        value = _as_tensor_of(value, self._dtype)
        shape = value.shape
        if shape is None:
            shape = self._shape  # unknown until the graph runs: the kernel checks it
        elif len(shape) == len(self._shape) and all(
            d is None or d == e for d, e in zip(shape, self._shape)
        ):
            shape = self._shape
        if shape != self._shape:
            raise ValueError(
                f"Cannot assign value to variable '{self.name}': shapes {self._shape} and "
                f"{value.shape} are incompatible"
            )
        raw_ops.AssignVariableOp(resource=self.handle, value=value)
        return self

    def assign_add(self, delta):
        from . import raw_ops

        raw_ops.AssignAddVariableOp(resource=self.handle, value=_as_tensor_of(delta, self._dtype))
        return self

    def assign_sub(self, delta):
        from . import raw_ops

        raw_ops.AssignSubVariableOp(resource=self.handle, value=_as_tensor_of(delta, self._dtype))
        return self

    def numpy(self):
        with _graph.init_scope():
            return self.read_value().numpy()

    def __array__(self, dtype=None, copy=None):
        return self.read_value().__array__(dtype, copy)

    def __repr__(self):
        return f"<opforge.Variable '{self.name}' shape={self.shape} dtype={self.dtype.name}, numpy={self.numpy()!r}>"

    def __del__(self):
        try:
            from . import _graph, raw_ops

            with _graph.init_scope():
                raw_ops.DestroyResourceOp(resource=self.handle, ignore_lookup_error=True)
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    # Arithmetic reads the value.
    def _v(self):
        return self.read_value()

    def __add__(self, o): return self._v() + o
    def __radd__(self, o): return o + self._v()
    def __sub__(self, o): return self._v() - o
    def __rsub__(self, o): return o - self._v()
    def __mul__(self, o): return self._v() * o
    def __rmul__(self, o): return o * self._v()
    def __truediv__(self, o): return self._v() / o
    def __rtruediv__(self, o): return o / self._v()
    def __matmul__(self, o): return self._v() @ o
    def __rmatmul__(self, o): return o @ self._v()
    def __neg__(self): return -self._v()
    def __getitem__(self, key): return self._v()[key]
    def __pow__(self, o): return self._v() ** o


def _as_tensor_of(v, dtype):
    from ._convert import convert_to_tensor

    return convert_to_tensor(v.read_value() if isinstance(v, Variable) else v, dtype=dtype)
