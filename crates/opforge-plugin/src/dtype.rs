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

/// IEEE binary16 (`DT_HALF`) as its bits. The SDK does no arithmetic on
/// it: compute in `f32` ([`to_f32`](Self::to_f32), exact) and round back
/// ([`from_f32`](Self::from_f32)), as TensorFlow's CPU kernels do; a
/// product or sum of two halves is exact in `f32`, so one rounding gives
/// the correctly rounded result.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash, Debug)]
#[repr(transparent)]
pub struct Half(pub u16);

/// bfloat16 (`DT_BFLOAT16`) as its bits, as [`Half`]: the upper half of an
/// `f32`.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash, Debug)]
#[repr(transparent)]
pub struct BFloat16(pub u16);

impl Half {
    /// The nearest half to `v` (ties to even; beyond the largest half,
    /// infinity; NaN stays NaN, quiet, with the upper payload bits).
    pub const fn from_f32(v: f32) -> Half {
        let x = v.to_bits();
        let sign = ((x >> 16) & 0x8000) as u16;
        let exp = ((x >> 23) & 0xff) as i32;
        let man = x & 0x7f_ffff;
        if exp == 0xff {
            if man == 0 {
                return Half(sign | 0x7c00);
            }
            return Half(sign | 0x7e00 | (man >> 13) as u16);
        }
        // The half's biased exponent.
        let e = exp - 127 + 15;
        if e >= 31 {
            return Half(sign | 0x7c00);
        }
        if e <= 0 {
            // Below 2^-25 (half the smallest subnormal), or exactly it
            // (the tie goes to the even zero): zero.
            if e < -10 {
                return Half(sign);
            }
            // A subnormal: the 24-bit significand shifted to units of
            // 2^-24, rounded to nearest even (rounding up to 0x400 is the
            // smallest normal, which is the right encoding).
            let m = man | 0x80_0000;
            let shift = (14 - e) as u32;
            let rem = m & ((1 << shift) - 1);
            let half = 1 << (shift - 1);
            let mut h = (m >> shift) as u16;
            if rem > half || (rem == half && h & 1 == 1) {
                h += 1;
            }
            return Half(sign | h);
        }
        let mut h = sign | ((e as u16) << 10) | (man >> 13) as u16;
        let rem = man & 0x1fff;
        // A carry out of the significand steps the exponent, up to
        // infinity: still the nearest value.
        if rem > 0x1000 || (rem == 0x1000 && h & 1 == 1) {
            h += 1;
        }
        Half(h)
    }

    /// The value as an `f32` (exact).
    pub const fn to_f32(self) -> f32 {
        let h = self.0 as u32;
        let sign = (h & 0x8000) << 16;
        let exp = (h >> 10) & 0x1f;
        let man = h & 0x3ff;
        let bits = if exp == 0x1f {
            sign | 0x7f80_0000 | (man << 13)
        } else if exp != 0 {
            sign | ((exp + 127 - 15) << 23) | (man << 13)
        } else if man == 0 {
            sign
        } else {
            // A subnormal, man * 2^-24: normalise its leading bit (at
            // position p < 10) to the f32's implicit one.
            let p = 31 - man.leading_zeros();
            sign | ((p + 127 - 24) << 23) | ((man << (23 - p)) & 0x7f_ffff)
        };
        f32::from_bits(bits)
    }
}

impl BFloat16 {
    /// The nearest bfloat16 to `v` (ties to even; NaN stays NaN, quiet).
    pub const fn from_f32(v: f32) -> BFloat16 {
        let x = v.to_bits();
        if v.is_nan() {
            return BFloat16(((x >> 16) | 0x0040) as u16);
        }
        // No overflow: the largest non-NaN pattern, 0xff80_0000, plus the
        // bias stays below 2^32.
        let bias = 0x7fff + ((x >> 16) & 1);
        BFloat16(((x + bias) >> 16) as u16)
    }

    /// The value as an `f32` (exact).
    pub const fn to_f32(self) -> f32 {
        f32::from_bits((self.0 as u32) << 16)
    }
}

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

    /// Every half and bfloat16 converts to the f32 the `half` crate gives,
    /// and f32s convert to the half and bfloat16 it gives: every 65,537th
    /// pattern of the whole range, every 61st from 2^-26 to 2^17 (the
    /// halves' range, with its subnormals and overflow), and the edges of
    /// rounding.
    #[test]
    fn half_and_bfloat16_conversions_agree_with_the_half_crate() {
        let same = |a: f32, b: f32| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan());
        for bits in 0..=u16::MAX {
            let want = half::f16::from_bits(bits).to_f32();
            assert!(same(Half(bits).to_f32(), want), "half {bits:#06x}");
            let want = half::bf16::from_bits(bits).to_f32();
            assert!(same(BFloat16(bits).to_f32(), want), "bfloat16 {bits:#06x}");
        }
        let edges = [
            0.0f32,
            -0.0,
            65504.0,
            65520.0,
            65519.996,
            f32::MAX,
            f32::MIN_POSITIVE,
            5.960_464_5e-8, // 2^-24, the smallest half subnormal
            2.980_232_2e-8, // 2^-25: the tie, to zero
            2.980_232_5e-8, // just above it: the smallest subnormal
            6.097_555e-5,   // the largest half subnormal
            6.103_515_6e-5, // the smallest half normal
            1.0 + 1.0 / 2048.0,
            1.0 + 3.0 / 2048.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            f32::from_bits(0x7f80_0001),
            f32::from_bits(0xffc0_1234),
        ];
        let stride = 65_537u32;
        let sampled = (0..=u32::MAX / stride).map(|k| f32::from_bits(k * stride));
        let dense = (0x3280_0000u32..0x4800_0000)
            .step_by(61)
            .map(f32::from_bits);
        // Both NaN (payloads may differ), or the same bits.
        let agree = |what: &str, v: f32, got: u16, got_f32: f32, want: u16, want_f32: f32| {
            assert!(
                got == want || (want_f32.is_nan() && got_f32.is_nan()),
                "{what} of {v:e} ({:#010x}): {got:#06x}, not {want:#06x}",
                v.to_bits()
            );
        };
        for v in edges.into_iter().chain(sampled).chain(dense) {
            let (got, want) = (Half::from_f32(v), half::f16::from_f32(v));
            agree(
                "half",
                v,
                got.0,
                got.to_f32(),
                want.to_bits(),
                want.to_f32(),
            );
            let (got, want) = (BFloat16::from_f32(v), half::bf16::from_f32(v));
            agree(
                "bfloat16",
                v,
                got.0,
                got.to_f32(),
                want.to_bits(),
                want.to_f32(),
            );
        }
    }
}
