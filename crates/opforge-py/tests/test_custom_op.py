"""MXNet-style custom operators (`opforge.operator`): MXNet's custom-op
scenarios ported (its `example/numpy-ops/custom_softmax.py` and the custom-op
tests of `tests/python/unittest/test_operator.py`), and the Python-kernel rules
(lent buffers, errors, threads)."""

import gc
import sys
import threading

import numpy as np
import pytest

import opforge as of
from conftest import REPO
from opforge import operator as mx

sys.path.insert(0, str(REPO / "examples" / "mxnet_style"))
import custom_softmax  # noqa: E402


def _np_softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


custom_softmax.define(mx, "softmax")


def _data(n=8, k=5, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, k)).astype(np.float32)
    label = rng.integers(0, k, n).astype(np.float32)
    return x, label


def test_softmax_forward_matches_numpy():
    x, label = _data()
    y = mx.Custom(of.constant(x), of.constant(label), op_type="softmax")
    np.testing.assert_allclose(y.numpy(), _np_softmax(x), rtol=1e-6, atol=1e-7)


def test_softmax_backward_is_the_cross_entropy_gradient_under_a_tape():
    x, label = _data()
    v = of.Variable(x)
    with of.GradientTape() as tape:
        y = mx.Custom(v, of.constant(label), op_type="softmax")
    g = tape.gradient(y, v).numpy()
    want = _np_softmax(x)
    want[np.arange(len(label)), label.astype(int)] -= 1.0
    np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-6)


def test_softmax_gradient_equals_the_built_in_ops_gradient():
    x, label = _data(16, 10, seed=3)
    onehot = np.eye(10, dtype=np.float32)[label.astype(int)]
    v = of.Variable(x)
    with of.GradientTape() as tape:
        loss, _ = of.ops.softmax_cross_entropy_with_logits(v, of.constant(onehot))
        loss = of.reduce_sum(loss)
    built_in = tape.gradient(loss, v).numpy()
    with of.GradientTape() as tape:
        y = mx.Custom(v, of.constant(label), op_type="softmax")
    custom = tape.gradient(y, v).numpy()
    np.testing.assert_allclose(custom, built_in, rtol=1e-5, atol=1e-5)


def test_in_a_function_and_its_gradient():
    x, label = _data()

    @of.function
    def f(x, label):
        with of.GradientTape() as tape:
            tape.watch(x)
            y = mx.Custom(x, label, op_type="softmax")
        return y, tape.gradient(y, x)

    y, g = f(of.constant(x), of.constant(label))
    np.testing.assert_allclose(y.numpy(), _np_softmax(x), rtol=1e-6, atol=1e-7)
    want = _np_softmax(x)
    want[np.arange(len(label)), label.astype(int)] -= 1.0
    np.testing.assert_allclose(g.numpy(), want, rtol=1e-5, atol=1e-6)


def test_in_a_graph_with_of_gradients():
    x, label = _data()
    g = of.Graph()
    with g.as_default():
        px = of.placeholder(of.float32, shape=[8, 5])
        pl = of.placeholder(of.float32, shape=[8])
        y = mx.Custom(px, pl, op_type="softmax")
        (dx,) = of.gradients(y, [px])
    yv, dxv = g.run([y, dx], {px: x, pl: label})
    np.testing.assert_allclose(yv, _np_softmax(x), rtol=1e-6, atol=1e-7)
    want = _np_softmax(x)
    want[np.arange(len(label)), label.astype(int)] -= 1.0
    np.testing.assert_allclose(dxv, want, rtol=1e-5, atol=1e-6)


def test_the_shape_function_uses_infer_shape():
    g = of.Graph()
    with g.as_default():
        px = of.placeholder(of.float32, shape=[3, 7])
        pl = of.placeholder(of.float32, shape=[3])
        y = mx.Custom(px, pl, op_type="softmax")
        assert y.shape == (3, 7)
        pu = of.placeholder(of.float32, shape=None)
        assert mx.Custom(pu, pl, op_type="softmax").shape is None


