"""`opforge.load_op_library`: an op library loaded at run time, as a module
of generated functions (TensorFlow's `tf.load_op_library`)."""

from __future__ import annotations

import functools
import os
import types

from . import _C, _ops
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
