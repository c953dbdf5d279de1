//! Element types: [`DataType`] (TensorFlow's `DataType` numbers), the
//! [`Element`] trait of the Rust types a tensor's elements can be read as,
//! and [`dispatch!`](crate::dispatch) to pick the monomorphised code for a
//! run-time dtype.

use core::fmt;
use opforge_abi::OpforgeDType;

/// A tensor element type: TensorFlow's `DataType` number, carried as the
/// ABI's integer so that a value unknown to this SDK survives (rule R3).
/// The constants have opforge-core's names (`DataType::Float`).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(transparent)]
pub struct DataType(pub OpforgeDType);

macro_rules! dtypes {
    ($($(#[$m:meta])* $name:ident = $value:literal, $tf:literal;)*) => {
        #[allow(non_upper_case_globals)]
        impl DataType {
            $( $(#[$m])* pub const $name: DataType = DataType($value); )*

            /// TensorFlow's name (`"DT_FLOAT"`), or `None` for a number this
            /// SDK does not know.
            pub const fn name(self) -> Option<&'static str> {
                match self.0 {
                    $( $value => Some($tf), )*
                    _ => None,
                }
            }
        }
    };
}

dtypes! {
    /// `DT_INVALID`: no type.
    Invalid = 0, "DT_INVALID";
    /// `DT_FLOAT`: `f32`.
    Float = 1, "DT_FLOAT";
    /// `DT_DOUBLE`: `f64`.
    Double = 2, "DT_DOUBLE";
    /// `DT_INT32`: `i32`.
    Int32 = 3, "DT_INT32";
    /// `DT_UINT8`: `u8`.
    UInt8 = 4, "DT_UINT8";
    /// `DT_INT16`: `i16`.
    Int16 = 5, "DT_INT16";
    /// `DT_INT8`: `i8`.
    Int8 = 6, "DT_INT8";
    /// `DT_STRING`.
    String = 7, "DT_STRING";
    /// `DT_COMPLEX64`.
    Complex64 = 8, "DT_COMPLEX64";
    /// `DT_INT64`: `i64`.
    Int64 = 9, "DT_INT64";
    /// `DT_BOOL`.
    Bool = 10, "DT_BOOL";
    /// `DT_QINT8`.
    QInt8 = 11, "DT_QINT8";
    /// `DT_QUINT8`.
    QUInt8 = 12, "DT_QUINT8";
    /// `DT_QINT32`.
    QInt32 = 13, "DT_QINT32";
    /// `DT_BFLOAT16`: [`BFloat16`].
    BFloat16 = 14, "DT_BFLOAT16";
    /// `DT_QINT16`.
    QInt16 = 15, "DT_QINT16";
    /// `DT_QUINT16`.
    QUInt16 = 16, "DT_QUINT16";
    /// `DT_UINT16`: `u16`.
    UInt16 = 17, "DT_UINT16";
    /// `DT_COMPLEX128`.
    Complex128 = 18, "DT_COMPLEX128";
    /// `DT_HALF`: [`Half`].
    Half = 19, "DT_HALF";
    /// `DT_RESOURCE`.
    Resource = 20, "DT_RESOURCE";
    /// `DT_VARIANT`.
    Variant = 21, "DT_VARIANT";
    /// `DT_UINT32`: `u32`.
    UInt32 = 22, "DT_UINT32";
    /// `DT_UINT64`: `u64`.
    UInt64 = 23, "DT_UINT64";
    /// `DT_FLOAT8_E5M2`.
    Float8E5M2 = 24, "DT_FLOAT8_E5M2";
    /// `DT_FLOAT8_E4M3FN`.
    Float8E4M3FN = 25, "DT_FLOAT8_E4M3FN";
    /// `DT_FLOAT8_E4M3FNUZ`.
    Float8E4M3FNUZ = 26, "DT_FLOAT8_E4M3FNUZ";
    /// `DT_FLOAT8_E4M3B11FNUZ`.
    Float8E4M3B11FNUZ = 27, "DT_FLOAT8_E4M3B11FNUZ";
    /// `DT_FLOAT8_E5M2FNUZ`.
    Float8E5M2FNUZ = 28, "DT_FLOAT8_E5M2FNUZ";
    /// `DT_INT4`.
    Int4 = 29, "DT_INT4";
    /// `DT_UINT4`.
    UInt4 = 30, "DT_UINT4";
    /// `DT_INT2`.
    Int2 = 31, "DT_INT2";
    /// `DT_UINT2`.
    UInt2 = 32, "DT_UINT2";
    /// `DT_FLOAT4_E2M1FN`.
    Float4E2M1FN = 33, "DT_FLOAT4_E2M1FN";
}

impl DataType {
    /// TensorFlow's `realnumbertype` class, in its order (the dtypes of the
    /// spec `T: realnumbertype`).
    pub const REAL_NUMBER_TYPES: &'static [DataType] = &[
        DataType::Float,
        DataType::Double,
        DataType::Int32,
        DataType::UInt8,
        DataType::Int16,
        DataType::Int8,
        DataType::Int64,
        DataType::BFloat16,
        DataType::UInt16,
        DataType::Half,
        DataType::UInt32,
        DataType::UInt64,
    ];
}

impl fmt::Debug for DataType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for DataType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            // TensorFlow prints dtypes without the prefix, lower case.
            Some(name) => f.write_str(&name[3..].to_ascii_lowercase()),
            None => write!(f, "dtype {}", self.0),
        }
    }
}

