"""of.Graph from Python (issue 15 part 7): building with the op functions
while a graph is the default, symbolic tensors and their inferred shapes,
graph.run with feeds and fetch structures, captures, names, errors."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import opforge as of


def test_ops_add_nodes_while_a_graph_is_the_default():
    g = of.Graph()
    assert of.get_default_graph() is None
    with g.as_default() as entered:
        assert entered is g and of.get_default_graph() is g
        x = of.placeholder(of.float32, shape=[None, 3], name="x")
        y = of.add(x, 1.0)
        z = of.ops.mul(y, y, name="square")
        w = of.raw_ops.Neg(x=z)
    assert of.get_default_graph() is None
    for t in (x, y, z, w):
        assert isinstance(t, of.SymbolicTensor)
        assert t.graph is g
    assert x.name == "x:0" and x.op.type == "Placeholder"
    assert y.op.type == "AddV2" and y.name == "AddV2:0"
    assert z.name == "square:0" and z.op.name == "square"
    assert w.op.type == "Neg"
    assert [i.name for i in z.op.inputs] == ["AddV2:0", "AddV2:0"]
    assert z.op.outputs == (z,)
    assert z.op.get_attr("T") is of.float32
    assert len(g) == len(g.get_operations()) == 5  # x, Const, AddV2, square, Neg


def test_inferred_shapes_partially_known():
    g = of.Graph()
    with g.as_default():
        x = of.placeholder(of.float32, shape=[None, 3])
        u = of.placeholder(of.float32)  # unknown shape
        m = of.matmul(x, of.constant(np.ones((3, 4), np.float32)))
        s = of.reduce_sum(x, axis=1)
        r = of.reshape(x, [-1])
        e = of.exp(u)
        t = of.transpose(m)
    assert x.shape == (None, 3) and x.ndim == 2
    assert m.shape == (None, 4)
    assert s.shape == (None,)
    assert r.shape == (None,)
    assert u.shape is None and u.ndim is None and e.shape is None
    assert t.shape == (4, None)
    assert m.dtype is of.float32


def test_run_with_feeds_matches_numpy():
    g = of.Graph()
    with g.as_default():
        x = of.placeholder(of.float32, shape=[None, 3], name="x")
        w = of.constant([[1.0], [2.0], [3.0]])
        y = of.nn.relu(of.matmul(x, w) - 5.0)
    xv = np.array([[1, 2, 3], [0, 1, 0], [2, 2, 2]], np.float32)
    out = g.run(y, feed_dict={x: xv})
    assert isinstance(out, of.Tensor)
    expected = np.maximum(xv @ np.array([[1], [2], [3]], np.float32) - 5.0, 0.0)
    np.testing.assert_allclose(out.numpy(), expected)
    # Feeds by name, a second feed value, fetch by name.
    out2 = g.run("Relu:0", feed_dict={"x:0": xv * 2})
    np.testing.assert_allclose(out2.numpy(), np.maximum((xv * 2) @ [[1], [2], [3]] - 5.0, 0))


def test_fetch_structures():
    g = of.Graph()
    with g.as_default():
        a = of.placeholder(of.int32, shape=[])
        b = a * 2
        c = a + 10
    out = g.run({"b": b, "rest": [c, (a, b)]}, {a: 4})
    assert set(out) == {"b", "rest"}
    assert int(out["b"]) == 8
    assert isinstance(out["rest"], list) and isinstance(out["rest"][1], tuple)
    assert int(out["rest"][0]) == 14
    assert [int(v) for v in out["rest"][1]] == [4, 8]
    # An operation fetched (by object or name) runs and gives None.
    assert g.run([b.op, "AddV2"], {a: 1}) == [None, None]


def test_eager_tensors_are_captured_as_constants():
    e = of.constant([1.0, 2.0])
    g = of.Graph()
    with g.as_default():
        y = e * 3.0
        y2 = e + 1.0
    assert isinstance(y, of.SymbolicTensor)
    # One Const per captured tensor.
    consts = [op for op in g.get_operations() if op.type == "Const"]
    assert sum(1 for op in consts if op.get_attr("value") is not None) == len(consts)
    np.testing.assert_allclose(g.run(y).numpy(), [3.0, 6.0])
    np.testing.assert_allclose(g.run(y2).numpy(), [2.0, 3.0])
    # of.constant in a graph is a Const node.
    with g.as_default():
        k = of.constant(7, name="seven")
    assert isinstance(k, of.SymbolicTensor) and k.op.type == "Const" and k.name == "seven:0"
    assert int(g.run(k)) == 7


def test_variables_are_read_in_the_graph_at_run_time():
    v = of.Variable([1.0, 2.0])
    g = of.Graph()
    with g.as_default():
        y = v * 2.0
    np.testing.assert_allclose(g.run(y).numpy(), [2.0, 4.0])
    v.assign([5.0, 6.0])
    np.testing.assert_allclose(g.run(y).numpy(), [10.0, 12.0])


def test_operators_on_symbolic_tensors_and_mixed_eager():
    g = of.Graph()
    with g.as_default():
        x = of.placeholder(of.float32, shape=[2])
        e = of.constant([1.0, 4.0])
        outs = [x + e, e + x, x - 1, 1 - x, x * x, x / 2, 2 / x, -x, abs(x), x ** 2,
                x > 0.5, x <= 1.0]
    xv = np.array([-1.0, 2.0], np.float32)
    vals = g.run(outs, {x: xv})
    exp = [xv + [1, 4], [1, 4] + xv, xv - 1, 1 - xv, xv * xv, xv / 2, 2 / xv, -xv,
           np.abs(xv), xv ** 2, xv > 0.5, xv <= 1.0]
    for v, ex in zip(vals, exp):
        np.testing.assert_allclose(v.numpy(), ex, rtol=1e-6)


def test_names_are_unique_and_scoped():
    g = of.Graph()
    with g.as_default():
        x = of.placeholder(of.float32, shape=[], name="x")
        a = of.identity(x)
        b = of.identity(x)
        c = of.identity(x, name="Identity")
        with of.name_scope("layer"):
            d = of.identity(x)
            with of.name_scope("inner"):
                e = of.identity(x)
        x2 = of.placeholder(of.float32, name="x")
    assert [t.op.name for t in (a, b, c, d, e, x2)] == [
        "Identity", "Identity_1", "Identity_2", "layer/Identity", "layer/inner/Identity", "x_1"]
    assert g.get_tensor_by_name("layer/Identity:0") is d
    assert g.get_operation_by_name("x_1") is x2.op
    with pytest.raises(KeyError):
        g.get_operation_by_name("nope")
    with pytest.raises(ValueError):
        g.get_tensor_by_name("x")


def test_default_graph_stack_nests_and_is_per_thread():
    g1, g2 = of.Graph(), of.Graph()
    seen = []
    with g1.as_default():
        with g2.as_default():
            assert of.get_default_graph() is g2
            t = threading.Thread(target=lambda: seen.append(of.get_default_graph()))
            t.start()
            t.join()
        assert of.get_default_graph() is g1
    assert seen == [None]
    assert of.get_default_graph() is None


def test_init_scope_runs_eagerly():
    g = of.Graph()
    with g.as_default():
        with of.init_scope():
            e = of.constant(2.0) * 3.0
        s = of.constant(2.0) * 3.0
    assert isinstance(e, of.Tensor) and float(e) == 6.0
    assert isinstance(s, of.SymbolicTensor)


def test_errors_name_the_node_and_argument():
    g = of.Graph()
    with g.as_default():
        x = of.placeholder(of.float32, shape=[2, 3], name="x")
        # A shape error at construction names the node.
        with pytest.raises(of.errors.InvalidArgumentError, match="MatMul"):
            of.matmul(x, x)
        # A dtype mismatch names the argument.
        i = of.placeholder(of.int32, shape=[2, 3])
        with pytest.raises((TypeError, ValueError), match="AddV2|input"):
            of.add(x, i)
        y = of.identity(x)
    # A placeholder left unfed: the node is named.
    with pytest.raises(of.errors.InvalidArgumentError, match="x"):
        g.run(y)
    # A feed of the wrong shape.
    with pytest.raises(ValueError, match="shape"):
        g.run(y, {x: np.zeros((3, 3), np.float32)})
    # A tensor of another graph.
    other = of.Graph()
    with other.as_default():
        with pytest.raises(ValueError, match="another graph"):
            of.add(x, 1.0)
    with pytest.raises(ValueError):
        other.run(y)


def test_symbolic_tensors_have_no_value():
    g = of.Graph()
    with g.as_default():
        x = of.placeholder(of.float32, shape=[2])
    with pytest.raises(TypeError):
        bool(x)
    with pytest.raises(NotImplementedError, match="symbolic"):
        x.numpy()
    with pytest.raises(RuntimeError, match="eager"):
        of.placeholder(of.float32)


def test_graph_grows_after_runs():
    g = of.Graph()
    with g.as_default():
        x = of.placeholder(of.float32, shape=[])
        y = x + 1.0
    assert float(g.run(y, {x: 1.0})) == 2.0
    with g.as_default():
        z = y * 10.0
    assert float(g.run(z, {x: 1.0})) == 20.0
    assert float(g.run(y, {x: 5.0})) == 6.0


def test_list_inputs_and_list_outputs():
    g = of.Graph()
    with g.as_default():
        x = of.placeholder(of.float32, shape=[4, 6])
        parts = of.ops.split(of.constant(1), x, num_split=3)
        joined = of.concat(parts, axis=0)
        n = of.ops.add_n([x, x, x])
    assert isinstance(parts, list) and len(parts) == 3
    assert parts[0].shape == (4, 2)
    assert joined.shape == (12, 2)
    xv = np.arange(24, dtype=np.float32).reshape(4, 6)
    out = g.run([joined, n], {x: xv})
    np.testing.assert_allclose(out[0].numpy(), np.concatenate(np.split(xv, 3, axis=1), axis=0))
    np.testing.assert_allclose(out[1].numpy(), 3 * xv)


def test_test_case_evaluate_runs_symbolic_tensors():
    class T(of.test.TestCase):
        def runTest(self):  # noqa: N802
            g = of.Graph()
            with g.as_default():
                y = of.constant([1.0, 2.0]) * 2.0
            self.assertAllClose(self.evaluate([y, {"e": of.constant(1.0)}])[0], [2.0, 4.0])

    result = T().run()
    assert result.wasSuccessful(), result.failures + result.errors
