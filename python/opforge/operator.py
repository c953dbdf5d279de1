"""Operators written in Python, MXNet style (`mxnet.operator`): `CustomOp`,
`CustomOpProp`, `register` and `Custom`.

    @of.operator.register("softmax")
    class SoftmaxProp(of.operator.CustomOpProp):
        def __init__(self):
            super().__init__(need_top_grad=False)
        def list_arguments(self):
            return ["data", "label"]
        def infer_shape(self, in_shape):
            return in_shape, [in_shape[0]], []
        def create_operator(self, ctx, in_shapes, in_dtypes):
            return Softmax()

    y = of.operator.Custom(x, label, op_type="softmax")

Each registered op type becomes two real ops (`Custom>softmax` and its
backward, `Custom>softmax>Backward`), with Python kernels (see `_pykernel`):
they run eagerly, under `GradientTape`, in `opforge.function` graphs and in
`opforge.gradients`, mixed with every other op.

- `in_data`, `out_data`, `in_grad` and `aux` are `NDArray`s: views of the
  runtime's buffers, no copies (`numpy.asarray(x)` shares memory,
  `x.asnumpy()` copies, `x[:] = v` writes). Inputs are read-only. Buffers lent
  for a call stop reaching the runtime when it returns: an array kept after
  the call and written later changes no tensor.
- Parameters: `Custom(..., op_type="t", **params)` calls the prop's
  `__init__(**params)` with the values as given, keeping their Python types;
  MXNet turned every value into a string. Code written for MXNet that parses
  strings keeps working when given strings, and `Custom` accepts them.
- `create_operator` runs once per (parameters, input shapes, input dtypes);
  forward and backward of a call use the same operator object, so state kept
  on `self` in `forward` is there in `backward`, as in MXNet.
- Auxiliary states (`list_auxiliary_states`) are arrays owned by the operator
  type and parameters, zeros at first, shaped by `infer_shape`'s third list;
  they persist across calls as in MXNet.
- `req` is what the runtime asks of each output, as MXNet's executor does:
  `'write'`; `'null'` for an output nobody reads (a graph output not fetched
  or used) and for the gradients of integer and bool inputs; `'add'` where a
  graph sums several gradients of one tensor: the output view then holds the
  sum so far, and the op adds its part (`assign` does). `'inplace'` is never
  asked of a Python operator. `assign` honours all four.
- An exception raised in `forward`, `backward`, `infer_shape` or `infer_type`
  reaches the caller as the same object, with a note naming the op and node.
"""

from __future__ import annotations

import operator as operator_module
import re
import threading
from typing import Any

import numpy as np

from . import _C, _graph, _pykernel, _tape, dtypes, errors
from ._convert import convert_to_tensor
from ._symbolic import SymbolicTensor

_Tensor = _C.Tensor

__all__ = [
    "CustomOp", "CustomOpProp", "NDArray", "register", "Custom", "get_all_registered_operators",
    "is_training", "train_mode",
]


