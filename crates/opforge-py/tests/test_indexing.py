"""`tensor[key]` as TensorFlow's `Tensor.__getitem__` (`_slice_helper`): one
StridedSlice op with TensorFlow's masks, for eager tensors (recorded by
tapes: gradients flow through indexing) and symbolic ones (a node in the
graph, with its inferred shape); advanced keys (lists, index arrays, boolean
masks) as a numpy copy eagerly and a TypeError symbolically; indices out of
range an InvalidArgumentError."""

from __future__ import annotations

import numpy as np
import pytest

import opforge as of

A = np.arange(60, dtype=np.float32).reshape(3, 4, 5)

# Basic keys, each checked against numpy.
KEYS = [
    0, 2, -1, -3,
    (1, 2), (1, -1, 4), (-1, -2, -3),
    slice(None), slice(1, None), slice(None, 2), slice(1, 3), slice(-2, None),
    slice(None, -1), slice(None, None, 2), slice(None, None, -1), slice(2, 0, -1),
    slice(None, None, -2), slice(-1, -4, -2), slice(10, None, -1), slice(-10, 10),
    (slice(1, 3), slice(None, None, 2)), (slice(None), slice(3, 0, -2), 1),
    Ellipsis, (Ellipsis, 1), (1, Ellipsis), (0, Ellipsis, 1), (Ellipsis, slice(None, None, -1)),
    None, (None, 1), (1, None), (Ellipsis, None), (None, Ellipsis, None),
    (None, slice(None), None, -1, None), (slice(None), None, 2, Ellipsis),
    (), (0, 1, 2), (Ellipsis, 0, 1, 2), (-1, Ellipsis, None, slice(4, 0, -3)),
    # empty results
    slice(2, 1), slice(5, 10), (slice(None), slice(3, 3)), slice(0, 3, -1),
    # numpy integers and integer scalar tensors as indices and bounds
    np.int64(1), (np.int32(-1), slice(np.int64(1), None)), np.array(2),
]


def _eager_keys():
    # Keys holding tensors, built lazily (after opforge is imported).
    return [
        of.constant(1), of.constant(-2, dtype=of.int64),
        (slice(of.constant(1), of.constant(3)), of.constant(0)),
        slice(None, None, of.constant(-1, dtype=of.int64)),
    ]


def _np_key(key):
    if isinstance(key, of.Tensor):
        return int(key)
    if isinstance(key, slice):
        return slice(*(_np_key(v) for v in (key.start, key.stop, key.step)))
    if isinstance(key, tuple):
        return tuple(_np_key(k) for k in key)
    return key


@pytest.mark.parametrize("key", KEYS, ids=repr)
def test_eager_values_match_numpy(key):
    got = of.constant(A)[key]
    want = A[key]
    assert isinstance(got, of.Tensor)
    assert got.dtype == of.float32
    assert got.shape == want.shape
    np.testing.assert_array_equal(got.numpy(), want)


def test_tensor_indices_and_bounds():
    x = of.constant(A)
    for key in _eager_keys():
        np.testing.assert_array_equal(x[key].numpy(), A[_np_key(key)])


@pytest.mark.parametrize("key", [1, -1, slice(None, None, -1), (slice(None), 0), (None, Ellipsis, 1)],
                         ids=repr)
def test_int32_and_string_tensors(key):
    ints = np.arange(12, dtype=np.int32).reshape(3, 4)
    got = of.constant(ints)[key]
    assert got.dtype == of.int32
    np.testing.assert_array_equal(got.numpy(), ints[key])

    strings = np.array([[b"a", b"bc", b"d"], [b"ef", b"", b"g"]], dtype=object)
    s = of.constant(strings.tolist())[key]
    assert s.dtype == of.string
    np.testing.assert_array_equal(s.numpy(), strings[key])


def test_scalars_and_zero_d_results():
    z = of.constant(3.5)
    assert z[()].shape == () and float(z[()]) == 3.5
    assert z[...].shape == ()
    assert z[None].shape == (1,)
    r = of.constant(A)[1, 2, 3]
    assert r.shape == () and float(r) == A[1, 2, 3]


