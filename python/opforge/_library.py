"""`opforge.load_op_library`: an op library loaded at run time, as a module
of generated functions (TensorFlow's `tf.load_op_library`), and
`opforge.unload_op_library`, which unloads it again."""

from __future__ import annotations

import functools
import gc
import os
import types
from typing import NamedTuple

from . import _C, _graph, _ops, errors
from . import ops as ops_module
from . import raw_ops as raw_ops_module

_MODULES: dict = {}


def _restore_function(path, name):
    return getattr(load_op_library(path), name)


def _reduce_library(path, protocol=None):
    """How a library's module pickles: `load_op_library` of its path."""
    return (load_op_library, (path,))


def load_op_library(library_filename) -> types.ModuleType:
    """Loads the op library at `library_filename` into opforge's registry
    and returns a module of its ops as snake_case functions (`lib.zero_out`),
    with `OP_LIST` (the serialized `OpList`), `__file__` and
    `__opforge_library__` (name, version, path). Loading the same library
    again (same file, a symlink, or a copy with the same content) returns
    the same module. A library whose ops conflict with registered ones
    raises AlreadyExistsError naming both.

    The module is a plain `types.ModuleType` (CPython reads the attributes
    of a module subclass more slowly, on every call of `lib.zero_out`); it
    pickles as `load_op_library` of its path through its own
    `__reduce_ex__`."""
    path = os.fspath(library_filename)
    name, version, resolved, ops = _C.load_library(path)
    key = (name, version, tuple(ops))
    mod = _MODULES.get(key)
    if mod is not None:
        return mod
    mod = types.ModuleType(name, f"opforge op library {name} {version} ({resolved})")
    mod.__file__ = resolved
    mod.__reduce_ex__ = functools.partial(_reduce_library, resolved)  # type: ignore[assignment]
    setattr(mod, "__opforge_library__", {"name": name, "version": version, "path": resolved})
    setattr(mod, "OP_LIST", _C.op_list_bytes(list(ops)))
    names = []
    for op in ops:
        # A generated op function (a native `_C.OpFunction`) of the
        # library's module, pickled by the library's path and the op, so
        # it runs unchanged in `multiprocessing`, Ray or Dask workers (the
        # worker loads the library on unpickling).
        f = _ops.make_function(_ops.op_info(op), raw=False)
        f.__module__ = name
        f._opforge_reduce = (_restore_function, (resolved, f.__name__))
        setattr(mod, f.__name__, f)
        names.append(f.__name__)
    setattr(mod, "__all__", names)
    _MODULES[key] = mod
    # `opforge.ops` and `opforge.raw_ops` get the library's ops too (if
    # they made their functions already; else they will on first use).
    for m in (ops_module, raw_ops_module):
        if m._made[0]:
            m._sync()
    return mod


class UnloadReport(NamedTuple):
    """What `unload_op_library` did."""

    name: str
    """The library's name."""
    version: str
    """The library's version."""
    path: str
    """The file it was loaded from."""
    ops: list[str]
    """The ops removed from the registry (with their kernels, shape
    functions and gradients)."""
    unmapped: bool
    """Whether the library was finalised and unmapped now; else it is when
    the last thing that holds it (see `note`) is gone."""
    note: str | None
    """Why it was not unmapped, with what to do."""


def _library_path(library: object) -> str:
    """The file of `library`: a module `load_op_library` returned, or a path."""
    if isinstance(library, types.ModuleType):
        info = getattr(library, "__opforge_library__", None)
        if not isinstance(info, dict) or "path" not in info:
            raise TypeError(
                f"unload_op_library() takes a module load_op_library returned, or the path of "
                f"a loaded library; module {library.__name__!r} is not an op library's"
            )
        return str(info["path"])
    if isinstance(library, (str, os.PathLike)):
        return os.fsdecode(os.fspath(library))
    raise TypeError(
        "unload_op_library() takes a module load_op_library returned, or the path of a "
        f"loaded library (str or os.PathLike), not {type(library).__name__}"
    )


def _graph_holders(ops: set) -> list[str]:
    """The live graphs (function graphs by their function's name) that have
    nodes of `ops`, each with the ops it uses."""
    out = []
    for g in _graph.live_graphs():
        used: dict = {}
        for i in range(g._num_nodes()):
            op = g._node(i)[1]
            if op in ops:
                used[op] = used.get(op, 0) + 1
        if not used:
            continue
        name = getattr(g, "name", None)
        what = f"the graph of function {name!r}" if isinstance(name, str) else f"graph {g!r}"
        uses = ", ".join(f"{n} node{'s' if n > 1 else ''} of {op}" for op, n in sorted(used.items()))
        out.append(f"{what} ({uses})")
    return out


def _holders(ops: set, foreign: int) -> list[str]:
    """What uses a library whose ops are `ops` and which owns the memory of
    `foreign` tensors: graphs with nodes of its ops, and those tensors."""
    holders = _graph_holders(ops)
    if foreign:
        holders.append(
            f"{foreign} tensor{'s' if foreign > 1 else ''} whose memory the library owns "
            "(outputs its kernels made in their own memory)"
        )
    return holders


def unload_op_library(
    library: types.ModuleType | str | os.PathLike[str], force: bool = False
) -> UnloadReport:
    """Unloads an op library `load_op_library` loaded: `library` is the
    module it returned, or the library's path (a symlink to it or a copy of
    it are the same library).

    Its ops, kernels, shape functions and gradients leave the registry, its
    module is forgotten (`load_op_library` of the path loads it again, as a
    new module), `opforge.ops` and `opforge.raw_ops` lose its functions,
    and calling a function of its module raises `NotFoundError` naming the
    library. opforge's own caches let go of its kernels first.

    Refused (`FailedPreconditionError` naming them) while something still
    uses the library: graphs with nodes of its ops (also the traced graphs
    of `opforge.function`s that called them), or tensors whose memory the
    library owns (outputs its kernels made in their own memory). Drop
    those and unload again, or pass `force=True`: the library is unloaded
    anyway; graphs using it then fail to run, and it is finalised and
    unmapped when the last of them is gone (`UnloadReport.unmapped`,
    `.note`). Kernels that other threads ran recently also keep it mapped
    until those threads run an op again.
    """
    path = _library_path(library)
    name, version, resolved, ops, _kernels, foreign = _C.release_library(path)
    if not force:
        holders = _holders(set(ops), foreign)
        if holders:
            # Graphs and tensors only kept alive by reference cycles are
            # not in use: collect them, then ask again.
            gc.collect()
            foreign = _C.release_library(path)[5]
            holders = _holders(set(ops), foreign)
        if holders:
            raise errors.FailedPreconditionError(
                f"op library {name} {version} ({resolved}) is in use: "
                + "; ".join(holders)
                + ". Drop them (and the functions whose traces use its ops) and unload again, "
                "or pass force=True to unload it anyway (graphs using it then fail to run)",
                None,
                errors.FAILED_PRECONDITION,
            )
    removed, unmapped, note = _C.unload_library(resolved)
    for key, mod in list(_MODULES.items()):
        if getattr(mod, "__file__", None) == resolved:
            del _MODULES[key]
    # (Through the loop: mypy reads `opforge.ops` from its generated stub.)
    for m in (ops_module, raw_ops_module):
        m._forget(removed)
    return UnloadReport(name, version, resolved, list(removed), unmapped, note)