# -- defaults, req, aux, parameters -------------------------------------

class Recorder(mx.CustomOp):
    """Records what it was given; forward: out = in * scale (+ aux count)."""

    seen: list = []

    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, is_train, req, in_data, out_data, aux):
        Recorder.seen.append(("forward", is_train, list(req)))
        self.assign(out_data[0], req[0], in_data[0].asnumpy() * self.scale)
        if aux:
            aux[0][:] = aux[0].asnumpy() + 1

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        Recorder.seen.append(("backward", list(req), [g is None for g in out_grad],
                              [d is None for d in in_data], [d is None for d in out_data]))
        for i in range(len(in_grad)):
            self.assign(in_grad[i], req[i], out_grad[0].asnumpy() * self.scale)


@mx.register("scale")
class ScaleProp(mx.CustomOpProp):
    def __init__(self, scale=1.0, with_aux=False):
        super().__init__(need_top_grad=True)
        self.scale = float(scale)
        self.with_aux = with_aux in (True, "True", "true", "1")
        self.params = (scale, with_aux)

    def list_auxiliary_states(self):
        return ["count"] if self.with_aux else []

    def infer_shape(self, in_shape):
        return in_shape, [in_shape[0]], [[1]] if self.with_aux else []

    def declare_backward_dependency(self, out_grad, in_data, out_data):
        return out_grad

    def create_operator(self, ctx, in_shapes, in_dtypes):
        return Recorder(self.scale)


def test_mxnet_defaults():
    p = mx.CustomOpProp()
    assert p.list_arguments() == ["data"]
    assert p.list_outputs() == ["output"]
    assert p.list_auxiliary_states() == []
    assert p.infer_shape([[2, 3]]) == ([[2, 3]], ([2, 3],), ())
    assert p.infer_type([np.float32]) == ([np.float32], [np.float32], [])
    assert p.declare_backward_dependency([0], [1], [2]) == [0, 1, 2]
    assert mx.CustomOpProp(need_top_grad=False).declare_backward_dependency([0], [1], [2]) == [1, 2]


def test_parameters_keep_their_python_types_and_strings_work_too():
    x = of.constant(np.arange(6, dtype=np.float32).reshape(2, 3))
    y = mx.Custom(x, op_type="scale", scale=2.5)
    np.testing.assert_array_equal(y.numpy(), np.arange(6).reshape(2, 3) * 2.5)
    y = mx.Custom(x, op_type="scale", scale="3")  # as MXNet passes them
    np.testing.assert_array_equal(y.numpy(), np.arange(6).reshape(2, 3) * 3.0)


def test_req_write_forward_and_is_train_under_a_tape():
    Recorder.seen.clear()
    x = of.constant(np.ones((2, 2), np.float32))
    mx.Custom(x, op_type="scale", scale=2.0)
    with of.GradientTape() as tape:
        tape.watch(x)
        y = mx.Custom(x, op_type="scale", scale=2.0)
    with mx.train_mode():
        mx.Custom(x, op_type="scale", scale=2.0)
    assert Recorder.seen == [
        ("forward", False, ["write"]), ("forward", True, ["write"]), ("forward", True, ["write"])
    ]
    Recorder.seen.clear()
    g = tape.gradient(y, x)
    np.testing.assert_array_equal(g.numpy(), np.full((2, 2), 2.0))
    # Only out_grad was declared: in_data and out_data are not kept.
    assert Recorder.seen == [("backward", ["write"], [False], [True], [True])]


