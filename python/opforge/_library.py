"""`opforge.load_op_library`: an op library loaded at run time, as a module
of generated functions (TensorFlow's `tf.load_op_library`)."""

from __future__ import annotations

import inspect
import os
import types

from . import _C, _ops

_MODULES: dict = {}


class LibraryOpFunction:
    """A loaded library's op function: called like the generated function
    it wraps (same signature and docstring), and pickled by the library's
    path and the op, so it runs unchanged in `multiprocessing`, Ray or Dask
    workers (the worker loads the library on unpickling)."""

    def __init__(self, f, path, module_name):
        self._f = f
        self._path = path
        self.__name__ = f.__name__
        self.__qualname__ = f.__qualname__
        self.__doc__ = f.__doc__
        self.__signature__ = inspect.signature(f)
        self.__wrapped__ = f
        self._opforge_op = f._opforge_op
        self.__module__ = module_name

    def __call__(self, *args, **kwargs):
        return self._f(*args, **kwargs)

    def __reduce__(self):
        return (_restore_function, (self._path, self.__name__))

    def __repr__(self):
        return f"<opforge op function {self.__module__}.{self.__name__}>"


def _restore_function(path, name):
    return getattr(load_op_library(path), name)


class OpLibraryModule(types.ModuleType):
    """The module `load_op_library` returns: one generated function per op
    of the library (`lib.zero_out`), `OP_LIST` (the serialized `OpList`),
    `__file__` and `__opforge_library__` (name, version, path)."""

    OP_LIST: bytes
    __opforge_library__: dict[str, str]
    __all__: list[str]

    def __reduce__(self):
        return (load_op_library, (self.__file__,))


def load_op_library(library_filename) -> OpLibraryModule:
    """Loads the op library at `library_filename` into opforge's registry
    and returns a module of its ops as snake_case functions. Loading the
    same library again (same file, a symlink, or a copy with the same
    content) returns the same module. A library whose ops conflict with
    registered ones raises AlreadyExistsError naming both."""
    path = os.fspath(library_filename)
    name, version, resolved, ops = _C.load_library(path)
    key = (name, version, tuple(ops))
    mod = _MODULES.get(key)
    if mod is not None:
        return mod
    mod = OpLibraryModule(name, f"opforge op library {name} {version} ({resolved})")
    mod.__file__ = resolved
    mod.__opforge_library__ = {"name": name, "version": version, "path": resolved}
    mod.OP_LIST = _C.op_list_bytes(list(ops))
    names = []
    for op in ops:
        f = LibraryOpFunction(_ops.make_function(_ops.op_info(op), raw=False), resolved, name)
        setattr(mod, f.__name__, f)
        names.append(f.__name__)
    mod.__all__ = names
    _MODULES[key] = mod
    return mod
