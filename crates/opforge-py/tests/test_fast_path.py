"""The native fast path of the op functions (`_C.OpFunction`, issue 15's
eager speed target): which calls take it, that every other call falls back
to the generated Python function with the same results and errors, the
per-thread switch graph mode uses, native tape recording, pickling and
introspection."""

from __future__ import annotations

import inspect
import pickle
import subprocess
import sys
import threading

import numpy as np
import pytest

import opforge as of
from opforge import _C, _ops


@pytest.fixture
def slow_calls(monkeypatch):
    """Counts the calls that ran the Python fallback (`OpInfo.call`, the
    path of the generated functions and of the Tensor operator hooks)."""
    calls = []
    original = _ops.OpInfo.call

    def counting(self, *args, **kwargs):
        calls.append(self.name)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(_ops.OpInfo, "call", counting)
    return calls


@pytest.fixture
def fast_path_off():
    """Turns the fast path off on this thread for the block, as graph mode does."""

    class Off:
        def __enter__(self):
            self.was = _C.set_eager_fast_path(False)

        def __exit__(self, *exc):
            _C.set_eager_fast_path(self.was)

    return Off


def _both(fast_path_off, f, *args, **kwargs):
    """`f(*args, **kwargs)` with the fast path on, then off: (result or
    exception) of each."""

    def run():
        try:
            return ("ok", f(*args, **kwargs))
        except Exception as e:  # noqa: BLE001 - compared below
            return ("err", e)

    fast = run()
    with fast_path_off():
        slow = run()
    return fast, slow


def _same_outcome(fast, slow):
    assert fast[0] == slow[0], (fast, slow)
    if fast[0] == "err":
        assert type(fast[1]) is type(slow[1])
        assert str(fast[1]) == str(slow[1])
    else:
        a, b = fast[1], slow[1]
        if isinstance(a, tuple):
            assert type(a) is type(b) and len(a) == len(b)
            for x, y in zip(a, b):
                assert x.dtype == y.dtype
                np.testing.assert_array_equal(x.numpy(), y.numpy())
        elif a is None:
            assert b is None
        else:
            assert type(a) is type(b) is of.Tensor
            assert a.dtype == b.dtype and a.shape == b.shape
            np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_op_functions_are_native_with_their_generated_interface():
    f = of.ops.add_v2
    assert type(f) is _C.OpFunction and f._fast
    assert f.__name__ == "add_v2" and f.__qualname__ == "add_v2"
    assert f.__module__ == "opforge.ops" and f._opforge_op == "AddV2"
    assert "Args:" in f.__doc__
    assert str(inspect.signature(f)) == "(x, y, name=None)"
    assert repr(f) == "<opforge op function opforge.ops.add_v2>"
    raw = of.raw_ops.AddV2
    assert type(raw) is _C.OpFunction and raw.__module__ == "opforge.raw_ops"
    assert all(p.kind is p.KEYWORD_ONLY for p in inspect.signature(raw).parameters.values())
    # The aliases that are exactly one op are native too, with their own names.
    assert type(of.add) is _C.OpFunction and of.add.__name__ == "add"
    assert of.add.__module__ == "opforge" and str(inspect.signature(of.add)) == "(x, y, name=None)"
    assert of.add.__doc__.startswith("x + y")
    # Ops with list inputs or outputs always run the fallback.
    assert not of.ops.add_n._fast
    assert of.ops.add_n([of.constant([1.0]), of.constant([2.0])]).numpy().tolist() == [3.0]
    # They pickle as the functions they replace did.
    for g in (f, raw, of.add, of.ops.mat_mul):
        assert pickle.loads(pickle.dumps(g)) is g
    # The tuple-and-dict entry (tp_call) binds as the vectorcall one does.
    ta = of.constant([1.0])
    assert type(f).__call__(f, ta, y=ta).numpy().tolist() == [2.0]
    assert type(raw).__call__(raw, x=ta, y=ta).numpy().tolist() == [2.0]
    with pytest.raises(TypeError):
        type(raw).__call__(raw, ta, ta)
    # Stored on a class, an op function binds as a method, as a function does.
    class Holder:
        double = of.ops.add_v2

    h = Holder()
    assert Holder.double is of.ops.add_v2
    assert h.double.__self__ is h and h.double.__func__ is of.ops.add_v2


