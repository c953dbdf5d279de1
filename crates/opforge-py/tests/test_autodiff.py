"""GradientTape and Variable (issue 15 part 6)."""

from __future__ import annotations

import numpy as np
import pytest

import opforge as of


def test_gradient_of_a_watched_tensor():
    x = of.constant(3.0)
    with of.GradientTape() as g:
        g.watch(x)
        y = x * x
    assert float(g.gradient(y, x)) == 6.0


def test_unwatched_and_unconnected_sources_give_none():
    x = of.constant(3.0)
    z = of.constant(4.0)
    with of.GradientTape(persistent=True) as g:
        g.watch(x)
        y = x * 2.0
    assert g.gradient(y, z) is None
    dx, dz = g.gradient(y, [x, z])
    assert float(dx) == 2.0 and dz is None
    zero = g.gradient(y, [z], unconnected_gradients="zero")[0]
    assert float(zero) == 0.0


def test_a_non_persistent_tape_answers_once():
    x = of.constant([1.0, 2.0])
    with of.GradientTape() as g:
        g.watch(x)
        y = of.reduce_sum(x * x)
    g.gradient(y, x)
    with pytest.raises(RuntimeError, match="persistent"):
        g.gradient(y, x)


def test_persistent_tapes_and_structures():
    x = of.constant([1.0, 2.0, 3.0])
    w = of.constant([[1.0], [2.0], [3.0]])
    with of.GradientTape(persistent=True) as g:
        g.watch([x, w])
        y = of.reduce_sum(of.matmul(of.reshape(x, [1, 3]), w))
        z = of.reduce_sum(x * x)
    gy = g.gradient(y, {"x": x, "w": w})
    np.testing.assert_allclose(gy["x"].numpy(), [1.0, 2.0, 3.0])
    np.testing.assert_allclose(gy["w"].numpy(), [[1.0], [2.0], [3.0]])
    np.testing.assert_allclose(g.gradient(z, x).numpy(), [2.0, 4.0, 6.0])
    # Several targets are summed; output_gradients weights them.
    (gx,) = g.gradient([y, z], [x], output_gradients=[of.constant(2.0), of.constant(1.0)])
    np.testing.assert_allclose(gx.numpy(), [4.0, 8.0, 12.0])


def test_nested_tapes_give_higher_order_gradients():
    x = of.constant(3.0)
    with of.GradientTape() as g2:
        g2.watch(x)
        with of.GradientTape() as g1:
            g1.watch(x)
            y = x * x * x
        dy = g1.gradient(y, x)  # 3x^2 = 27
    d2y = g2.gradient(dy, x)  # 6x = 18
    assert float(dy) == 27.0
    assert float(d2y) == 18.0


def test_tensors_shared_by_several_tapes():
    # A tape keeps a tensor's handle in the tensor itself when no other
    # live tape does, else in a table: every mix gives the same gradients.
    x = of.constant(3.0)
    with of.GradientTape(persistent=True) as first:
        first.watch(x)
        y = x * x
    # `first` is alive and holds x's slot: `second` uses its table.
    with of.GradientTape() as second:
        second.watch(x)
        z = x * y  # y was computed on `first` only: a constant here
    assert float(second.gradient(z, x)) == 9.0
    assert float(first.gradient(y, x)) == 6.0
    # Tensors made on one tape, used on a third; the first tape then dies
    # and a fourth tape gets the freed slots.
    with of.GradientTape() as third:
        third.watch(y)
        w = y * y
    assert float(third.gradient(w, y)) == 18.0
    del first
    for _ in range(2):
        with of.GradientTape() as g:
            g.watch(x)
            v = x * x * x
        assert float(g.gradient(v, x)) == 27.0
    # Three tapes at once, recording the same calls.
    with of.GradientTape() as a, of.GradientTape() as b, of.GradientTape() as c:
        for t in (a, b, c):
            t.watch(x)
        u = x * x
        u2 = u * x
    assert [float(t.gradient(u2, x)) for t in (a, b, c)] == [27.0, 27.0, 27.0]


def test_an_outer_tape_entered_after_the_forward_pass_differentiates_the_gradient():
    # The forward pass runs on `inner` alone; `outer`, entered afterwards,
    # knows `x` (an input `inner` never watched) and `h` (a result `inner`
    # computed) by their objects and records the gradient computation,
    # which reads both: as in TensorFlow, d(dy/dz)/dx = 2h, d(dy/dz)/dh = 2x.
    x = of.constant(3.0)
    z = of.constant(2.0)
    with of.GradientTape(persistent=True) as inner:
        inner.watch(z)
        h = x * z  # 6
        y = h * h  # 36
    with of.GradientTape(persistent=True) as outer:
        outer.watch(x)
        outer.watch(h)
        g = inner.gradient(y, z)  # 2h * x = 36
    assert float(g) == 36.0
    # Only the gradient computation reaches the outer tape (not the
    # forward pass it never saw): 6 calls, none of them twice.
    ops = [r[0] for r in outer._tape.records()]
    assert ops == ["OnesLike", "Mul", "Mul", "AddN", "Mul", "Mul"], ops
    dx, dh = outer.gradient(g, [x, h])
    assert (float(dx), float(dh)) == (12.0, 6.0)


