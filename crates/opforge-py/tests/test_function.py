"""@of.function (issue 15 part 7): tracing per input signature (counted),
caching, input_signature, Python arguments by value, variables, tapes
inside traced functions and around calls (first and second order),
of.gradients inside, nested functions."""

from __future__ import annotations

import numpy as np
import pytest

import opforge as of


def test_traces_once_per_signature_and_caches():
    traced = []

    @of.function
    def f(x, n):
        traced.append((x.shape, n))
        assert isinstance(x, of.SymbolicTensor)
        return of.reduce_sum(x * n)

    a = of.constant([1.0, 2.0])
    assert float(f(a, 3)) == 9.0
    assert float(f(of.constant([5.0, 1.0]), 3)) == 18.0   # same signature
    assert f.experimental_get_tracing_count() == 1
    assert float(f(a, 4)) == 12.0                         # new Python value
    assert float(f(of.constant([1.0, 2.0, 3.0]), 4)) == 24.0  # new shape
    assert float(f(np.array([1, 2], np.float64), 3)) == 9.0   # new dtype (numpy)
    assert f.experimental_get_tracing_count() == 4
    assert float(f(a, 4)) == 12.0
    assert f.experimental_get_tracing_count() == 4
    assert traced == [((2,), 3), ((2,), 4), ((3,), 4), ((2,), 3)]


def test_structures_and_keyword_arguments():
    @of.function
    def f(pair, scale=1.0, *, offset):
        a, b = pair
        return {"sum": (a + b) * scale + offset, "both": [a, b], "tag": "kept"}

    out = f((of.constant(1.0), of.constant(2.0)), scale=2.0, offset=of.constant(0.5))
    assert out["tag"] == "kept"
    assert float(out["sum"]) == 6.5
    assert [float(v) for v in out["both"]] == [1.0, 2.0]


def test_input_signature_fixes_the_trace():
    @of.function(input_signature=[of.TensorSpec([None, 2], of.float32)])
    def f(x):
        assert x.shape == (None, 2)
        return of.reduce_sum(x, axis=1)

    np.testing.assert_allclose(f([[1.0, 2.0]]).numpy(), [3.0])
    np.testing.assert_allclose(f(np.ones((3, 2), np.float32)).numpy(), [2.0, 2.0, 2.0])
    assert f.experimental_get_tracing_count() == 1
    with pytest.raises(ValueError, match="input_signature"):
        f(np.ones((2, 3), np.float32))
    with pytest.raises(TypeError):
        f(of.constant([[1, 2]]))  # int32 for a float32 spec
    with pytest.raises(TypeError, match="positional"):
        f(1.0, 2.0)
    spec = of.TensorSpec([None, 2], of.float32)
    assert spec.is_compatible_with(of.constant([[1.0, 2.0]]))
    assert not spec.is_compatible_with(of.constant([1.0, 2.0]))


def test_a_function_updates_variables_in_order():
    v = of.Variable(1.0)

    @of.function
    def bump(k):
        v.assign_add(k)
        v.assign(v * 2.0)     # must see the assign_add
        return v.read_value()

    assert float(bump(of.constant(1.0))) == 4.0
    assert float(bump(of.constant(1.0))) == 10.0
    assert float(v.numpy()) == 10.0
    assert bump.experimental_get_tracing_count() == 1


def test_automatic_control_dependencies_are_per_variable():
    # As TensorFlow's: reads wait for the last write of their variable,
    # writes for that write and the reads since; ops on different
    # variables are not ordered (they may run at once).
    a, b = of.Variable(1.0), of.Variable(2.0)

    @of.function
    def f():
        first = a.read_value()
        b.read_value()
        a.assign_add(1.0)
        b.assign_add(1.0)
        a.assign(a.read_value() * 10.0)
        return first

    graph = f.get_concrete_function().graph
    ops: dict = {}
    for i in range(graph._num_nodes()):
        op = graph._operation(i)
        ops.setdefault(op.type, []).append(op)
    ra, rb, ra2 = ops["ReadVariableOp"]
    wa, wb = ops["AssignAddVariableOp"]
    (wa2,) = ops["AssignVariableOp"]
    deps = {op.name: {c.name for c in op.control_inputs} for op in (ra, rb, ra2, wa, wb, wa2)}
    assert deps[ra.name] == set() and deps[rb.name] == set()
    assert deps[wa.name] == {ra.name}
    assert deps[wb.name] == {rb.name}
    assert deps[ra2.name] == {wa.name}
    assert deps[wa2.name] == {ra2.name, wa.name}
    assert float(f()) == 1.0 and float(a.numpy()) == 20.0 and float(b.numpy()) == 3.0


