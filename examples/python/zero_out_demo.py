"""The README's demo: the guide's ZeroOut, built as an op library with
plain cargo, loaded into Python, called on numpy data and differentiated
with GradientTape through the gradient the library ships.

    python examples/python/zero_out_demo.py target/release/libzero_out.so
"""

import sys

import numpy as np

import opforge as of

lib = of.load_op_library(sys.argv[1] if len(sys.argv) > 1 else "target/release/libzero_out.so")
print(f"loaded {lib.__opforge_library__['name']} {lib.__opforge_library__['version']}: {', '.join(lib.__all__[:3])}, ...")
print("zero_out signature:", lib.zero_out.__name__ + str(__import__("inspect").signature(lib.zero_out)))

x = np.array([[1.0, 2.0], [3.0, 4.0]], dtype=np.float32)
y = lib.zero_out(x, preserve_index=3)
print("zero_out(x, preserve_index=3) =", y.numpy().tolist())

xt = of.constant(x)
with of.GradientTape() as tape:
    tape.watch(xt)
    loss = of.reduce_sum(lib.zero_out(xt, preserve_index=3) * 2.0)
print("loss =", float(loss))
print("d loss / d x =", tape.gradient(loss, xt).numpy().tolist())

try:
    lib.zero_out(x, preserve_index=-1)
except of.errors.InvalidArgumentError as e:
    print("zero_out(x, preserve_index=-1) raises InvalidArgumentError:", e.message)
