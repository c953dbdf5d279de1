"""`opforge.numpy_function` and `opforge.py_function`: TensorFlow's `PyFunc`,
`PyFuncStateless` and `EagerPyFunc` ops, with kernels that call Python (see
`_pykernel`).

As in TensorFlow, a function is found through the op's `token` attr. Inside a
graph (`opforge.function`, `Graph.as_default()`), each call gets a token of
its own (`pyfunc_N`), kept while the graph lives. Eager calls all use the token
`eager` and pass the function on the calling thread, so that the eager kernel
cache holds one kernel per dtype signature, not one per call.

Errors are TensorFlow 2.21's: eagerly, `numpy_function` lets the function's
exception through unchanged; in a graph, and for `py_function` always, a
`ValueError`/`TypeError` becomes `InvalidArgumentError`, `StopIteration`
`OutOfRangeError`, `MemoryError` `ResourceExhaustedError`,
`NotImplementedError` `UnimplementedError`, anything else `UnknownError`, with
the exception's type, message and traceback as the message.

Differences from TensorFlow: the arrays `numpy_function` passes are read-only
views of the input tensors (no copy; TensorFlow passes writable arrays, and
eagerly TensorFlow 2.21 even lets the function write the caller's tensor);
eagerly, a result whose dtype is not `Tout` is an `InvalidArgumentError` as in
a graph (TensorFlow returns it with its own dtype when eager).
"""

from __future__ import annotations

import itertools
import threading
import traceback
import weakref

import numpy as np

from . import _C, _graph, _pykernel, dtypes, errors
from ._C import Tensor

_tokens = itertools.count()
# token -> (func, kind): functions of graph calls, removed with their graph.
_funcs: dict[str, tuple] = {}
# Eager calls: the function of the call under way on this thread.
_eager = threading.local()
# py_function's forward tapes, for its gradient: key -> (tape, inputs, outputs).
_tape_cache: dict = {}
_TAPE_CACHE_MAX = 4096


def _tf_name(d) -> str:
    """TensorFlow's C++ name of a dtype (`float`, `double`, `int32`)."""
    return d._proto[3:].lower()


def _as_op_error(e: BaseException, kind: str):
    """TensorFlow's error for exception `e` raised by a script op's function."""
    text = "".join(traceback.format_exception(type(e), e, e.__traceback__))
    message = f"{type(e).__name__}: {e}\n{text}"
    if isinstance(e, (ValueError, TypeError)):
        cls = errors.InvalidArgumentError
    elif isinstance(e, StopIteration):
        cls = errors.OutOfRangeError
    elif isinstance(e, MemoryError):
        cls = errors.ResourceExhaustedError
    elif isinstance(e, NotImplementedError):
        cls = errors.UnimplementedError
    elif isinstance(e, errors.OpError):
        return e
    else:
        cls = errors.UnknownError
    return cls(message, kind)


def _lookup(token: str):
    if token == "eager":
        stack = getattr(_eager, "stack", None)
        if stack:
            return stack[-1]
    entry = _funcs.get(token)
    if entry is None:
        raise errors.InvalidArgumentError(
            f"the Python function of token '{token}' is gone (its graph was deleted, or the "
            "graph was imported into another process)",
            None,
        )
    return entry


def _numpy_factory(attrs, node):
    token = _pykernel.as_str(attrs["token"])
    tout = [dtypes.as_dtype(t) for t in attrs["Tout"]]
    name = token if token != "eager" else "pyfunc"

    def kernel(call, inputs):
        func, _, eager = _lookup(token)
        args = call.arrays()
        try:
            ret = func(*args)
        except BaseException as e:
            if eager:
                raise
            raise _as_op_error(e, "PyFunc") from None
        if ret is None:
            ret = []
        elif not isinstance(ret, (list, tuple)):
            ret = [ret]
        if len(ret) != len(tout):
            raise errors.InvalidArgumentError(
                f"{name} returns {len(ret)} values, but expects to see {len(tout)} values.", None
            )
        for i, (v, want) in enumerate(zip(ret, tout)):
            if isinstance(v, Tensor):
                v = v.numpy()
            if not isinstance(v, np.ndarray):
                v = np.asarray(v, dtype=want.as_numpy_dtype) if eager else np.asarray(v)
            if want is dtypes.string:
                call.set_output(i, _string_tensor(v))
                continue
            if v.dtype != want.as_numpy_dtype:
                got = _tf_name(dtypes.as_dtype(v.dtype))
                raise errors.InvalidArgumentError(
                    f"{i}-th value returned by {name} is {got}, but expects {_tf_name(want)}",
                    None,
                )
            call.set_output(i, v)

    return kernel


