"""Op functions generated from the registered OpDefs: `opforge.raw_ops.X`
(keyword-only, TensorFlow's `tf.raw_ops`) and snake_case functions in
`opforge.ops` (`ZeroOut` -> `zero_out`): inputs, then attrs without
defaults, then attrs with defaults, then `name=None`; attrs the inputs
determine (`T`, `N`) are inferred. Docstrings follow TensorFlow's generated
wrappers. Argument mistakes raise TypeError/ValueError naming the argument
and the op before any kernel runs."""

from __future__ import annotations

import ast
import collections
import inspect
import json
import keyword
import math
from typing import Any

from . import _C, _graph, _tape, dtypes
from ._C import Tensor
from ._convert import convert_to_tensor
from ._symbolic import SymbolicTensor

_gstate = _graph._state

class _Default:
    """A default that Python cannot write as a literal (a tensor attr):
    shown as TensorFlow's wrappers show it, left to opforge to fill in."""

    __slots__ = ("_text",)

    def __init__(self, text):
        self._text = text

    def __repr__(self):
        return self._text


def _default_value(literal: str):
    if literal.startswith("tf."):
        name = literal[3:]
        try:
            return dtypes.as_dtype(name)
        except TypeError:
            return _Default(literal)
    if literal in ("float('inf')", "float('-inf')", "float('nan')"):
        return float(literal[7:-2])
    try:
        return ast.literal_eval(literal)
    except (ValueError, SyntaxError):
        return _Default(literal)


