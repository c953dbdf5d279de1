"""The overhead of a Python CustomOp call (`opforge.operator.Custom`) over its
body, and of `opforge.numpy_function`, each as a ratio to `numpy.add` on the
same small arrays in the same run (absolute times move with the machine).

    python benches/custom_op.py [--json]

The body is timed alone by calling the operator's `forward` on ready-made
views, so the overhead is what opforge adds: argument conversion, the op
call, the kernel's call into Python, the views and lent buffers. With
`--mxnet`, runs under MXNet instead (`mx.nd.Custom` on the same op; see
scripts/compare_mxnet.py, which runs both in one session). With
`--tensorflow`, times TensorFlow's `tf.numpy_function` (eagerly and inside a
`tf.function`) in the Python running it, for comparison with opforge's rows.
"""

import json
import sys
import timeit

import numpy as np

N = 20000
REPEAT = 7


def best(stmt, number=N):
    return min(timeit.repeat(stmt, number=number, repeat=REPEAT)) / number


def interleaved(stmts, number):
    """The best time per call of each statement, their rounds interleaved
    (so a slower stretch of the machine weighs on all of them alike)."""
    out = {k: float("inf") for k in stmts}
    for _ in range(2 * REPEAT):
        for k, f in stmts.items():
            out[k] = min(out[k], timeit.timeit(f, number=number) / number)
    return out


def tensorflow(a, b):
    import os

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf

    base = best(lambda: np.add(a, b))
    x = tf.constant(a)
    f = tf.function(lambda x: tf.numpy_function(lambda v: v, [x], tf.float32))
    f(x)
    eager = best(lambda: tf.numpy_function(lambda v: v, [x], tf.float32), 2000)
    fn = best(lambda: f(x), 2000)
    print(f"tensorflow {tf.__version__}: numpy.add {base * 1e6:.3f} us")
    print(f"tensorflow: numpy_function eager {eager * 1e6:.2f} us = {eager / base:.1f} x "
          f"numpy.add; in a tf.function {fn * 1e6:.2f} us = {fn / base:.1f} x numpy.add")


def main():
    use_mxnet = "--mxnet" in sys.argv
    a = np.ones(16, np.float32)
    b = np.ones(16, np.float32)
    if "--tensorflow" in sys.argv:
        return tensorflow(a, b)
    results = {"numpy_add": best(lambda: np.add(a, b))}
    if use_mxnet:
        import mxnet as mx
        op_mod, Custom = mx.operator, mx.nd.Custom
        x = mx.nd.array(a)
        NDArray = mx.nd.NDArray

        def wait(y):
            y.wait_to_read()
    else:
        import opforge as of
        op_mod, Custom = of.operator, of.operator.Custom
        x = of.constant(a)
        NDArray = of.operator.NDArray

        def wait(y):
            pass

    class Copy(op_mod.CustomOp):
        def forward(self, is_train, req, in_data, out_data, aux):
            self.assign(out_data[0], req[0], in_data[0])

        def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
            self.assign(in_grad[0], req[0], out_grad[0])

    @op_mod.register("bench_copy")
    class CopyProp(op_mod.CustomOpProp):
        def create_operator(self, ctx, in_shapes, in_dtypes):
            return Copy()

    def call():
        wait(Custom(x, op_type="bench_copy"))

    call()
    n = N if not use_mxnet else 2000
    op = Copy()
    if use_mxnet:
        ins, outs = [x], [mx.nd.zeros(16)]
    else:
        ins, outs = [NDArray(a)], [NDArray(np.zeros(16, np.float32))]
    results.update(interleaved({
        "numpy_add": lambda: np.add(a, b),
        "custom_call": call,
        "custom_body": lambda: op.forward(False, ["write"], ins, outs, []),
    }, n))
    if not use_mxnet:
        results["numpy_function_call"] = best(lambda: of.numpy_function(lambda v: v, [x], of.float32))
        results["numpy_function_body"] = best(lambda: (lambda v: v)(a))
        f = of.function(lambda x: of.numpy_function(lambda v: v, [x], of.float32))
        f(x)
        results["numpy_function_in_function"] = best(lambda: f(x), 2000)
    if "--json" in sys.argv:
        print(json.dumps(results))
        return
    base = results["numpy_add"]
    name = "mxnet" if use_mxnet else "opforge"
    print(f"{name}: numpy.add {base * 1e6:.3f} us")
    over = results["custom_call"] - results["custom_body"]
    print(f"{name}: Custom call {results['custom_call'] * 1e6:.2f} us, body "
          f"{results['custom_body'] * 1e6:.2f} us, overhead {over * 1e6:.2f} us = "
          f"{over / base:.1f} x numpy.add")
    if not use_mxnet:
        over = results["numpy_function_call"] - results["numpy_function_body"]
        print(f"{name}: numpy_function call {results['numpy_function_call'] * 1e6:.2f} us, "
              f"overhead {over * 1e6:.2f} us = {over / base:.1f} x numpy.add")
        fn = results["numpy_function_in_function"]
        print(f"{name}: numpy_function in an of.function {fn * 1e6:.2f} us = "
              f"{fn / base:.1f} x numpy.add")


if __name__ == "__main__":
    main()
