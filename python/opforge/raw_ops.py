"""Every registered op by its OpDef name, keyword arguments only
(`opforge.raw_ops.AddV2(x=..., y=...)`), as TensorFlow's `tf.raw_ops`."""

from __future__ import annotations

from . import _C, _ops

_cache: dict = {}
_gen = [-1]


def __getattr__(name: str):
    g = _C.registry_generation()
    if g != _gen[0]:
        _cache.clear()
        _gen[0] = g
    f = _cache.get(name)
    if f is None:
        if name not in set(_C.op_names()):
            raise AttributeError(f"module 'opforge.raw_ops' has no op {name!r}")
        f = _ops.make_function(_ops.op_info(name), raw=True)
        _cache[name] = f
    globals()[name] = f
    return f


def __dir__():
    return list(_C.op_names())