def test_req_null_for_an_integer_input():
    seen = []

    class Two(mx.CustomOp):
        def forward(self, is_train, req, in_data, out_data, aux):
            self.assign(out_data[0], req[0], in_data[0].asnumpy() * in_data[1].asnumpy())

        def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
            seen.append(list(req))
            self.assign(in_grad[0], req[0], out_grad[0].asnumpy() * in_data[1].asnumpy())
            self.assign(in_grad[1], req[1], 7)

    @mx.register("int_scale")
    class TwoProp(mx.CustomOpProp):
        def list_arguments(self):
            return ["data", "factor"]

        def create_operator(self, ctx, in_shapes, in_dtypes):
            return Two()

    x = of.constant(np.ones(3, np.float32))
    k = of.constant(np.array([1, 2, 3], np.int32))
    with of.GradientTape() as tape:
        tape.watch(x)
        y = mx.Custom(x, k, op_type="int_scale")
    np.testing.assert_array_equal(tape.gradient(y, x).numpy(), [1, 2, 3])
    assert seen == [["write", "null"]]


def test_assign_honours_every_req():
    op = mx.CustomOp()
    for req, want in [("null", [1, 1]), ("write", [5, 5]), ("inplace", [5, 5]), ("add", [6, 6])]:
        dst = np.ones(2)
        op.assign(dst, req, np.full(2, 5.0))
        np.testing.assert_array_equal(dst, want)
    with pytest.raises(ValueError, match="unknown req"):
        op.assign(np.ones(2), "sideways", 1)


def test_auxiliary_states_persist_across_calls():
    x = of.constant(np.ones((2, 2), np.float32))
    for _ in range(3):
        mx.Custom(x, op_type="scale", scale=1.0, with_aux=True)
    e = mx._entry("scale", {"scale": 1.0, "with_aux": True})
    (count,) = e.aux_arrays([(2, 2)], [np.float32])
    assert count.asnumpy().tolist() == [3.0]


def test_state_on_self_from_forward_is_there_in_backward():
    class Keep(mx.CustomOp):
        def forward(self, is_train, req, in_data, out_data, aux):
            self.saved = in_data[0].asnumpy() * 10
            self.assign(out_data[0], req[0], in_data[0])

        def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
            self.assign(in_grad[0], req[0], self.saved)

    @mx.register("keep")
    class KeepProp(mx.CustomOpProp):
        def create_operator(self, ctx, in_shapes, in_dtypes):
            return Keep()

    x = of.constant(np.array([1.0, 2.0], np.float32))
    with of.GradientTape() as tape:
        tape.watch(x)
        y = mx.Custom(x, op_type="keep")
    np.testing.assert_array_equal(tape.gradient(y, x).numpy(), [10.0, 20.0])


# -- buffers --------------------------------------------------------------

def test_views_share_memory_and_inputs_are_read_only():
    seen = {}

    class Probe(mx.CustomOp):
        def forward(self, is_train, req, in_data, out_data, aux):
            a = np.asarray(in_data[0])
            seen["input_is_the_tensor"] = a.ctypes.data == seen["ptr"]
            seen["input_writeable"] = a.flags.writeable
            with pytest.raises(ValueError):
                in_data[0][:] = 0
            o = np.asarray(out_data[0])
            seen["out_shares"] = np.shares_memory(o, np.asarray(out_data[0]))
            out_data[0][:] = a + 1
            seen["shape"], seen["dtype"] = out_data[0].shape, out_data[0].dtype

    @mx.register("probe")
    class ProbeProp(mx.CustomOpProp):
        def create_operator(self, ctx, in_shapes, in_dtypes):
            return Probe()

    x = of.constant(np.arange(4, dtype=np.float32))
    seen["ptr"] = x._data_ptr
    y = mx.Custom(x, op_type="probe")
    np.testing.assert_array_equal(y.numpy(), [1, 2, 3, 4])
    assert seen == {"ptr": x._data_ptr, "input_is_the_tensor": True, "input_writeable": False,
                    "out_shares": True, "shape": (4,), "dtype": np.float32}


