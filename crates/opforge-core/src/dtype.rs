//! Data types: every value of TensorFlow's `DataType` enum with the same
//! numeric codes, their names in op specs (`float`, `int32`, ...) and in
//! protos (`DT_FLOAT`, ...), byte sizes, and the type classes the spec
//! language uses (`numbertype`, `realnumbertype`, `quantizedtype`).

use std::fmt;

macro_rules! data_types {
    ($($variant:ident, $ref_variant:ident, $code:literal, $name:literal, $proto:literal, $size:literal;)*) => {
        /// A tensor element type, with TensorFlow's numeric codes.
        ///
        /// The `*Ref` variants (code + 100) are TensorFlow's reference types;
        /// they appear only in the signatures of old ref-typed ops.
        ///
        /// ```
        /// use opforge_core::DataType;
        /// assert_eq!(DataType::Float as i32, 1);
        /// assert_eq!(DataType::from_spec_name("float32"), Some(DataType::Float));
        /// assert_eq!(DataType::Int64.proto_name(), "DT_INT64");
        /// assert_eq!(DataType::Half.size(), 2);
        /// ```
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(i32)]
        pub enum DataType {
            /// Not a legal value: a `DataType` field that was not set.
            Invalid = 0,
            $(
                #[doc = concat!("`", $proto, "` (`", $name, "` in op specs).")]
                $variant = $code,
            )*
            $(
                #[doc = concat!("`", $proto, "_REF`: a reference to a `", $name, "` tensor.")]
                $ref_variant = $code + 100,
            )*
        }

        impl DataType {
            /// Every valid (non-`Invalid`, non-ref) type, in code order.
            pub const BASE_TYPES: &'static [DataType] = &[$(DataType::$variant),*];
            /// Every ref type, in code order.
            pub const REF_TYPES: &'static [DataType] = &[$(DataType::$ref_variant),*];

            /// The type with this numeric code (`DataType::from_i32(1) == Some(DataType::Float)`).
            pub fn from_i32(code: i32) -> Option<DataType> {
                match code {
                    0 => Some(DataType::Invalid),
                    $($code => Some(DataType::$variant),)*
                    $(c if c == $code + 100 => Some(DataType::$ref_variant),)*
                    _ => None,
                }
            }

            /// The name TensorFlow's `DataTypeString` gives: `float`, `int32`,
            /// `float_ref`, ... (`invalid` for `Invalid`).
            pub fn name(self) -> &'static str {
                match self {
                    DataType::Invalid => "invalid",
                    $(DataType::$variant => $name,)*
                    $(DataType::$ref_variant => concat!($name, "_ref"),)*
                }
            }

            /// The proto enum name: `DT_FLOAT`, `DT_FLOAT_REF`, `DT_INVALID`.
            pub fn proto_name(self) -> &'static str {
                match self {
                    DataType::Invalid => "DT_INVALID",
                    $(DataType::$variant => $proto,)*
                    $(DataType::$ref_variant => concat!($proto, "_REF"),)*
                }
            }

            /// The type with this proto enum name (`DT_FLOAT`).
            pub fn from_proto_name(name: &str) -> Option<DataType> {
                match name {
                    "DT_INVALID" => Some(DataType::Invalid),
                    $($proto => Some(DataType::$variant),)*
                    $(concat!($proto, "_REF") => Some(DataType::$ref_variant),)*
                    _ => None,
                }
            }

            /// The base type of a ref type; a non-ref type is returned as it is.
            pub fn base(self) -> DataType {
                match self {
                    $(DataType::$ref_variant => DataType::$variant,)*
                    other => other,
                }
            }

            /// The ref type of a base type; a ref type (or `Invalid`) is returned as it is.
            pub fn to_ref(self) -> DataType {
                match self {
                    $(DataType::$variant => DataType::$ref_variant,)*
                    other => other,
                }
            }

            /// Bytes per element as stored in a dense tensor buffer (4- and
            /// 2-bit types take one byte each); 0 for `string`, `resource`,
            /// `variant`, ref types and `Invalid`, which have no fixed size.
            #[inline]
            pub fn size(self) -> usize {
                match self {
                    $(DataType::$variant => $size,)*
                    _ => 0,
                }
            }
        }
    };
}