def test_iteration_and_unpacking_still_end_at_the_last_element():
    # Python iterates a Tensor by __getitem__(0), (1), ... until IndexError:
    # the out-of-range error is an InvalidArgumentError and an IndexError.
    t = of.constant([[1, 2], [3, 4], [5, 6]])
    rows = list(t)
    assert [r.numpy().tolist() for r in rows] == [[1, 2], [3, 4], [5, 6]]
    a, b = of.constant([7.0, 8.0])
    assert (float(a), float(b)) == (7.0, 8.0)


# -- advanced keys --------------------------------------------------------

ADVANCED = [
    [0, 2], [[0, 1], [2, 0]], np.array([2, 0]), (slice(None), [0, 3]),
    A > 30, (A[:, 0, 0] > 10,), True, (0, np.array([1, 2])),
]


@pytest.mark.parametrize("key", ADVANCED, ids=lambda k: type(k).__name__)
def test_eager_advanced_keys_keep_numpy_indexing(key):
    got = of.constant(A)[key]
    np.testing.assert_array_equal(got.numpy(), A[key])


def test_eager_advanced_keys_as_tensors():
    x = of.constant(A)
    np.testing.assert_array_equal(x[of.constant([2, 0])].numpy(), A[[2, 0]])
    np.testing.assert_array_equal(x[of.constant(A > 40)].numpy(), A[A > 40])


def test_the_advanced_fallback_is_a_copy_no_tape_records():
    x = of.constant(A)
    with of.GradientTape() as tape:
        tape.watch(x)
        y = of.reduce_sum(x[[0, 2]])
    assert tape.gradient(y, x) is None


@pytest.mark.parametrize("key", [1.0, "a", slice(0.5, None), (0, 1.0), of.float32,
                                 slice(np.array([1, 2]), None), slice([1], None)],
                         ids=repr)
def test_non_index_keys_are_type_errors(key):
    with pytest.raises(TypeError, match="Only integers, slices"):
        of.constant(A)[key]


def test_a_float_tensor_is_not_an_index():
    with pytest.raises(TypeError, match="Only integers, slices"):
        of.constant(A)[of.constant(1.0)]


# -- errors -----------------------------------------------------------------


def test_out_of_range_is_invalid_argument():
    x = of.constant(A)
    with pytest.raises(of.errors.InvalidArgumentError,
                       match=r"slice index 5 of dimension 0 out of bounds"):
        x[5]
    with pytest.raises(of.errors.InvalidArgumentError,
                       match=r"slice index -1 of dimension 1 out of bounds"):
        x[0, -5]
    with pytest.raises(of.errors.InvalidArgumentError,
                       match=r"Index out of range using input dim 3; input has only 3 dims"):
        x[0, 0, 0, 0]
    with pytest.raises(of.errors.InvalidArgumentError, match="Multiple ellipses"):
        x[..., 0, ...]
    with pytest.raises(of.errors.InvalidArgumentError, match=r"strides\[0\] must be non-zero"):
        x[::0]
    with pytest.raises(of.errors.InvalidArgumentError, match="out of bounds"):
        x[2**40]        # int64 begin/end
    with pytest.raises(of.errors.InvalidArgumentError, match="out of bounds"):
        of.zeros([0, 3])[0]
    # An InvalidArgumentError is a ValueError, as TensorFlow's.
    with pytest.raises(ValueError):
        x[3]


def test_out_of_range_in_a_graph_and_a_function():
    g = of.Graph()
    with g.as_default():
        p = of.placeholder(of.float32, shape=(None, 4))
        with pytest.raises(of.errors.InvalidArgumentError,
                           match=r"slice index 7 of dimension 1 out of bounds"):
            p[:, 7]

    @of.function
    def f(v):
        return v[5]

    with pytest.raises(of.errors.InvalidArgumentError,
                       match=r"slice index 5 of dimension 0 out of bounds"):
        f(of.constant(A))


# -- gradients --------------------------------------------------------------


def _mask(shape, key):
    m = np.zeros(shape, np.float32)
    m[key] = 1.0
    return m