def test_one_type_called_with_inputs_of_several_dtypes_and_keywords():
    # The native call keeps a plan per input dtypes under the type's name;
    # calls alternating between them, and calls it does not take (a name,
    # a positional op_type is an error), each get their own right answer.
    seen = []

    class Twice(mx.CustomOp):
        def forward(self, is_train, req, in_data, out_data, aux):
            seen.append((type(in_data[0]), type(out_data[0]), in_data[0].dtype))
            self.assign(out_data[0], req[0], np.asarray(in_data[0]) * 2)

    @mx.register("twice_dtypes")
    class TwiceProp(mx.CustomOpProp):
        def create_operator(self, ctx, in_shapes, in_dtypes):
            return Twice()

    f32 = of.constant(np.array([1.5, 2.0], np.float32))
    f64 = of.constant(np.array([0.25, -1.0], np.float64))
    for _ in range(3):
        y32 = mx.Custom(f32, op_type="twice_dtypes")
        y64 = mx.Custom(f64, op_type="twice_dtypes")
        assert y32.dtype == of.float32 and y64.dtype == of.float64
        np.testing.assert_array_equal(y32.numpy(), [3.0, 4.0])
        np.testing.assert_array_equal(y64.numpy(), [0.5, -2.0])
    y = mx.Custom(f32, op_type="twice_dtypes", name="named")
    np.testing.assert_array_equal(y.numpy(), [3.0, 4.0])
    assert {(i, o) for i, o, _ in seen} == {(mx.NDArray, mx.NDArray)}
    assert {d for _, _, d in seen} == {np.float32, np.float64}
    with pytest.raises(TypeError):
        mx.Custom(f32, "twice_dtypes")


def test_a_kept_output_buffer_written_later_changes_no_tensor():
    kept = []

    class Keeper(mx.CustomOp):
        def forward(self, is_train, req, in_data, out_data, aux):
            out_data[0][:] = 5.0
            kept.append(np.asarray(out_data[0]))

    @mx.register("keeper")
    class KeeperProp(mx.CustomOpProp):
        def create_operator(self, ctx, in_shapes, in_dtypes):
            return Keeper()

    x = of.constant(np.zeros(3, np.float32))
    y = mx.Custom(x, op_type="keeper")
    kept[0][:] = -1.0  # after the call returned
    np.testing.assert_array_equal(y.numpy(), [5.0, 5.0, 5.0])
    z = y + 0.0
    np.testing.assert_array_equal(z.numpy(), [5.0, 5.0, 5.0])


def test_an_unkept_output_buffer_becomes_the_output_without_a_copy():
    ptrs = []

    class NoKeep(mx.CustomOp):
        def forward(self, is_train, req, in_data, out_data, aux):
            a = np.asarray(out_data[0])
            ptrs.append(a.ctypes.data)
            a[:] = 2.0

    @mx.register("nokeep")
    class NoKeepProp(mx.CustomOpProp):
        def create_operator(self, ctx, in_shapes, in_dtypes):
            return NoKeep()

    y = mx.Custom(of.constant(np.zeros(1000, np.float32)), op_type="nokeep")
    assert y._data_ptr == ptrs[0]
    np.testing.assert_array_equal(y.numpy(), np.full(1000, 2.0))


# -- errors ---------------------------------------------------------------

class Boom(Exception):
    pass


def test_an_exception_in_forward_is_the_same_object_with_a_note():
    err = Boom("bad input")

    class Raiser(mx.CustomOp):
        def forward(self, is_train, req, in_data, out_data, aux):
            raise err

    @mx.register("raiser")
    class RaiserProp(mx.CustomOpProp):
        def create_operator(self, ctx, in_shapes, in_dtypes):
            return Raiser()

    x = of.constant(np.ones(2, np.float32))
    with pytest.raises(Boom) as info:
        mx.Custom(x, op_type="raiser")
    assert info.value is err
    assert any("Custom>raiser" in n for n in info.value.__notes__)
    f = of.function(lambda x: mx.Custom(x, op_type="raiser", name="node7"))
    with pytest.raises(Boom) as info:
        f(x)
    assert info.value is err
    assert any("node7" in n for n in info.value.__notes__), info.value.__notes__
    # The runtime stays usable.
    np.testing.assert_array_equal(mx.Custom(x, op_type="scale", scale=2.0).numpy(), [2.0, 2.0])


