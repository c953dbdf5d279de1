"""Test tools with TensorFlow's names (`tf.test`): `TestCase`,
`compute_gradient`, `compute_gradient_error`, `main`."""

from __future__ import annotations

import re
import unittest

import numpy as np

from .. import _C, errors
from .._C import Tensor

__all__ = ["TestCase", "main", "compute_gradient", "compute_gradient_error", "max_error"]


def _np(x):
    if isinstance(x, Tensor):
        return x.numpy()
    if hasattr(x, "read_value"):
        return x.read_value().numpy()
    return np.asarray(x)


class TestCase(unittest.TestCase):
    """`unittest.TestCase` with TensorFlow's assertions."""

    def evaluate(self, tensors):
        """Tensors (or nested lists/dicts of them) as numpy values."""
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