@pytest.mark.parametrize("key", [
    (slice(1, 3), slice(None, None, 2)), (Ellipsis, -1), (slice(None, None, -1), 1, None),
    (1, slice(3, 0, -2)), (),
], ids=repr)
def test_gradient_through_eager_indexing(key):
    a = np.arange(20, dtype=np.float32).reshape(4, 5)
    x = of.constant(a)
    with of.GradientTape() as tape:
        tape.watch(x)
        y = of.reduce_sum(x[key])
    grad = tape.gradient(y, x)
    assert grad is not None
    np.testing.assert_array_equal(grad.numpy(), _mask(a.shape, key))


def test_gradient_of_sum_of_a_slice_is_the_mask():
    x = of.constant(np.ones((3, 4), np.float32))
    with of.GradientTape() as tape:
        tape.watch(x)
        y = of.reduce_sum(x[1:3, ::2])
    expected = np.zeros((3, 4), np.float32)
    expected[1, 0] = expected[1, 2] = expected[2, 0] = expected[2, 2] = 1.0
    np.testing.assert_array_equal(tape.gradient(y, x).numpy(), expected)


def test_gradient_weights_repeated_reads():
    # x[1] + 2 * x[1:2, None] reads row 1 twice: the gradient adds up.
    x = of.constant(np.zeros((3, 2), np.float32))
    with of.GradientTape() as tape:
        tape.watch(x)
        y = of.reduce_sum(x[1] * 3.0) + of.reduce_sum(x[1:2, None] * 2.0)
    np.testing.assert_array_equal(tape.gradient(y, x).numpy(), [[0, 0], [5, 5], [0, 0]])


def test_gradient_through_a_variable_read():
    v = of.Variable(np.arange(6, dtype=np.float32).reshape(2, 3))
    with of.GradientTape() as tape:
        y = of.reduce_sum(v.read_value()[:, 1:] * 2.0)
    np.testing.assert_array_equal(tape.gradient(y, v).numpy(), [[0, 2, 2], [0, 2, 2]])
    # Indexing the Variable itself reads it (tf.Variable.__getitem__).
    with of.GradientTape() as tape:
        y = of.reduce_sum(v[1, ::2] * 3.0)
    np.testing.assert_array_equal(v[1, ::2].numpy(), [3, 5])
    np.testing.assert_array_equal(tape.gradient(y, v).numpy(), [[0, 0, 0], [3, 0, 3]])


def test_compute_gradient_agrees():
    a = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    for key in [(slice(1, 3), slice(None, None, 2)), (slice(None, None, -1), 2), (None, Ellipsis, -1)]:
        theoretical, numerical = of.test.compute_gradient(lambda v, key=key: v[key], [a])
        # The Jacobian of a selection: one 1 per output element.
        picked = np.arange(a.size).reshape(a.shape)[key].reshape(-1)
        jac = np.zeros((picked.size, a.size), np.float32)
        jac[np.arange(picked.size), picked] = 1.0
        np.testing.assert_array_equal(theoretical[0], jac)
        np.testing.assert_allclose(numerical[0], jac, atol=1e-2)


def test_second_order_through_indexing():
    x = of.constant([1.0, 2.0, 3.0])
    with of.GradientTape() as outer:
        outer.watch(x)
        with of.GradientTape() as inner:
            inner.watch(x)
            y = of.reduce_sum(x[::2] ** 3.0)
        g = inner.gradient(y, x)
    np.testing.assert_allclose(g.numpy(), [3.0, 0.0, 27.0])
    np.testing.assert_allclose(outer.gradient(g, x).numpy(), [6.0, 0.0, 18.0])


# -- of.function ----------------------------------------------------------


@pytest.mark.parametrize("key", KEYS, ids=repr)
def test_function_values_match_eager(key):
    f = of.function(lambda v: v[key])
    got = f(of.constant(A))
    np.testing.assert_array_equal(got.numpy(), of.constant(A)[key].numpy())
    np.testing.assert_array_equal(got.numpy(), A[key])


