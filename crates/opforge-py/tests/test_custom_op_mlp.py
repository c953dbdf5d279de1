"""MXNet's classic custom-op example (`example/numpy-ops/custom_softmax.py`):
an MLP whose loss is a softmax cross-entropy written as a Python `CustomOp`
(with `need_top_grad=False`, as MXNet's loss ops), trained on scikit-learn's
bundled `digits` set. Its gradients equal those of the built-in
`SoftmaxCrossEntropyWithLogits` to 1e-5, and it reaches 90% test accuracy."""

import sys

import numpy as np
import pytest

import opforge as of
from conftest import REPO
from opforge import operator as mx

sys.path.insert(0, str(REPO / "examples" / "mxnet_style"))
import custom_softmax  # noqa: E402

datasets = pytest.importorskip("sklearn.datasets")


custom_softmax.define(mx, "mlp_softmax_ce")


def _digits():
    d = datasets.load_digits()
    x = (d.data / 16.0).astype(np.float32)
    y = d.target.astype(np.float32)
    rng = np.random.default_rng(0)
    order = rng.permutation(len(x))
    x, y = x[order], y[order]
    return (x[:1500], y[:1500]), (x[1500:], y[1500:])


def _params(seed=0):
    rng = np.random.default_rng(seed)
    return [
        of.Variable((rng.standard_normal((64, 64)) * 0.1).astype(np.float32)),
        of.Variable(np.zeros(64, np.float32)),
        of.Variable((rng.standard_normal((64, 10)) * 0.1).astype(np.float32)),
        of.Variable(np.zeros(10, np.float32)),
    ]


def _logits(params, x):
    w1, b1, w2, b2 = params
    h = of.nn.relu(of.matmul(x, w1) + b1)
    return of.matmul(h, w2) + b2


def test_gradients_equal_the_built_in_ops():
    (x, y), _ = _digits()
    x, y = of.constant(x[:64]), y[:64]
    params = _params(1)
    with of.GradientTape() as tape:
        prob = mx.Custom(_logits(params, x), of.constant(y), op_type="mlp_softmax_ce")
    custom = tape.gradient(prob, params)
    onehot = of.constant(np.eye(10, dtype=np.float32)[y.astype(int)])
    with of.GradientTape() as tape:
        loss, _ = of.ops.softmax_cross_entropy_with_logits(_logits(params, x), onehot)
        loss = of.reduce_sum(loss)
    built_in = tape.gradient(loss, params)
    for c, b in zip(custom, built_in):
        np.testing.assert_allclose(c.numpy(), b.numpy(), rtol=1e-5, atol=1e-5)


def test_the_mlp_trains_to_90_percent_on_digits():
    (x, y), (xt, yt) = _digits()
    params = _params(2)
    lr, batch = 0.02, 50

    @of.function
    def step(xb, yb):
        with of.GradientTape() as tape:
            prob = mx.Custom(_logits(params, xb), yb, op_type="mlp_softmax_ce")
        grads = tape.gradient(prob, params)
        for p, g in zip(params, grads):
            p.assign_sub(g * lr)
        return prob

    rng = np.random.default_rng(3)
    for _ in range(30):
        order = rng.permutation(len(x))
        for i in range(0, len(x), batch):
            idx = order[i:i + batch]
            step(of.constant(x[idx]), of.constant(y[idx]))
    pred = np.argmax(_logits(params, of.constant(xt)).numpy(), axis=1)
    accuracy = float(np.mean(pred == yt))
    print(f"digits test accuracy: {accuracy:.4f}")
    assert accuracy >= 0.9, accuracy
