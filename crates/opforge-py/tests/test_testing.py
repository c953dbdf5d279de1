"""of.test (issue 15 part 8) with TensorFlow's zero_out_op_test.py flows."""

from __future__ import annotations

import unittest

import numpy as np

import opforge as of


def _zero_out_test_case(lib):
    class ZeroOutTest(of.test.TestCase):
        def test_zero_out(self):
            result = lib.zero_out([5, 4, 3, 2, 1])
            self.assertAllEqual(result, np.array([5, 0, 0, 0, 0]))

        def test_preserve_index_error(self):
            with self.assertRaisesOpError("Need preserve_index >= 0, got -1"):
                self.evaluate(lib.zero_out([5, 4], preserve_index=-1))

        def test_gradient(self):
            x = np.array([[1.0, 2.0], [3.0, 4.0]], dtype=np.float32)
            theoretical, numerical = of.test.compute_gradient(
                lambda t: lib.zero_out(t, preserve_index=2), [x]
            )
            self.assertEqual(theoretical[0].shape, (4, 4))
            expected = np.zeros((4, 4))
            expected[2, 2] = 1.0
            self.assertAllClose(theoretical[0], expected)
            self.assertLess(of.test.max_error(theoretical, numerical), 1e-3)

        def test_a_failing_assertion_fails(self):
            with self.assertRaises(AssertionError):
                self.assertAllEqual(lib.zero_out([1, 2]), np.array([1, 2]))

    return ZeroOutTest


def test_zero_out_suite(zero_out_lib):
    # TensorFlow's zero_out_op_test.py, as a tf.test.TestCase-style suite.
    case = _zero_out_test_case(zero_out_lib)
    suite = unittest.defaultTestLoader.loadTestsFromTestCase(case)
    result = unittest.TextTestRunner(verbosity=0).run(suite)
    assert result.testsRun == 4
    assert result.wasSuccessful(), result.failures + result.errors


def test_compute_gradient_shapes_and_error():
    x = np.array([1.0, 2.0, 3.0], dtype=np.float32)
    w = np.array([[1.0, 0.5], [2.0, -1.0], [0.0, 3.0]], dtype=np.float32)
    f = lambda a, b: of.matmul(of.reshape(a, [1, 3]), b)  # noqa: E731
    t, n = of.test.compute_gradient(f, [x, w])
    assert [j.shape for j in t] == [(2, 3), (2, 6)]
    assert [j.shape for j in n] == [(2, 3), (2, 6)]
    assert of.test.compute_gradient_error(f, [x, w]) < 1e-3
    assert of.test.compute_gradient_error(lambda a: of.ops.tanh(a) * a, [x]) < 1e-3


def test_a_wrong_gradient_is_caught():
    # (No other test differentiates Sin.)
    @of.RegisterGradient("Sin", override=True)
    def _wrong(op, grad):
        return grad * 2.0

    err = of.test.compute_gradient_error(lambda a: of.ops.sin(a), [np.array([0.5, 1.0])])
    assert err > 0.5


def test_opcheck_on_library_and_builtin_ops(zero_out_lib):
    x = np.array([[1.0, 2.0], [3.0, 4.0]], dtype=np.float32)
    out = of.test.opcheck(zero_out_lib.zero_out, [x], {"preserve_index": 1})
    assert out[0].numpy().tolist() == [[0.0, 2.0], [0.0, 0.0]]
    of.test.opcheck("ZeroOut", [np.array([3, 4], np.int32)])
    of.test.opcheck(of.ops.bias_add, [np.ones((2, 3), np.float32), np.array([1.0, 2.0, 3.0], np.float32)])
    of.test.opcheck("MatMul", [np.ones((2, 3), np.float32), np.ones((3, 4), np.float32)])
    of.test.opcheck("Reshape", [np.arange(6, dtype=np.float32), np.array([3, 2], np.int32)])
    of.test.opcheck(of.ops.tanh, [np.array([0.1, -0.5, 2.0])])


def test_opcheck_catches_a_wrong_gradient():
    import pytest

    @of.RegisterGradient("Cos", override=True)  # (no other test differentiates Cos)
    def _wrong(op, grad):
        return grad

    with pytest.raises(AssertionError, match="gradient error"):
        of.test.opcheck("Cos", [np.array([0.3, 1.2])])
