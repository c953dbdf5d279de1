"""Shared set-up of the reference MLP benchmarks: the model of
examples/mlp/ (784-512-512-10, batch 128, ReLU, sparse softmax
cross-entropy, plain SGD with learning rate 0.05, float32) on 16 synthetic
batches, and the timing loop (5 warm-up steps, then STEPS timed steps)."""
import sys, time
import numpy as np

SIZES, BATCH, LR, BATCHES = [784, 512, 512, 10], 128, 0.05, 16


def setup():
    """Initial weights (He-scaled normal), zero biases and the batches."""
    rng = np.random.default_rng(7)
    w = [(rng.standard_normal((a, b)) * np.sqrt(2.0 / a)).astype(np.float32)
         for a, b in zip(SIZES, SIZES[1:])]
    b = [np.zeros(n, np.float32) for n in SIZES[1:]]
    data = [(rng.uniform(-1, 1, (BATCH, SIZES[0])).astype(np.float32),
             rng.integers(0, SIZES[-1], BATCH).astype(np.int32)) for _ in range(BATCHES)]
    return w, b, data


def run(name, step, data, finish=float):
    """Times `step(x, y)` (returns the loss) and prints one line."""
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 300  # argv[2:]: the script's own
    first = finish(step(*data[0]))
    for x, y in data[:5]:
        step(x, y)
    start = time.perf_counter()
    for s in range(steps):
        loss = step(*data[s % len(data)])
    last = finish(loss)
    secs = time.perf_counter() - start
    print(f"{name}: {steps / secs:.1f} steps/s; loss {first:.4f} -> {last:.4f}", flush=True)
