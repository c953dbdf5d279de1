"""opforge from Python: the step of tensorflow_step.py written the same way
with opforge's names — an `@of.function` (traced once into an opforge
graph, run by the executor), gradients from `of.GradientTape`, SGD as
`assign_sub` on `of.Variable`s. Needs the opforge package installed in the
venv (`pip install .` at the repository root, a release build)."""
import opforge as of
from common import setup, run, LR

w, b, data = setup()
W = [of.Variable(v) for v in w]
B = [of.Variable(v) for v in b]
data = [(of.constant(x), of.constant(y)) for x, y in data]


@of.function
def step(x, y):
    with of.GradientTape() as tape:
        h = x
        for i in range(3):
            h = of.nn.bias_add(of.matmul(h, W[i]), B[i])
            if i < 2:
                h = of.nn.relu(h)
        loss = of.reduce_mean(
            of.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=h))
    for v, g in zip(W + B, tape.gradient(loss, W + B)):
        v.assign_sub(LR * g)
    return loss


run("opforge (Python, @of.function)", step, data, finish=lambda t: float(t.numpy()))
assert step.experimental_get_tracing_count() == 1, "the step was traced more than once"