data_types! {
Float, FloatRef, 1, "float", "DT_FLOAT", 4;
Double, DoubleRef, 2, "double", "DT_DOUBLE", 8;
Int32, Int32Ref, 3, "int32", "DT_INT32", 4;
UInt8, UInt8Ref, 4, "uint8", "DT_UINT8", 1;
Int16, Int16Ref, 5, "int16", "DT_INT16", 2;
Int8, Int8Ref, 6, "int8", "DT_INT8", 1;
String, StringRef, 7, "string", "DT_STRING", 0;
Complex64, Complex64Ref, 8, "complex64", "DT_COMPLEX64", 8;
Int64, Int64Ref, 9, "int64", "DT_INT64", 8;
Bool, BoolRef, 10, "bool", "DT_BOOL", 1;
QInt8, QInt8Ref, 11, "qint8", "DT_QINT8", 1;
QUInt8, QUInt8Ref, 12, "quint8", "DT_QUINT8", 1;
QInt32, QInt32Ref, 13, "qint32", "DT_QINT32", 4;
BFloat16, BFloat16Ref, 14, "bfloat16", "DT_BFLOAT16", 2;
QInt16, QInt16Ref, 15, "qint16", "DT_QINT16", 2;
QUInt16, QUInt16Ref, 16, "quint16", "DT_QUINT16", 2;
UInt16, UInt16Ref, 17, "uint16", "DT_UINT16", 2;
Complex128, Complex128Ref, 18, "complex128", "DT_COMPLEX128", 16;
Half, HalfRef, 19, "half", "DT_HALF", 2;
Resource, ResourceRef, 20, "resource", "DT_RESOURCE", 0;
Variant, VariantRef, 21, "variant", "DT_VARIANT", 0;
UInt32, UInt32Ref, 22, "uint32", "DT_UINT32", 4;
UInt64, UInt64Ref, 23, "uint64", "DT_UINT64", 8;
Float8E5M2, Float8E5M2Ref, 24, "float8_e5m2", "DT_FLOAT8_E5M2", 1;
Float8E4M3FN, Float8E4M3FNRef, 25, "float8_e4m3fn", "DT_FLOAT8_E4M3FN", 1;
Float8E4M3FNUZ, Float8E4M3FNUZRef, 26, "float8_e4m3fnuz", "DT_FLOAT8_E4M3FNUZ", 1;
Float8E4M3B11FNUZ, Float8E4M3B11FNUZRef, 27, "float8_e4m3b11fnuz", "DT_FLOAT8_E4M3B11FNUZ", 1;
Float8E5M2FNUZ, Float8E5M2FNUZRef, 28, "float8_e5m2fnuz", "DT_FLOAT8_E5M2FNUZ", 1;
Int4, Int4Ref, 29, "int4", "DT_INT4", 1;
UInt4, UInt4Ref, 30, "uint4", "DT_UINT4", 1;
Int2, Int2Ref, 31, "int2", "DT_INT2", 1;
UInt2, UInt2Ref, 32, "uint2", "DT_UINT2", 1;
Float4E2M1FN, Float4E2M1FNRef, 33, "float4_e2m1fn", "DT_FLOAT4_E2M1FN", 1;}

impl DataType {
    /// Whether this is one of the `*_REF` types.
    pub fn is_ref(self) -> bool {
        (self as i32) > 100
    }

    /// The type named `name` in an op spec, as TensorFlow's
    /// `DataTypeFromString` reads it: the names of [`DataType::name`] plus the
    /// aliases `float32`, `float64` and `float16`, each optionally with a
    /// `_ref` suffix.
    pub fn from_spec_name(name: &str) -> Option<DataType> {
        if let Some(base) = name.strip_suffix("_ref") {
            let dt = DataType::from_spec_name(base)?;
            return if dt.is_ref() { None } else { Some(dt.to_ref()) };
        }
        match name {
            "float32" => return Some(DataType::Float),
            "float64" => return Some(DataType::Double),
            "float16" => return Some(DataType::Half),
            _ => {}
        }
        DataType::BASE_TYPES
            .iter()
            .copied()
            .find(|dt| dt.name() == name)
    }