def _string_tensor(v):
    from ._convert import constant

    return constant(np.asarray(v, dtype=object), dtype=dtypes.string)


def _eager_factory(attrs, node):
    token = _pykernel.as_str(attrs["token"])
    tout = [dtypes.as_dtype(t) for t in attrs["Tout"]]

    def kernel(call, inputs):
        from ._convert import convert_to_tensor
        from ._tape import GradientTape

        func, key, _ = _lookup(token)
        record = key is not None
        try:
            if record:
                with GradientTape(persistent=False) as tape:
                    for t in inputs:
                        if t.dtype.is_floating or t.dtype.is_complex:
                            tape.watch(t)
                    ret = func(*inputs)
            else:
                ret = func(*inputs)
            if ret is None:
                ret = []
            elif not isinstance(ret, (list, tuple)):
                ret = [ret]
            outs = [convert_to_tensor(v, dtype=want) for v, want in zip(ret, tout)]
        except BaseException as e:
            raise _as_op_error(e, "EagerPyFunc") from None
        if len(outs) < len(tout):
            raise errors.InvalidArgumentError(
                f"{token} returns {len(outs)} values, but expects to see {len(tout)} values.",
                None,
            )
        for i, t in enumerate(outs):
            call.set_output(i, t)
        if record:
            if len(_tape_cache) >= _TAPE_CACHE_MAX:
                _tape_cache.pop(next(iter(_tape_cache)))
            _tape_cache[key(outs)] = (tape, list(inputs), outs)

    return kernel


_INPUTS = ["input: Tin"]
_OUTPUTS = ["output: Tout"]
_ATTRS = ["token: string", "Tin: list(type) >= 0", "Tout: list(type) >= 0"]
_pykernel.register_op(
    "PyFunc", inputs=_INPUTS, outputs=_OUTPUTS, attrs=_ATTRS, factory=_numpy_factory,
    stateful=True, location=__file__,
    doc="Invokes a Python function to compute func(input)->output.\n\n"
    "This operation is considered stateful. For a stateless version, see PyFuncStateless.\n\n"
    "input: List of Tensors that will provide input to the Op.\n"
    "output: The outputs from the Op.\n"
    "token: A token representing a registered python function in this address space.\n"
    "Tin: Data types of the inputs to the op.\n"
    "Tout: Data types of the outputs from the op.",
)
_pykernel.register_op(
    "PyFuncStateless", inputs=_INPUTS, outputs=_OUTPUTS, attrs=_ATTRS, factory=_numpy_factory,
    location=__file__,
    doc="A stateless version of PyFunc.",
)
_pykernel.register_op(
    "EagerPyFunc", inputs=_INPUTS, outputs=_OUTPUTS,
    attrs=_ATTRS + ["is_async: bool = false"], factory=_eager_factory, stateful=True,
    location=__file__,
    doc="Eagerly executes a python function to compute func(input)->output. The\n"
    "semantics of the input, output, and attributes are the same as those for\nPyFunc.",
)
_C.not_differentiable("PyFunc", __file__)
_C.not_differentiable("PyFuncStateless", __file__)


def _out_key(outs):
    return tuple(t._data_ptr for t in outs)


def _symbolic(inp) -> bool:
    from ._symbolic import SymbolicTensor

    return any(isinstance(x, SymbolicTensor) for x in inp)


def _graph_token(func, kind) -> str:
    token = f"pyfunc_{next(_tokens)}"
    _funcs[token] = (func, kind, False)
    g = _graph.current()
    if g is not None:
        weakref.finalize(g, _funcs.pop, token, None)
    return token


def _flat_tout(Tout):
    if isinstance(Tout, (list, tuple)):
        return [dtypes.as_dtype(t) for t in Tout], True
    return [dtypes.as_dtype(Tout)], False