class NDArray:
    """A view of a runtime buffer for a `CustomOp` (MXNet's NDArray, the parts
    custom operators use): `shape`, `dtype`, `size`, `ndim`, `asnumpy()` (a
    copy), `numpy.asarray(x)` (the view itself), indexing, `x[:] = v`,
    `x += v`, arithmetic (numpy arrays as results)."""

    __slots__ = ("_a",)

    def __init__(self, array: np.ndarray):
        self._a = array

    @property
    def shape(self) -> tuple:
        return self._a.shape

    @property
    def dtype(self):
        return self._a.dtype.type

    @property
    def size(self) -> int:
        return self._a.size

    @property
    def ndim(self) -> int:
        return self._a.ndim

    @property
    def context(self) -> str:
        return "cpu(0)"

    def asnumpy(self) -> np.ndarray:
        return self._a.copy()

    def asscalar(self):
        return self._a.reshape(()).item() if self._a.size == 1 else self._a.item()

    def __array__(self, dtype=None, copy=None):
        if dtype is not None and np.dtype(dtype) != self._a.dtype:
            return self._a.astype(dtype)
        if copy:
            return self._a.copy()
        return self._a

    def __getitem__(self, key):
        return NDArray(self._a[key])

    def __setitem__(self, key, value):
        self._a[key] = value._a if type(value) is NDArray else value

    def __iadd__(self, value):
        self._a += np.asarray(value)
        return self

    def __isub__(self, value):
        self._a -= np.asarray(value)
        return self

    def __imul__(self, value):
        self._a *= np.asarray(value)
        return self

    def __len__(self) -> int:
        return len(self._a)

    def __repr__(self) -> str:
        return f"<NDArray {'x'.join(map(str, self.shape))} @cpu(0)>\n{self._a!r}"

    def copyto(self, other):
        other[:] = self._a
        return other

    def _op(self, other, f):
        return f(self._a, np.asarray(other))

    def __add__(self, o): return self._op(o, np.add)
    def __radd__(self, o): return self._op(o, lambda a, b: b + a)
    def __sub__(self, o): return self._op(o, np.subtract)
    def __rsub__(self, o): return self._op(o, lambda a, b: b - a)
    def __mul__(self, o): return self._op(o, np.multiply)
    def __rmul__(self, o): return self._op(o, lambda a, b: b * a)
    def __truediv__(self, o): return self._op(o, np.true_divide)
    def __rtruediv__(self, o): return self._op(o, lambda a, b: b / a)
    def __neg__(self): return -self._a


class CustomOp:
    """An operator's computation (MXNet's `mx.operator.CustomOp`)."""

    def __init__(self):
        pass

    def forward(self, is_train, req, in_data, out_data, aux):
        """Computes `out_data` from `in_data` (write them with `assign`)."""
        raise NotImplementedError(f"{type(self).__name__}.forward")

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        """Computes `in_grad` from `out_grad` (and `in_data`/`out_data`)."""
        raise NotImplementedError(f"{type(self).__name__}.backward")

    def assign(self, dst, req, src):
        """Writes `src` to `dst` as `req` asks: nothing for `'null'`,
        `dst[:] = src` for `'write'` and `'inplace'`, `dst[:] += src` for
        `'add'`. `dst` may be an `NDArray` or a numpy array."""
        if req == "null":
            return
        if req == "write" or req == "inplace":
            dst[:] = src
        elif req == "add":
            dst[:] += np.asarray(src)
        else:
            raise ValueError(f"unknown req '{req}': expected 'null', 'write', 'inplace' or 'add'")


class CustomOpProp:
    """An operator's properties (MXNet's `mx.operator.CustomOpProp`): its
    arguments, outputs, auxiliary states, shape and type inference, backward
    dependencies, and the factory of its `CustomOp`."""

    def __init__(self, need_top_grad=True):
        self.need_top_grad_ = need_top_grad

    def infer_shape(self, in_shape):
        """(input shapes, output shapes, aux shapes): by default the outputs
        take the first input's shape, and there are no auxiliary states."""
        return in_shape, (in_shape[0],) * len(self.list_outputs()), ()

    def infer_type(self, in_type):
        """(input types, output types, aux types) as numpy types: by default
        everything takes the first input's type."""
        return (
            in_type,
            [in_type[0]] * len(self.list_outputs()),
            [in_type[0]] * len(self.list_auxiliary_states()),
        )

    def list_outputs(self):
        return ["output"]

    def list_arguments(self):
        return ["data"]

    def list_auxiliary_states(self):
        return []

    def declare_backward_dependency(self, out_grad, in_data, out_data):
        """The ids (from the three lists) of the buffers backward reads: only
        those are kept for the gradient."""
        deps = []
        if self.need_top_grad_:
            deps.extend(out_grad)
        deps.extend(in_data)
        deps.extend(out_data)
        return deps

    def create_operator(self, ctx, in_shapes, in_dtypes):
        """The `CustomOp` for inputs of these shapes and dtypes."""
        return CustomOp()


_registry: dict[str, type] = {}
_lock = threading.Lock()


