#!/usr/bin/env python3
"""Runs the MXNet custom-op scenarios (examples/mxnet_style/scenarios.py) under
MXNet 1.9.1 and under opforge, each in its own Python, exchanging results as
`.npz` files, and compares every output and gradient. With `--bench`, also
runs benches/custom_op.py under both in the same session: the overhead of a
trivial custom op's call over its body, as a ratio to `numpy.add` in each.

    python scripts/compare_mxnet.py --setup      # once: MXNet's venv
    python scripts/compare_mxnet.py [--bench]

MXNet 1.9.1 needs numpy < 1.24 and opforge numpy >= 1.26, so MXNet runs in a
venv of its own, `target/mxnet-venv` (Python 3.11, `mxnet==1.9.1`,
`numpy==1.23.5` from PyPI), which `--setup` creates. opforge runs in the
Python running this script (the test venv: `target/py-venv/bin/python`).
Exit status 1 when a result differs by more than 1e-5.
"""

import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VENV = os.path.join(ROOT, "target", "mxnet-venv")
MXPY = os.path.join(VENV, "bin", "python")
SCENARIOS = os.path.join(ROOT, "examples", "mxnet_style", "scenarios.py")
BENCH = os.path.join(ROOT, "benches", "custom_op.py")


def setup():
    py = os.environ.get("PYTHON311", "python3.11")
    if not os.path.exists(MXPY):
        subprocess.run([py, "-m", "venv", VENV], check=True)
    subprocess.run([MXPY, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                    "mxnet==1.9.1", "numpy==1.23.5"], check=True)
    print(f"MXNet venv ready: {VENV}")


def run(python, backend, path):
    env = dict(os.environ)
    for var in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
        env.pop(var, None)
    subprocess.run([python, SCENARIOS, backend, path], check=True, env=env)


def bench(python, *args):
    env = dict(os.environ)
    for var in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
        env.pop(var, None)
    out = subprocess.run([python, BENCH, *args], check=True, env=env, capture_output=True,
                         text=True)
    print(out.stdout, end="")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--setup", action="store_true", help="create MXNet's venv and exit")
    p.add_argument("--bench", action="store_true", help="also compare call overheads")
    a = p.parse_args()
    if a.setup:
        setup()
        return 0
    if not os.path.exists(MXPY):
        print(f"no MXNet venv at {VENV}: run `{sys.argv[0]} --setup` first", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as d:
        mx_path, of_path = os.path.join(d, "mxnet.npz"), os.path.join(d, "opforge.npz")
        run(MXPY, "mxnet", mx_path)
        run(sys.executable, "opforge", of_path)
        mx, of = np.load(mx_path), np.load(of_path)
        worst = 0.0
        for k in mx.files:
            if k not in of.files:
                print(f"{k}: missing from opforge's results")
                worst = np.inf
                continue
            diff = float(np.max(np.abs(mx[k] - of[k]))) if mx[k].size else 0.0
            worst = max(worst, diff)
            print(f"{k:16s} {str(mx[k].shape):10s} max |mxnet - opforge| = {diff:.3g}")
    if a.bench:
        bench(MXPY, "--mxnet")
        bench(sys.executable)
    ok = worst <= 1e-5
    print("all results agree to 1e-5" if ok else f"results differ by {worst:.3g}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
