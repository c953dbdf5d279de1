"""MXNet custom-op scenarios written once, run under MXNet 1.9.1 or opforge:
the operators are the same classes on either framework's `operator` module;
only the few lines of glue in `Backend` differ. `scripts/compare_mxnet.py`
runs them under both (each in its own Python) and compares the `.npz` files.

    python examples/mxnet_style/scenarios.py opforge out.npz
    python examples/mxnet_style/scenarios.py mxnet out.npz   # in MXNet's venv

Differences the glue covers: MXNet passes auxiliary states as extra inputs
(`mx.nd.Custom(x, aux, ...)`), opforge keeps them with the operator; MXNet
records gradients with `autograd.record()`/`backward()`, opforge with
`GradientTape`.
"""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import custom_softmax  # noqa: E402


class Backend:
    def __init__(self, name):
        self.name = name
        if name == "mxnet":
            import mxnet as mx

            self.mx = mx
            self.operator = mx.operator
        else:
            import opforge as of

            self.of = of
            self.operator = of.operator

    def array(self, a):
        a = np.asarray(a)
        if self.name == "mxnet":
            return self.mx.nd.array(a, dtype=a.dtype)
        return self.of.constant(a)

    def numpy(self, t):
        return t.asnumpy() if self.name == "mxnet" else t.numpy()

    def custom(self, *inputs, op_type, aux=(), **params):
        if self.name == "mxnet":
            return self.mx.nd.Custom(*inputs, *aux, op_type=op_type, **params)
        return self.of.operator.Custom(*inputs, op_type=op_type, **params)

    def aux(self, shape):
        return [self.mx.nd.zeros(shape)] if self.name == "mxnet" else []

    def grad(self, f, xs, heads):
        """f(*xs), and the gradients of its outputs (with `heads`) for xs."""
        if self.name == "mxnet":
            for x in xs:
                x.attach_grad()
            with self.mx.autograd.record():
                ys = f(*xs)
            ys = ys if isinstance(ys, list) else [ys]
            self.mx.autograd.backward(ys, [self.array(h) for h in heads])
            return [y.asnumpy() for y in ys], [x.grad.asnumpy() for x in xs]
        of = self.of
        with of.GradientTape() as tape:
            for x in xs:
                tape.watch(x)
            ys = f(*xs)
        ys = ys if isinstance(ys, list) else [ys]
        gs = tape.gradient(ys, list(xs), output_gradients=[self.array(h) for h in heads])
        return [y.numpy() for y in ys], [g.numpy() for g in gs]

    def dot(self, a, b):
        return self.mx.nd.dot(a, b) if self.name == "mxnet" else self.of.matmul(a, b)

    def relu(self, a):
        return self.mx.nd.relu(a) if self.name == "mxnet" else self.of.nn.relu(a)


def define(op):
    """The scenario operators, on `op` (mx.operator or opforge.operator)."""

    custom_softmax.define(op, "cmp_softmax")

    class Scale(op.CustomOp):
        def __init__(self, scale):
            super().__init__()
            self.scale = scale

        def forward(self, is_train, req, in_data, out_data, aux):
            self.assign(out_data[0], req[0], in_data[0].asnumpy() * self.scale)
            self.assign(out_data[1], req[1], in_data[0].asnumpy() + self.scale)

        def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
            g = out_grad[0].asnumpy() * self.scale + out_grad[1].asnumpy()
            self.assign(in_grad[0], req[0], g)

    @op.register("cmp_scale")
    class ScaleProp(op.CustomOpProp):
        def __init__(self, scale="1.0"):
            super().__init__(need_top_grad=True)
            self.scale = float(scale)  # a string under MXNet, as given in opforge

        def list_outputs(self):
            return ["scaled", "shifted"]

        def declare_backward_dependency(self, out_grad, in_data, out_data):
            return out_grad

        def create_operator(self, ctx, shapes, dtypes):
            return Scale(self.scale)

    class Count(op.CustomOp):
        def forward(self, is_train, req, in_data, out_data, aux):
            aux[0][:] = aux[0].asnumpy() + 1
            self.assign(out_data[0], req[0], in_data[0].asnumpy() + aux[0].asnumpy())

    @op.register("cmp_count")
    class CountProp(op.CustomOpProp):
        def list_auxiliary_states(self):
            return ["count"]

        def infer_shape(self, in_shape):
            return in_shape, [in_shape[0]], [in_shape[0]]

        def create_operator(self, ctx, shapes, dtypes):
            return Count()


def run(b):
    define(b.operator)
    rng = np.random.default_rng(0)
    out = {}
    x = rng.standard_normal((8, 5)).astype(np.float32)
    label = rng.integers(0, 5, 8).astype(np.float32)
    (y,), (gx, _) = b.grad(
        lambda x, l: b.custom(x, l, op_type="cmp_softmax"), [b.array(x), b.array(label)],
        [np.ones((8, 5), np.float32)],
    )
    out["softmax_out"], out["softmax_grad"] = y, gx
    h0 = rng.standard_normal((8, 5)).astype(np.float32)
    h1 = rng.standard_normal((8, 5)).astype(np.float32)
    ys, (g,) = b.grad(lambda x: b.custom(x, op_type="cmp_scale", scale="2.5"), [b.array(x)],
                      [h0, h1])
    out["scale_scaled"], out["scale_shifted"], out["scale_grad"] = ys[0], ys[1], g
    aux = b.aux((8, 5))
    for k in range(3):
        out[f"count_call{k}"] = b.numpy(b.custom(b.array(x), op_type="cmp_count", aux=aux))
    # A few SGD steps of a small MLP whose loss is the custom softmax.
    w1 = (rng.standard_normal((5, 16)) * 0.3).astype(np.float32)
    w2 = (rng.standard_normal((16, 5)) * 0.3).astype(np.float32)
    for _ in range(5):
        _, (g1, g2) = b.grad(
            lambda a, c: b.custom(b.dot(b.relu(b.dot(b.array(x), a)), c), b.array(label),
                                  op_type="cmp_softmax"),
            [b.array(w1), b.array(w2)], [np.ones((8, 5), np.float32)],
        )
        w1, w2 = w1 - 0.1 * g1, w2 - 0.1 * g2
    out["mlp_w1"], out["mlp_w2"] = w1, w2
    return out


if __name__ == "__main__":
    results = run(Backend(sys.argv[1]))
    np.savez(sys.argv[2], **results)
    print(f"{sys.argv[1]}: {len(results)} arrays written to {sys.argv[2]}")
