"""Gradients written in Python, with TensorFlow's API:

    @of.RegisterGradient("ZeroOut")
    def _zero_out_grad(op, grad):
        ...                       # op.inputs, op.outputs, op.get_attr(name), op.type
        return [dx]               # one per input (None: no gradient)

The function becomes the op's gradient in opforge's registry, used by
`GradientTape` exactly like a gradient registered in Rust or shipped by an
op library. Registering for an op that already has a gradient raises
`AlreadyExistsError` naming where the existing one came from, unless
`override=True`.
"""

from __future__ import annotations

from . import _C
from ._C import Tensor

__all__ = ["RegisterGradient", "NotDifferentiable", "no_gradient", "GradOp"]


class GradOp:
    """The forward op a Python gradient function differentiates."""

    __slots__ = ("type", "name", "inputs", "outputs", "_attrs")

    def __init__(self, op_type, inputs, outputs, attrs):
        self.type = op_type
        self.name = op_type
        self.inputs = tuple(inputs)
        self.outputs = tuple(outputs)
        self._attrs = attrs

    def get_attr(self, name):
        """The value of attr `name` (every attr, given, inferred or defaulted)."""
        try:
            return self._attrs[name]
        except KeyError:
            raise ValueError(f"op '{self.type}' has no attr named '{name}'") from None

    @property
    def node_def(self):
        return {"op": self.type, "attr": dict(self._attrs)}

    def __repr__(self):
        return f"<opforge.GradOp {self.type}>"


def _call_gradient(f, args, num_inputs):
    """Runs `f(op, *grads)` and brings its result to one entry per input."""
    from ._convert import convert_to_tensor

    result = f(*args)
    if num_inputs == 1 and not isinstance(result, (list, tuple)):
        result = [result]
    if not isinstance(result, (list, tuple)):
        raise TypeError(
            f"the gradient of '{args[0].type}' returned {type(result).__name__}; "
            f"return one Tensor (or None) per input ({num_inputs})"
        )
    result = list(result)
    if len(result) != num_inputs:
        from . import errors

        raise errors.InvalidArgumentError(
            f"the gradient of '{args[0].type}' returned {len(result)} values for "
            f"{num_inputs} inputs: return one Tensor (or None) per input",
            args[0].type,
        )
    out = []
    for i, g in enumerate(result):
        if g is None:
            out.append(None)
            continue
        t = convert_to_tensor(g)
        want = args[0].inputs[i].dtype
        if t.dtype != want:
            raise TypeError(
                f"the gradient of '{args[0].type}' for input {i} has dtype {t.dtype.name}, "
                f"but the input is {want.name}"
            )
        out.append(t)
    return out


def _location(f) -> str:
    code = getattr(f, "__code__", None)
    if code is None:
        return f"python:{getattr(f, '__qualname__', repr(f))}"
    return f"{code.co_filename}:{code.co_firstlineno}"


class RegisterGradient:
    """Decorator registering a Python function as an op's gradient
    (`tf.RegisterGradient`)."""

    def __init__(self, op_type: str, override: bool = False):
        if not isinstance(op_type, str):
            raise TypeError("RegisterGradient takes the op's name (a str)")
        self._op_type = op_type
        self._override = override

    def __call__(self, f):
        from . import errors

        try:
            _C.register_gradient(self._op_type, f, self._override, _location(f))
        except errors.AlreadyExistsError as e:
            raise errors.AlreadyExistsError(
                f"{e.message}; pass override=True to RegisterGradient to replace it",
                e.op,
                e.error_code,
            ) from None
        return f


def NotDifferentiable(op_type: str) -> None:  # noqa: N802 - TensorFlow's name
    """Declares that no gradient flows through `op_type`."""
    _C.not_differentiable(op_type, f"python:NotDifferentiable({op_type!r})")


no_gradient = NotDifferentiable
