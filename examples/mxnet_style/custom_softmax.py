"""MXNet's custom softmax (`example/numpy-ops/custom_softmax.py`), written once
for either framework's `operator` module (`mxnet.operator` or
`opforge.operator`): forward is the softmax of the logits; backward, with
`need_top_grad=False` as MXNet's loss ops, is softmax - onehot(label), the
gradient of the summed cross-entropy. Used by scenarios.py and by opforge's
custom-op tests."""

import numpy as np


def define(op, name):
    """Registers the softmax as op type `name` on `op`; returns the prop class."""

    class Softmax(op.CustomOp):
        def forward(self, is_train, req, in_data, out_data, aux):
            x = in_data[0].asnumpy()
            y = np.exp(x - x.max(axis=1).reshape((x.shape[0], 1)))
            y /= y.sum(axis=1).reshape((x.shape[0], 1))
            self.assign(out_data[0], req[0], y)

        def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
            label = in_data[1].asnumpy().ravel().astype(np.int64)
            y = out_data[0].asnumpy()
            y[np.arange(label.shape[0]), label] -= 1.0
            self.assign(in_grad[0], req[0], y)
            self.assign(in_grad[1], req[1], 0)

    @op.register(name)
    class SoftmaxProp(op.CustomOpProp):
        def __init__(self):
            super().__init__(need_top_grad=False)

        def list_arguments(self):
            return ["data", "label"]

        def list_outputs(self):
            return ["output"]

        def infer_shape(self, in_shape):
            return [in_shape[0], (in_shape[0][0],)], [in_shape[0]], []

        def create_operator(self, ctx, shapes, dtypes):
            return Softmax()

    return SoftmaxProp
