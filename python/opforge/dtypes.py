"""opforge's dtypes: TensorFlow's `DataType`s as Python objects.

Every place that takes a dtype accepts an `opforge.DType`, a numpy dtype or
scalar type (`numpy.float32`), a name (`'float32'`, `'float'`, `'DT_FLOAT'`)
or the `DataType` number.
"""

from __future__ import annotations

import builtins

import numpy as _np

__all__ = [
    "DType", "as_dtype",
    "float16", "half", "bfloat16", "float32", "float64", "double",
    "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "bool", "complex64", "complex128", "string",
    "qint8", "quint8", "qint16", "quint16", "qint32", "resource", "variant",
]


class DType:
    """A TensorFlow `DataType`: `name`, `as_datatype_enum`, `as_numpy_dtype`, `size`."""

    __slots__ = ("_enum", "_name", "_np", "_size", "_proto")

    def __init__(self, enum: int, name: str, proto: str, np_type, size: int):
        self._enum = enum
        self._name = name
        self._proto = proto
        self._np = np_type
        self._size = size

    @property
    def name(self) -> str:
        """The TensorFlow Python name (`float32`)."""
        return self._name

    @property
    def as_datatype_enum(self) -> int:
        """TensorFlow's `DataType` number (`DT_FLOAT` = 1)."""
        return self._enum

    @property
    def as_numpy_dtype(self):
        """The numpy scalar type (`numpy.float32`; `object` for strings)."""
        return self._np

    @property
    def size(self) -> int:
        """Bytes per element (0 for strings, resources and variants)."""
        return self._size

    @property
    def is_floating(self) -> builtins.bool:
        return self._name in ("float16", "bfloat16", "float32", "float64")

    @property
    def is_integer(self) -> builtins.bool:
        return self._name.startswith(("int", "uint"))

    @property
    def is_complex(self) -> builtins.bool:
        return self._name.startswith("complex")

    @property
    def is_bool(self) -> builtins.bool:
        return self._name == "bool"

    def __repr__(self) -> str:
        return f"opforge.{self._name}"

    def __str__(self) -> str:
        return repr(self)

    def __eq__(self, other) -> builtins.bool:
        if isinstance(other, DType):
            return other._enum == self._enum
        try:
            return as_dtype(other)._enum == self._enum
        except (TypeError, ValueError):
            return NotImplemented

    def __hash__(self) -> int:
        return hash(self._enum)

    def __reduce__(self):
        return (as_dtype, (self._enum,))


def _bfloat16_numpy():
    try:
        import ml_dtypes  # type: ignore

        return ml_dtypes.bfloat16
    except ImportError:
        return None


_TABLE = [
    # enum, name, proto name, numpy type, size
    (1, "float32", "DT_FLOAT", _np.float32, 4),
    (2, "float64", "DT_DOUBLE", _np.float64, 8),
    (3, "int32", "DT_INT32", _np.int32, 4),
    (4, "uint8", "DT_UINT8", _np.uint8, 1),
    (5, "int16", "DT_INT16", _np.int16, 2),
    (6, "int8", "DT_INT8", _np.int8, 1),
    (7, "string", "DT_STRING", object, 0),
    (8, "complex64", "DT_COMPLEX64", _np.complex64, 8),
    (9, "int64", "DT_INT64", _np.int64, 8),
    (10, "bool", "DT_BOOL", _np.bool_, 1),
    (11, "qint8", "DT_QINT8", _np.int8, 1),
    (12, "quint8", "DT_QUINT8", _np.uint8, 1),
    (13, "qint32", "DT_QINT32", _np.int32, 4),
    (14, "bfloat16", "DT_BFLOAT16", _bfloat16_numpy(), 2),
    (15, "qint16", "DT_QINT16", _np.int16, 2),
    (16, "quint16", "DT_QUINT16", _np.uint16, 2),
    (17, "uint16", "DT_UINT16", _np.uint16, 2),
    (18, "complex128", "DT_COMPLEX128", _np.complex128, 16),
    (19, "float16", "DT_HALF", _np.float16, 2),
    (20, "resource", "DT_RESOURCE", object, 0),
    (21, "variant", "DT_VARIANT", object, 0),
    (22, "uint32", "DT_UINT32", _np.uint32, 4),
    (23, "uint64", "DT_UINT64", _np.uint64, 8),
]

# The dtypes, made from _TABLE below (declared for type checkers).
float32: DType
float64: DType
int32: DType
uint8: DType
int16: DType
int8: DType
string: DType
complex64: DType
int64: DType
bool: DType
qint8: DType
quint8: DType
qint32: DType
bfloat16: DType
qint16: DType
quint16: DType
uint16: DType
complex128: DType
float16: DType
resource: DType
variant: DType
uint32: DType
uint64: DType

#: DType objects indexed by `DataType` number (None where there is none).
BY_ENUM: list[DType | None] = [None] * 24
_BY_NAME: dict[str, DType] = {}
for _e, _n, _p, _t, _s in _TABLE:
    _d = DType(_e, _n, _p, _t, _s)
    BY_ENUM[_e] = _d
    _BY_NAME[_n] = _d
    _BY_NAME[_p] = _d
    _BY_NAME[_p[3:].lower()] = _d  # 'float', 'double', 'half', ...
    globals()[_n] = _d
half = float16
double = float64
_BY_NAME["half"] = float16
_BY_NAME["double"] = float64

# numpy dtypes (and scalar types) that map one to one.
_BY_NUMPY = {
    _np.dtype(_np.float32): float32, _np.dtype(_np.float64): float64,
    _np.dtype(_np.float16): float16, _np.dtype(_np.int8): int8,
    _np.dtype(_np.int16): int16, _np.dtype(_np.int32): int32,
    _np.dtype(_np.int64): int64, _np.dtype(_np.uint8): uint8,
    _np.dtype(_np.uint16): uint16, _np.dtype(_np.uint32): uint32,
    _np.dtype(_np.uint64): uint64, _np.dtype(_np.bool_): bool,
    _np.dtype(_np.complex64): complex64, _np.dtype(_np.complex128): complex128,
}
if bfloat16._np is not None:
    _BY_NUMPY[_np.dtype(bfloat16._np)] = bfloat16


def as_dtype(value) -> DType:
    """The `DType` of `value`: a DType, a numpy dtype or type, a name or a
    `DataType` number. TypeError for anything else."""
    if isinstance(value, DType):
        return value
    if isinstance(value, int) and not isinstance(value, type(True)):
        found = BY_ENUM[value] if 0 < value < len(BY_ENUM) else None
        if found is not None:
            return found
        raise TypeError(f"no opforge dtype has DataType number {value}")
    if isinstance(value, str):
        d = _BY_NAME.get(value)
        if d is None:
            raise TypeError(f"unknown dtype name {value!r} (e.g. 'float32', 'int64', 'string')")
        return d
    if value is str or value is bytes:
        return string
    if value is float:
        return float32
    if value is int:
        return int32
    if value is type(True):
        return bool
    if value is complex:
        return complex128
    try:
        npd = _np.dtype(value)
    except TypeError:
        raise TypeError(f"cannot convert {value!r} to an opforge dtype") from None
    d = _BY_NUMPY.get(npd.newbyteorder("=") if npd.byteorder not in ("=", "|") else npd)
    if d is not None:
        return d
    if npd.kind in ("S", "U", "O"):
        return string
    raise TypeError(f"numpy dtype {npd} has no opforge equivalent")
