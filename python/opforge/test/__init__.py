"""Test tools with TensorFlow's names (`tf.test`): `TestCase`,
`compute_gradient`, `compute_gradient_error`, `main`."""

from __future__ import annotations

import re
import unittest

import numpy as np

from .. import _C, errors
from .._C import Tensor

__all__ = [
    "TestCase", "main", "compute_gradient", "compute_gradient_error", "max_error", "opcheck",
]


def _np(x):
    if isinstance(x, Tensor):
        return x.numpy()
    if hasattr(x, "read_value"):
        return x.read_value().numpy()
    return np.asarray(x)


class TestCase(unittest.TestCase):
    """`unittest.TestCase` with TensorFlow's assertions."""

    def evaluate(self, tensors):
        """Tensors (or nested lists/dicts of them) as numpy values; symbolic
        tensors of a graph are computed by running their graph."""
        from .._symbolic import SymbolicTensor

        if isinstance(tensors, SymbolicTensor):
            return _np(tensors.graph.run(tensors))
        if isinstance(tensors, (list, tuple)):
            return type(tensors)(self.evaluate(t) for t in tensors)
        if isinstance(tensors, dict):
            return {k: self.evaluate(v) for k, v in tensors.items()}
        return _np(tensors)

    def assertAllEqual(self, a, b, msg=None):  # noqa: N802
        a, b = _np(a), _np(b)
        self.assertEqual(a.shape, b.shape, msg or f"shapes differ: {a.shape} vs {b.shape}")
        np.testing.assert_array_equal(a, b, err_msg=msg or "")

    def assertAllClose(self, a, b, rtol=1e-6, atol=1e-6, msg=None):  # noqa: N802
        a, b = _np(a), _np(b)
        self.assertEqual(a.shape, b.shape, msg or f"shapes differ: {a.shape} vs {b.shape}")
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=msg or "")

    def assertAllCloseAccordingToType(self, a, b, rtol=1e-6, atol=1e-6,  # noqa: N802
                                      float_rtol=1e-6, float_atol=1e-6,
                                      half_rtol=1e-3, half_atol=1e-3, msg=None):
        a_np = _np(a)
        if a_np.dtype == np.float16:
            rtol, atol = max(rtol, half_rtol), max(atol, half_atol)
        elif a_np.dtype in (np.float32, np.complex64):
            rtol, atol = max(rtol, float_rtol), max(atol, float_atol)
        self.assertAllClose(a, b, rtol=rtol, atol=atol, msg=msg)

    def assertShapeEqual(self, np_array, tensor, msg=None):  # noqa: N802
        self.assertEqual(tuple(np.shape(np_array)), tuple(tensor.shape), msg)

    def assertDTypeEqual(self, target, expected_dtype):  # noqa: N802
        from .. import dtypes

        self.assertEqual(dtypes.as_dtype(_np(target).dtype), dtypes.as_dtype(expected_dtype))

    def assertRaisesOpError(self, expected_err_re_or_predicate):  # noqa: N802
        """A context that expects an `OpError` whose message matches."""
        return self.assertRaisesWithPredicateMatch(errors.OpError, expected_err_re_or_predicate)

    def assertRaisesWithPredicateMatch(self, exception_type, predicate):  # noqa: N802
        test = self

        class _Ctx:
            def __enter__(self):
                return self

            def __exit__(self, exc_type, exc, tb):
                if exc_type is None:
                    test.fail(f"{exception_type.__name__} not raised")
                if not issubclass(exc_type, exception_type):
                    return False
                text = str(exc)
                ok = predicate(exc) if callable(predicate) else re.search(predicate, text)
                if not ok:
                    test.fail(f"the error {text!r} does not match {predicate!r}")
                return True

        return _Ctx()


def main(argv=None):
    """Runs the tests of the calling module (`tf.test.main`)."""
    unittest.main(argv=argv)


def _jacobian_theoretical(f, xs):
    from .. import GradientTape, constant

    xs_t = [constant(x) for x in xs]
    with GradientTape(persistent=True) as g:
        for x in xs_t:
            g.watch(x)
        y = f(*xs_t)
    y_np = y.numpy()
    jac = [np.zeros((y_np.size, x.size), dtype=np.float64) for x in xs]
    for i in range(y_np.size):
        seed = np.zeros(y_np.size, dtype=y_np.dtype)
        seed[i] = 1
        grads = g.gradient(y, xs_t, output_gradients=[constant(seed.reshape(y_np.shape))])
        for j, gr in enumerate(grads):
            if gr is not None:
                jac[j][i, :] = gr.numpy().reshape(-1)
    return jac, y_np


def _jacobian_numerical(f, xs, delta):
    from .. import constant

    jac = []
    y0 = f(*[constant(x) for x in xs]).numpy()
    for j, x in enumerate(xs):
        jj = np.zeros((y0.size, x.size), dtype=np.float64)
        flat = x.reshape(-1)
        for k in range(x.size):
            plus = flat.copy()
            minus = flat.copy()
            plus[k] += delta
            minus[k] -= delta
            args_p = [constant(v) for v in xs]
            args_m = [constant(v) for v in xs]
            args_p[j] = constant(plus.reshape(x.shape))
            args_m[j] = constant(minus.reshape(x.shape))
            yp = f(*args_p).numpy().astype(np.float64).reshape(-1)
            ym = f(*args_m).numpy().astype(np.float64).reshape(-1)
            jj[:, k] = (yp - ym) / (2 * delta)
        jac.append(jj)
    return jac