def test_a_long_tape_recording_alone_and_its_tensors_after_it():
    # A tape recording alone keeps no Python object per result (the
    # tensors' slots find them); once it is dropped, a new tape claims the
    # slots of the tensors it recorded.
    x = of.constant(3.0)
    with of.GradientTape() as t:
        t.watch(x)
        v = x
        for _ in range(200):
            v = v * 1.0
        u = v * x
    assert float(t.gradient(u, x)) == 6.0
    del t
    with of.GradientTape() as t2:
        t2.watch(v)
        w = v * v
    assert float(t2.gradient(w, v)) == 6.0
    # While the first tape lives, a second one finds the same tensors in
    # its table, and both give their gradients.
    with of.GradientTape(persistent=True) as a:
        a.watch(x)
        p = x * x
    with of.GradientTape() as b:
        b.watch(p)
        q = p * x
    assert float(b.gradient(q, p)) == 3.0
    assert float(a.gradient(p, x)) == 6.0


def test_stop_recording():
    x = of.constant(2.0)
    with of.GradientTape() as g:
        g.watch(x)
        with g.stop_recording():
            y = x * x
        z = x * 3.0
    assert float(g.gradient(z, x)) == 3.0
    with of.GradientTape() as g:
        g.watch(x)
        with g.stop_recording():
            y = x * x
    assert g.gradient(y, x) is None


def test_variables_are_watched_when_read():
    v = of.Variable([1.0, 2.0])
    assert v.dtype == of.float32 and v.shape == (2,)
    with of.GradientTape() as g:
        y = of.reduce_sum(v * v)
    np.testing.assert_allclose(g.gradient(y, v).numpy(), [2.0, 4.0])
    with of.GradientTape(watch_accessed_variables=False) as g:
        y = of.reduce_sum(v * v)
    assert g.gradient(y, v) is None
    frozen = of.Variable(1.0, trainable=False)
    with of.GradientTape() as g:
        y = frozen * 2.0
    assert g.gradient(y, frozen) is None
    # An explicit watch makes it count; two reads add up.
    with of.GradientTape() as g:
        g.watch(frozen)
        y = frozen * 2.0 + frozen * 3.0
    assert float(g.gradient(y, frozen)) == 5.0


def test_variable_updates():
    v = of.Variable([1.0, 2.0])
    v.assign([3.0, 4.0])
    np.testing.assert_array_equal(v.numpy(), [3.0, 4.0])
    v.assign_add([1.0, 1.0])
    v.assign_sub(of.constant([0.5, 0.5]))
    np.testing.assert_array_equal(v.numpy(), [3.5, 4.5])
    with pytest.raises(ValueError, match="incompatible"):
        v.assign([1.0, 2.0, 3.0])
    with pytest.raises(of.errors.InvalidArgumentError):
        v.assign_add([1.0, 2.0, 3.0])


def test_a_small_training_loop():
    rng = np.random.default_rng(0)
    xs = rng.normal(size=(64, 3)).astype(np.float32)
    true_w = np.array([[1.0], [-2.0], [0.5]], dtype=np.float32)
    ys = xs @ true_w
    w = of.Variable(np.zeros((3, 1), np.float32))
    for _ in range(200):
        with of.GradientTape() as g:
            err = of.matmul(xs, w) - ys
            loss = of.reduce_mean(err * err)
        w.assign_sub(g.gradient(loss, w) * 0.1)
    np.testing.assert_allclose(w.numpy(), true_w, atol=1e-3)


def test_the_library_gradient_through_the_tape(zero_out_lib):
    # ZeroOut's gradient (shipped by the library): only the kept element.
    x = of.constant([1.0, 2.0, 3.0])
    with of.GradientTape() as g:
        g.watch(x)
        y = of.reduce_sum(zero_out_lib.zero_out(x, preserve_index=1) * 5.0)
    np.testing.assert_array_equal(g.gradient(y, x).numpy(), [0.0, 5.0, 0.0])


def test_a_gradient_registered_in_python_is_used_by_the_tape():
    # Replaces a built-in gradient (no other test differentiates Softsign).
    calls = []

    @of.RegisterGradient("Softsign", override=True)
    def _softsign_grad(op, grad):
        calls.append((op.type, op.inputs[0].numpy().tolist(), op.get_attr("T")))
        return grad * 10.0

    x = of.constant([1.0, -2.0])
    with of.GradientTape() as g:
        g.watch(x)
        y = of.ops.softsign(x)
    np.testing.assert_array_equal(g.gradient(y, x).numpy(), [10.0, 10.0])
    assert calls == [("Softsign", [1.0, -2.0], of.float32)]


def test_a_second_registration_is_refused_unless_override():
    with pytest.raises(of.errors.AlreadyExistsError, match="already has a Gradient") as e:

        @of.RegisterGradient("Tanh")
        def _tanh_grad(op, grad):
            return grad

    assert "gradients.rs" in str(e.value) and "override=True" in str(e.value)

    @of.RegisterGradient("PyTestOnlyOp")
    def _g1(op, grad):
        return grad

    with pytest.raises(of.errors.AlreadyExistsError) as e:

        @of.RegisterGradient("PyTestOnlyOp")
        def _g2(op, grad):
            return grad

    # The message names where the first one came from (file:line).
    assert "test_autodiff.py" in str(e.value)


def test_not_differentiable_and_bad_gradient_results():
    of.NotDifferentiable("PyTestOnlyOp2")

    @of.RegisterGradient("Softplus", override=True)
    def _bad(op, grad):
        return [grad, grad]  # Softplus has one input

    x = of.constant([1.0])
    with of.GradientTape() as g:
        g.watch(x)
        y = of.ops.softplus(x)
    with pytest.raises(of.errors.InvalidArgumentError, match="returned 2 values for 1 inputs"):
        g.gradient(y, x)
