#!/usr/bin/env bash
# The 784-512-512-10 MLP (batch 128, SGD, float32): opforge's graph-mode
# training step (examples/mlp.rs) against the same step written by hand in
# numpy (OpenBLAS matmuls), in the same run. numpy comes from PyPI into a venv
# this script creates (target/bench-venv); OPENBLAS_CORETYPE and
# OPENBLAS_L2_SIZE are unset for the numpy command alone.
# Usage: benches/mlp_vs_numpy.sh [STEPS]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
steps=${1:-300}
venv=target/bench-venv
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet numpy threadpoolctl
fi
cargo build --quiet --release --example mlp
env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$venv/bin/python" - "$steps" <<'PY'
import sys, time, numpy as np
steps = int(sys.argv[1])
rng = np.random.default_rng(7)
sizes, batch, lr = [784, 512, 512, 10], 128, 0.05
W = [(rng.standard_normal((a, b)) * np.sqrt(2.0 / a)).astype(np.float32) for a, b in zip(sizes, sizes[1:])]
B = [np.zeros(b, np.float32) for b in sizes[1:]]
data = [(rng.standard_normal((batch, 784)).astype(np.float32), rng.integers(0, 10, batch)) for _ in range(16)]
def step(x, y):
    h1 = np.maximum(x @ W[0] + B[0], 0)
    h2 = np.maximum(h1 @ W[1] + B[1], 0)
    z = h2 @ W[2] + B[2]
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    p = e / e.sum(axis=1, keepdims=True)
    loss = -np.log(p[np.arange(batch), y]).mean()
    g3 = p
    g3[np.arange(batch), y] -= 1
    g3 /= batch
    gW3, gb3 = h2.T @ g3, g3.sum(0)
    g2 = (g3 @ W[2].T) * (h2 > 0)
    gW2, gb2 = h1.T @ g2, g2.sum(0)
    g1 = (g2 @ W[1].T) * (h1 > 0)
    gW1, gb1 = x.T @ g1, g1.sum(0)
    for w, g in zip(W + B, [gW1, gW2, gW3, gb1, gb2, gb3]):
        w -= lr * g
    return loss
first = step(*data[0])
for d in data[:5]:
    step(*d)
t = time.perf_counter()
for s in range(steps):
    last = step(*data[s % 16])
secs = time.perf_counter() - t
print(f"numpy {np.__version__} (same step by hand): {steps / secs:.1f} steps/s; loss {first:.4f} -> {last:.4f}")
PY
target/release/examples/mlp "$steps"
