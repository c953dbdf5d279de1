"""Graph.as_graph_def and of.import_graph_def (issue 15 part 7): round
trips through binary bytes, text and of.GraphDef, input_map,
return_elements, name prefixes, errors, all-or-nothing imports."""

from __future__ import annotations

import numpy as np
import pytest

import opforge as of


def _model():
    g = of.Graph()
    with g.as_default():
        x = of.placeholder(of.float32, shape=[None, 2], name="x")
        w = of.constant([[2.0], [-1.0]], name="w")
        y = of.identity(of.nn.relu(of.matmul(x, w)) + 0.5, name="y")
    return g, x, y


XV = np.array([[1.0, 1.0], [0.0, 3.0], [4.0, 1.0]], np.float32)
EXPECTED = np.maximum(XV @ np.array([[2.0], [-1.0]], np.float32), 0) + 0.5


def test_as_graph_def_is_a_binary_proto_with_text():
    g, _, _ = _model()
    gd = g.as_graph_def()
    assert isinstance(gd, of.GraphDef)
    data = gd.SerializeToString()
    assert isinstance(data, bytes) and bytes(gd) == data
    names = [n.name for n in gd.node]
    assert names[:2] == ["x", "w"] and "y" in names
    assert next(n for n in gd.node if n.name == "y").op == "Identity"
    text = str(gd)
    assert 'name: "x"' in text and 'op: "Placeholder"' in text
    # Text parses back to the same bytes.
    assert of.GraphDef.from_text(text) == gd
    assert of.GraphDef.FromString(data) == gd


@pytest.mark.parametrize("form", ["bytes", "text", "graph_def", "text_bytes"])
def test_round_trip(form):
    g, _, y = _model()
    gd = g.as_graph_def()
    value = {
        "bytes": gd.SerializeToString(),
        "text": str(gd),
        "graph_def": gd,
        "text_bytes": str(gd).encode(),
    }[form]
    g2 = of.Graph()
    with g2.as_default():
        (y2,) = of.import_graph_def(value, return_elements=["y:0"])
    assert y2.name == "import/y:0" and y2.shape == (None, 1)
    out = g2.run(y2, {"import/x:0": XV})
    np.testing.assert_allclose(out.numpy(), EXPECTED)
    # The re-exported graph has the same nodes (prefixed).
    assert [n.name for n in g2.as_graph_def().node] == ["import/" + n.name for n in gd.node]


def test_input_map_and_return_operations():
    g, _, _ = _model()
    gd = g.as_graph_def()
    g2 = of.Graph()
    with g2.as_default():
        a = of.placeholder(of.float32, shape=[None, 2], name="a")
        doubled = a * 2.0
        y2, op = of.import_graph_def(
            gd, input_map={"x:0": doubled}, return_elements=["y:0", "y"], name="m")
    assert isinstance(op, of.Operation) and op.name == "m/y"
    out = g2.run(y2, {a: XV / 2.0})
    np.testing.assert_allclose(out.numpy(), EXPECTED)
    with g2.as_default():
        with pytest.raises(ValueError, match="not found"):
            of.import_graph_def(gd, input_map={"nope:0": a})
        with pytest.raises(ValueError, match="return_element"):
            of.import_graph_def(gd, return_elements=["nope:0"])


def test_prefixes_are_made_unique_and_empty_name_keeps_names():
    g, _, _ = _model()
    gd = g.as_graph_def()
    g2 = of.Graph()
    with g2.as_default():
        of.import_graph_def(gd)
        (y,) = of.import_graph_def(gd, return_elements=["y:0"])
        (y0,) = of.import_graph_def(gd, return_elements=["y:0"], name="")
    assert y.name == "import_1/y:0"
    assert y0.name == "y:0"


def test_bad_graph_defs_raise_and_leave_the_graph_unchanged():
    g2 = of.Graph()
    with g2.as_default():
        of.placeholder(of.float32, name="keep")
        n = len(g2)
        with pytest.raises(of.errors.DataLossError, match="cannot parse"):
            of.import_graph_def(b"\xff\xff\xff not a proto")
        with pytest.raises(of.errors.OpError, match="as text"):
            of.import_graph_def("node { this is not text format")
        with pytest.raises(of.errors.NotFoundError, match="NoSuchOp"):
            of.import_graph_def('node { name: "a" op: "NoSuchOp" }')
        # The second node fails: the first is not added either.
        bad = '''
            node { name: "ok" op: "Const" attr { key: "dtype" value { type: DT_FLOAT } }
                   attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape {} float_val: 1 } } } }
            node { name: "bad" op: "MatMul" input: "ok" input: "ok" }
        '''
        with pytest.raises(of.errors.InvalidArgumentError):
            of.import_graph_def(bad)
        assert len(g2) == n
        with pytest.raises(TypeError):
            of.import_graph_def(42)
    with pytest.raises(RuntimeError, match="default graph"):
        of.import_graph_def(b"")


def test_a_tensorflow_style_text_graph():
    text = '''
        node { name: "p" op: "Placeholder" attr { key: "dtype" value { type: DT_INT32 } } }
        node { name: "two" op: "Const" attr { key: "dtype" value { type: DT_INT32 } }
               attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape {} int_val: 2 } } } }
        node { name: "out" op: "Mul" input: "p" input: "two" attr { key: "T" value { type: DT_INT32 } } }
        versions { producer: 1994 }
    '''
    g = of.Graph()
    with g.as_default():
        (out,) = of.import_graph_def(text, return_elements=["out:0"], name="tf")
    np.testing.assert_array_equal(g.run(out, {"tf/p:0": [1, 2, 3]}).numpy(), [2, 4, 6])