def test_symbolic_indices_in_a_function():
    @of.function
    def f(v, i):
        return v[i], v[i:i + 2, -i], v[..., i], v[:, ::i]

    x = of.constant(A)
    for i, dtype in ((1, of.int32), (2, of.int64)):
        got = f(x, of.constant(i, dtype=dtype))
        want = (A[i], A[i:i + 2, -i], A[..., i], A[:, ::i])
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g.numpy(), w)


def test_gradient_through_indexing_in_a_function():
    @of.function
    def f(v):
        with of.GradientTape() as tape:
            tape.watch(v)
            y = of.reduce_sum(v[1:3, ::2] * v[1:3, ::2])
        return tape.gradient(y, v)

    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    expected = 2 * a * _mask(a.shape, (slice(1, 3), slice(None, None, 2)))
    np.testing.assert_array_equal(f(of.constant(a)).numpy(), expected)


def test_tape_around_a_function_call_that_indexes():
    f = of.function(lambda v: of.reduce_sum(v[..., 0] * 2.0))
    x = of.constant(np.ones((2, 3), np.float32))
    with of.GradientTape() as tape:
        tape.watch(x)
        y = f(x)
    np.testing.assert_array_equal(tape.gradient(y, x).numpy(), [[2, 0, 0], [2, 0, 0]])


# -- graphs -----------------------------------------------------------------

MASKS = ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask")


@pytest.mark.parametrize("key, shape, masks, vectors", [
    # (key, inferred shape, TensorFlow's masks, [begin, end, strides])
    ((slice(1, 3), slice(None, None, 2)), (None, 2, 5), (2, 2, 0, 0, 0), [[1, 0], [3, 0], [1, 2]]),
    (1, (4, 5), (0, 0, 0, 0, 1), [[1], [2], [1]]),
    (-1, (4, 5), (0, 0, 0, 0, 1), [[-1], [0], [1]]),
    ((Ellipsis, 1), (None, 4), (0, 0, 1, 0, 2), [[0, 1], [0, 2], [1, 1]]),
    ((None, slice(None), -1), (1, None, 5), (2, 2, 0, 1, 4), [[0, 0, -1], [0, 0, 0], [1, 1, 1]]),
    (slice(None, None, -1), (None, 4, 5), (1, 1, 0, 0, 0), [[0], [0], [-1]]),
    ((slice(None), slice(3, None, -2), Ellipsis, None), (None, 2, 5, 1), (1, 3, 4, 8, 0),
     [[0, 3, 0, 0], [0, 0, 0, 0], [1, -2, 1, 1]]),
    ((0, slice(1, 3), slice(-1, None)), (2, 1), (0, 4, 0, 0, 1), [[0, 1, -1], [1, 3, 0], [1, 1, 1]]),
    ((), (None, 4, 5), (0, 0, 0, 0, 0), [[], [], []]),
], ids=repr)
def test_graph_node_masks_and_shapes(key, shape, masks, vectors):
    g = of.Graph()
    with g.as_default():
        p = of.placeholder(of.float32, shape=(None, 4, 5))
        r = p[key]
    assert isinstance(r, of.SymbolicTensor)
    assert r.shape == shape
    op = r.op
    assert op.type == "StridedSlice"
    assert op.name.startswith("strided_slice")
    assert tuple(op.get_attr(m) for m in MASKS) == masks
    assert op.get_attr("Index") == of.int32
    assert [g.run(t).numpy().tolist() for t in op.inputs[1:]] == vectors
    value = g.run(r, feed_dict={p: A})
    np.testing.assert_array_equal(value.numpy(), A[key])


