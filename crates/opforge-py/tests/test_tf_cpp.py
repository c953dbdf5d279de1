"""TensorFlow custom-op C++ sources (crates/opforge-cli/tests/tf/*.cc) built
with TensorFlow's documented line and `opforge.sysconfig`'s flags, as a
TensorFlow user builds them with `tf.sysconfig`, then loaded with
`load_op_library` and used from Python: generated wrappers, eagerly, in
`@of.function`, with a Python gradient under a tape, and unloaded."""

from __future__ import annotations

import shutil
import subprocess
import sys

import numpy as np
import pytest

import opforge as of
from conftest import REPO

SOURCES = REPO / "crates" / "opforge-cli" / "tests" / "tf"
CXX = shutil.which("c++")

pytestmark = pytest.mark.skipif(
    CXX is None or sys.platform != "linux", reason="needs a C++ compiler (Linux)"
)


def _build(tmp_path_factory, name: str, sources: list[str]):
    out = tmp_path_factory.mktemp("tf_cpp") / f"lib{name}.so"
    cmd = (
        [CXX, "-std=c++17", "-shared", "-fPIC", "-O2"]
        + [str(SOURCES / s) for s in sources]
        + ["-o", str(out)]
        + of.sysconfig.get_compile_flags()
        + of.sysconfig.get_link_flags()
    )
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return out


@pytest.fixture(scope="module")
def zero_out_cc(tmp_path_factory):
    return _build(tmp_path_factory, "zero_out_cc", ["zero_out.cc"])


@pytest.fixture(scope="module")
def kernels_cc(tmp_path_factory):
    return _build(tmp_path_factory, "kernels_cc", ["kernels.cc"])


def test_sysconfig_names_the_shipped_headers():
    inc = of.sysconfig.get_include()
    flags = of.sysconfig.get_compile_flags()
    assert flags[0] == f"-I{inc}"
    for header in ("opforge/opforge.h", "tensorflow/core/framework/op_kernel.h",
                   "tensorflow/core/framework/shape_inference.h"):
        assert (REPO / "include" / header).read_bytes() == open(f"{inc}/{header}", "rb").read()
    assert "-DEIGEN_MAX_ALIGN_BYTES=64" in flags
    assert of.sysconfig.get_compile_flags("c") == [f"-I{inc}"]
    assert of.sysconfig.get_link_flags() == []
    with pytest.raises(ValueError):
        of.sysconfig.get_compile_flags("fortran")


def test_the_guides_zero_out_from_python(zero_out_cc):
    # In a fresh interpreter: the example library of the other tests (loaded
    # for the whole session) defines a different ZeroOut, and loading this
    # one beside it is rightly AlreadyExistsError.
    code = f"""
import numpy as np
import opforge as of

lib = of.load_op_library({str(zero_out_cc)!r})
y = lib.zero_out([[5, 6], [7, 8]])
np.testing.assert_array_equal(y.numpy(), [[5, 0], [0, 0]])
assert y.dtype == of.int32
assert "zero_out" in dir(lib)


@of.function
def f(x):
    return lib.zero_out(x) * 2


np.testing.assert_array_equal(f(of.constant([3, 4, 5])).numpy(), [6, 0, 0])
try:
    lib.zero_out(of.constant([1.5]))
    raise AssertionError("a float input was accepted")
except of.errors.InvalidArgumentError:
    pass
del f
report = of.unload_op_library(lib)
assert report.ops == ["ZeroOut"], report
assert report.unmapped, report.note
print("ok")
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip() == "ok"


def test_eigen_kernels_with_a_python_gradient(kernels_cc):
    lib = of.load_op_library(str(kernels_cc))
    x = of.constant(np.array([1.0, -2.0, 0.5], np.float32))
    y = lib.scale_shift(x, scale=3.0, shift=1.0)
    np.testing.assert_allclose(y.numpy(), [4.0, -5.0, 2.5])

    @of.RegisterGradient("ScaleShift")
    def _scale_shift_grad(op, dy):
        return [dy * op.get_attr("scale")]

    with of.GradientTape() as tape:
        tape.watch(x)
        y = lib.scale_shift(x, scale=3.0, shift=1.0)
        loss = of.reduce_sum(y * y)
    (g,) = tape.gradient(loss, [x])
    # d/dx sum((3x + 1)^2) = 6 (3x + 1)
    np.testing.assert_allclose(g.numpy(), [24.0, -30.0, 15.0])
    err = of.test.compute_gradient_error(
        lambda v: lib.scale_shift(v, scale=3.0, shift=1.0),
        [np.array([0.25, -1.0], np.float64)],
    )
    assert err < 1e-6

    mean, mx = lib.row_stats([[1.0, 2.0, 6.0], [-1.0, -5.0, 0.0]])
    np.testing.assert_allclose(mean.numpy(), [3.0, -2.0])
    np.testing.assert_allclose(mx.numpy(), [6.0, 0.0])
    with pytest.raises(of.errors.InternalError, match="read as float"):
        lib.misuse([1, 2], how="wrong_type")


def test_a_cpp_gradient_eagerly_and_in_a_function(tmp_path_factory):
    lib = of.load_op_library(str(_build(tmp_path_factory, "gradient_cc", ["gradient.cc"])))
    x = of.constant(np.array([0.5, -1.25, 2.0]))
    with of.GradientTape() as tape:
        tape.watch(x)
        y = lib.cube(x)
    np.testing.assert_allclose(tape.gradient(y, x).numpy(), 3 * x.numpy() ** 2)

    @of.function
    def grad(v):
        return of.gradients(lib.cube(v), [v])[0]

    np.testing.assert_allclose(grad(x).numpy(), [0.75, 4.6875, 12.0])
    assert of.test.compute_gradient_error(lib.cube, [np.array([0.3, -0.7])]) < 1e-6
