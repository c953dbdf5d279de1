"""of.gradients in graph mode (issue 15 parts 6 and 7): values against
hand-derived numpy formulas and central differences, grad_ys, unconnected
inputs, gradients registered in Python used while building graph
gradients (and differentiated again), and exceptions from them."""

from __future__ import annotations

import numpy as np
import pytest

import opforge as of


def _numeric(f, x, eps=1e-3):
    """Central differences of scalar f at x (float64)."""
    x = np.asarray(x, np.float64)
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        d = np.zeros_like(x)
        d[i] = eps
        g[i] = (f(x + d) - f(x - d)) / (2 * eps)
    return g


def test_gradients_match_formulas_and_numeric_differences():
    g = of.Graph()
    with g.as_default():
        x = of.placeholder(of.float64, shape=[3], name="x")
        w = of.placeholder(of.float64, shape=[3, 2], name="w")
        h = of.ops.tanh(of.matmul(of.reshape(x, [1, 3]), w))
        loss = of.reduce_sum(h * h) + of.reduce_sum(of.exp(x) * x)
        dx, dw = of.gradients(loss, [x, w])
    assert dx.shape == (3,) and dw.shape == (3, 2)
    xv = np.array([0.3, -0.2, 0.5])
    wv = np.array([[0.1, -0.4], [0.7, 0.2], [-0.3, 0.5]])
    gx, gw = g.run([dx, dw], {x: xv, w: wv})

    def f(xa, wa):
        hh = np.tanh(xa.reshape(1, 3) @ wa)
        return np.sum(hh * hh) + np.sum(np.exp(xa) * xa)

    # By hand: d/dh sum(h^2) = 2h; through tanh: (1 - h^2).
    hv = np.tanh(xv.reshape(1, 3) @ wv)
    gh = 2 * hv * (1 - hv * hv)
    np.testing.assert_allclose(gx.numpy(), (gh @ wv.T).reshape(3) + np.exp(xv) * (1 + xv), rtol=1e-10)
    np.testing.assert_allclose(gw.numpy(), xv.reshape(3, 1) @ gh, rtol=1e-10)
    np.testing.assert_allclose(gx.numpy(), _numeric(lambda a: f(a, wv), xv), rtol=1e-5)
    np.testing.assert_allclose(gw.numpy(), _numeric(lambda a: f(xv, a), wv), rtol=1e-5)


def test_grad_ys_several_ys_and_unconnected():
    g = of.Graph()
    with g.as_default():
        x = of.placeholder(of.float32, shape=[2])
        z = of.placeholder(of.float32, shape=[2])
        y1 = x * x
        y2 = 3.0 * x
        (d,) = of.gradients([y1, y2], x, grad_ys=[of.constant([1.0, 2.0]), [10.0, 0.0]])
        none = of.gradients(y1, [z])
        zero = of.gradients(y1, [z], unconnected_gradients="zero")
    assert none == [None]
    xv = np.array([1.5, -2.0], np.float32)
    got = g.run(d, {x: xv})
    np.testing.assert_allclose(got.numpy(), np.array([1.0, 2.0]) * 2 * xv + [30.0, 0.0])
    np.testing.assert_allclose(g.run(zero[0], {x: xv, z: xv}).numpy(), [0.0, 0.0])


def test_gradient_nodes_go_under_a_name_scope():
    g = of.Graph()
    with g.as_default():
        x = of.placeholder(of.float32, shape=[])
        y = of.ops.sin(x)
        (d1,) = of.gradients(y, x)
        (d2,) = of.gradients(y, x)
    assert d1.op.name.startswith("gradients/")
    assert d2.op.name.startswith("gradients_1/")


def test_second_order_through_built_in_gradients():
    g = of.Graph()
    with g.as_default():
        x = of.placeholder(of.float64, shape=[3])
        y = of.reduce_sum(x * x * x)
        (dy,) = of.gradients(y, x)
        (d2,) = of.gradients(dy, x)
    xv = np.array([1.0, -2.0, 0.5])
    a, b = g.run([dy, d2], {x: xv})
    np.testing.assert_allclose(a.numpy(), 3 * xv ** 2)
    np.testing.assert_allclose(b.numpy(), 6 * xv)


def test_gradients_need_graph_tensors():
    with pytest.raises(TypeError, match="graph mode"):
        of.gradients(of.constant(1.0), of.constant(2.0))


def test_python_gradient_is_used_in_graph_gradients_and_second_order():
    calls = []

    # A deliberately unusual gradient (3 * cos), so the test sees it is used.
    @of.RegisterGradient("Sin", override=True)
    def _sin_grad(op, grad):
        calls.append((op.type, type(op.inputs[0]).__name__, type(grad).__name__))
        assert op.get_attr("T") is of.float64
        return grad * of.ops.cos(op.inputs[0]) * 3.0

    try:
        g = of.Graph()
        with g.as_default():
            x = of.placeholder(of.float64, shape=[3])
            y = of.ops.sin(x)
            (dy,) = of.gradients(of.reduce_sum(y), x)
            (d2,) = of.gradients(of.reduce_sum(dy), x)
        assert calls == [("Sin", "SymbolicTensor", "SymbolicTensor")]
        xv = np.array([0.0, 1.0, 2.5])
        a, b = g.run([dy, d2], {x: xv})
        np.testing.assert_allclose(a.numpy(), 3 * np.cos(xv), rtol=1e-12)
        np.testing.assert_allclose(b.numpy(), -3 * np.sin(xv), rtol=1e-12)
        # The same function serves the eager tape.
        xe = of.constant(xv)
        with of.GradientTape() as t:
            t.watch(xe)
            ye = of.ops.sin(xe)
        np.testing.assert_allclose(t.gradient(ye, xe).numpy(), 3 * np.cos(xv), rtol=1e-12)
        assert calls[-1] == ("Sin", "Tensor", "Tensor")
    finally:
        _restore_sin()


def _restore_sin():
    @of.RegisterGradient("Sin", override=True)
    def _sin(op, grad):
        return grad * of.ops.cos(op.inputs[0])


class MyError(Exception):
    pass


def test_an_exception_in_a_python_gradient_propagates_as_itself():
    @of.RegisterGradient("Cos", override=True)
    def _bad(op, grad):
        raise MyError("boom in the gradient")

    try:
        g = of.Graph()
        with g.as_default():
            x = of.placeholder(of.float32, shape=[])
            y = of.ops.cos(x)
            with pytest.raises(MyError, match="boom") as info:
                of.gradients(y, x)
        notes = "".join(getattr(info.value, "__notes__", []))
        assert "Cos" in notes
        xe = of.constant(1.0)
        with of.GradientTape() as t:
            t.watch(xe)
            ye = of.ops.cos(xe)
        with pytest.raises(MyError, match="boom"):
            t.gradient(ye, xe)
    finally:
        @of.RegisterGradient("Cos", override=True)
        def _cos(op, grad):
            return -grad * of.ops.sin(op.inputs[0])

    # Restored: the built-in formula again.
    g = of.Graph()
    with g.as_default():
        x = of.placeholder(of.float32, shape=[])
        (d,) = of.gradients(of.ops.cos(x), x)
    np.testing.assert_allclose(float(g.run(d, {x: 0.5})), -np.sin(0.5), rtol=1e-6)