def test_tape_and_gradients_inside_a_function():
    w = of.Variable([1.0, -2.0])

    @of.function
    def step(x):
        with of.GradientTape() as t:
            loss = of.reduce_sum(w * w * x)
        gw = t.gradient(loss, w)
        (gx,) = of.gradients(loss, [x])
        w.assign_sub(0.1 * gw)
        return loss, gw, gx

    x = of.constant([1.0, 3.0])
    loss, gw, gx = step(x)
    assert float(loss) == pytest.approx(1.0 + 12.0)
    np.testing.assert_allclose(gw.numpy(), [2.0, -12.0])
    np.testing.assert_allclose(gx.numpy(), [1.0, 4.0])
    np.testing.assert_allclose(w.numpy(), [0.8, -0.8])
    loss2, _, _ = step(x)
    assert float(loss2) == pytest.approx(0.64 + 3 * 0.64)


def test_tape_differentiates_through_a_call():
    @of.function
    def f(x, y):
        return of.reduce_sum(of.ops.sin(x) * y), x * y

    x = of.constant([0.5, 1.0])
    y = of.constant([2.0, 3.0])
    with of.GradientTape(persistent=True) as t:
        t.watch([x, y])
        s, p = f(x, y)
    dx, dy = t.gradient(s, [x, y])
    np.testing.assert_allclose(dx.numpy(), np.cos([0.5, 1.0]) * [2.0, 3.0], rtol=1e-6)
    np.testing.assert_allclose(dy.numpy(), np.sin([0.5, 1.0]), rtol=1e-6)
    np.testing.assert_allclose(t.gradient(p, x).numpy(), [2.0, 3.0])


def test_second_order_through_a_call():
    @of.function
    def cube(x):
        return x * x * x

    x = of.constant(2.0)
    with of.GradientTape() as outer:
        outer.watch(x)
        with of.GradientTape() as inner:
            inner.watch(x)
            y = cube(x)
        dy = inner.gradient(y, x)
    d2 = outer.gradient(dy, x)
    assert float(dy) == pytest.approx(12.0)
    assert float(d2) == pytest.approx(12.0)


def test_tape_watches_variables_read_in_a_call():
    v = of.Variable([3.0, 4.0])

    @of.function
    def f(x):
        return of.reduce_sum(v * v * x)

    x = of.constant([1.0, 2.0])
    with of.GradientTape() as t:
        y = f(x)
    np.testing.assert_allclose(t.gradient(y, v).numpy(), [6.0, 16.0])


def test_a_python_gradient_through_a_function_call():
    @of.RegisterGradient("Log1p", override=True)
    def _log1p_grad(op, grad):
        # 5x the true 1 / (1 + x): visibly this function's.
        x = op.inputs[0]
        return grad * 5.0 / (1.0 + x)

    try:
        @of.function
        def f(x):
            return of.ops.log1p(x)

        x = of.constant([0.0, 1.0])
        with of.GradientTape() as t:
            t.watch(x)
            y = f(x)
        np.testing.assert_allclose(t.gradient(y, x).numpy(), 5.0 / (1.0 + np.array([0.0, 1.0])))

        # And the graph gradient inside a trace calls it too.
        @of.function
        def g(x):
            return of.gradients(of.ops.log1p(x), [x])[0]

        np.testing.assert_allclose(g(x).numpy(), [5.0, 2.5])
    finally:
        @of.RegisterGradient("Log1p", override=True)
        def _log1p(op, grad):
            return grad / (1.0 + op.inputs[0])


