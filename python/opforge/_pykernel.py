"""Ops whose kernel is Python code: the machinery under `opforge.numpy_function`,
`opforge.py_function` and `opforge.operator` (crates/opforge-py/src/pykernel.rs
holds the native half and the rules: lent buffers, the GIL, errors).

`register_op` registers a real op (OpDef, CPU kernel, shape function) owned by
the package's Python owner; it then runs eagerly, under tapes, in graphs and in
`opforge.gradients` like any other op. A kernel's Python code runs with the
calling thread's tapes paused and eager mode on: ops it runs are not recorded
on the caller's tape nor added to the caller's graph.
"""

from __future__ import annotations

import atexit
import inspect
from typing import Any, Callable, Sequence

from . import _C, _graph, _tape

atexit.register(_C.python_kernels_shutdown)

_tstate = _tape._state
_gstate = _graph._state


class paused:
    """While a kernel's Python code runs: this thread's tapes and graphs are
    set aside (ops run eagerly and are recorded nowhere), and put back after."""

    __slots__ = ("_tapes", "_graphs")

    def __enter__(self):
        d = _tstate.__dict__
        self._tapes = d.get("tapes")
        if self._tapes:
            _tstate.tapes = []
            _tape._sync()
        g = _gstate.__dict__
        self._graphs = g.get("graphs")
        if self._graphs:
            _gstate.graphs = []
            _graph._sync_fast_path()
        return self

    def __exit__(self, *exc):
        if self._tapes:
            _tstate.tapes = self._tapes
            _tape._sync()
        if self._graphs:
            _gstate.graphs = self._graphs
            _graph._sync_fast_path()
        return False


def as_str(v) -> str:
    """A string attr's value as `str` (attrs reach kernels as TensorFlow
    gives them to Python: `bytes`)."""
    return v.decode() if isinstance(v, bytes) else v


def run_paused(f, args):
    """Runs `f(*args)` (a kernel's Python code) with this thread's tapes and
    graphs set aside (the native kernel calls this when the thread may have
    either)."""
    with paused():
        return f(*args)


def _caller_location() -> str:
    for frame in inspect.stack()[2:]:
        if "/opforge/" not in frame.filename.replace("\\", "/"):
            return f"{frame.filename}:{frame.lineno}"
    return "python"


def register_op(
    name: str,
    *,
    inputs: Sequence[str],
    outputs: Sequence[str],
    attrs: Sequence[str] = (),
    factory: Callable[[dict, str], Callable[[Any, list], None]],
    shape_fn: Callable[[list, dict], list] | None = None,
    doc: str = "",
    stateful: bool = False,
    location: str | None = None,
    requests: Sequence[str] = (),
    forward: bool = False,
) -> None:
    """Registers op `name` from TensorFlow spec strings (`"x: T"`, `"T: {float, int32}"`)
    with a CPU kernel written in Python.

    `factory(attrs, node_name)` runs once per kernel (per graph node, or per
    eager call signature) and returns `kernel(call, inputs)`, which runs each
    call: `inputs` are the input `Tensor`s (`call.arrays()` gives read-only
    numpy views of them, no copy), and `call` sets every output, with
    `call.allocate_output(i, shape)` (a writable numpy array over the output's
    buffer, which the kernel fills) or `call.set_output(i, tensor_or_array)`
    (an array is copied).
    `shape_fn(input_shapes, attrs)` returns one shape per output (a list of
    dims with None for unknown ones, or None for an unknown rank); without one
    the output shapes are unknown.

    `requests` names the output requests beyond `'write'` the kernel handles
    (`'null'`: an output nobody reads may be skipped; `'add'`:
    `allocate_output` lends the accumulator, and the kernel adds its result
    into it); `call.requests` tells the kernel what each call asks. Other
    requests are the runtime's to handle. With `forward`, the op is an MXNet
    custom operator's forward (`opforge.operator`): `factory` returns a
    planner, `plan(in_shapes) -> (out_shapes, forward, aux, ndarray_class,
    is_train)`, asked once per input shapes, and the native kernel calls
    `forward(is_train, req, in_data, out_data, aux)` itself.
    """
    _C.register_python_op(
        name, list(inputs), list(outputs), list(attrs), doc, factory, shape_fn,
        stateful, location or _caller_location(), list(requests), forward,
    )
