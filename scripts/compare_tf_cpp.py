#!/usr/bin/env python3
"""Builds the TensorFlow custom-op C++ sources of opforge's tests
(crates/opforge-cli/tests/tf/*.cc) twice, against TensorFlow 2.21's own
headers (`tf.sysconfig`) and against opforge's (`opforge.sysconfig`), with
TensorFlow's documented build line, loads each build with its framework's
`load_op_library`, runs the same calls in both, and compares outputs and
errors. Each framework runs in its own Python, exchanging results as `.npz`
files.

    python scripts/compare_tf_cpp.py --setup    # once: TensorFlow's venv
    python scripts/compare_tf_cpp.py

TensorFlow runs in `target/tf-venv` (`tensorflow-cpu==2.21.*` from PyPI),
which `--setup` creates; opforge in the Python running this script (the test
venv: `target/py-venv/bin/python`). A source file is a library of its own,
except `NAME_ops.cc` and `NAME_kernels.cc`, which build one library `NAME`
(the same rule as tests/tf_layer.rs). Exit status 1 when a source fails to
build against either, or a result differs.

Not compared: the misuse cases (TensorFlow aborts the process on them, where
opforge reports INTERNAL) and C++ gradients (TensorFlow's Python autodiff
does not run REGISTER_OP_GRADIENT functions).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCES = os.path.join(ROOT, "crates", "opforge-cli", "tests", "tf")
VENV = os.path.join(ROOT, "target", "tf-venv")
TFPY = os.path.join(VENV, "bin", "python")

# (library, snake-case op function, positional inputs (lists with a dtype),
# attrs). Values are worked out by hand in tests/tf_layer.rs; here both
# frameworks must simply agree.
CASES = [
    ("zero_out", "zero_out", [([[5, 6], [7, 8]], "int32")], {}),
    ("zero_out", "zero_out", [([1.5], "float32")], {}),
    ("guide_variants", "zero_out_poly", [([1.5, 2.0, 3.0], "float32")], {}),
    ("guide_variants", "zero_out_poly", [([-4, 2], "int32")], {}),
    ("guide_variants", "zero_out_preserve", [([5, 6, 7, 8], "int32")], {"preserve_index": 2}),
    ("guide_variants", "zero_out_preserve", [([5, 6, 7, 8], "int32")], {"preserve_index": 9}),
    ("guide_variants", "zero_out_preserve", [([5, 6, 7, 8], "int32")], {"preserve_index": -1}),
    ("guide_variants", "zero_out_list", [[([5, 6], "int32"), ([7, 8, 9], "int32")]], {}),
    ("guide_variants", "zero_out_types", [[([5, 6], "int64"), ([7.5, 8.0], "float64")]], {}),
    ("shapes", "pair_concat", [([[1, 2], [3, 4]], "float32"), ([[5], [6]], "float32")], {}),
    ("shapes", "pair_concat", [([[1, 2]], "int32"), ([[5], [6]], "int32")], {}),
    ("shapes", "repeat_rows", [([1.5, -1.0], "float32"), (3, "int32")], {}),
    ("shapes", "repeat_rows", [([1.5, -1.0], "float32"), (-1, "int32")], {}),
    ("shapes", "last_dim_sum", [([[1, 2, 3], [4, 5, 6]], "float64")], {}),
    ("kernels", "scale_shift", [([1.0, 2.0, 3.0], "float32")], {"scale": 2.0, "shift": 0.5}),
    ("kernels", "scale_shift", [([1.0, -2.0], "float16")], {"scale": 2.0}),
    ("kernels", "scale_shift", [([0.25 * i for i in range(37)], "float64")], {"scale": -3.0}),
    ("kernels", "row_stats", [([[1, 2, 6], [-1, -5, 0]], "float32")], {}),
    ("kernels", "row_stats", [([1, 2, 3], "float32")], {}),
    ("kernels", "shard_square", [([0.5 * i for i in range(200000)], "float64")], {}),
    ("kernels", "add_one_in_place", [([1.0, 2.0], "float32")], {}),
    ("kernels", "cumsum_temp", [([1, 2, 3, 4], "int64")], {}),
    ("kernels", "cumsum_temp", [([0.5, 0.25], "float32")], {}),
    ("kernels", "repeat_string", [(["ab", "", "xyz"], "object")], {"times": 2}),
    ("split", "negated", [([1.5, -2.0], "float32")], {}),
    ("gradient", "cube", [([0.5, -1.25, 2.0], "float64")], {}),
]
# Outputs that say how the kernel ran, not what it computed (Shard's shard
# count, whether the runtime let the input be forwarded).
SKIP_OUTPUTS = {("shard_square", 1), ("add_one_in_place", 1)}


def libraries() -> dict[str, list[str]]:
    names = sorted(f for f in os.listdir(SOURCES) if f.endswith(".cc"))
    libs: dict[str, list[str]] = {}
    for f in names:
        stem = f[:-3]
        for suffix in ("_ops", "_kernels"):
            if stem.endswith(suffix):
                stem = stem[: -len(suffix)]
                break
        libs.setdefault(stem, []).append(f)
    return libs


RUNNER = r"""
import json, sys
import numpy as np
which, spec, out = sys.argv[1], json.loads(open(sys.argv[2]).read()), sys.argv[3]
if which == "tf":
    import os
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as fw
else:
    import opforge as fw