def test_graph_shapes_with_unknown_dims_and_rank():
    g = of.Graph()
    with g.as_default():
        p = of.placeholder(of.float32, shape=(None, None, 5))
        assert p[0].shape == (None, 5)
        assert p[1:3].shape == (None, None, 5)
        assert p[..., 1:4].shape == (None, None, 3)
        assert p[:, :, ::-2].shape == (None, None, 3)
        assert p[None, ..., 2, None].shape == (1, None, None, 1)
        q = of.placeholder(of.float32, shape=None)
        assert q[1:3].shape is None
        assert q[0].shape is None
        i = of.placeholder(of.int64, shape=())
        r = p[i]
        assert r.shape == (None, 5)
        assert r.op.get_attr("Index") == of.int64
        assert p[:, i:].shape == (None, None, 5)
        out = g.run([r, p[:, i:]], feed_dict={p: A, i: 1})
    np.testing.assert_array_equal(out[0].numpy(), A[1])
    np.testing.assert_array_equal(out[1].numpy(), A[:, 1:])


def test_graph_strings():
    g = of.Graph()
    with g.as_default():
        s = of.placeholder(of.string, shape=(None,))
        r = s[::-1]
        out = g.run(r, feed_dict={s: np.array([b"a", b"b", b"c"], dtype=object)})
    assert out.numpy().tolist() == [b"c", b"b", b"a"]


def test_graph_gradients_through_indexing():
    g = of.Graph()
    with g.as_default():
        p = of.placeholder(of.float32, shape=(3, 4))
        y = of.reduce_sum(p[1:, ::-3] * 2.0)
        (dp,) = of.gradients(y, [p])
        out = g.run(dp, feed_dict={p: np.zeros((3, 4), np.float32)})
    np.testing.assert_array_equal(out.numpy(), 2 * _mask((3, 4), (slice(1, None), slice(None, None, -3))))


@pytest.mark.parametrize("key, what", [
    ([0, 1], "gather_v2"), (np.array([0, 2]), "gather_v2"), ((slice(None), [1, 2]), "gather_v2"),
    (np.ones((2, 4, 5), bool), "boolean_mask"), (True, "boolean_mask"), ((0, False), "boolean_mask"),
], ids=repr)
def test_symbolic_advanced_keys_are_type_errors(key, what):
    g = of.Graph()
    with g.as_default():
        p = of.placeholder(of.float32, shape=(2, 4, 5))
        with pytest.raises(TypeError, match=what) as e:
            p[key]
    assert "symbolic tensor cannot be indexed with" in str(e.value)


def test_symbolic_tensor_keys():
    g = of.Graph()
    with g.as_default():
        p = of.placeholder(of.float32, shape=(2, 4, 5))
        with pytest.raises(TypeError, match="boolean_mask"):
            p[p > 1.0]
        with pytest.raises(TypeError, match="gather_v2"):
            p[of.placeholder(of.int32, shape=(2,))]
        with pytest.raises(TypeError, match="Only integers, slices"):
            p[of.placeholder(of.float32, shape=())]
        with pytest.raises(TypeError, match="Only integers, slices"):
            p[1.5]

    @of.function
    def f(v):
        return v[[0, 1]]

    with pytest.raises(TypeError, match="gather_v2"):
        f(of.constant(A))


def test_a_rejected_key_adds_no_node():
    # The whole key is checked before any op (the `i + 1` of a symbolic
    # index, the Pack of begin/end/strides) is added.
    g = of.Graph()
    with g.as_default():
        p = of.placeholder(of.float32, shape=(2, 4, 5))
        i = of.placeholder(of.int32, shape=())
        before = len(g.get_operations())
        with pytest.raises(TypeError, match="gather_v2"):
            p[i, [0, 1]]
        with pytest.raises(TypeError, match="Only integers"):
            p[i, 0.5]
        assert len(g.get_operations()) == before
        r = p[i, 1:, i]
        # begin and end are computed (Pack): the sliced size is unknown
        # until the graph runs, as in TensorFlow.
        assert r.shape == (None,)
        out = g.run(r, feed_dict={p: A[:2], i: 1})
    np.testing.assert_array_equal(out.numpy(), A[1, 1:, 1])


def test_eager_tensor_indexed_while_a_graph_is_the_default_is_captured():
    g = of.Graph()
    x = of.constant(A)
    with g.as_default():
        r = x[1:, 0]
    assert isinstance(r, of.SymbolicTensor)
    assert r.shape == (2, 5)
    np.testing.assert_array_equal(g.run(r).numpy(), A[1:, 0])