class OpInfo:
    """What the generated functions of one op need, built once."""

    def __init__(self, opdef: dict):
        self.opdef = opdef
        self.name = opdef["name"]
        self.inputs = opdef.get("input_arg", [])
        self.outputs = opdef.get("output_arg", [])
        self.attr_types = {a["name"]: a["type"] for a in opdef.get("attr", [])}
        self.attr_defs = {a["name"]: a for a in opdef.get("attr", [])}
        self.params = [
            (py, arg, is_input, None if lit is None else _default_value(lit))
            for (py, arg, is_input, lit) in _C.python_params(self.name)
        ]
        self.has_default = {
            py: lit is not None for (py, _, _, lit) in _C.python_params(self.name)
        }
        # Single-tensor inputs only: Tensors pass through unconverted.
        self.simple = not any(
            a.get("number_attr") or a.get("type_list_attr") for a in self.inputs
        )
        names = [o["name"] for o in self.outputs]
        self.stateful = bool(opdef.get("is_stateful"))
        # The namedtuple of the outputs when there are several.
        self.result: Any = None
        if len(names) > 1:
            safe = [n + "_" if keyword.iskeyword(n) else n for n in names]
            # A namespaced op (`Custom>x`) names its tuple `Custom_x`.
            tname = "".join(c if c.isalnum() or c == "_" else "_" for c in self.name)
            self.result = collections.namedtuple(tname, safe)  # type: ignore[misc]

    # -- inputs ----------------------------------------------------------

    def _fixed_dtype(self, arg):
        t = arg.get("type")
        if t and t != "DT_INVALID":
            return dtypes.as_dtype(t)
        return None

    def convert_inputs(self, values):
        """The inputs as Tensors (lists for list args), with dtypes shared
        through type attrs as TensorFlow infers them."""
        if self.simple and all(type(v) is Tensor for v in values):
            return values
        known = {}
        # First pass: what Tensors and arrays say about each type attr.
        for arg, v in zip(self.inputs, values):
            ta = arg.get("type_attr")
            if not ta or ta in known:
                continue
            items = v if arg.get("number_attr") and isinstance(v, (list, tuple)) else [v]
            for item in items:
                d = getattr(item, "dtype", None)
                if isinstance(item, (Tensor, SymbolicTensor)):
                    known[ta] = item.dtype
                    break
                if d is not None and hasattr(item, "__array__"):
                    try:
                        known[ta] = dtypes.as_dtype(d)
                        break
                    except TypeError:
                        pass
        out = []
        for arg, v in zip(self.inputs, values):
            name = arg["name"]
            try:
                if arg.get("number_attr") or arg.get("type_list_attr"):
                    if isinstance(v, Tensor) or not isinstance(v, (list, tuple)):
                        raise TypeError(
                            f"Expected list for '{name}' argument to '{self.name}' Op, not {v!r}."
                        )
                    if arg.get("type_list_attr"):
                        out.append([convert_to_tensor(x) for x in v])
                    else:
                        fixed = self._fixed_dtype(arg)
                        ta = arg.get("type_attr")
                        conv = []
                        for x in v:
                            if fixed is not None:
                                conv.append(convert_to_tensor(x, dtype=fixed))
                            else:
                                t = convert_to_tensor(x, dtype_hint=known.get(ta))
                                known.setdefault(ta, t.dtype)
                                conv.append(t)
                        out.append(conv)
                else:
                    fixed = self._fixed_dtype(arg)
                    if fixed is not None:
                        out.append(convert_to_tensor(v, dtype=fixed))
                    else:
                        ta = arg.get("type_attr")
                        t = convert_to_tensor(v, dtype_hint=known.get(ta))
                        if ta:
                            known.setdefault(ta, t.dtype)
                        out.append(t)
            except (TypeError, ValueError) as e:
                raise type(e)(f"op '{self.name}', input '{name}': {e}") from None
        return out

    # -- attrs -----------------------------------------------------------

    def convert_attr(self, name, value):
        t = self.attr_types.get(name)
        try:
            if t == "type":
                return dtypes.as_dtype(value).as_datatype_enum
            if t == "list(type)":
                return [dtypes.as_dtype(v).as_datatype_enum for v in value]
        except TypeError as e:
            raise TypeError(f"op '{self.name}', attr '{name}': {e}") from None
        return value

    # -- results ---------------------------------------------------------

    def wrap(self, outs):
        if self.result is not None:
            return self.result(*outs)
        if len(outs) == 1:
            return outs[0]
        if not outs:
            return None
        return outs

    def call(self, input_values, attrs, name=None):
        if _gstate.__dict__.get("graphs"):
            return self.call_in_graph(_graph.current(), input_values, attrs, name)
        if self.simple and all(type(v) is Tensor for v in input_values):
            inputs = input_values
        else:
            g = _symbolic_graph(input_values)
            if g is not None:
                return self.call_in_graph(g, input_values, attrs, name)
            inputs = self.convert_inputs(input_values)
        conv = {k: self.convert_attr(k, v) for k, v in attrs.items()}
        outs = _C.execute(self.name, inputs, conv)
        if _tape._state.__dict__.get("tapes"):
            _tape.record(self.name, inputs, conv, outs)
        return self.wrap(outs)

    def call_in_graph(self, graph, input_values, attrs, name=None):
        """Adds a node of this op to `graph` (symbolic results). Eager
        inputs are captured (see `Graph.capture`)."""
        inputs = self.convert_inputs(input_values)
        sym = []
        for arg, v in zip(self.inputs, inputs):
            if isinstance(v, list):
                sym.append([_in_graph(graph, x, self.name, arg["name"]) for x in v])
            else:
                sym.append(_in_graph(graph, v, self.name, arg["name"]))
        conv = {k: self.convert_attr(k, v) for k, v in attrs.items()}
        control: list = []
        notes = None
        if self.stateful and getattr(graph, "_auto_control_deps", False):
            control, notes = graph._stateful_deps(self.name, sym)
        op, flat, groups = graph._add(self.name, sym, conv, name, control)
        if notes is not None:
            graph._note_stateful(op._node, notes)
        outs = []
        for start, end, is_list in groups:
            if is_list:
                outs.append(flat[start:end])
            else:
                outs.extend(flat[start:end])
        if not outs:
            return op
        return self.wrap(outs)

    # -- documentation ---------------------------------------------------

    def docstring(self):
        """TensorFlow's generated-wrapper docstring, rendered by the core
        (`opforge_core::signature::python_docstring`)."""
        return _C.python_docstring(self.name)