def test_tensor_calls_run_natively_and_the_switch_sends_them_to_python(slow_calls, fast_path_off):
    ta, tb = of.constant([1.0, 2.0]), of.constant([3.0, 4.0])
    for call in (
        lambda: of.add(ta, tb),
        lambda: of.ops.add_v2(ta, tb),
        lambda: of.ops.add_v2(ta, y=tb),
        lambda: of.ops.add_v2(y=tb, x=ta, name="sum"),
        lambda: of.ops.add_v2(ta, tb, "sum"),
        lambda: of.raw_ops.AddV2(x=ta, y=tb),
        lambda: ta + tb,
    ):
        assert call().numpy().tolist() == [4.0, 6.0]
    assert slow_calls == []
    assert _C.eager_fast_path()
    with fast_path_off():
        assert not _C.eager_fast_path()
        assert of.add(ta, tb).numpy().tolist() == [4.0, 6.0]
        assert (ta + tb).numpy().tolist() == [4.0, 6.0]
        assert of.raw_ops.AddV2(x=ta, y=tb).numpy().tolist() == [4.0, 6.0]
    assert _C.eager_fast_path()
    assert slow_calls == ["AddV2"] * 3


def test_values_to_convert_go_to_python(slow_calls):
    t = of.constant([1.0, 2.0])
    assert of.add(t, 1).numpy().tolist() == [2.0, 3.0]
    assert of.add([1, 2], [3, 4]).numpy().tolist() == [4, 6]
    assert (t + 1.5).numpy().tolist() == [2.5, 3.5]
    assert (2.0 - t).numpy().tolist() == [1.0, 0.0]
    assert len(slow_calls) == 4


def test_numpy_arrays_run_natively_without_a_copy(slow_calls, fast_path_off):
    a = np.arange(6, dtype=np.float32)
    b = np.ones(6, np.float32)
    assert of.add(a, b).numpy().tolist() == (a + 1).tolist()
    assert of.add(a, of.constant(b)).numpy().tolist() == (a + 1).tolist()
    # Identity forwards its input: the output is the array's own memory.
    out = of.identity(a)
    assert out._data_ptr == a.ctypes.data
    assert slow_calls == []
    # Fortran order, strided and non-viewable arrays: still right.
    f = np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3))
    np.testing.assert_array_equal(of.identity(f).numpy(), f)
    s = np.arange(12, dtype=np.float32)[::2]
    np.testing.assert_array_equal(of.add(s, s).numpy(), s + s)
    # Big-endian arrays are copied natively, as from_numpy copies them.
    be = np.arange(3, dtype=">f4")
    np.testing.assert_array_equal(of.add(be, be).numpy(), [0, 2, 4])
    assert slow_calls == []
    # Arrays of a dtype a Tensor cannot hold, and object arrays: Python's conversion.
    ld = np.ones(2, np.longdouble)
    _same_outcome(*_both(fast_path_off, of.add, ld, ld))
    assert len(slow_calls) == 2


def test_fixed_dtype_inputs_of_another_dtype_keep_the_python_conversion(fast_path_off):
    # Reshape's `shape` is `Tshape` (int32 or int64): an int64 array is taken as is.
    x = np.arange(6, dtype=np.float32)
    _same_outcome(*_both(fast_path_off, of.ops.reshape, x, np.array([2, 3], np.int64)))
    # Cast's DstT given as a dtype object (native), a name, a numpy dtype (Python).
    for dst in (of.int32, "int32", np.int32):
        _same_outcome(*_both(fast_path_off, of.raw_ops.Cast, x=x, DstT=dst))
    # Fixed-dtype inputs given arrays of another dtype: Python converts or refuses them.
    _same_outcome(*_both(fast_path_off, of.ops.fake_quant_with_min_max_args, np.arange(3, dtype=np.int32)))
    _same_outcome(*_both(fast_path_off, of.ops.fake_quant_with_min_max_args, np.arange(3.0)))
    _same_outcome(*_both(fast_path_off, of.ops.logical_not, np.arange(3, dtype=np.int32)))
    _same_outcome(*_both(fast_path_off, of.ops.logical_not, np.array([True, False])))