mods = {name: fw.load_op_library(path) for name, path in spec["libs"].items()}
def arg(a):
    if isinstance(a, list) and a and isinstance(a[0], list) and len(a[0]) == 2 and isinstance(a[0][1], str):
        return [fw.constant(np.array(v, dtype=d)) for v, d in a]
    v, d = a
    return fw.constant(np.array(v, dtype=d))
results = {}
for i, (lib, fn, args, attrs) in enumerate(spec["cases"]):
    try:
        r = getattr(mods[lib], fn)(*[arg(a) for a in args], **attrs)
        outs = list(r) if isinstance(r, (list, tuple)) else [r]
        for k, o in enumerate(outs):
            a = o.numpy()
            # Strings: bytes in both (numpy object arrays do not round-trip).
            results[f"{i}_{k}"] = a.astype(bytes) if a.dtype == object else a
    except Exception as e:
        results[f"{i}_error"] = np.array(f"{type(e).__name__}: {e}")
np.savez(out, **results)
"""


def build(flags: list[str], srcs: list[str], out: str) -> str | None:
    cmd = ["c++", "-std=c++17", "-shared", "-fPIC", "-O2", "-w"]
    cmd += [os.path.join(SOURCES, s) for s in srcs] + ["-o", out] + flags
    r = subprocess.run(cmd, capture_output=True, text=True)
    return None if r.returncode == 0 else r.stderr[-4000:]


def flags_of(python: str, module: str) -> list[str]:
    code = (f"import json, os; os.environ['TF_CPP_MIN_LOG_LEVEL'] = '3'; import {module} as m; "
            "print(json.dumps(m.sysconfig.get_compile_flags() + m.sysconfig.get_link_flags()))")
    r = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--setup", action="store_true", help="create target/tf-venv (TensorFlow 2.21)")
    a = p.parse_args()
    if a.setup:
        if not os.path.exists(TFPY):
            subprocess.run([sys.executable, "-m", "venv", VENV], check=True)
        subprocess.run([TFPY, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                        "tensorflow-cpu==2.21.*"], check=True)
        print(f"TensorFlow venv ready: {VENV}")
        return 0
    if not os.path.exists(TFPY):
        print("no TensorFlow venv: run with --setup first", file=sys.stderr)
        return 1
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        spec = {}
        for which, python, module in (("tf", TFPY, "tensorflow"), ("of", sys.executable, "opforge")):
            flags = flags_of(python, module)
            libs = {}
            for name, srcs in libraries().items():
                out = os.path.join(tmp, f"{which}_lib{name}.so")
                err = build(flags, srcs, out)
                if err:
                    ok = False
                    print(f"{name} ({' '.join(srcs)}) does not build against {module}:\n{err}")
                else:
                    libs[name] = out
            spec[which] = libs
        cases = [c for c in CASES if c[0] in spec["tf"] and c[0] in spec["of"]]
        results = {}
        for which, python in (("tf", TFPY), ("of", sys.executable)):
            sp = os.path.join(tmp, f"{which}.json")
            with open(sp, "w") as f:
                json.dump({"libs": spec[which], "cases": cases}, f)
            runner = os.path.join(tmp, "runner.py")
            with open(runner, "w") as f:
                f.write(RUNNER)
            out = os.path.join(tmp, f"{which}.npz")
            subprocess.run([python, runner, which, sp, out], check=True)
            results[which] = dict(np.load(out))
        for i, (lib, fn, _, attrs) in enumerate(cases):
            tf_keys = sorted(k for k in results["tf"] if k.split("_")[0] == str(i))
            of_keys = sorted(k for k in results["of"] if k.split("_")[0] == str(i))
            label = f"{lib}.{fn}{'(' + str(attrs) + ')' if attrs else ''}"
            if tf_keys != of_keys:
                ok = False
                print(f"DIFF  {label}: tensorflow gave {tf_keys}, opforge {of_keys}: "
                      f"{[str(results['tf'][k]) for k in tf_keys]} vs "
                      f"{[str(results['of'][k]) for k in of_keys]}")
                continue
            for k in tf_keys:
                t, o = results["tf"][k], results["of"][k]
                if k.endswith("_error"):
                    tn, on = str(t).split(":")[0], str(o).split(":")[0]
                    same = tn == on
                    print(f"{'same' if same else 'DIFF'}  {label}: {tn} / {on}")
                    ok &= same
                    continue
                if (fn, int(k.split("_")[1])) in SKIP_OUTPUTS:
                    continue
                same = t.dtype == o.dtype and t.shape == o.shape and np.array_equal(t, o)
                ok &= same
                print(f"{'same' if same else 'DIFF'}  {label} output {k.split('_')[1]}: "
                      f"{t.dtype}{list(t.shape)}" + ("" if same else f" tf={t} of={o}"))
    print("all results agree" if ok else "DIFFERENCES FOUND")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
