"""Every registered op by its OpDef name, keyword arguments only
(`opforge.raw_ops.AddV2(x=..., y=...)`), as TensorFlow's `tf.raw_ops`.

As in `opforge.ops`, the functions are made on the first read of any of
them, all at once, as plain module attributes, and the module's
`__getattr__` then goes away (a module with one is slower to read from);
`load_op_library` adds the functions of a library's ops (`_sync`)."""

from __future__ import annotations

from . import _C, _ops

_names: set = set()
_made = [False]


def _sync():
    """Makes a function for every registered op that has none yet."""
    ns = globals()
    for op in _C.op_names():
        # Namespaced ops (`Custom>softmax`, TensorFlow's `Addons>ParseTime`)
        # have no Python name: they are called through their own API.
        if op not in _names and op.isidentifier():
            ns[op] = _ops.make_function(_ops.op_info(op), raw=True)
            _names.add(op)
    _made[0] = True


def __getattr__(name: str):
    _sync()
    globals().pop("__getattr__", None)
    if name not in _names:
        raise AttributeError(f"module 'opforge.raw_ops' has no op {name!r}")
    return globals()[name]


def __dir__():
    _sync()
    return sorted(_names)


def _forget(ops) -> None:
    """Removes the functions of `ops` (an unloaded op library's)."""
    ns = globals()
    for op in ops:
        if op in _names:
            _names.discard(op)
            ns.pop(op, None)
