"""Every registered op as a snake_case function (`opforge.ops.add_v2`,
`opforge.ops.zero_out` once its library is loaded), generated from its
OpDef.

The functions are made on the first read of any of them (PEP 562's module
`__getattr__`), all at once, as plain module attributes; the module's
`__getattr__` then goes away, because CPython reads attributes of a module
that has one more slowly (no specialized lookup). `load_op_library` adds
the functions of a library's ops (`_sync`)."""

from . import _C, _ops

_names: dict = {}
_made = [False]


def _sync():
    """Makes a function for every registered op that has none yet."""
    ns = globals()
    for op in _C.op_names():
        if not op.isidentifier():
            # A namespaced op (`Custom>softmax`): called through its own API.
            continue
        name = _ops.snake_case(op)
        if _names.setdefault(name, op) != op or name in ns:
            # A name two ops map to: the first op keeps it. A name already
            # made keeps its function (loading only adds ops).
            continue
        ns[name] = _ops.make_function(_ops.op_info(op), raw=False)
    _made[0] = True


def __getattr__(name: str):
    _sync()
    globals().pop("__getattr__", None)
    f = globals().get(name)
    if f is None or name not in _names:
        raise AttributeError(f"module 'opforge.ops' has no op function {name!r}")
    return f


def __dir__():
    _sync()
    return sorted(_names)


def _forget(ops) -> None:
    """Removes the functions of `ops` (an unloaded op library's)."""
    ns = globals()
    for op in ops:
        name = _ops.snake_case(op)
        if _names.get(name) == op:
            del _names[name]
            ns.pop(name, None)