def register(reg_name: str):
    """Class decorator: registers a `CustomOpProp` subclass as op type
    `reg_name`, called with `Custom(..., op_type=reg_name)`."""
    def do_register(prop_cls):
        if not (isinstance(prop_cls, type) and issubclass(prop_cls, CustomOpProp)):
            raise TypeError(f"register('{reg_name}') decorates a CustomOpProp subclass")
        with _lock:
            _registry[reg_name] = prop_cls
            # A new class for the name: instances of the old one are stale.
            for key in [k for k, e in _props.items() if e.op_type == reg_name]:
                del _props[key]
            for key in [k for k in _entries
                        if k == reg_name or (isinstance(k, tuple) and k[0] == reg_name)]:
                del _entries[key]
            _calls.clear()
            _fast.clear()
        _C.python_kernel_plans_changed()
        return prop_cls

    return do_register


def get_all_registered_operators():
    """The registered op types."""
    return sorted(_registry)


def _sanitize(name: str) -> str:
    s = re.sub(r"[^A-Za-z0-9_]", "_", name)
    return s


def _arg_name(name: str) -> str:
    s = re.sub(r"[^a-z0-9_]", "_", name.lower())
    if not s or not s[0].isalpha():
        s = "a_" + s
    return s


class _Entry:
    """One (op type, parameters): the prop, its op names, caches."""

    def __init__(self, key: str, op_type: str, prop: CustomOpProp):
        self.key = key
        self.op_type = op_type
        self.prop = prop
        self.args = list(prop.list_arguments())
        self.outs = list(prop.list_outputs())
        self.aux_names = list(prop.list_auxiliary_states())
        n_in, n_out = len(self.args), len(self.outs)
        self.dep_ids = [
            int(i)
            for i in prop.declare_backward_dependency(
                list(range(n_out)),
                list(range(n_out, n_out + n_in)),
                list(range(n_out + n_in, 2 * n_out + n_in)),
            )
        ]
        self.operators: dict = {}
        self.shapes: dict = {}
        self.aux: dict = {}
        self.op_name, self.grad_name, self.in_names, self.out_names = _ensure_ops(
            op_type, self.args, self.outs)
        self.n_args, self.n_outs = n_in, n_out
        self.lock = threading.Lock()

    def infer_shapes(self, in_shapes):
        key = tuple(in_shapes)
        r = self.shapes.get(key)
        if r is not None:
            return r
        if r is None:
            res = self.prop.infer_shape([list(s) for s in in_shapes])
            if not isinstance(res, (list, tuple)) or len(res) not in (2, 3):
                raise ValueError(
                    f"{type(self.prop).__name__}.infer_shape must return (in_shapes, out_shapes"
                    f", aux_shapes), not {res!r}"
                )
            outs = res[1]
            aux = res[2] if len(res) == 3 else []
            if len(outs) != len(self.outs):
                raise ValueError(
                    f"{type(self.prop).__name__}.infer_shape returned {len(outs)} output shapes "
                    f"for {len(self.outs)} outputs ({self.outs})"
                )
            if len(aux) != len(self.aux_names):
                raise ValueError(
                    f"{type(self.prop).__name__}.infer_shape returned {len(aux)} aux shapes for "
                    f"{len(self.aux_names)} auxiliary states ({self.aux_names})"
                )
            try:
                r = ([tuple(int(d) for d in s) for s in outs], [tuple(int(d) for d in s) for s in aux])
            except (TypeError, ValueError):
                raise ValueError(
                    f"{type(self.prop).__name__}.infer_shape returned a shape that is not a "
                    f"list of ints: {res!r}"
                ) from None
            self.shapes[key] = r
        return r

    def operator(self, in_shapes, in_dtypes):
        key = (tuple(in_shapes), tuple(in_dtypes))
        op = self.operators.get(key)
        if op is not None:
            return op
        if op is None:
            with self.lock:
                op = self.operators.get(key)
                if op is None:
                    op = self.prop.create_operator(
                        "cpu(0)", [list(s) for s in in_shapes], list(in_dtypes)
                    )
                    self.operators[key] = op
        return op

    def aux_arrays(self, in_shapes, in_dtypes):
        if not self.aux_names:
            return []
        key = tuple(in_shapes)
        arrays = self.aux.get(key)
        if arrays is None:
            _, aux_shapes = self.infer_shapes(in_shapes)
            _, _, aux_types = self.infer_types(in_dtypes)
            arrays = [NDArray(np.zeros(s, dtype=t)) for s, t in zip(aux_shapes, aux_types)]
            self.aux[key] = arrays
        return arrays

    def infer_types(self, in_dtypes):
        res = self.prop.infer_type(list(in_dtypes))
        if not isinstance(res, (list, tuple)) or len(res) not in (2, 3):
            raise ValueError(
                f"{type(self.prop).__name__}.infer_type must return (in_types, out_types, "
                f"aux_types), not {res!r}"
            )
        outs = [np.dtype(t).type for t in res[1]]
        aux = [np.dtype(t).type for t in (res[2] if len(res) == 3 else [])]
        if len(outs) != len(self.outs):
            raise ValueError(
                f"{type(self.prop).__name__}.infer_type returned {len(outs)} output types for "
                f"{len(self.outs)} outputs"
            )
        return res[0], outs, aux


