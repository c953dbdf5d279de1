"""Neural-network ops with TensorFlow's `tf.nn` names."""

from __future__ import annotations

from . import ops as _ops


def relu(features, name=None):
    """max(features, 0)."""
    return _ops.relu(features, name=name)


def relu6(features, name=None):
    """min(max(features, 0), 6)."""
    return _ops.relu6(features, name=name)


def softmax(logits, axis=None, name=None):
    """Softmax over the last axis (other axes are not supported yet)."""
    if axis not in (None, -1):
        raise NotImplementedError("softmax over an axis other than the last")
    return _ops.softmax(logits, name=name)


def log_softmax(logits, axis=None, name=None):
    """Log-softmax over the last axis."""
    if axis not in (None, -1):
        raise NotImplementedError("log_softmax over an axis other than the last")
    return _ops.log_softmax(logits, name=name)


def bias_add(value, bias, data_format=None, name=None):
    """value + bias, with bias along the channel dimension."""
    return _ops.bias_add(value, bias, data_format=data_format or "NHWC", name=name)


def sigmoid(x, name=None):
    return _ops.sigmoid(x, name=name)


def tanh(x, name=None):
    return _ops.tanh(x, name=name)


def elu(features, name=None):
    return _ops.elu(features, name=name)


def selu(features, name=None):
    return _ops.selu(features, name=name)


def softplus(features, name=None):
    return _ops.softplus(features, name=name)


def leaky_relu(features, alpha=0.2, name=None):
    return _ops.leaky_relu(features, alpha=alpha, name=name)


def sparse_softmax_cross_entropy_with_logits(labels=None, logits=None, name=None):
    """Per-example softmax cross-entropy of `logits` (`[batch, classes]`)
    against integer class `labels` (`[batch]`), as `tf.nn`'s: the loss
    output of `SparseSoftmaxCrossEntropyWithLogits` (its backprop output is
    what the op's registered gradient uses)."""
    if labels is None or logits is None:
        raise ValueError(
            "sparse_softmax_cross_entropy_with_logits needs both labels= and logits="
        )
    return _ops.sparse_softmax_cross_entropy_with_logits(logits, labels, name=name).loss