def test_wrong_infer_shape_results_name_the_method():
    @mx.register("bad_shape")
    class BadShapeProp(mx.CustomOpProp):
        def infer_shape(self, in_shape):
            return in_shape, [], []

    with pytest.raises(ValueError, match="infer_shape returned 0 output shapes"):
        mx.Custom(of.constant([1.0]), op_type="bad_shape")


def test_unknown_op_type():
    with pytest.raises(ValueError, match="no custom operator type 'nope'"):
        mx.Custom(of.constant([1.0]), op_type="nope")


def test_not_recorded_on_the_callers_tape():
    inner = []

    class UsesOps(mx.CustomOp):
        def forward(self, is_train, req, in_data, out_data, aux):
            t = of.constant(in_data[0].asnumpy()) * 3.0
            inner.append(t)
            self.assign(out_data[0], req[0], t.numpy())

    @mx.register("uses_ops")
    class UsesOpsProp(mx.CustomOpProp):
        def create_operator(self, ctx, in_shapes, in_dtypes):
            return UsesOps()

    x = of.constant(np.ones(2, np.float32))
    with of.GradientTape(persistent=True) as tape:
        tape.watch(x)
        mx.Custom(x, op_type="uses_ops")
    assert tape.gradient(inner[0], x) is None


# -- threads --------------------------------------------------------------

def test_graph_runs_from_four_threads():
    @of.function
    def f(x, label):
        return mx.Custom(x * 1.0, label, op_type="softmax") + 0.0

    results, failures = {}, []

    def run(k):
        try:
            x, label = _data(8, 5, seed=k)
            for _ in range(20):
                y = f(of.constant(x), of.constant(label))
            results[k] = (y.numpy(), _np_softmax(x))
        except BaseException as e:  # noqa: BLE001
            failures.append(e)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not failures
    assert len(results) == 4
    for got, want in results.values():
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    gc.collect()


def test_parameters_that_change_the_arguments_get_an_op_of_their_own():
    class Sum(mx.CustomOp):
        def forward(self, is_train, req, in_data, out_data, aux):
            self.assign(out_data[0], req[0], sum(np.asarray(a) for a in in_data))

    @mx.register("sum_n")
    class SumProp(mx.CustomOpProp):
        def __init__(self, n=2):
            super().__init__()
            self.n = int(n)

        def list_arguments(self):
            return [f"x{i}" for i in range(self.n)]

        def create_operator(self, ctx, in_shapes, in_dtypes):
            return Sum()

    one = of.constant([1.0])
    assert mx.Custom(one, one, op_type="sum_n").numpy().tolist() == [2.0]
    assert mx.Custom(one, one, one, op_type="sum_n", n=3).numpy().tolist() == [3.0]
    assert mx.Custom(one, one, op_type="sum_n", n="2").numpy().tolist() == [2.0]
    with pytest.raises(TypeError, match="takes 3 inputs"):
        mx.Custom(one, one, op_type="sum_n", n=3)


def test_re_registering_a_type_replaces_its_prop():
    class Const(mx.CustomOp):
        def __init__(self, v):
            super().__init__()
            self.v = v

        def forward(self, is_train, req, in_data, out_data, aux):
            self.assign(out_data[0], req[0], np.full(in_data[0].shape, self.v, np.float32))

    def make(v):
        @mx.register("const_v")
        class ConstProp(mx.CustomOpProp):
            def create_operator(self, ctx, in_shapes, in_dtypes):
                return Const(v)

    x = of.constant([0.0, 0.0])
    make(1.0)
    assert mx.Custom(x, op_type="const_v").numpy().tolist() == [1.0, 1.0]
    make(2.0)
    assert mx.Custom(x, op_type="const_v").numpy().tolist() == [2.0, 2.0]


