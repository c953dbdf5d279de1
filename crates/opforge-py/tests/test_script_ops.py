"""`opforge.numpy_function` and `opforge.py_function` as TensorFlow's tests
(`script_ops_test.py`, `py_func_test.py`) use them. The expected errors are
what TensorFlow 2.21 raised in the same cases (checked side by side with
tensorflow-cpu 2.21.0 on Python 3.11)."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import opforge as of
from opforge import errors


def _raise(exc):
    def f(*args):
        raise exc

    return f


def test_numpy_function_eagerly_and_in_a_function():
    x = of.constant([1.0, 2.0])
    y = of.numpy_function(lambda a: a * 2, [x], of.float32)
    assert isinstance(y, of.Tensor)
    np.testing.assert_array_equal(y.numpy(), [2.0, 4.0])
    f = of.function(lambda x: of.numpy_function(lambda a: a + 1, [x], of.float32))
    np.testing.assert_array_equal(f(x).numpy(), [2.0, 3.0])


def test_numpy_function_several_outputs_and_stateless():
    x = of.constant([1, 2], dtype=of.int32)
    a, b = of.numpy_function(lambda v: (v + 1, v * 10), [x], [of.int32, of.int32])
    assert a.numpy().tolist() == [2, 3] and b.numpy().tolist() == [10, 20]
    (c,) = of.numpy_function(lambda v: v, [x], [of.int32], stateful=False)
    assert c.numpy().tolist() == [1, 2]


def test_numpy_function_gets_read_only_views_of_the_inputs():
    x = of.constant(np.arange(1000, dtype=np.float32))
    seen = {}

    def f(a):
        seen["shares"] = a.ctypes.data == x._data_ptr
        seen["writeable"] = a.flags.writeable
        return a.copy()

    of.numpy_function(f, [x], of.float32)
    assert seen == {"shares": True, "writeable": False}


def test_numpy_function_is_not_differentiable():
    v = of.Variable([1.0, 2.0])
    with of.GradientTape() as tape:
        y = of.numpy_function(lambda a: a * a, [v], of.float32)
    assert tape.gradient(y, v) is None


# An exception a script op's function raises, and TensorFlow's error for it.
ERRORS = [
    (ValueError("boom"), errors.InvalidArgumentError),
    (TypeError("t"), errors.InvalidArgumentError),
    (KeyError("k"), errors.UnknownError),
    (StopIteration(), errors.OutOfRangeError),
    (NotImplementedError("ni"), errors.UnimplementedError),
]


@pytest.mark.parametrize("exc, graph_error", ERRORS)
def test_numpy_function_errors(exc, graph_error):
    x = of.constant([1.0])
    # Eagerly the exception comes through unchanged (TensorFlow calls the
    # function directly), in a function it becomes TensorFlow's error.
    with pytest.raises(type(exc)) as info:
        of.numpy_function(_raise(exc), [x], of.float32)
    assert info.value is exc
    f = of.function(lambda x: of.numpy_function(_raise(exc), [x], of.float32))
    with pytest.raises(graph_error) as info:
        f(x)
    assert str(info.value).startswith(f"{type(exc).__name__}: ")
    assert "Traceback" in str(info.value)


@pytest.mark.parametrize("exc, error", ERRORS)
def test_py_function_errors(exc, error):
    x = of.constant([1.0])
    with pytest.raises(error, match=f"^{type(exc).__name__}: "):
        of.py_function(_raise(exc), [x], of.float32)
    f = of.function(lambda x: of.py_function(_raise(exc), [x], of.float32))
    with pytest.raises(error, match=f"^{type(exc).__name__}: "):
        f(x)


def test_wrong_dtype_and_count_in_a_function_are_tensorflows_errors():
    x = of.constant([1.0, 2.0])
    f = of.function(lambda x: of.numpy_function(lambda a: a.astype(np.float64), [x], of.float32))
    with pytest.raises(errors.InvalidArgumentError, match=r"^0-th value returned by pyfunc_\d+ "
                       r"is double, but expects float"):
        f(x)
    f = of.function(lambda x: of.numpy_function(lambda a: (a, a), [x], of.float32))
    with pytest.raises(errors.InvalidArgumentError,
                       match=r"^pyfunc_\d+ returns 2 values, but expects to see 1 values\."):
        f(x)
    # A Python scalar takes Tout's dtype eagerly, as TensorFlow's eager call
    # converts it; in a function it is a float64 array, as in TensorFlow.
    assert of.numpy_function(lambda a: 3.0, [x], of.float32).numpy() == 3.0
    g = of.function(lambda x: of.numpy_function(lambda a: 3.0, [x], of.float32))
    with pytest.raises(errors.InvalidArgumentError, match="is double, but expects float"):
        g(x)


def test_py_function_gets_eager_tensors_and_converts_results():
    x = of.constant([1.0, 2.0])
    seen = []
    y = of.py_function(lambda a: (seen.append(type(a)), 3.0)[1], [x], of.float32)
    assert seen == [of.Tensor]
    assert y.numpy() == 3.0 and y.dtype == of.float32
    with pytest.raises(errors.InvalidArgumentError, match="^ValueError: "):
        of.py_function(lambda a: of.cast(a, of.float64), [x], of.float32)


def test_py_function_gradient_eagerly_and_in_a_function():
    v = of.Variable([1.0, 2.0])
    with of.GradientTape() as tape:
        y = of.py_function(lambda a: a * a * 3.0, [v], of.float32)
    np.testing.assert_allclose(tape.gradient(y, v).numpy(), [6.0, 12.0])

    @of.function
    def g(x):
        with of.GradientTape() as tape:
            tape.watch(x)
            y = of.py_function(lambda a: a * a * 3.0, [x], of.float32)
        return tape.gradient(y, x)

    np.testing.assert_allclose(g(of.constant([2.0, 3.0])).numpy(), [12.0, 18.0])


def test_ops_inside_are_not_recorded_on_the_callers_tape():
    inner = []
    x = of.constant([1.0, 2.0])

    def f(a):
        t = of.constant(a) * 2.0
        inner.append(t)
        return t.numpy()

    with of.GradientTape(persistent=True) as tape:
        tape.watch(x)
        of.numpy_function(f, [x], of.float32)
    assert tape.gradient(inner[0], x) is None


def _run(code):
    env = dict(os.environ)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=120, env=env)


def test_fork_with_live_workers_does_not_hang():
    r = _run("""
        import os, numpy as np, opforge as of
        f = of.function(lambda x: of.numpy_function(lambda a: a * 2, [x], of.float32) + 1.0)
        x = of.constant(np.ones(100000, np.float32))
        assert float(of.reduce_sum(f(x))) == 300000.0
        pid = os.fork()
        if pid == 0:
            y = f(x)
            os._exit(0 if float(of.reduce_sum(y)) == 300000.0 else 3)
        _, status = os.waitpid(pid, 0)
        print("child", os.waitstatus_to_exitcode(status))
    """)
    assert r.returncode == 0, r.stderr
    assert "child 0" in r.stdout


def test_interpreter_exit_during_runs_does_not_hang():
    r = _run("""
        import threading, time, numpy as np, opforge as of
        f = of.function(lambda x: of.numpy_function(lambda a: (time.sleep(0.01), a)[1], [x],
                                                    of.float32))
        def loop():
            while True:
                f(of.constant([1.0]))
        for _ in range(2):
            threading.Thread(target=loop, daemon=True).start()
        time.sleep(0.3)
        print("bye")
    """)
    assert r.returncode == 0, r.stderr
    assert "bye" in r.stdout