@pytest.mark.parametrize(
    "call",
    [
        # Wrong dtypes: the runtime's error.
        lambda: of.add(of.constant([1.0]), of.constant([1])),
        lambda: of.add(np.ones(1, np.float32), np.ones(1, np.float64)),
        lambda: of.constant([1.0]) + of.constant([1]),
        lambda: of.ops.mat_mul(of.constant([1.0]), of.constant([1.0])),
        # Binding mistakes: Python's TypeError.
        lambda: of.ops.add_v2(of.constant(1.0)),
        lambda: of.ops.add_v2(of.constant(1.0), of.constant(1.0), "n", "extra"),
        lambda: of.ops.add_v2(of.constant(1.0), x=of.constant(1.0)),
        lambda: of.ops.add_v2(of.constant(1.0), z=of.constant(1.0)),
        lambda: of.ops.add_v2(of.constant(1.0), of.constant(1.0), "n", name="m"),
        lambda: of.raw_ops.AddV2(of.constant(1.0), of.constant(1.0)),
        lambda: of.raw_ops.AddV2(x=of.constant(1.0)),
        # Attrs: defaults, given, of the wrong type, out of range.
        lambda: of.ops.mat_mul(of.constant([[1.0, 2.0]]), of.constant([[1.0, 2.0]]), transpose_b=True),
        lambda: of.ops.mat_mul(of.constant([[1.0, 2.0]]), of.constant([[1.0, 2.0]]), transpose_b=False),
        lambda: of.ops.mat_mul(of.constant([[1.0, 2.0]]), of.constant([[1.0, 2.0]]), transpose_b=1),
        lambda: of.ops.mat_mul(of.constant([[1.0, 2.0]]), of.constant([[1.0, 2.0]])),
        lambda: of.ops.leaky_relu(of.constant([-1.0, 1.0]), alpha=0.5),
        lambda: of.ops.leaky_relu(of.constant([-1.0, 1.0]), alpha=1),
        lambda: of.ops.leaky_relu(of.constant([-1.0, 1.0]), alpha="a"),
        lambda: of.raw_ops.Cast(x=of.constant([1.5]), DstT=of.int32),
        lambda: of.raw_ops.Cast(x=of.constant([1.5]), DstT=of.int32, Truncate=True),
        lambda: of.raw_ops.Cast(x=of.constant([1.5]), DstT=of.string),
        lambda: of.ops.sum(of.constant([[1.0, 2.0]]), of.constant(1), keep_dims=True),
        lambda: of.ops.sum(of.constant([[1.0, 2.0]]), of.constant(5)),
        # Several outputs come back as the same namedtuple.
        lambda: of.ops.unique(of.constant([3, 1, 3])),
        # No outputs.
        lambda: of.ops.no_op(),
    ],
)
def test_results_and_errors_are_the_fallbacks(call, fast_path_off):
    _same_outcome(*_both(fast_path_off, call))


def test_library_ops_run_natively(zero_out_lib, zero_out_path, slow_calls, fast_path_off):
    f = zero_out_lib.zero_out
    assert type(f) is _C.OpFunction and f._fast and f.__module__ == "zero_out"
    t = of.constant([5, 4, 3])
    assert f(t).numpy().tolist() == [5, 0, 0]
    assert f(t, preserve_index=2).numpy().tolist() == [0, 0, 3]
    assert f(t, 1).numpy().tolist() == [0, 4, 0]
    assert f(np.array([1, 2], np.int32)).numpy().tolist() == [1, 0]
    assert slow_calls == []
    for args, kwargs in (((t,), {"preserve_index": 7}), ((t,), {"preserve_index": "a"}), ((t,), {"preserve_index": 1.0})):
        _same_outcome(*_both(fast_path_off, f, *args, **kwargs))
    # Loading again gives the same module and functions, still native.
    assert of.load_op_library(zero_out_path) is zero_out_lib
    assert pickle.loads(pickle.dumps(f)) is f
    assert of.raw_ops.ZeroOut(to_zero=t).numpy().tolist() == [5, 0, 0]


def test_a_registry_change_keeps_prepared_calls_right():
    # Replacing a gradient changes the registry's generation: prepared
    # calls re-check what they hold and keep running; the tape uses the
    # gradient registered last. (No other test differentiates Log1p.)
    x = of.constant(3.0)
    assert of.ops.log1p(x).numpy() == pytest.approx(np.log1p(3.0))
    generation = _C.registry_generation()

    @of.RegisterGradient("Log1p", override=True)
    def _log1p_grad(op, grad):
        return [grad * 7.0]

    assert _C.registry_generation() != generation
    assert of.ops.log1p(x).numpy() == pytest.approx(np.log1p(3.0))
    with of.GradientTape() as g:
        g.watch(x)
        y = of.ops.log1p(x)
    assert g.gradient(y, x).numpy() == pytest.approx(7.0)


def test_tapes_record_native_calls(slow_calls):
    x = of.constant([1.0, 2.0])
    with of.GradientTape(persistent=True) as g:
        g.watch(x)
        y = of.multiply(x, x)
        z = of.add(y, x) * x
        n = g._tape.num_records()
        with g.stop_recording():
            w = z * x
        assert g._tape.num_records() == n
    assert slow_calls == []
    # d/dx (x^3 + x^2) = 3x^2 + 2x
    assert g.gradient(z, x).numpy().tolist() == [5.0, 16.0]
    assert g.gradient(w, x) is None
    # After the block nothing is recorded.
    n = g._tape.num_records()
    of.add(x, x)
    assert g._tape.num_records() == n


def test_nested_tapes_record_natively():
    x = of.constant(2.0)
    with of.GradientTape() as outer:
        outer.watch(x)
        with of.GradientTape() as inner:
            inner.watch(x)
            y = x * x * x
        dy = inner.gradient(y, x)
    assert dy.numpy() == 12.0
    assert outer.gradient(dy, x).numpy() == 12.0