    /// Whether the type is a floating-point type (including bfloat16 and the float8 family).
    pub fn is_floating(self) -> bool {
        use DataType::*;
        matches!(
            self.base(),
            Float
                | Double
                | Half
                | BFloat16
                | Float8E5M2
                | Float8E4M3FN
                | Float8E4M3FNUZ
                | Float8E4M3B11FNUZ
                | Float8E5M2FNUZ
                | Float4E2M1FN
        )
    }

    /// Whether the type is a complex type.
    pub fn is_complex(self) -> bool {
        matches!(self.base(), DataType::Complex64 | DataType::Complex128)
    }

    /// Whether the type is a (non-quantized) integer type.
    pub fn is_integer(self) -> bool {
        use DataType::*;
        matches!(
            self.base(),
            Int8 | Int16
                | Int32
                | Int64
                | UInt8
                | UInt16
                | UInt32
                | UInt64
                | Int4
                | UInt4
                | Int2
                | UInt2
        )
    }

    /// Whether the type is a quantized type (`qint8`, ...).
    pub fn is_quantized(self) -> bool {
        QUANTIZED_TYPES.contains(&self.base())
    }

    /// Whether tensors of this type are plain bytes (so they can live in a
    /// device's memory): every type but `string`, `resource` and `variant`,
    /// whose tensors always stay on the host.
    pub fn is_dense(self) -> bool {
        !matches!(
            self.base(),
            DataType::String | DataType::Resource | DataType::Variant | DataType::Invalid
        )
    }
}

impl fmt::Display for DataType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl From<DataType> for i32 {
    fn from(dt: DataType) -> i32 {
        dt as i32
    }
}

impl TryFrom<i32> for DataType {
    type Error = crate::Status;
    fn try_from(code: i32) -> crate::Result<DataType> {
        DataType::from_i32(code).ok_or_else(|| {
            crate::Status::invalid_argument(format!("Invalid DataType enum: {code}"))
        })
    }
}

