"""Ctrl-C during a long graph run (issue 15 part 10): the run is cancelled
(KeyboardInterrupt soon after the signal, not when the run would have
ended), the GIL is free meanwhile, and the graph runs again afterwards."""

from __future__ import annotations

import os
import signal
import threading
import time

import numpy as np
import pytest

import opforge as of

SIZE = 320


def _chain(n):
    """n MatMuls of a (1/SIZE)-filled matrix with itself (idempotent: every
    value stays 1/SIZE), so a run's cost grows with n and its value does not."""
    g = of.Graph()
    with g.as_default():
        x = of.placeholder(of.float32, shape=[SIZE, SIZE], name="x")
        y = x
        for _ in range(n):
            y = of.matmul(y, y)
    return g, x, y


def _feed():
    return np.full((SIZE, SIZE), 1.0 / SIZE, np.float32)


def _seconds_per_node(g, x, y, n):
    start = time.perf_counter()
    g.run(y, {x: _feed()})
    return (time.perf_counter() - start) / n


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(),
                    reason="signals reach the main thread only")
@pytest.mark.skipif(signal.getsignal(signal.SIGINT) is signal.SIG_IGN,
                    reason="SIGINT is ignored in this process (a background job of a "
                    "non-interactive shell): Ctrl-C cannot reach it")
def test_ctrl_c_cancels_a_long_run_and_the_graph_runs_again():
    small = 100
    g, x, y = _chain(small)
    per_node = _seconds_per_node(g, x, y, small)
    # A chain whose run would take about 15 s.
    n = max(500, int(15.0 / max(per_node, 1e-6)))
    n = min(n, 50_000)
    g, x, y = _chain(n)
    expected = per_node * n
    fired = []

    def interrupt():
        fired.append(time.perf_counter())
        os.kill(os.getpid(), signal.SIGINT)

    timer = threading.Timer(0.3, interrupt)
    start = time.perf_counter()
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            g.run(y, {x: _feed()})
    finally:
        timer.cancel()
    done = time.perf_counter()
    assert fired, "the timer did not fire"
    # Raised soon after the signal: far earlier than the whole run.
    assert done - fired[0] < 3.0, (done - fired[0], expected)
    assert done - start < expected / 3, (done - start, expected)
    # The graph (and its session) is usable afterwards.
    with g.as_default():
        z = of.reduce_sum(x)
    assert np.isclose(float(g.run(z, {x: _feed()})), SIZE)


class _Stop(Exception):
    pass


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(),
                    reason="signals reach the main thread only")
@pytest.mark.parametrize("handler", ["raises", "ignores"])
def test_a_custom_sigint_handler_decides(handler):
    # With a SIGINT handler of its own, Python code decides: a handler that
    # raises cancels the run (its exception comes out soon after the
    # signal); one that does not leaves the run to finish.
    small = 100
    g, x, y = _chain(small)
    per_node = _seconds_per_node(g, x, y, small)
    seen = []

    def on_sigint(signum, frame):
        seen.append(signum)
        if handler == "raises":
            raise _Stop()

    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        if handler == "raises":
            n = min(max(500, int(15.0 / max(per_node, 1e-6))), 50_000)
            g, x, y = _chain(n)
        else:
            n = max(20, int(0.6 / max(per_node, 1e-6)))
            g, x, y = _chain(n)
        timer = threading.Timer(0.2, lambda: os.kill(os.getpid(), signal.SIGINT))
        start = time.perf_counter()
        timer.start()
        try:
            if handler == "raises":
                with pytest.raises(_Stop):
                    g.run(y, {x: _feed()})
                assert time.perf_counter() - start < per_node * n / 3
            else:
                out = g.run(y, {x: _feed()})
                np.testing.assert_allclose(out.numpy(), _feed(), rtol=1e-4)
        finally:
            timer.cancel()
            timer.join()
    finally:
        signal.signal(signal.SIGINT, previous)
    assert seen == [signal.SIGINT]


def test_a_run_releases_the_gil():
    g, x, y = _chain(150)
    count = [0]
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            count[0] += 1

    t = threading.Thread(target=spin)
    t.start()
    try:
        time.sleep(0.05)
        before = count[0]
        start = time.perf_counter()
        out = g.run(y, {x: _feed()})
        elapsed = time.perf_counter() - start
        during = count[0] - before
    finally:
        stop.set()
        t.join()
    np.testing.assert_allclose(out.numpy(), _feed(), rtol=1e-4)
    # The other thread ran Python code while the graph ran (with the GIL
    # held for the whole run it could not have counted at all beyond
    # switch-interval slices taken before the run).
    assert elapsed > 0.02
    assert during > 1000, (during, elapsed)


def test_runs_from_another_thread_are_not_affected():
    g, x, y = _chain(5)
    out = []
    t = threading.Thread(target=lambda: out.append(g.run(y, {x: _feed()})))
    t.start()
    t.join()
    np.testing.assert_allclose(out[0].numpy(), _feed(), rtol=1e-5)


def test_short_runs_on_the_main_thread_return_promptly():
    # The main thread waits for the helper thread that runs the graph: it
    # must wake when the run ends, not at its next signal check (20 ms).
    g = of.Graph()
    with g.as_default():
        x = of.placeholder(of.float32, shape=[])
        y = x + 1.0
    g.run(y, {x: 1.0})
    start = time.perf_counter()
    for _ in range(200):
        g.run(y, {x: 1.0})
    assert time.perf_counter() - start < 2.0


def _child_run(q):
    g = of.Graph()
    with g.as_default():
        x = of.placeholder(of.float32, shape=[])
        y = x * 3.0
    q.put(float(g.run(y, {x: 2.0})))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_runs_work_in_a_forked_child():
    import multiprocessing

    # The parent has run graphs (its helper thread exists); the child has
    # none of the parent's threads and starts its own.
    g, x, y = _chain(2)
    g.run(y, {x: _feed()})
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_child_run, args=(q,))
    p.start()
    try:
        assert q.get(timeout=60) == 6.0
    finally:
        p.join(timeout=60)
    assert p.exitcode == 0
