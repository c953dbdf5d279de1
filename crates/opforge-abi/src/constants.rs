//! Status codes, dtypes (TensorFlow's `DataType` numbers), handles and
//! sentinels.

use crate::*;

// ---------------------------------------------------------------------------
// Codes
// ---------------------------------------------------------------------------

/// Not an error.
pub const OPFORGE_OK: OpforgeCode = 0;
/// The operation was cancelled.
pub const OPFORGE_CANCELLED: OpforgeCode = 1;
/// Unknown error (also: a callback returned a code outside 0..16).
pub const OPFORGE_UNKNOWN: OpforgeCode = 2;
/// The caller gave an invalid argument.
pub const OPFORGE_INVALID_ARGUMENT: OpforgeCode = 3;
/// A deadline expired.
pub const OPFORGE_DEADLINE_EXCEEDED: OpforgeCode = 4;
/// Something requested was not found.
pub const OPFORGE_NOT_FOUND: OpforgeCode = 5;
/// Something to be created already exists.
pub const OPFORGE_ALREADY_EXISTS: OpforgeCode = 6;
/// The caller may not do this.
pub const OPFORGE_PERMISSION_DENIED: OpforgeCode = 7;
/// A resource (memory, quota) is exhausted.
pub const OPFORGE_RESOURCE_EXHAUSTED: OpforgeCode = 8;
/// The system is not in a state the operation needs (also: ABI refusals).
pub const OPFORGE_FAILED_PRECONDITION: OpforgeCode = 9;
/// The operation was aborted.
pub const OPFORGE_ABORTED: OpforgeCode = 10;
/// A value was out of range.
pub const OPFORGE_OUT_OF_RANGE: OpforgeCode = 11;
/// Not implemented (also: a slot newer than the host, an enum value of a
/// newer minor).
pub const OPFORGE_UNIMPLEMENTED: OpforgeCode = 12;
/// An internal error (also: a panic or exception caught at the boundary).
pub const OPFORGE_INTERNAL: OpforgeCode = 13;
/// The service is unavailable.
pub const OPFORGE_UNAVAILABLE: OpforgeCode = 14;
/// Unrecoverable data loss or corruption (also: a corrupt manifest).
pub const OPFORGE_DATA_LOSS: OpforgeCode = 15;
/// The caller is not authenticated.
pub const OPFORGE_UNAUTHENTICATED: OpforgeCode = 16;

// ---------------------------------------------------------------------------
// Dtypes (TensorFlow's DataType numbers)
// ---------------------------------------------------------------------------

