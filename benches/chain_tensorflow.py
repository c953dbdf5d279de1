"""TensorFlow's executor on the chain of benches/ops.rs `chain`: 10,000
scalar AddV2 nodes (x + 1 + 1 + ...), run by a tf.compat.v1.Session with
Grappler off (its arithmetic optimizer would fold the chain); median of 11
samples of 20 runs, per node, with one inter-op and one intra-op thread and
with TensorFlow's default thread counts. Run by benches/chain_vs_tensorflow.sh."""
import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import tensorflow as tf

NODES = 10_000
tf.compat.v1.disable_eager_execution()
g = tf.Graph()
with g.as_default():
    x = tf.compat.v1.placeholder(tf.float32, shape=[], name="x")
    one = tf.constant(1.0, name="one")
    y = x
    for i in range(NODES):
        y = tf.raw_ops.AddV2(x=y, y=one, name=f"add_{i}")


def measure(threads):
    config = tf.compat.v1.ConfigProto(
        inter_op_parallelism_threads=threads, intra_op_parallelism_threads=threads)
    config.graph_options.rewrite_options.disable_meta_optimizer = True
    config.graph_options.optimizer_options.opt_level = tf.compat.v1.OptimizerOptions.L0
    config.graph_options.optimizer_options.do_constant_folding = False
    with tf.compat.v1.Session(graph=g, config=config) as sess:
        got = sess.run(y, {x: 0.5})
        assert got == 0.5 + NODES, got
        samples = []
        for _ in range(11):
            start = time.perf_counter()
            for _ in range(20):
                sess.run(y, {x: 0.5})
            samples.append((time.perf_counter() - start) / 20)
        return statistics.median(samples)


for threads, what in [(1, "1 inter-op and 1 intra-op thread"), (0, "default threads")]:
    t = measure(threads)
    print(f"tensorflow {tf.__version__}: executor, {NODES}-node chain of scalar AddV2, "
          f"{what}: {t / NODES * 1e9:.1f} ns/node ({t * 1e3:.3f} ms/run)", flush=True)