def test_functions_calling_functions_are_inlined():
    @of.function
    def inner(x):
        return x * 2.0

    @of.function
    def outer(x):
        return inner(x) + 1.0

    assert float(outer(of.constant(3.0))) == 7.0
    assert outer.experimental_get_tracing_count() == 1
    assert inner.experimental_get_tracing_count() == 0
    cf = outer.get_concrete_function(of.constant(3.0))
    assert isinstance(cf.graph, of.Graph)
    assert [op.type for op in cf.graph.get_operations()].count("Mul") == 1


def test_methods():
    class Model:
        def __init__(self, k):
            self.k = k

        @of.function
        def __call__(self, x):
            return x * self.k

    a, b = Model(2.0), Model(3.0)
    assert float(a(of.constant(1.0))) == 2.0
    assert float(b(of.constant(1.0))) == 3.0


def test_an_mlp_training_step_learns():
    rng = np.random.default_rng(0)
    xs = rng.normal(size=(64, 4)).astype(np.float32)
    true_w = rng.normal(size=(4, 1)).astype(np.float32)
    ys = xs @ true_w
    w = of.Variable(np.zeros((4, 1), np.float32))

    @of.function
    def train(x, y):
        with of.GradientTape() as t:
            err = of.matmul(x, w) - y
            loss = of.reduce_mean(err * err)
        w.assign_sub(0.1 * t.gradient(loss, w))
        return loss

    first = float(train(xs, ys))
    for _ in range(200):
        last = float(train(xs, ys))
    assert train.experimental_get_tracing_count() == 1
    assert last < first * 1e-3
    np.testing.assert_allclose(w.numpy(), true_w, atol=1e-2)


def test_calls_from_eight_threads_at_once():
    import threading

    @of.function
    def f(x):
        y = x
        for _ in range(4):
            y = of.matmul(y, y) * (0.5 / 32) + 0.25
        return of.reduce_sum(y)

    def expected(v):
        y = np.full((32, 32), v, np.float64)
        for _ in range(4):
            y = (y @ y) * (0.5 / 32) + 0.25
        return y.sum()

    values = [i / 8.0 for i in range(8)]
    results = [None] * 8
    errors = []
    barrier = threading.Barrier(8)

    def work(i):
        try:
            barrier.wait()
            for _ in range(5):
                results[i] = float(f(np.full((32, 32), values[i], np.float32)))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert f.experimental_get_tracing_count() == 1
    for i in range(8):
        assert results[i] == pytest.approx(expected(values[i]), rel=1e-4)


def test_reductions_of_scalars_in_graphs():
    # axis=None on a rank-0 symbolic tensor: no axes, as an int32 tensor
    # (a bare [] would be float32, which no reduction takes).
    @of.function
    def f(x):
        return of.reduce_sum(x * 2.0), of.reduce_mean(x), of.reduce_max(x)

    assert [float(t) for t in f(of.constant(1.5))] == [3.0, 1.5, 1.5]
    assert float(of.reduce_sum(of.constant(4.0))) == 4.0


def test_a_tape_in_a_function_records_what_it_saw():
    # As TensorFlow's tape in a tf.function: ops added under stop_recording,
    # or before the tape was entered, pass no gradient.
    @of.function
    def stopped(x):
        with of.GradientTape() as t:
            t.watch(x)
            with t.stop_recording():
                y = x * x
            z = y + x
        return t.gradient(z, x)

    @of.function
    def before(x):
        y = x * x  # not on the tape
        with of.GradientTape() as t:
            t.watch(x)
            z = y * x
        return t.gradient(z, x)

    assert float(stopped(of.constant(3.0))) == 1.0
    assert float(before(of.constant(3.0))) == 9.0
    # The same as eagerly.
    x = of.constant(3.0)
    with of.GradientTape() as t:
        t.watch(x)
        with t.stop_recording():
            y = x * x
        z = y + x
    assert float(t.gradient(z, x)) == 1.0
