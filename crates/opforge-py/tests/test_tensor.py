"""Tensors, dtypes and conversions (issue 15 part 2)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import opforge as of


def test_python_values_convert_as_tensorflow_converts_them():
    assert of.constant(1).dtype == of.int32
    assert of.constant(2**33).dtype == of.int64
    assert of.constant([1, 2**40]).dtype == of.int64
    assert of.constant(1.5).dtype == of.float32
    assert of.constant([1, 2.5]).dtype == of.float32
    assert of.constant(True).dtype == of.bool
    assert of.constant("abc").dtype == of.string
    assert of.constant(b"abc").dtype == of.string
    assert of.constant(1 + 2j).dtype == of.complex128
    assert of.constant([[1, 2], [3, 4]]).shape == (2, 2)
    assert of.constant([]).dtype == of.float32
    assert of.constant([]).shape == (0,)
    with pytest.raises(ValueError, match="non-rectangular"):
        of.constant([[1, 2], [3]])
    with pytest.raises(TypeError):
        of.constant([1, "a"])
    with pytest.raises(TypeError, match="dtype int32"):
        of.constant(1.5, dtype=of.int32)
    with pytest.raises(ValueError, match="out of range"):
        of.constant(300, dtype=of.uint8)


def test_dtype_arguments_accept_every_spelling():
    for spelling in (of.float32, np.float32, np.dtype("float32"), "float32", "float", "DT_FLOAT", 1):
        assert of.as_dtype(spelling) is of.float32
        assert of.constant([1, 2], dtype=spelling).dtype == of.float32
    assert of.as_dtype("half") is of.float16
    assert of.as_dtype(np.int64) is of.int64
    assert of.float32.as_numpy_dtype is np.float32
    assert of.float32.size == 4
    assert of.float32.as_datatype_enum == 1
    with pytest.raises(TypeError):
        of.as_dtype("float33")
    assert pickle.loads(pickle.dumps(of.int16)) is of.int16


def test_numpy_inputs_are_viewed_without_a_copy():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = of.convert_to_tensor(a)
    assert t._data_ptr == a.ctypes.data
    assert t.dtype == of.float32 and t.shape == (3, 4)
    # Small arrays too (no copy of any aligned C-contiguous input).
    b = np.array([7], dtype=np.int64)
    assert of.convert_to_tensor(b)._data_ptr == b.ctypes.data
    # constant always copies.
    assert of.constant(a)._data_ptr != a.ctypes.data


def test_outputs_are_handed_to_numpy_without_a_copy():
    t = of.add(of.constant([1.0, 2.0]), 1.0)
    v = t.numpy()
    assert v.ctypes.data == t._data_ptr
    assert not v.flags.writeable
    np.testing.assert_array_equal(v, [2.0, 3.0])
    assert np.asarray(t).ctypes.data == t._data_ptr
    # The view keeps the tensor's memory alive.
    del t
    np.testing.assert_array_equal(v, [2.0, 3.0])


def test_a_lent_array_is_never_written_by_an_op():
    a = np.ones(4096, dtype=np.float32)
    # Relu could compute in place into a uniquely owned input; the lent
    # array must not be that input.
    y = of.nn.relu(of.convert_to_tensor(-a))
    x = of.convert_to_tensor(a)
    z = of.ops.neg(x)
    np.testing.assert_array_equal(a, 1.0)
    np.testing.assert_array_equal(z.numpy(), -1.0)
    np.testing.assert_array_equal(y.numpy(), 0.0)


@pytest.mark.parametrize(
    "make",
    [
        lambda: np.asfortranarray(np.arange(12, dtype=np.float64).reshape(3, 4)),
        lambda: np.arange(24, dtype=np.int32).reshape(4, 6)[:, ::-2],
        lambda: np.arange(10, dtype=np.dtype(">i4")),
        lambda: np.frombuffer(b"\0" + np.arange(5, dtype=np.float32).tobytes(), dtype=np.float32, offset=1),
    ],
    ids=["fortran", "negative-strides", "byteswapped", "misaligned"],
)
def test_strided_swapped_and_misaligned_arrays_read_correctly(make):
    a = make()
    t = of.convert_to_tensor(a)
    np.testing.assert_array_equal(t.numpy(), a)
    assert t.shape == a.shape


def test_every_numeric_dtype_round_trips_through_numpy():
    for npt in (np.float16, np.float32, np.float64, np.int8, np.int16, np.int32, np.int64,
                np.uint8, np.uint16, np.uint32, np.uint64, np.bool_, np.complex64, np.complex128):
        a = (np.arange(6) % 2 == 0) if npt is np.bool_ else np.arange(6).astype(npt)
        t = of.convert_to_tensor(a.reshape(2, 3))
        assert t.dtype == of.as_dtype(npt)
        back = t.numpy()
        assert back.dtype == np.dtype(npt)
        np.testing.assert_array_equal(back, a.reshape(2, 3))


def test_every_numeric_numpy_type_is_viewed_and_mapped_by_its_type_number():
    # numpy's C type numbers (int, long, longlong: one opforge dtype by
    # size), native and byte-swapped, as zero-copy views or copies, through
    # convert_to_tensor and as direct op inputs (the fast path).
    for npt in (np.float16, np.float32, np.float64, np.byte, np.ubyte, np.short, np.ushort,
                np.intc, np.uintc, np.int_, np.uint, np.longlong, np.ulonglong, np.bool_,
                np.complex64, np.complex128):
        want = of.as_dtype(np.dtype(npt).name)
        base = (np.arange(6) % 2 == 0) if npt is np.bool_ else np.arange(6).astype(npt)
        for a in (base.reshape(2, 3), base[:1].reshape(()), base.reshape(2, 3).astype(
                np.dtype(npt).newbyteorder(">"))):
            t = of.convert_to_tensor(a)
            assert t.dtype == want, (npt, a.dtype)
            assert t.shape == a.shape
            np.testing.assert_array_equal(t.numpy(), a)
            viewed = a.dtype.isnative and a.size > 0
            assert (t._data_ptr == a.ctypes.data) == viewed, (npt, a.dtype)
            out = of.ops.identity(a)
            assert out.dtype == want
            np.testing.assert_array_equal(out.numpy(), a)
    # Empty arrays are copied (no memory to view), and read right.
    e = np.zeros((0, 3), np.float32)
    assert of.convert_to_tensor(e).shape == (0, 3)
    np.testing.assert_array_equal(of.add(e, e).numpy(), e)


def test_string_tensors():
    t = of.constant([["a", "bc"], ["", "d\u00e9"]])
    assert t.dtype == of.string and t.shape == (2, 2)
    v = t.numpy()
    assert v.dtype == object
    assert v[1, 1] == "dé".encode()
    s = of.convert_to_tensor(np.array(["x", "yz"]))
    assert s.numpy().tolist() == [b"x", b"yz"]


def test_operators_and_indexing():
    x = of.constant([1.0, 2.0, 3.0])
    np.testing.assert_array_equal((x + 1).numpy(), [2, 3, 4])
    np.testing.assert_array_equal((1 - x).numpy(), [0, -1, -2])
    np.testing.assert_array_equal((x * x).numpy(), [1, 4, 9])
    np.testing.assert_array_equal((x / 2).numpy(), [0.5, 1, 1.5])
    np.testing.assert_array_equal((-x).numpy(), [-1, -2, -3])
    np.testing.assert_array_equal((x ** 2).numpy(), [1, 4, 9])
    np.testing.assert_array_equal((x < 2).numpy(), [True, False, False])
    np.testing.assert_array_equal((x == 2).numpy(), [False, True, False])
    m = of.constant([[1.0, 2.0], [3.0, 4.0]])
    np.testing.assert_array_equal((m @ m).numpy(), [[7, 10], [15, 22]])
    assert float(x[1]) == 2.0
    np.testing.assert_array_equal(m[:, 1].numpy(), [2.0, 4.0])
    assert len(m) == 2
    assert int(of.constant(7)) == 7
    assert bool(of.constant(True))
    with pytest.raises(ValueError):
        bool(x)
    r = repr(x)
    assert r.startswith("<opforge.Tensor: shape=(3,), dtype=float32, numpy=") and "1." in r


def test_tensors_pickle():
    for t in (of.constant([[1, 2], [3, 4]]), of.constant(["a", "b"]), of.constant(2.5)):
        u = pickle.loads(pickle.dumps(t))
        assert u.dtype == t.dtype and u.shape == t.shape
        np.testing.assert_array_equal(u.numpy(), t.numpy())


def test_dlpack_round_trip_with_numpy():
    a = np.arange(6, dtype=np.float32)
    t = of.from_dlpack(a)
    assert t._data_ptr == a.ctypes.data
    np.testing.assert_array_equal(t.numpy(), a)


def test_dlpack_export_to_numpy_is_zero_copy_and_read_only():
    t = of.constant([1.0, 2.0, 3.0])
    assert t.__dlpack_device__() == (1, 0)
    a = np.from_dlpack(t)
    assert a.ctypes.data == t._data_ptr
    assert not a.flags.writeable
    np.testing.assert_array_equal(a, [1.0, 2.0, 3.0])


def test_dlpack_round_trips_with_torch():
    torch = pytest.importorskip("torch")
    for dt in (torch.float32, torch.float64, torch.float16, torch.int32, torch.int64,
               torch.uint8, torch.bool, torch.complex64):
        src = (torch.arange(6) % 3).to(dt).reshape(2, 3)
        t = of.from_dlpack(src)  # zero-copy from torch's memory
        assert t._data_ptr == src.data_ptr() and t.shape == (2, 3)
        np.testing.assert_array_equal(t.numpy(), src.numpy())
        back = torch.from_dlpack(t)  # DLPack 1.0: zero-copy, read-only
        assert back.data_ptr() == t._data_ptr and back.dtype == dt
        assert torch.equal(back, src)
    # A strided torch tensor is copied into a C-contiguous Tensor.
    strided = torch.arange(12, dtype=torch.float32).reshape(3, 4).t()
    t = of.from_dlpack(strided)
    np.testing.assert_array_equal(t.numpy(), strided.numpy())
    # An op result handed to torch and back.
    r = of.add(of.from_dlpack(torch.ones(3)), 1.0)
    assert torch.equal(torch.from_dlpack(r), torch.full((3,), 2.0))


def test_dlpack_round_trips_with_jax():
    jnp = pytest.importorskip("jax.numpy")
    x = jnp.arange(6.0, dtype=jnp.float32).reshape(2, 3)
    t = of.from_dlpack(x)
    assert t._data_ptr == x.unsafe_buffer_pointer()
    np.testing.assert_array_equal(t.numpy(), np.asarray(x))
    # JAX asks for pre-1.0 DLPack, which cannot mark memory read-only: it
    # gets a copy (a Tensor never changes under its holders).
    y = jnp.from_dlpack(t)
    assert y.unsafe_buffer_pointer() != t._data_ptr
    np.testing.assert_array_equal(np.asarray(y), t.numpy())
    with pytest.raises(BufferError, match="read-only"):
        t.__dlpack__(copy=False)
