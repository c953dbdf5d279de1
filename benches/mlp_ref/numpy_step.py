"""The training step written by hand in numpy (OpenBLAS matmuls)."""
import numpy as np
from common import setup, run, BATCH, LR

W, B, data = setup()
rows = np.arange(BATCH)


def step(x, y):
    h1 = np.maximum(x @ W[0] + B[0], 0)
    h2 = np.maximum(h1 @ W[1] + B[1], 0)
    z = h2 @ W[2] + B[2]
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    p = e / e.sum(axis=1, keepdims=True)
    loss = -np.log(p[rows, y]).mean()
    g3 = p
    g3[rows, y] -= 1
    g3 /= BATCH
    gW3, gb3 = h2.T @ g3, g3.sum(0)
    g2 = (g3 @ W[2].T) * (h2 > 0)
    gW2, gb2 = h1.T @ g2, g2.sum(0)
    g1 = (g2 @ W[1].T) * (h1 > 0)
    gW1, gb1 = x.T @ g1, g1.sum(0)
    for v, g in zip(W + B, [gW1, gW2, gW3, gb1, gb2, gb3]):
        v -= LR * g
    return loss


run(f"numpy {np.__version__} (the step by hand)", step, data)