def test_req_null_for_an_output_nobody_reads_in_a_graph():
    seen = []

    class TwoOut(mx.CustomOp):
        def forward(self, is_train, req, in_data, out_data, aux):
            seen.append(list(req))
            self.assign(out_data[0], req[0], in_data[0].asnumpy() * 2)
            self.assign(out_data[1], req[1], in_data[0].asnumpy() + 1)

    @mx.register("two_out")
    class TwoOutProp(mx.CustomOpProp):
        def list_outputs(self):
            return ["doubled", "shifted"]

        def create_operator(self, ctx, in_shapes, in_dtypes):
            return TwoOut()

    g = of.Graph()
    with g.as_default():
        px = of.placeholder(of.float32, shape=[2])
        a, b = mx.Custom(px, op_type="two_out")
    assert g.run(a, {px: np.array([1.0, 2.0], np.float32)}).numpy().tolist() == [2.0, 4.0]
    assert seen == [["write", "null"]]
    seen.clear()
    assert g.run(b, {px: np.array([1.0, 2.0], np.float32)}).numpy().tolist() == [2.0, 3.0]
    assert seen == [["null", "write"]]
    # Eagerly every output is returned, so every one is written.
    seen.clear()
    mx.Custom(of.constant([1.0]), op_type="two_out")
    assert seen == [["write", "write"]]


def test_req_add_when_a_graph_sums_gradients():
    Recorder.seen.clear()
    xv = np.array([1.0, 2.0], np.float32)
    for custom_first in (True, False):
        g = of.Graph()
        with g.as_default():
            px = of.placeholder(of.float32, shape=[2])
            y1 = mx.Custom(px, op_type="scale", scale=2.0)
            y2 = px * 3.0
            y = y1 + y2 if custom_first else y2 + y1
            (dx,) = of.gradients(y, [px])
        assert g.run(dx, {px: xv}).numpy().tolist() == [5.0, 5.0]
    reqs = [r for (kind, r, *_rest) in Recorder.seen if kind == "backward"]
    # One of the two sums has the custom op's part after the other: the
    # executor asks it to add into the part before it.
    assert ["add"] in reqs, reqs


def test_custom_ops_running_sharded_ops_from_four_threads_do_not_deadlock():
    # MXNet #18090's shape: graph runs from several Python threads whose
    # custom ops run eager ops that shard over the runtime's pool. Run in a
    # child process, its timeout the watchdog.
    import subprocess
    import textwrap

    code = textwrap.dedent("""
        import threading
        import numpy as np
        import opforge as of
        from opforge import operator as mx

        class MatSquare(mx.CustomOp):
            def forward(self, is_train, req, in_data, out_data, aux):
                x = of.constant(in_data[0].asnumpy())
                self.assign(out_data[0], req[0], of.matmul(x, x).numpy())

        @mx.register("mat_square")
        class MatSquareProp(mx.CustomOpProp):
            def create_operator(self, ctx, in_shapes, in_dtypes):
                return MatSquare()

        @of.function
        def f(x):
            y = mx.Custom(x, op_type="mat_square")
            return of.matmul(x, x) + y

        a = np.random.default_rng(0).standard_normal((256, 256)).astype(np.float32)
        want = 2 * (a.astype(np.float64) @ a.astype(np.float64))
        ok = []

        def run():
            for _ in range(10):
                got = f(of.constant(a)).numpy()
                ok.append(np.allclose(got, want, rtol=1e-3, atol=1e-2))

        threads = [threading.Thread(target=run) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        print(len(ok), all(ok))
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["40", "True"], r.stdout
