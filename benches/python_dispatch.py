"""Python eager-call overhead, in one run against numpy (issue 15's speed
targets): a one-element float32 add through numpy, through opforge's
generated functions (`of.add`, `of.ops.add_v2`, `of.raw_ops.AddV2`) on
numpy arrays and on Tensors, a loaded library's op, and the same add under
a recording GradientTape (one long tape, and fresh 100-op tapes), and the
Python fallback the native fast path replaces (`_C.set_eager_fast_path`).

    python benches/python_dispatch.py [target/release/libzero_out.so]

Run it with OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset (numpy's best
kernel). Figures: medians over 9 rounds of timeit loops, in microseconds;
each round times numpy.add (and, for the tape rows, the plain of.add
loop) right before the row's statement, and the ratios (overheads) are
the medians of the rounds' own ratios, so drift hits both alike.
TensorFlow and PyTorch are timed too when installed in the same venv.
"""

import sys
import timeit

import numpy as np

import opforge as of


ROUNDS = 9


def _per_call(stmt, number, per=1):
    return timeit.timeit(stmt, number=number) / number / per * 1e6


def bench(label, stmt, number=20000, base=None, per=1, over=None):
    """The median time of `stmt` (µs per call) over ROUNDS rounds. Each
    round also times `numpy.add` (and `over`, when given) right before the
    statement, so the machine's drift during the run hits both alike: the
    ratio to numpy.add (and the overhead over `over`) is the median of the
    rounds' ratios (differences)."""
    times, ratios, extra = [], [], []
    for _ in range(ROUNDS):
        b = _per_call(numpy_add, 20000) if base else None
        o = _per_call(over, number, per) if over else None
        t = _per_call(stmt, number, per)
        times.append(t)
        if b:
            ratios.append(t / b)
        if o:
            extra.append(t - o)
    med = lambda v: sorted(v)[len(v) // 2]  # noqa: E731
    us = med(times)
    note = f"  ({med(ratios):.2f}x numpy.add)" if ratios else ""
    if extra:
        note += f"  (+{med(extra):.3f} us over of.add)"
    print(f"{label:48s} {us:8.3f} us{note}")
    return us


a = np.ones(1, np.float32)
b = np.ones(1, np.float32)
ta = of.constant(a)
tb = of.constant(b)

print(f"numpy {np.__version__}, opforge {of.__version__}")


def numpy_add():
    np.add(a, b)


base = bench("numpy.add(a, b)", numpy_add)
bench("of.add(a, b) on ndarrays", lambda: of.add(a, b), base=base)
bench("of.add(ta, tb) on Tensors", lambda: of.add(ta, tb), base=base)
bench("of.ops.add_v2(ta, tb)", lambda: of.ops.add_v2(ta, tb), base=base)
bench("of.raw_ops.AddV2(x=ta, y=tb)", lambda: of.raw_ops.AddV2(x=ta, y=tb), base=base)
bench("ta + tb", lambda: ta + tb, base=base)
if len(sys.argv) > 1:
    lib = of.load_op_library(sys.argv[1])
    ti = of.constant(np.ones(1, np.int32))
    bench("lib.zero_out(ti) (op library)", lambda: lib.zero_out(ti), base=base)
try:
    import tensorflow as tf

    xa, xb = tf.constant(a), tf.constant(b)
    bench(f"TensorFlow {tf.__version__} tf.add (eager, tf tensors)", lambda: tf.add(xa, xb), number=2000, base=base)
except ImportError:
    print("TensorFlow not installed: no tf.add figure")
try:
    import torch

    pa, pb = torch.from_numpy(a), torch.from_numpy(b)
    bench(f"PyTorch {torch.__version__} torch.add", lambda: torch.add(pa, pb), base=base)
except ImportError:
    print("PyTorch not installed: no torch.add figure")


def _plain(n=100):
    for _ in range(n):
        of.add(ta, tb)


# One tape that records every round's ops (it grows to ROUNDS * 2000 ops).
long_tape = of.GradientTape(persistent=True)
with long_tape:
    long_tape.watch(ta)


def _recording(n=2000):
    with long_tape:
        for _ in range(n):
            of.add(ta, tb)


bench("of.add(ta, tb) under a recording tape", _recording, number=1, base=base, per=2000,
      over=lambda: _plain(2000))


def _taped(n=100):
    with of.GradientTape() as g:
        g.watch(ta)
        for _ in range(n):
            of.add(ta, tb)


bench("of.add(ta, tb) on a fresh 100-op tape (per op)", _taped, number=200, base=base, per=100,
      over=_plain)
was = of._C.set_eager_fast_path(False)
bench("of.add(ta, tb), fast path off (Python fallback)", lambda: of.add(ta, tb), number=5000, base=base)
of._C.set_eager_fast_path(was)
