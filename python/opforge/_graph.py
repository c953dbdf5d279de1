"""`opforge.Graph` (TensorFlow's `tf.Graph`): a graph built from Python.

    g = of.Graph()
    with g.as_default():
        x = of.placeholder(of.float32, shape=[None, 3])
        y = of.reduce_sum(x * 2.0, axis=1)
    g.run(y, feed_dict={x: [[1, 2, 3]]})        # Tensor [12.]

While a graph is the default (a thread-local stack), the op functions
(`of.ops.*`, `of.raw_ops.*`, the aliases, operators) add nodes to it and
return `SymbolicTensor`s. Eager tensors used as inputs are captured: as
`Const` nodes, or (resource and variant tensors, such as variable handles)
as placeholders fed with the captured value at every run. `run` executes
with opforge's executor, without the GIL, and Ctrl-C cancels it.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from typing import TYPE_CHECKING, Any, Iterator, Mapping, Sequence

from . import _C, dtypes
from ._C import Tensor
from ._symbolic import Operation, SymbolicTensor

if TYPE_CHECKING:
    from ._graph_def import GraphDef

__all__ = ["Graph", "get_default_graph", "placeholder", "init_scope", "name_scope"]

_state: threading.local = threading.local()


def _stack() -> list:
    s = _state.__dict__.get("graphs")
    if s is None:
        s = _state.graphs = []
    return s


def _sync_fast_path() -> None:
    """The native op functions run eagerly on their own (`_C.OpFunction`):
    they must not while a graph is the default on this thread, where every
    call adds a node instead (the switch's contract: off means every call
    runs the Python function). Called whenever the default-graph stack of
    this thread changes."""
    _C.set_eager_fast_path(not _state.__dict__.get("graphs"))


def current() -> Graph | None:
    """The default graph of this thread, or None (eager)."""
    s = _state.__dict__.get("graphs")
    return s[-1] if s else None


def get_default_graph() -> Graph | None:
    """The innermost graph made default with `as_default()` on this thread
    (None when ops run eagerly)."""
    return current()


@contextlib.contextmanager
def init_scope() -> Iterator[None]:
    """Ops run eagerly inside this block, whatever graph is the default
    (TensorFlow's `tf.init_scope`: variables are created this way)."""
    saved = _state.__dict__.get("graphs")
    _state.graphs = []
    _sync_fast_path()
    try:
        yield
    finally:
        _state.graphs = saved if saved is not None else []
        _sync_fast_path()


@contextlib.contextmanager
def name_scope(name: str) -> Iterator[str | None]:
    """Prefixes the names of nodes added to the default graph with `name/`
    (nothing changes eagerly)."""
    g = current()
    if g is None:
        yield None
        return
    with g.name_scope(name) as scope:
        yield scope


_RESOURCE_LIKE = (dtypes.resource, dtypes.variant)  # type: ignore[attr-defined]
# Ops that only read the resources they take (they wait for writes, not
# for each other).
_READ_ONLY_RESOURCE_OPS = frozenset(
    {"ReadVariableOp", "ResourceGather", "ResourceGatherNd", "VariableShape", "VarIsInitializedOp"}
)


# Every live graph (plain and function graphs): `unload_op_library` looks
# through them for graphs that use a library's ops.
_LIVE: weakref.WeakSet = weakref.WeakSet()


def live_graphs() -> list[Graph]:
    """Every graph alive now, plain and function graphs."""
    return list(_LIVE)


class Graph(_C.Graph):
    """A dataflow graph of opforge ops (`tf.Graph`)."""

    def __init__(self) -> None:
        _LIVE.add(self)
        self._tensors: dict = {}
        self._operations: dict = {}
        # Eager tensors used in the graph: id -> (tensor, symbolic tensor).
        self._captures: dict = {}
        # Placeholders fed with a captured value at every run.
        self._capture_feeds: list = []
        self._scope: list = []
        self._lock = threading.RLock()
        # Variable reads (node index -> variable), for GradientTape.
        self._variable_reads: dict = {}
        # Function graphs order their stateful ops (automatic control
        # dependencies, see `_stateful_deps`); a plain graph leaves it to
        # the user, as TF1.
        self._auto_control_deps = False
        # Per resource (the (node, index) of its handle; None for the
        # stateful ops that take no resource): the last op that wrote it,
        # and the ops that read it since.
        self._last_write: dict = {}
        self._reads_since: dict = {}

    # -- building ---------------------------------------------------------

    @contextlib.contextmanager
    def as_default(self) -> Iterator[Graph]:
        """Makes this the default graph of the thread inside the block."""
        s = _stack()
        s.append(self)
        _sync_fast_path()
        try:
            yield self
        finally:
            # The innermost entry for this graph (blocks nest properly).
            for i in range(len(s) - 1, -1, -1):
                if s[i] is self:
                    del s[i]
                    break
            _sync_fast_path()

    @contextlib.contextmanager
    def name_scope(self, name: str) -> Iterator[str]:
        """Names of nodes added inside get `name/` in front (nested scopes
        add up); yields the full scope name."""
        self._scope.append(name.rstrip("/"))
        try:
            yield "/".join(self._scope) + "/"
        finally:
            self._scope.pop()

    def _full_name(self, name) -> str:
        if self._scope:
            return "/".join(self._scope) + "/" + name
        return name

    def _tensor(self, node: int, index: int) -> SymbolicTensor:
        key = (node, index)
        t = self._tensors.get(key)
        if t is None:
            outs = self._outputs(node)
            if index >= len(outs):
                raise ValueError(f"node {node} has {len(outs)} outputs; there is no output {index}")
            dtype_enum, shape = outs[index]
            t = SymbolicTensor(self, node, index, dtype_enum, shape)
            self._tensors[key] = t
        return t

    def _operation(self, node: int) -> Operation:
        op = self._operations.get(node)
        if op is None:
            name, op_type, _, _, device = self._node(node)
            op = Operation(self, node, name, op_type, device)
            self._operations[node] = op
        return op

    def _add(self, op_type, inputs, attrs, name, control=()):
        """Adds a node: `inputs` one symbolic tensor (or list) per input
        argument; returns (Operation, flat outputs, groups)."""
        refs = [
            [(t._node, t._index) for t in v] if isinstance(v, list) else (v._node, v._index)
            for v in inputs
        ]
        full = self._full_name(name or op_type)
        node, _, outs, groups = self._add_op(op_type, refs, attrs, full, list(control))
        flat = [self._tensor(node, i) for i in range(len(outs))]
        return self._operation(node), flat, groups

    def _stateful_deps(self, op_type: str, inputs) -> tuple[list[int], list]:
        """The automatic control dependencies of a stateful op with
        symbolic `inputs` (one tensor or list per argument), as TensorFlow's
        function graphs add them: an op that only reads a resource waits
        for the last op that wrote it; any other op on a resource waits for
        that write and for every read since (so reads and writes of one
        variable keep program order, and ops on different variables stay
        free to run at once); stateful ops that take no resource keep
        program order among themselves. Returns the node indices to wait
        for and the (resource, is_write) pairs to note once the op is added
        (`_note_stateful`)."""
        resources: list[tuple[int, int] | None] = []
        for v in inputs:
            for t in (v if isinstance(v, list) else (v,)):
                if t.dtype == dtypes.resource:  # type: ignore[attr-defined]
                    resources.append((t._node, t._index))
        write = op_type not in _READ_ONLY_RESOURCE_OPS
        if not resources:
            resources, write = [None], True
        deps: list[int] = []
        for r in resources:
            last = self._last_write.get(r)
            if last is not None:
                deps.append(last)
            if write:
                deps.extend(self._reads_since.get(r, ()))
        return list(dict.fromkeys(deps)), [(r, write) for r in resources]

    def _note_stateful(self, node: int, notes) -> None:
        """Records stateful op `node` (see `_stateful_deps`)."""
        for r, write in notes:
            if write:
                self._last_write[r] = node
                self._reads_since[r] = []
            else:
                self._reads_since.setdefault(r, []).append(node)

    def capture(self, t: Tensor) -> SymbolicTensor:
        """The symbolic tensor standing for eager tensor `t` in this graph
        (a `Const` node, or a placeholder fed with `t` at every run for
        resource and variant tensors); one per tensor."""
        hit = self._captures.get(id(t))
        if hit is not None and hit[0] is t:
            return hit[1]
        if t.dtype in _RESOURCE_LIKE:
            _, flat, _ = self._add(
                "Placeholder", [], {"dtype": t.dtype.as_datatype_enum, "shape": list(t.shape)},
                "captured_input")
            s = flat[0]
            self._capture_feeds.append((s, t))
        else:
            node, _ = self._add_const(t, self._full_name("Const"))
            s = self._tensor(node, 0)
        self._captures[id(t)] = (t, s)
        return s

    def constant(self, t: Tensor, name: str | None = None) -> SymbolicTensor:
        """A `Const` node holding `t`."""
        node, _ = self._add_const(t, self._full_name(name or "Const"))
        return self._tensor(node, 0)

    # -- looking up -------------------------------------------------------

    def get_operation_by_name(self, name: str) -> Operation:
        node = self._find(name)
        if node is None:
            raise KeyError(f"The name '{name}' refers to an Operation not in the graph.")
        return self._operation(node)

    def get_tensor_by_name(self, name: str) -> SymbolicTensor:
        if ":" not in name:
            raise ValueError(
                f"The name '{name}' looks like an (invalid) Operation name, not a Tensor name: "
                "tensor names have the form '<op_name>:<output_index>'"
            )
        op_name, _, index = name.rpartition(":")
        op = self.get_operation_by_name(op_name)
        try:
            return self._tensor(op._node, int(index))
        except ValueError:
            raise KeyError(f"The name '{name}' refers to a Tensor which does not exist") from None

    def as_graph_element(self, obj: SymbolicTensor | Operation | str) -> SymbolicTensor | Operation:
        """A tensor, operation or name (`"node:0"` a tensor, `"node"` an
        operation) as an element of this graph."""
        if isinstance(obj, (SymbolicTensor, Operation)):
            if obj.graph is not self:
                raise ValueError(f"{obj!r} is not an element of this graph")
            return obj
        if isinstance(obj, str):
            if ":" in obj:
                return self.get_tensor_by_name(obj)
            return self.get_operation_by_name(obj)
        raise TypeError(f"Can not convert a {type(obj).__name__} into a graph element")

    def get_operations(self) -> list[Operation]:
        """Every operation, in the order they were added."""
        return [self._operation(i) for i in range(self._num_nodes())]

    def __len__(self) -> int:
        return self._num_nodes()

    # -- running ----------------------------------------------------------

    def run(self, fetches: Any, feed_dict: Mapping[Any, Any] | None = None) -> Any:
        """Runs the graph: `fetches` a tensor, an operation, a name
        (`"node:0"` for a tensor, `"node"` for an operation), or a list,
        tuple or dict nesting them; `feed_dict` maps tensors (or names) to
        values (converted to the tensor's dtype). Returns Tensors (None for
        operations) in the structure of `fetches`. Runs without the GIL;
        Ctrl-C raises KeyboardInterrupt and leaves the graph usable."""
        leaves = []

        def flatten(f):
            if isinstance(f, (list, tuple)):
                for x in f:
                    flatten(x)
            elif isinstance(f, dict):
                for k in f:
                    flatten(f[k])
            else:
                leaves.append(self.as_graph_element(f))

        flatten(fetches)
        tensor_refs: list[tuple[int, int]] = []
        targets: list[int] = []
        slots: dict[tuple[int, int], int] = {}
        for e in leaves:
            if isinstance(e, SymbolicTensor):
                key = (e._node, e._index)
                if key not in slots:
                    slots[key] = len(tensor_refs)
                    tensor_refs.append(key)
            else:
                targets.append(e._node)
        feeds = self._feeds(feed_dict)
        values = self._run(tensor_refs, feeds, targets)
        it = iter(leaves)

        def pack(f):
            if isinstance(f, tuple):
                return tuple(pack(x) for x in f)
            if isinstance(f, list):
                return [pack(x) for x in f]
            if isinstance(f, dict):
                return {k: pack(f[k]) for k in f}
            e = next(it)
            if isinstance(e, SymbolicTensor):
                return values[slots[(e._node, e._index)]]
            return None

        return pack(fetches)

    def _feeds(self, feed_dict):
        from ._convert import convert_to_tensor

        feeds = [((s._node, s._index), t) for s, t in self._capture_feeds]
        for k, v in (feed_dict or {}).items():
            key = self.as_graph_element(k)
            if not isinstance(key, SymbolicTensor):
                raise TypeError(f"feed_dict keys must be tensors (or tensor names), not {k!r}")
            if isinstance(v, SymbolicTensor):
                raise TypeError(f"The value of a feed cannot be a symbolic tensor ({v.name})")
            try:
                t = convert_to_tensor(v, dtype=key.dtype)
            except (TypeError, ValueError) as e:
                raise type(e)(f"feed for '{key.name}': {e}") from None
            shape = key.shape
            if shape is not None and (
                len(shape) != t.ndim
                or any(d is not None and d != s for d, s in zip(shape, t.shape))
            ):
                raise ValueError(
                    f"Cannot feed value of shape {t.shape} for Tensor '{key.name}', which has "
                    f"shape {shape}"
                )
            feeds.append(((key._node, key._index), t))
        return feeds

    # -- export -----------------------------------------------------------

    def as_graph_def(self) -> GraphDef:
        """The graph as a `GraphDef` (`opforge.GraphDef`: binary proto
        bytes, `.SerializeToString()`, `str()` for the text format)."""
        from ._graph_def import GraphDef

        return GraphDef(self._graph_def_bytes())

    def __repr__(self) -> str:
        return f"<opforge.Graph with {self._num_nodes()} nodes>"


def placeholder(
    dtype: Any, shape: Sequence[int | None] | None = None, name: str | None = None
) -> SymbolicTensor:
    """A tensor fed at run time (`tf.compat.v1.placeholder`): `shape` a
    list with None for unknown dims, or None for an unknown shape. Needs a
    default graph."""
    g = current()
    if g is None:
        raise RuntimeError(
            "of.placeholder() is not compatible with eager execution: build it inside "
            "`with of.Graph().as_default():` (or an of.function)"
        )
    d = dtypes.as_dtype(dtype)
    attrs: dict[str, Any] = {"dtype": d.as_datatype_enum}
    if shape is not None:
        attrs["shape"] = [-1 if s is None else int(s) for s in shape]
    _, flat, _ = g._add("Placeholder", [], attrs, name or "Placeholder")
    return flat[0]


def is_symbolic(x: object) -> bool:
    return isinstance(x, SymbolicTensor)