def make_function(info: OpInfo, raw: bool):
    """The generated function of `info`'s op (raw: keyword-only)."""
    params = []
    inputs = []
    attrs = []
    ns: dict[str, Any] = {"_info": info}
    for i, (py, arg, is_input, default) in enumerate(info.params):
        if default is not None or info.has_default[py]:
            ns[f"_d{i}"] = default
            params.append(f"{py}=_d{i}")
        else:
            params.append(py)
        if is_input:
            inputs.append(py)
        else:
            attrs.append((arg, py, f"_d{i}" if info.has_default[py] else None))
    params.append("name=None")
    fname = info.name if raw else _C.snake_case(info.name)
    if keyword.iskeyword(fname):
        fname += "_"
    star = "*, " if raw and params else ""
    body = [f"def {fname}({star}{', '.join(params)}):"]
    body.append("    __a = {}")
    for arg, py, d in attrs:
        if d is None:
            body.append(f"    __a[{arg!r}] = {py}")
        else:
            body.append(f"    if {py} is not {d}: __a[{arg!r}] = {py}")
    body.append(f"    return _info.call([{', '.join(inputs)}{',' if len(inputs) == 1 else ''}], __a, name)")
    src = "\n".join(body)
    exec(compile(src, f"<opforge op {info.name}>", "exec"), ns)
    f = ns[fname]
    f.__doc__ = info.docstring()
    f.__module__ = "opforge.raw_ops" if raw else "opforge.ops"
    f.__qualname__ = fname
    f._opforge_op = info.name
    return _native(f, info, raw)


def _native(f, info: OpInfo, raw: bool, op_attrs: bool = True):
    """`f` (a generated function, or an alias with its parameters) as a
    `_C.OpFunction`: calls on Tensors (and plain arrays) with simple attrs
    run natively; every other call runs `f` (its `__wrapped__`). See
    crates/opforge-py/src/fast.rs."""
    params = [
        (py, arg, is_input, info.has_default[py], default)
        for (py, arg, is_input, default) in info.params
    ]
    n = _C.OpFunction(info.name, f, params, raw, info.result)
    for a in ("__name__", "__qualname__", "__doc__", "__module__"):
        setattr(n, a, getattr(f, a))
    n.__wrapped__ = f
    if op_attrs:
        n._opforge_op = info.name
    return n


def alias(f, op: str):
    """A friendly alias `f` of op `op` (`opforge.add` of `AddV2`) whose
    parameters are exactly the op function's, as a native op function
    falling back to `f`; `f` itself otherwise."""
    info = op_info(op)
    empty = inspect.Parameter.empty
    want = [(py, info.has_default[py], d) for (py, _, _, d) in info.params] + [("name", True, None)]
    params = inspect.signature(f).parameters.values()
    got = [(p.name, p.default is not empty, None if p.default is empty else p.default) for p in params]
    if got != want or any(p.kind is not p.POSITIONAL_OR_KEYWORD for p in params):
        return f
    return _native(f, info, raw=False, op_attrs=False)


_INFO: dict = {}
_GEN = [-1]


def op_info(name: str) -> OpInfo:
    g = _C.registry_generation()
    if g != _GEN[0]:
        _INFO.clear()
        _GEN[0] = g
    info = _INFO.get(name)
    if info is None:
        opdef = json.loads(_C.op_defs_json([name]))[0]
        info = OpInfo(opdef)
        _INFO[name] = info
    return info


def execute(op: str, inputs, attrs, name=None):
    """Runs `op` on `inputs` (values converted as its generated function
    does) with `attrs`; the result as the generated function returns it
    (symbolic, added to the graph, in graph mode)."""
    return op_info(op).call(inputs, attrs, name)


def _symbolic_graph(values):
    """The graph of the first symbolic tensor among `values`, or None."""
    for v in values:
        if isinstance(v, SymbolicTensor):
            return v.graph
        if isinstance(v, (list, tuple)):
            for x in v:
                if isinstance(x, SymbolicTensor):
                    return x.graph
    return None


def _in_graph(graph, v, op, arg):
    if isinstance(v, SymbolicTensor):
        if v.graph is not graph:
            raise ValueError(
                f"op '{op}', input '{arg}': {v.name} belongs to another graph than the one "
                "the op is added to"
            )
        return v
    return graph.capture(v)


def snake_case(name: str) -> str:
    """TensorFlow's Python name of an op (`Conv2DBackpropInput` ->
    `conv2d_backprop_input`), by the core's rule
    (`opforge_core::signature::snake_case`)."""
    return _C.snake_case(name)