_props: dict[str, _Entry] = {}
_ops_made: dict[tuple, tuple] = {}


def _prop_key(op_type: str, params: dict) -> str:
    return op_type + "(" + ", ".join(f"{k}={params[k]!r}" for k in sorted(params)) + ")"


def _entry(op_type: str, params: dict) -> _Entry:
    key = _prop_key(op_type, params)
    e = _props.get(key)
    if e is None:
        cls = _registry.get(op_type)
        if cls is None:
            raise ValueError(
                f"no custom operator type '{op_type}' is registered (register one with "
                f"@opforge.operator.register('{op_type}'); registered: "
                f"{get_all_registered_operators()})"
            )
        e = _Entry(key, op_type, cls(**params))
        _props[key] = e
    return e


def _by_key(key: str) -> _Entry:
    e = _props.get(key)
    if e is None:
        raise errors.FailedPreconditionError(
            f"the custom operator '{key}' is not known in this process (register its prop "
            "class and call it once, or re-register it)",
            None,
        )
    return e


def _ensure_ops(op_type: str, args, outs):
    """The forward and backward op names of `op_type` with these arguments and
    outputs, registering the ops the first time."""
    sig = (tuple(args), tuple(outs))
    made = _ops_made.get((op_type, sig))
    if made is not None:
        return made
    base = f"Custom>{_sanitize(op_type)}"
    taken = {v[0] for v in _ops_made.values()}
    if base in taken:
        # Another signature of the type (its parameters change its
        # arguments or outputs): a numbered op of its own.
        k = 2
        while f"{base}_{k}" in taken:
            k += 1
        base = f"{base}_{k}"
    in_names = [_arg_name(a) for a in args]
    out_names: list[str] = []
    for o in outs:
        name = _arg_name(o)
        while name in in_names or name in out_names:
            name += "_out"
        out_names.append(name)
    if len(set(in_names)) != len(in_names):
        raise ValueError(f"custom operator '{op_type}': argument names {args} are not unique")
    inputs = [f"{a}: T_{a}" for a in in_names]
    outputs = [f"{o}: T_{o}" for o in out_names]
    attrs = [f"T_{a}: type" for a in in_names + out_names]
    attrs += ["prop_key: string", "is_train: bool = false"]
    doc = f"The custom operator '{op_type}' (opforge.operator), written in Python."
    fwd, bwd = base, base + ">Backward"
    _pykernel.register_op(
        fwd, inputs=inputs, outputs=outputs, attrs=attrs, factory=_forward_factory,
        shape_fn=_shape_fn, doc=doc, location=__file__, requests=("null", "add"), forward=True,
    )
    _pykernel.register_op(
        bwd,
        inputs=["deps: Tdeps"],
        outputs=["in_grad: Tgrad"],
        attrs=["Tdeps: list(type) >= 0", "Tgrad: list(type) >= 0", "prop_key: string",
               "dep_ids: list(int) >= 0", "in_shapes: list(shape) >= 0"],
        factory=_backward_factory, shape_fn=_backward_shape_fn, doc=f"The gradient of {fwd}.", location=__file__,
        requests=("null", "add"),
    )
    _C.register_gradient(fwd, _gradient, True, __file__)
    _C.not_differentiable(bwd, __file__)
    _ops_made[(op_type, sig)] = (fwd, bwd, in_names, out_names)
    return fwd, bwd, in_names, out_names