def _call(op, func, inp, Tout, name, key=None):
    from ._ops import execute

    tout, is_list = _flat_tout(Tout)
    attrs = {"Tout": tout}
    if _graph.current() is not None or _symbolic(inp):
        attrs["token"] = _graph_token(func, op)
        outs = execute(op, [list(inp)], attrs, name)
    else:
        attrs["token"] = "eager"
        stack = getattr(_eager, "stack", None)
        if stack is None:
            stack = _eager.stack = []
        stack.append((func, key, True))
        try:
            outs = execute(op, [list(inp)], attrs, name)
        finally:
            stack.pop()
    if outs is None:
        outs = []
    elif not isinstance(outs, (list, tuple)):
        outs = [outs]
    outs = list(outs)
    if not is_list:
        return outs[0]
    return outs


def numpy_function(func, inp, Tout, stateful=True, name=None):
    """Wraps the Python function `func`, which takes and returns numpy arrays,
    as an op (TensorFlow's `tf.numpy_function`): `PyFunc` (`stateful=True`) or
    `PyFuncStateless`. `Tout` is a dtype (one output, returned as a tensor) or
    a list of dtypes (a list returned). Not differentiable. Runs eagerly and in
    graphs; in a graph, the function must be alive when the graph runs.

    `func` gets read-only numpy views of the inputs (no copy): return new
    arrays. Python scalars it returns take `Tout`'s dtype eagerly.
    """
    op = "PyFunc" if stateful else "PyFuncStateless"
    return _call(op, func, inp, Tout, name)


def py_function(func, inp, Tout, name=None):
    """Wraps the Python function `func`, which takes and returns eager
    `Tensor`s, as an op (TensorFlow's `tf.py_function`, op `EagerPyFunc`).
    Differentiable: its gradient is taken from a tape recorded around `func`'s
    body, as TensorFlow does, eagerly and in graphs."""
    from ._tape import active_tapes

    key = _out_key if active_tapes() else None
    if _graph.current() is not None or _symbolic(inp):
        return _call_graph_py_function(func, inp, Tout, name)
    return _call("EagerPyFunc", func, inp, Tout, name, key)


def _call_graph_py_function(func, inp, Tout, name):
    from ._ops import execute

    tout, is_list = _flat_tout(Tout)
    token = f"pyfunc_{next(_tokens)}"
    _funcs[token] = (func, None, False)
    g = _graph.current()
    if g is not None:
        weakref.finalize(g, _funcs.pop, token, None)
    outs = execute("EagerPyFunc", [list(inp)], {"Tout": tout, "token": token}, name)
    if outs is None:
        outs = []
    elif not isinstance(outs, (list, tuple)):
        outs = [outs]
    outs = list(outs)
    return outs if is_list else outs[0]


def _eager_py_func_grad(op, *dy):
    token = _pykernel.as_str(op.get_attr("token"))
    sources = list(op.inputs)
    if token == "eager":
        # Eagerly: the tape recorded around the forward call's body.
        entry = _tape_cache.pop(_out_key(op.outputs), None)
        if entry is None:
            return [None] * len(sources)
        tape, ins, outs = entry
        return tape.gradient(outs, ins, output_gradients=list(dy))
    # In a graph: a py_function of its own that records the forward
    # function's body on a tape and differentiates it (the body runs again:
    # a graph run may differentiate on another thread than the forward ran).
    func = _funcs[token][0]
    n = len(sources)
    dys = [d if d is not None else _zeros_like_sym(o) for d, o in zip(dy, op.outputs)]

    def grad_fn(*vals):
        from ._tape import GradientTape

        ins, gys = list(vals[:n]), list(vals[n:])
        with GradientTape() as tape:
            for t in ins:
                if t.dtype.is_floating or t.dtype.is_complex:
                    tape.watch(t)
            outs = func(*ins)
        if not isinstance(outs, (list, tuple)):
            outs = [outs]
        gs = tape.gradient(list(outs), ins, output_gradients=gys)
        return [g if g is not None else _zeros_like(x) for g, x in zip(gs, ins)]

    return _call_graph_py_function(grad_fn, sources + dys, [x.dtype for x in sources], None)


def _zeros_like_sym(x):
    from . import ops

    return ops.zeros_like(x)


def _zeros_like(x):
    from ._convert import constant

    return constant(np.zeros(x.shape, dtype=x.dtype.as_numpy_dtype))


_C.register_gradient("EagerPyFunc", _eager_py_func_grad, False, __file__)