def compute_gradient(f, x, delta=None):
    """The theoretical (from the registered gradients, through a tape) and
    numerical (central differences) Jacobians of `f` at `x` (a list of
    arrays or tensors), each a list of `(y.size, x_i.size)` arrays, as
    TensorFlow 2's `tf.test.compute_gradient`. The numerical one is taken
    in float64 when `f` runs on float64 inputs."""
    xs = [np.asarray(_np(v)) for v in x]
    theoretical, _ = _jacobian_theoretical(f, xs)
    d = 1e-3 if delta is None else delta
    try:
        xs64 = [v.astype(np.float64) if v.dtype.kind == "f" else v for v in xs]
        f(*xs64)
        numerical = _jacobian_numerical(f, xs64, d)
    except (errors.OpError, TypeError, ValueError):
        numerical = _jacobian_numerical(f, xs, d)
    return theoretical, numerical


def max_error(theoretical, numerical) -> float:
    """The largest absolute difference between two lists of Jacobians."""
    err = 0.0
    for t, n in zip(theoretical, numerical):
        if t.size:
            err = max(err, float(np.max(np.abs(np.asarray(t) - np.asarray(n)))))
    return err


def compute_gradient_error(f, x, delta=None) -> float:
    """`max_error` of `compute_gradient(f, x, delta)`."""
    return max_error(*compute_gradient(f, x, delta))


def _flat_outputs(result):
    if result is None:
        return []
    if isinstance(result, Tensor):
        return [result]
    out = []
    for r in result:
        out.extend(r if isinstance(r, list) else [r])
    return out


def _same(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype.kind in "fc":
        return bool(np.allclose(a, b, rtol=1e-6, atol=1e-6, equal_nan=True))
    return bool(np.array_equal(a, b))


def opcheck(op, args, kwargs=None, *, gradient_tolerance=None):
    """Checks one sample of an op (PyTorch's `opcheck` idea, from the
    OpDef): `op` is a generated op function or an op name, `args` the
    sample's inputs (in order), `kwargs` its attrs. It runs the op and
    checks that

    - the generated function's signature is the OpDef's (inputs, attrs
      without defaults, attrs with defaults, `name`);
    - a one-op graph (inputs as constants) gives the eager results, and the
      shapes its shape function inferred agree with the kernel's outputs;
    - where the op has a gradient, it matches numerical differentiation
      with respect to each floating-point input (`compute_gradient_error`
      below `gradient_tolerance`: 1e-3, or 1e-2 for 16-bit types).

    Raises AssertionError naming the failed check; returns the eager outputs.
    """
    import inspect

    from .. import _ops, ops as ops_module

    kwargs = dict(kwargs or {})
    name = op if isinstance(op, str) else getattr(op, "_opforge_op", None)
    if name is None:
        raise TypeError("opcheck takes a generated op function or an op name")
    info = _ops.op_info(name)
    fn = getattr(ops_module, _ops.snake_case(name)) if isinstance(op, str) else op

    # The signature is the OpDef's.
    want = [p[0] for p in _C.python_params(name)] + ["name"]
    got = list(inspect.signature(fn).parameters)
    if got != want:
        raise AssertionError(f"{name}: the function's parameters {got} are not the OpDef's {want}")

    inputs = info.convert_inputs(list(args))
    attrs = {k: info.convert_attr(k, v) for k, v in kwargs.items()}
    eager = _flat_outputs(info.wrap(_C.execute(name, inputs, attrs)))
    graph, shapes = _C.graph_call(name, inputs, attrs)
    if len(graph) != len(eager):
        raise AssertionError(f"{name}: eager gave {len(eager)} outputs, the graph {len(graph)}")
    for i, (e, g, s) in enumerate(zip(eager, graph, shapes)):
        if not _same(_np(e), _np(g)):
            raise AssertionError(f"{name}: output {i} differs between eager and graph execution")
        if s is not None:
            if len(s) != len(e.shape) or any(d is not None and d != k for d, k in zip(s, e.shape)):
                raise AssertionError(
                    f"{name}: the shape function says output {i} is {s}, the kernel made {e.shape}"
                )

    # Gradients, for floating-point single-tensor inputs.
    floats = [
        i for i, (a, t) in enumerate(zip(info.inputs, inputs))
        if isinstance(t, Tensor) and t.dtype.is_floating and not (a.get("number_attr") or a.get("type_list_attr"))
    ]
    if floats and eager and all(o.dtype.is_floating for o in eager[:1]):
        tol = gradient_tolerance
        if tol is None:
            tol = 1e-2 if any(inputs[i].dtype.size == 2 for i in floats) else 1e-3

        def f(*xs):
            vals = list(inputs)
            for i, x in zip(floats, xs):
                vals[i] = x
            # Through the op function's path, so that tapes record the call.
            out = info.call([_cast_like(v, inputs[k]) for k, v in enumerate(vals)], kwargs)
            return _flat_outputs(out)[0]

        try:
            err = compute_gradient_error(f, [_np(inputs[i]) for i in floats])
        except errors.OpError as e:
            if "no gradient" in str(e).lower() or "not differentiable" in str(e).lower():
                return eager
            raise
        if not err <= tol:
            raise AssertionError(f"{name}: gradient error {err:.3g} exceeds {tol:.3g}")
    return eager


def _cast_like(v, like):
    """`v` (a Tensor) in `like`'s dtype (numerical checks run in float64)."""
    if isinstance(v, Tensor) and isinstance(like, Tensor) and v.dtype != like.dtype:
        from .. import raw_ops

        return raw_ops.Cast(x=v, DstT=like.dtype)
    return v