/// IEEE binary16 (`DT_HALF`) as its bits: the SDK moves such elements but
/// does no arithmetic on them (convert with a crate such as `half`).
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash, Debug)]
#[repr(transparent)]
pub struct Half(pub u16);

/// bfloat16 (`DT_BFLOAT16`) as its bits, as [`Half`].
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash, Debug)]
#[repr(transparent)]
pub struct BFloat16(pub u16);

/// A Rust type whose values are a tensor's elements of [`Element::DTYPE`]
/// in the ABI's dense layout.
///
/// # Safety
///
/// The type must have the size and alignment of the dtype's element, and
/// every bit pattern of that size must be a valid value (views hand out
/// typed slices over host memory).
pub unsafe trait Element: Copy + Default + Send + Sync + 'static {
    /// The dtype.
    const DTYPE: DataType;
}

macro_rules! elements {
    ($($t:ty => $d:ident),*) => {
        $(
            // SAFETY: a primitive integer or float (or a transparent u16
            // newtype) of exactly the element size of the dtype, valid for
            // every bit pattern, as the header's dtype comment lays out.
            unsafe impl Element for $t {
                const DTYPE: DataType = DataType::$d;
            }
        )*
    };
}

elements! {
    f32 => Float, f64 => Double, i32 => Int32, u8 => UInt8, i16 => Int16, i8 => Int8,
    i64 => Int64, BFloat16 => BFloat16, u16 => UInt16, Half => Half, u32 => UInt32,
    u64 => UInt64
}

/// Runs `$body` with the type alias `$T` bound to the [`Element`] type of
/// the run-time dtype `$dtype`, for each Rust type in the list; any other
/// dtype evaluates `$otherwise` (by default an `Unimplemented` error), as
/// opforge-core's `dispatch!`:
///
/// ```
/// # use opforge_plugin::{dispatch, DataType, Result, Status};
/// fn size_of(dtype: DataType) -> Result<usize> {
///     dispatch!(dtype, T => Ok(std::mem::size_of::<T>()), [f32, f64, i32])
/// }
/// assert_eq!(size_of(DataType::Double), Ok(8));
/// assert!(size_of(DataType::Int8).is_err());
/// ```
#[macro_export]
macro_rules! dispatch {
    ($dtype:expr, $T:ident => $body:expr, [$($t:ty),+ $(,)?] $(,)?) => {{
        let dtype: $crate::DataType = $dtype;
        $crate::dispatch!(dtype, $T => $body, [$($t),+],
            ::core::result::Result::Err($crate::Status::unimplemented(::std::format!(
                "no code for dtype {}", dtype
            ))))
    }};
    ($dtype:expr, $T:ident => $body:expr, [$($t:ty),+ $(,)?], $otherwise:expr $(,)?) => {{
        let dtype: $crate::DataType = $dtype;
        $(
            if dtype == <$t as $crate::Element>::DTYPE {
                #[allow(dead_code)]
                type $T = $t;
                $body
            } else
        )+
        { $otherwise }
    }};
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_display() {
        assert_eq!(DataType::Float.name(), Some("DT_FLOAT"));
        assert_eq!(DataType(99).name(), None);
        assert_eq!(DataType::Int32.to_string(), "int32");
        assert_eq!(DataType(99).to_string(), "dtype 99");
        assert_eq!(<Half as Element>::DTYPE, DataType::Half);
    }
}