def _shape_fn(in_shapes, attrs):
    e = _by_key(_pykernel.as_str(attrs["prop_key"]))
    if any(s is None or any(d is None for d in s) for s in in_shapes):
        return [None] * len(e.outs)
    outs, _ = e.infer_shapes([tuple(s) for s in in_shapes])
    return [list(s) for s in outs]


def _forward_factory(attrs, node):
    """The planner of a forward kernel (see `_pykernel.register_op`'s
    `forward`): per input shapes, the output shapes, the operator's bound
    `forward`, the aux arrays, the view class and `is_train`."""
    key = _pykernel.as_str(attrs["prop_key"])
    is_train = bool(attrs.get("is_train", False))
    e0 = _by_key(key)
    in_dtypes = tuple(dtypes.as_dtype(attrs[f"T_{n}"]).as_numpy_dtype for n in e0.in_names)

    def plan(in_shapes):
        e = _by_key(key)
        in_shapes = tuple(tuple(s) for s in in_shapes)
        out_shapes, _ = e.infer_shapes(in_shapes)
        aux = e.aux_arrays(in_shapes, in_dtypes) if e.aux_names else []
        op = e.operator(in_shapes, in_dtypes)
        return [list(s) for s in out_shapes], op.forward, aux, NDArray, is_train

    return plan


def _backward_shape_fn(in_shapes, attrs):
    return [list(s) for s in attrs["in_shapes"]]


def _backward_factory(attrs, node):
    key = _pykernel.as_str(attrs["prop_key"])
    dep_ids = list(attrs["dep_ids"])
    grad_types = [dtypes.as_dtype(t) for t in attrs["Tgrad"]]
    differentiable = [t.is_floating or t.is_complex for t in grad_types]
    in_shapes = tuple(tuple(int(d) for d in s) for s in attrs["in_shapes"])

    def kernel(call, inputs):
        e = _props.get(key) or _by_key(key)
        n_out, n_in = len(e.outs), len(e.args)
        in_dtypes = [t.as_numpy_dtype for t in grad_types]
        op = e.operator(in_shapes, in_dtypes)
        out_grad: list[Any] = [None] * n_out
        in_data: list[Any] = [None] * n_in
        out_data: list[Any] = [None] * n_out
        for i, a in zip(dep_ids, call.arrays()):
            v = NDArray(a)
            if i < n_out:
                out_grad[i] = v
            elif i < n_out + n_in:
                in_data[i - n_out] = v
            else:
                out_data[i - n_out - n_in] = v
        in_grad = [NDArray(call.allocate_output(i, s)) for i, s in enumerate(in_shapes)]
        aux = e.aux_arrays(in_shapes, in_dtypes)
        req = [r if d else "null" for r, d in zip(call.requests, differentiable)]
        op.backward(req=req, out_grad=out_grad, in_data=in_data, out_data=out_data,
                    in_grad=in_grad, aux=aux)

    return kernel


def _gradient(op, *dy):
    from . import ops as _ops_fns

    e = _by_key(_pykernel.as_str(op.get_attr("prop_key")))
    n_out, n_in = len(e.outs), len(e.args)
    deps = []
    for i in e.dep_ids:
        if i < n_out:
            g = dy[i]
            if g is None:
                g = _ops_fns.zeros_like(op.outputs[i])
            deps.append(g)
        elif i < n_out + n_in:
            deps.append(op.inputs[i - n_out])
        else:
            deps.append(op.outputs[i - n_out - n_in])
    shapes = []
    for x in op.inputs:
        shape = x.shape
        if shape is None or any(d is None for d in shape):
            raise errors.UnimplementedError(
                f"the gradient of custom operator '{e.op_type}' in a graph needs its inputs' "
                f"shapes when the graph is built; input shape {shape} is not fully known",
                op.type,
            )
        shapes.append([int(d) for d in shape])
    from ._ops import execute

    grads = execute(
        e.grad_name,
        [deps],
        {"prop_key": e.key, "dep_ids": e.dep_ids, "Tgrad": [x.dtype for x in op.inputs],
         "in_shapes": shapes},
    )
    if not isinstance(grads, (list, tuple)):
        grads = [grads]
    return [g if dtypes.as_dtype(x.dtype).is_floating or dtypes.as_dtype(x.dtype).is_complex else None
            for g, x in zip(grads, op.inputs)]