def test_arrays_under_a_tape_are_recorded_as_python_records_them(slow_calls):
    x = of.constant([1.0, 2.0])
    with of.GradientTape() as g:
        g.watch(x)
        y = of.multiply(x, np.array([3.0, 4.0], np.float32))
    assert slow_calls == ["Mul"]
    assert g.gradient(y, x).numpy().tolist() == [3.0, 4.0]


def test_turning_the_fast_path_on_again_asks_for_the_tapes(fast_path_off):
    x = of.constant(3.0)
    with fast_path_off():
        with of.GradientTape() as g:
            g.watch(x)
    # The list the fast path holds was made while it was off: turning it
    # on made it stale, and the next call asks again (no tape recording).
    y = x * x
    assert g._tape.num_records() == 0
    with of.GradientTape() as g2:
        g2.watch(x)
        with fast_path_off():
            pass
        y = x * x
    assert g2.gradient(y, x).numpy() == 6.0


def test_the_switch_and_the_tapes_are_per_thread(slow_calls):
    t = of.constant([1.0])
    seen = {}
    ready = threading.Event()
    done = threading.Event()

    def other():
        _C.set_eager_fast_path(False)
        seen["off"] = _C.eager_fast_path()
        of.add(t, t)
        ready.set()
        done.wait(10)

    th = threading.Thread(target=other)
    th.start()
    ready.wait(10)
    assert seen["off"] is False and _C.eager_fast_path()
    calls = len(slow_calls)
    of.add(t, t)
    assert len(slow_calls) == calls == 1
    done.set()
    th.join()


def test_eight_threads_share_op_functions():
    errors = []

    def work(k):
        try:
            for i in range(300):
                if (i + k) % 3 == 0:
                    a = of.constant(np.full(3, i, np.int32))
                elif (i + k) % 3 == 1:
                    a = of.constant(np.full(3, i, np.float64))
                else:
                    a = of.constant(np.full(3, i, np.float32))
                r = of.add(a, a)
                assert r.dtype == a.dtype and r.numpy().tolist() == [2 * i] * 3
                with of.GradientTape() as g:
                    g.watch(a)
                    y = a * a
                if a.dtype != of.int32:
                    assert g.gradient(y, a).numpy().tolist() == [2 * i] * 3
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []


def test_native_results_are_plain_tensors_freed_when_dropped():
    import gc
    import weakref

    ta = of.constant([1.0, 2.0])
    r = of.add(ta, ta)
    # Left out of the cycle collector (a Tensor holds no Python object),
    # still weak-referenceable and freed with its last reference.
    assert not gc.is_tracked(r)
    w = weakref.ref(r)
    del r
    assert w() is None
    gc.collect()
    assert (ta + ta).numpy().tolist() == [2.0, 4.0]


def test_array_inputs_are_released_when_the_call_ends():
    import sys

    a = np.ones(3, np.float32)
    before = sys.getrefcount(a)
    # Results kept (no Tensor is freed meanwhile): each call itself gives
    # back its hold on the array.
    results = [of.add(a, a) for _ in range(50)]
    assert sys.getrefcount(a) == before
    assert results[-1].numpy().tolist() == [2.0, 2.0, 2.0]


def test_op_modules_are_plain_module_attributes_and_learn_loaded_libraries(zero_out_path):
    # In a fresh process: the first read of `opforge.ops` / `opforge.raw_ops`
    # makes every function a plain attribute and removes the modules'
    # `__getattr__` (CPython reads attributes of a module that has one
    # without its specialized lookup); a library loaded afterwards still
    # shows up in both, and an unknown name is still an AttributeError.
    script = f"""
import opforge as of
assert "__getattr__" in vars(of.ops) and "__getattr__" in vars(of.raw_ops)
f, raw = of.ops.add_v2, of.raw_ops.AddV2
assert "__getattr__" not in vars(of.ops) and "__getattr__" not in vars(of.raw_ops)
assert vars(of.ops)["add_v2"] is f and vars(of.raw_ops)["AddV2"] is raw
assert "zero_out" not in dir(of.ops)
lib = of.load_op_library({str(zero_out_path)!r})
assert of.ops.zero_out(of.constant([5, 4])).numpy().tolist() == [5, 0]
assert of.raw_ops.ZeroOut(to_zero=of.constant([5, 4])).numpy().tolist() == [5, 0]
assert "zero_out" in dir(of.ops) and "ZeroOut" in dir(of.raw_ops)
for m, name in ((of.ops, "no_such_op"), (of.raw_ops, "NoSuchOp")):
    try:
        getattr(m, name)
    except AttributeError:
        pass
    else:
        raise AssertionError(name)
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
