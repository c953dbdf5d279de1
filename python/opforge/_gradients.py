"""`opforge.gradients` (`tf.gradients`): symbolic gradients on a graph,
built by opforge's reverse-mode autodiff with the gradients registered for
each op (in Rust, by op libraries, or in Python with
`@of.RegisterGradient`: such a function is called while the gradient is
built, with symbolic `op.inputs`/`op.outputs` and gradients, and adds its
nodes through the usual op functions)."""

from __future__ import annotations

from typing import Any, Sequence

from ._symbolic import SymbolicTensor

__all__ = ["gradients"]


def _as_list(x):
    if isinstance(x, (list, tuple)):
        return list(x)
    return [x]


def gradients(
    ys: SymbolicTensor | Sequence[SymbolicTensor],
    xs: SymbolicTensor | Sequence[SymbolicTensor],
    grad_ys: Any = None,
    name: str = "gradients",
    unconnected_gradients: str = "none",
    _recorded: list[tuple[int, int]] | None = None,
) -> list[SymbolicTensor | None]:
    """The symbolic gradients of the sum of `ys` with respect to each of
    `xs` (tensors of one graph; lists or single tensors), each y weighted
    by its `grad_ys` entry (ones by default): a list with one tensor per x,
    None for an x no y depends on (`unconnected_gradients="zero"` gives
    zeros). Nodes are added under the name scope `name`. (`_recorded`:
    the node-index ranges a `GradientTape` in the graph recorded; only
    those nodes pass gradients.)"""
    from . import _C, _graph, ops

    ys_l: list[Any] = _as_list(ys)
    xs_l: list[Any] = _as_list(xs)
    ys, xs = ys_l, xs_l
    if grad_ys is None:
        grad_ys = [None] * len(ys)
    else:
        grad_ys = _as_list(grad_ys)
    graph: Any = None
    for t in ys_l + xs_l:
        if not isinstance(t, SymbolicTensor):
            raise TypeError(
                "of.gradients works in graph mode (tensors of an of.Graph, or inside an "
                f"of.function); got {type(t).__name__}: use of.GradientTape eagerly"
            )
        if graph is None:
            graph = t.graph
        elif t.graph is not graph:
            raise ValueError(f"{t.name} is not in the same graph as the other ys and xs")
    if unconnected_gradients not in ("none", "zero"):
        raise ValueError(
            f"unconnected_gradients must be 'none' or 'zero', not {unconnected_gradients!r}"
        )
    if len(grad_ys) != len(ys):
        raise ValueError(f"{len(grad_ys)} grad_ys given for {len(ys)} ys")
    with graph.as_default():
        seeds: list[tuple[int, int] | None] = []
        for y, g in zip(ys, grad_ys):
            if g is None:
                seeds.append(None)
                continue
            if not isinstance(g, SymbolicTensor):
                from ._convert import convert_to_tensor

                g = graph.capture(convert_to_tensor(g, dtype=y.dtype))
            seeds.append((g._node, g._index))
        prefix = graph._full_name(_unique_scope(graph, name))
        refs = _C.graph_gradients(
            graph,
            [(y._node, y._index) for y in ys],
            [(x._node, x._index) for x in xs],
            seeds,
            prefix,
            _recorded,
        )
        out = [None if r is None else graph._tensor(*r) for r in refs]
        if unconnected_gradients == "zero":
            out = [ops.zeros_like(x) if g is None else g for g, x in zip(out, xs)]
    return out


def _unique_scope(graph, name):
    """`name`, then `name_1`, ... for each gradient computation on `graph`
    (node names inside are made unique by the graph in any case)."""
    counts = graph.__dict__.setdefault("_gradient_scopes", {})
    k = counts.get(name, 0)
    counts[name] = k + 1
    return name if k == 0 else f"{name}_{k}"