/// `DT_INVALID`: no type.
pub const OPFORGE_DT_INVALID: OpforgeDType = 0;
/// `DT_FLOAT`: f32.
pub const OPFORGE_DT_FLOAT: OpforgeDType = 1;
/// `DT_DOUBLE`: f64.
pub const OPFORGE_DT_DOUBLE: OpforgeDType = 2;
/// `DT_INT32`.
pub const OPFORGE_DT_INT32: OpforgeDType = 3;
/// `DT_UINT8`.
pub const OPFORGE_DT_UINT8: OpforgeDType = 4;
/// `DT_INT16`.
pub const OPFORGE_DT_INT16: OpforgeDType = 5;
/// `DT_INT8`.
pub const OPFORGE_DT_INT8: OpforgeDType = 6;
/// `DT_STRING`: one [`OpforgeStr`] per element in views.
pub const OPFORGE_DT_STRING: OpforgeDType = 7;
/// `DT_COMPLEX64`: (f32 real, f32 imag).
pub const OPFORGE_DT_COMPLEX64: OpforgeDType = 8;
/// `DT_INT64`.
pub const OPFORGE_DT_INT64: OpforgeDType = 9;
/// `DT_BOOL`: one byte, 0 or 1.
pub const OPFORGE_DT_BOOL: OpforgeDType = 10;
/// `DT_QINT8`.
pub const OPFORGE_DT_QINT8: OpforgeDType = 11;
/// `DT_QUINT8`.
pub const OPFORGE_DT_QUINT8: OpforgeDType = 12;
/// `DT_QINT32`.
pub const OPFORGE_DT_QINT32: OpforgeDType = 13;
/// `DT_BFLOAT16`: two bytes.
pub const OPFORGE_DT_BFLOAT16: OpforgeDType = 14;
/// `DT_QINT16`.
pub const OPFORGE_DT_QINT16: OpforgeDType = 15;
/// `DT_QUINT16`.
pub const OPFORGE_DT_QUINT16: OpforgeDType = 16;
/// `DT_UINT16`.
pub const OPFORGE_DT_UINT16: OpforgeDType = 17;
/// `DT_COMPLEX128`: (f64 real, f64 imag).
pub const OPFORGE_DT_COMPLEX128: OpforgeDType = 18;
/// `DT_HALF`: IEEE binary16, two bytes.
pub const OPFORGE_DT_HALF: OpforgeDType = 19;
/// `DT_RESOURCE` (not readable through the 1.0 ABI).
pub const OPFORGE_DT_RESOURCE: OpforgeDType = 20;
/// `DT_VARIANT` (not readable through the 1.0 ABI).
pub const OPFORGE_DT_VARIANT: OpforgeDType = 21;
/// `DT_UINT32`.
pub const OPFORGE_DT_UINT32: OpforgeDType = 22;
/// `DT_UINT64`.
pub const OPFORGE_DT_UINT64: OpforgeDType = 23;
/// `DT_FLOAT8_E5M2`: one byte.
pub const OPFORGE_DT_FLOAT8_E5M2: OpforgeDType = 24;
/// `DT_FLOAT8_E4M3FN`: one byte.
pub const OPFORGE_DT_FLOAT8_E4M3FN: OpforgeDType = 25;
/// `DT_FLOAT8_E4M3FNUZ`: one byte.
pub const OPFORGE_DT_FLOAT8_E4M3FNUZ: OpforgeDType = 26;
/// `DT_FLOAT8_E4M3B11FNUZ`: one byte.
pub const OPFORGE_DT_FLOAT8_E4M3B11FNUZ: OpforgeDType = 27;
/// `DT_FLOAT8_E5M2FNUZ`: one byte.
pub const OPFORGE_DT_FLOAT8_E5M2FNUZ: OpforgeDType = 28;
/// `DT_INT4`: one byte per element.
pub const OPFORGE_DT_INT4: OpforgeDType = 29;
/// `DT_UINT4`: one byte per element.
pub const OPFORGE_DT_UINT4: OpforgeDType = 30;
/// `DT_INT2`: one byte per element.
pub const OPFORGE_DT_INT2: OpforgeDType = 31;
/// `DT_UINT2`: one byte per element.
pub const OPFORGE_DT_UINT2: OpforgeDType = 32;
/// `DT_FLOAT4_E2M1FN`: one byte per element.
pub const OPFORGE_DT_FLOAT4_E2M1FN: OpforgeDType = 33;

// ---------------------------------------------------------------------------
// Handles, sentinels
// ---------------------------------------------------------------------------

/// The invalid handle ([`OpforgeShape`], [`OpforgeDim`], [`OpforgeSym`]):
/// returned where no handle can be produced, rejected with
/// INVALID_ARGUMENT where one is required.
pub const OPFORGE_NO_HANDLE: u64 = 0;
/// A rank that is not known (shape inference, attr shapes).
pub const OPFORGE_UNKNOWN_RANK: i32 = -1;
/// A dim that is not known (shape inference, attr shapes).
pub const OPFORGE_UNKNOWN_DIM: i64 = -1;
/// `subshape`'s `end` meaning "to the end of the shape".
pub const OPFORGE_TO_END: i64 = i64::MAX;
/// `forward_input_or_allocate_output`: no input was forwarded.
pub const OPFORGE_NOT_FORWARDED: i64 = -1;
