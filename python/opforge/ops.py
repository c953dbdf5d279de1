"""Every registered op as a snake_case function (`opforge.ops.add_v2`,
`opforge.ops.zero_out` once its library is loaded), generated from its
OpDef on first use (PEP 562)."""

from __future__ import annotations

from . import _C, _ops

_cache: dict = {}
_names: dict = {}
_gen = [-1]


def _table(force=False):
    g = _C.registry_generation()
    if force or g != _gen[0]:
        _names.clear()
        for op in _C.op_names():
            _names.setdefault(_ops.snake_case(op), op)
        _cache.clear()
        _ops._INFO.clear()
        _gen[0] = g
    return _names


def __getattr__(name: str):
    op = _table().get(name)
    if op is None:
        # A library loaded since the table was made: look again.
        op = _table(force=True).get(name)
    if op is None:
        raise AttributeError(f"module 'opforge.ops' has no op function {name!r}")
    f = _cache.get(name)
    if f is None:
        f = _ops.make_function(_ops.op_info(op), raw=False)
        _cache[name] = f
    # Later lookups find it without __getattr__ (loading a library only
    # adds ops, so a cached function never goes stale by name).
    globals()[name] = f
    return f


def __dir__():
    return sorted(_table())
