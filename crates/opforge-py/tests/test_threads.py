"""Calls from several Python threads (issue 15 part 10)."""

from __future__ import annotations

import threading

import numpy as np

import opforge as of


def test_eight_threads_of_eager_ops_give_the_single_thread_results():
    rng = np.random.default_rng(1)
    # Large enough that the calls run with the GIL released.
    xs = [rng.normal(size=(256, 256)).astype(np.float32) for _ in range(8)]
    expected = [of.reduce_sum(of.matmul(x, x) + 1.0).numpy() for x in xs]
    results = [None] * 8
    errors = []

    def work(i):
        try:
            for _ in range(10):
                r = of.reduce_sum(of.matmul(xs[i], xs[i]) + 1.0).numpy()
                np.testing.assert_allclose(r, expected[i], rtol=1e-5)
            results[i] = r
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    for r, e in zip(results, expected):
        np.testing.assert_allclose(r, e, rtol=1e-5)


def test_tapes_are_per_thread():
    out = {}

    def work(i):
        x = of.constant(float(i))
        with of.GradientTape() as g:
            g.watch(x)
            y = x * x
        out[i] = float(g.gradient(y, x))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert out == {i: 2.0 * i for i in range(8)}
