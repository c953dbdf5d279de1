"""Generated op functions for every registered op (issue 15 part 3):
names, parameter order and defaults as TensorFlow's generated wrappers
(the core's `python_signature`, which `opforge ops show` prints and the
conformance tests check against TensorFlow's naming rules)."""

from __future__ import annotations

import inspect
import re

import pytest

import opforge as of
from opforge import _C

OPS = _C.op_names()


def _split_params(sig: str):
    """The parameters of `name(a, b=[1, 2], c='x,y', name=None)`."""
    inner = sig[sig.index("(") + 1 : -1]
    out, depth, quote, cur = [], 0, None, ""
    for ch in inner:
        if quote:
            cur += ch
            if ch == quote:
                quote = None
            continue
        if ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
            continue
        cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def test_there_are_many_ops():
    assert len(OPS) > 150
    assert "AddV2" in OPS and "MatMul" in OPS


@pytest.mark.parametrize("op", OPS)
def test_every_op_has_raw_and_snake_case_functions_matching_the_core_signature(op):
    expected = _C.python_signature(op)
    snake = expected[: expected.index("(")]
    f = getattr(of.ops, snake)
    assert f.__name__ == snake
    assert f._opforge_op == op
    params = inspect.signature(f).parameters
    want = _split_params(expected)
    assert [p.split("=")[0] for p in want] == list(params), (op, expected)
    for p in want:
        name, _, literal = p.partition("=")
        has_default = params[name].default is not inspect.Parameter.empty
        assert has_default == bool(literal), (op, p)
        d = params[name].default
        if literal.startswith("tf."):
            assert d == of.as_dtype(literal[3:]), (op, p)
        elif re.fullmatch(r"-?\d+|True|False|None|'[^']*'", literal):
            assert repr(d) == literal, (op, p)
    assert f.__doc__ and "Args:" in f.__doc__ and "Returns:" in f.__doc__
    raw = getattr(of.raw_ops, op)
    rparams = inspect.signature(raw).parameters.values()
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in rparams), op


def test_raw_ops_take_keywords_only():
    x = of.constant([1.0, 2.0])
    assert of.raw_ops.AddV2(x=x, y=x).numpy().tolist() == [2.0, 4.0]
    with pytest.raises(TypeError):
        of.raw_ops.AddV2(x, x)


def test_naming_rules():
    snake = of._ops.snake_case
    assert snake("ZeroOut") == "zero_out"
    assert snake("Conv2DBackpropInput") == "conv2d_backprop_input"
    assert snake("BatchMatMulV2") == "batch_mat_mul_v2"
    assert snake("AddV2") == "add_v2"
    assert snake("BiasAdd") == "bias_add"


def test_several_outputs_come_back_as_a_namedtuple():
    r = of.ops.unique(of.constant([3, 1, 3, 2]))
    assert type(r).__name__ == "Unique"
    assert r.y.numpy().tolist() == [3, 1, 2]
    assert r.idx.numpy().tolist() == [0, 1, 0, 2]


def test_aliases():
    x = of.constant([[1.0, 2.0], [3.0, 4.0]])
    assert of.add(x, 1).numpy().tolist() == [[2, 3], [4, 5]]
    assert of.reduce_sum(x).numpy() == 10
    assert of.reduce_sum(x, axis=0).numpy().tolist() == [4, 6]
    assert of.reduce_mean(x, axis=1, keepdims=True).shape == (2, 1)
    assert of.matmul(x, x).numpy().tolist() == [[7, 10], [15, 22]]
    assert of.reshape(x, [4]).shape == (4,)
    assert of.transpose(x).numpy().tolist() == [[1, 3], [2, 4]]
    assert of.cast(x, of.int32).dtype == of.int32
    assert of.nn.relu(of.constant([-1.0, 2.0])).numpy().tolist() == [0, 2]
    s = of.nn.softmax(of.constant([[0.0, 0.0]]))
    assert s.numpy().tolist() == [[0.5, 0.5]]
    assert of.concat([x, x], 0).shape == (4, 2)
    assert of.stack([x, x]).shape == (2, 2, 2)
    assert of.zeros([2, 3]).numpy().sum() == 0
    assert of.ones([2], dtype=of.int64).dtype == of.int64
