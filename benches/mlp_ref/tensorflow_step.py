"""TensorFlow: the step as a tf.function (graph mode, Grappler, oneDNN),
gradients from tf.GradientTape, SGD as assign_sub on resource variables.
With a second argument `xla`, the tf.function is compiled by XLA
(jit_compile=True)."""
import os
import sys
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import tensorflow as tf
from common import setup, run, LR

w, b, data = setup()
W = [tf.Variable(v) for v in w]
B = [tf.Variable(v) for v in b]
data = [(tf.constant(x), tf.constant(y)) for x, y in data]


XLA = sys.argv[2:] == ["xla"]


@tf.function(jit_compile=XLA)
def step(x, y):
    with tf.GradientTape() as tape:
        h = x
        for i in range(3):
            h = tf.nn.bias_add(tf.matmul(h, W[i]), B[i])
            if i < 2:
                h = tf.nn.relu(h)
        loss = tf.reduce_mean(
            tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=h))
    for v, g in zip(W + B, tape.gradient(loss, W + B)):
        v.assign_sub(LR * g)
    return loss


run(f"tensorflow {tf.__version__} (tf.function{', XLA' if XLA else ''})", step, data)