/// TensorFlow's `RealNumberTypes()`, in the order TensorFlow lists them in an
/// OpDef's `allowed_values` (increasing code): the spec class `realnumbertype`
/// (alias `realnumerictype`).
pub const REAL_NUMBER_TYPES: &[DataType] = &[
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

/// TensorFlow's `NumberTypes()`: the spec class `numbertype` (alias `numerictype`):
/// the real number types, complex types and the quantized types.
pub const NUMBER_TYPES: &[DataType] = &[
    DataType::Float,
    DataType::Double,
    DataType::Int32,
    DataType::UInt8,
    DataType::Int16,
    DataType::Int8,
    DataType::Complex64,
    DataType::Int64,
    DataType::QInt8,
    DataType::QUInt8,
    DataType::QInt32,
    DataType::BFloat16,
    DataType::QInt16,
    DataType::QUInt16,
    DataType::UInt16,
    DataType::Complex128,
    DataType::Half,
    DataType::UInt32,
    DataType::UInt64,
];

/// TensorFlow's `QuantizedTypes()`: the spec class `quantizedtype`.
pub const QUANTIZED_TYPES: &[DataType] = &[
    DataType::QInt8,
    DataType::QUInt8,
    DataType::QInt32,
    DataType::QInt16,
    DataType::QUInt16,
];

/// The type classes an op spec may name, as TensorFlow's spec parser accepts
/// them: `(class name, its types)`.
pub const TYPE_CLASSES: &[(&str, &[DataType])] = &[
    ("numbertype", NUMBER_TYPES),
    ("numerictype", NUMBER_TYPES),
    ("realnumbertype", REAL_NUMBER_TYPES),
    ("realnumerictype", REAL_NUMBER_TYPES),
    ("quantizedtype", QUANTIZED_TYPES),
];

/// The types of the type class `name` (`numbertype`, ...), if it is one.
pub fn type_class(name: &str) -> Option<&'static [DataType]> {
    TYPE_CLASSES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, types)| *types)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_names_and_refs_round_trip() {
        for &dt in DataType::BASE_TYPES.iter().chain(DataType::REF_TYPES) {
            assert_eq!(DataType::from_i32(dt as i32), Some(dt));
            assert_eq!(DataType::from_proto_name(dt.proto_name()), Some(dt));
            assert_eq!(DataType::from_spec_name(dt.name()), Some(dt));
        }
        for &dt in DataType::BASE_TYPES {
            assert!(!dt.is_ref());
            assert!(dt.to_ref().is_ref());
            assert_eq!(dt.to_ref().base(), dt);
            assert_eq!(dt.to_ref() as i32, dt as i32 + 100);
        }
        assert_eq!(DataType::BASE_TYPES.len(), 33);
        assert_eq!(DataType::from_i32(34), None);
        assert_eq!(DataType::from_i32(100), None);
    }

    #[test]
    fn tensorflow_codes() {
        // A sample of TensorFlow's types.proto numbers.
        let expect = [
            (DataType::Float, 1, "DT_FLOAT"),
            (DataType::String, 7, "DT_STRING"),
            (DataType::Bool, 10, "DT_BOOL"),
            (DataType::BFloat16, 14, "DT_BFLOAT16"),
            (DataType::Complex128, 18, "DT_COMPLEX128"),
            (DataType::Half, 19, "DT_HALF"),
            (DataType::Resource, 20, "DT_RESOURCE"),
            (DataType::Variant, 21, "DT_VARIANT"),
            (DataType::UInt64, 23, "DT_UINT64"),
            (DataType::Float8E4M3FN, 25, "DT_FLOAT8_E4M3FN"),
            (DataType::UInt2, 32, "DT_UINT2"),
            (DataType::FloatRef, 101, "DT_FLOAT_REF"),
            (DataType::UInt64Ref, 123, "DT_UINT64_REF"),
        ];
        for (dt, code, name) in expect {
            assert_eq!(dt as i32, code);
            assert_eq!(dt.proto_name(), name);
        }
    }

    #[test]
    fn spec_aliases() {
        assert_eq!(DataType::from_spec_name("float64"), Some(DataType::Double));
        assert_eq!(DataType::from_spec_name("float16"), Some(DataType::Half));
        assert_eq!(
            DataType::from_spec_name("float32_ref"),
            Some(DataType::FloatRef)
        );
        assert_eq!(DataType::from_spec_name("float_ref_ref"), None);
        assert_eq!(DataType::from_spec_name("DT_FLOAT"), None);
        assert_eq!(DataType::from_spec_name("invalid"), None);
        assert_eq!(DataType::from_spec_name("int"), None);
    }

    #[test]
    fn sizes() {
        assert_eq!(DataType::Float.size(), 4);
        assert_eq!(DataType::Complex128.size(), 16);
        assert_eq!(DataType::Bool.size(), 1);
        assert_eq!(DataType::String.size(), 0);
        assert_eq!(DataType::FloatRef.size(), 0);
    }

    #[test]
    fn type_classes_nest() {
        for dt in REAL_NUMBER_TYPES {
            assert!(NUMBER_TYPES.contains(dt), "{dt}");
            assert!(!dt.is_complex() && !dt.is_quantized());
        }
        for dt in QUANTIZED_TYPES {
            assert!(dt.is_quantized());
        }
        assert_eq!(type_class("numerictype"), Some(NUMBER_TYPES));
        assert_eq!(type_class("realnumberictype"), None);
        // The class lists are in increasing code order, as TensorFlow prints them.
        for class in [REAL_NUMBER_TYPES, NUMBER_TYPES, QUANTIZED_TYPES] {
            assert!(class.windows(2).all(|w| (w[0] as i32) < (w[1] as i32)));
        }
    }
}