_train = threading.local()


def is_training() -> bool:
    """Whether `Custom` calls on this thread get `is_train=True`: inside
    `train_mode()`, or while a `GradientTape` records."""
    if _train.__dict__.get("on"):
        return True
    if not _tape._state.__dict__.get("tapes"):
        return False
    return bool(_tape.active_tapes())


class train_mode:
    """`with opforge.operator.train_mode():` calls get `is_train=True`."""

    def __enter__(self):
        self._saved = getattr(_train, "on", False)
        _train.on = True
        self._native = _C.set_custom_training(True)

    def __exit__(self, *exc):
        _train.on = self._saved
        _C.set_custom_training(self._native)
        return False


_calls: dict = {}
# op type -> [(input dtype enums, fn, attrs)], the plans of calls without
# parameters or a tape (`_C.CustomCaller` reads it; keyed by the type alone,
# whose string caches its hash, so that the native lookup builds no key).
_fast: dict = {}


def _call_plan(e: _Entry, in_enums: tuple, training: bool):
    """How to call `e`'s op on inputs of these dtypes: `(fn, attrs)`, the op
    function and its attr values as positional arguments after the inputs
    (cached: output types come from `infer_type` once)."""
    from ._ops import make_function, op_info

    key = (e.key, in_enums, training)
    plan = _calls.get(key)
    if plan is None:
        in_types = [dtypes.as_dtype(d).as_numpy_dtype for d in in_enums]
        _, out_types, _ = e.infer_types(in_types)
        info = op_info(e.op_name)
        attrs: dict[str, Any] = {"prop_key": e.key}
        for n, t in zip(e.out_names, out_types):
            attrs[f"T_{n}"] = dtypes.as_dtype(t)
        if training:
            attrs["is_train"] = True
        # The function's parameters after the inputs, in order; trailing
        # ones left at their defaults are not passed.
        rest = [(arg in attrs, attrs.get(arg, default))
                for (_, arg, is_input, default) in info.params if not is_input]
        while rest and not rest[-1][0]:
            rest.pop()
        plan = (make_function(info, raw=False), tuple(v for _, v in rest))
        _calls[key] = plan
        if not training and e.key == _prop_key(e.op_type, {}):
            _fast.setdefault(e.op_type, []).append((in_enums, *plan))
    return plan


def _custom(*inputs, op_type: str, name=None, **params):
    """Runs the custom operator `op_type` (registered with `register`) on
    `inputs` (tensors, arrays or values), with `params` passed to its prop's
    `__init__`. One tensor for one output, else a list (MXNet's
    `mx.nd.Custom`). In a graph (`opforge.function`), adds the op's node."""
    try:
        pkey: Any = (op_type, tuple(sorted(params.items()))) if params else op_type
        e = _entries.get(pkey)
    except TypeError:  # unhashable parameter values
        pkey, e = None, None
    if e is None:
        e = _entry(op_type, params)
        if pkey is not None:
            _entries[pkey] = e
    if len(inputs) != e.n_args:
        raise TypeError(
            f"custom operator '{op_type}' takes {len(e.args)} inputs ({e.args}), got "
            f"{len(inputs)}"
        )
    if all(type(x) is _Tensor for x in inputs):
        ins = inputs
        enums = tuple(map(_dtype_enum_of, inputs))
    else:
        ins = tuple(x if isinstance(x, (SymbolicTensor, _Tensor)) else convert_to_tensor(x)
                    for x in inputs)
        enums = tuple(dtypes.as_dtype(x.dtype).as_datatype_enum for x in ins)
    training = is_training()
    fn, attrs = _calls.get((e.key, enums, training)) or _call_plan(e, enums, training)
    outs = fn(*ins, *attrs) if name is None else fn(*ins, *attrs, name=name)
    if e.n_outs == 1:
        return outs
    return list(outs)


_dtype_enum_of = operator_module.attrgetter("_dtype_enum")

# The common call (eager tensors, no parameters, no recording tape, not in
# train_mode) goes natively to the plan `_call_plan` put in `_fast`; every
# other call runs `_custom`.
Custom = _C.CustomCaller(_fast, _custom)
_entries: dict = {}
