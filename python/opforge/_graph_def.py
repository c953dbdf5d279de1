"""`GraphDef`s from Python: `Graph.as_graph_def()` returns an
`opforge.GraphDef` (the binary proto, with TensorFlow's protobuf accessors
`SerializeToString()` / `FromString()` and the text format as `str()`),
and `opforge.import_graph_def` reads one, as binary bytes, as text (a
`.pbtxt` string), or as an `opforge.GraphDef`, into the default graph."""

from __future__ import annotations

import collections
from typing import Any, Mapping, Sequence

from . import _C

__all__ = ["GraphDef", "import_graph_def"]

NodeDef = collections.namedtuple("NodeDef", ["name", "op", "input", "device"])


class GraphDef:
    """A serialized `tensorflow.GraphDef` (binary protobuf bytes)."""

    __slots__ = ("_bytes",)

    def __init__(self, data: bytes = b"") -> None:
        self._bytes = bytes(data)

    @classmethod
    def FromString(cls, data: bytes) -> "GraphDef":  # noqa: N802 - protobuf's name
        """A GraphDef of binary bytes (checked: InvalidArgumentError if not one)."""
        return cls(_C.graph_def_to_bytes(bytes(data)))

    @classmethod
    def from_text(cls, text: str) -> "GraphDef":
        """A GraphDef of its text format (`.pbtxt`)."""
        return cls(_C.graph_def_to_bytes(text.encode("utf-8")))

    def SerializeToString(self) -> bytes:  # noqa: N802 - protobuf's name
        """The binary proto."""
        return self._bytes

    def ParseFromString(self, data: bytes) -> None:  # noqa: N802 - protobuf's name
        self._bytes = _C.graph_def_to_bytes(bytes(data))

    @property
    def node(self) -> list[NodeDef]:
        """The nodes: `NodeDef(name, op, input, device)` each."""
        return [NodeDef(*n) for n in _C.graph_def_nodes(self._bytes)]

    def __bytes__(self) -> bytes:
        return self._bytes

    def __str__(self) -> str:
        return _C.graph_def_to_text(self._bytes)

    def __eq__(self, other):
        return isinstance(other, GraphDef) and other._bytes == self._bytes

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"<opforge.GraphDef {len(self.node)} nodes, {len(self._bytes)} bytes>"


def _as_bytes(graph_def) -> bytes:
    if isinstance(graph_def, GraphDef):
        return graph_def._bytes
    if isinstance(graph_def, str):
        return graph_def.encode("utf-8")
    if isinstance(graph_def, (bytes, bytearray, memoryview)):
        return bytes(graph_def)
    if hasattr(graph_def, "SerializeToString"):
        # A protobuf message (TensorFlow's own GraphDef).
        return graph_def.SerializeToString()
    raise TypeError(
        "import_graph_def takes a GraphDef: binary bytes, text (str), an opforge.GraphDef "
        f"or a protobuf message, not {type(graph_def).__name__}"
    )


def _unique_prefix(graph, name: str) -> str:
    names = {op.name for op in graph.get_operations()}
    base, k = name, 0
    while any(n == base or n.startswith(base + "/") for n in names):
        k += 1
        base = f"{name}_{k}"
    return base


def import_graph_def(
    graph_def: GraphDef | bytes | str | Any,
    input_map: Mapping[str, Any] | None = None,
    return_elements: Sequence[str] | None = None,
    name: str | None = None,
) -> list[Any] | None:
    """Imports `graph_def` into the default graph (`tf.import_graph_def`),
    all or nothing, its nodes named `name/...` (`"import"` by default; a
    name already used gets `_1`, ...; `name=""` imports names as they
    are). `input_map` maps names in `graph_def` (`"x:0"`, `"x"`) to tensors
    of the default graph used in their place; `return_elements` lists
    names (`"y:0"` a tensor, `"y"` an operation) of imported elements to
    return, in order. Needs a default graph (`with g.as_default():`)."""
    from . import _graph
    from ._symbolic import SymbolicTensor

    g = _graph.current()
    if g is None:
        raise RuntimeError(
            "import_graph_def needs a default graph: call it inside `with graph.as_default():`"
        )
    data = _as_bytes(graph_def)
    if name is None:
        name = "import"
    prefix = (_unique_prefix(g, name) + "/") if name else ""
    pairs = []
    for k, v in (input_map or {}).items():
        if not isinstance(k, str):
            raise TypeError(f"input_map keys must be tensor names, not {k!r}")
        if not isinstance(v, SymbolicTensor) or v.graph is not g:
            raise ValueError(f"input_map['{k}'] must be a tensor of the default graph, not {v!r}")
        pairs.append((k, (v._node, v._index)))
    g._import(data, prefix, pairs)
    if return_elements is None:
        return None
    out = []
    for e in return_elements:
        try:
            out.append(g.as_graph_element(prefix + e))
        except KeyError:
            raise ValueError(f"Requested return_element {e!r} not found in graph_def.") from None
    return out
