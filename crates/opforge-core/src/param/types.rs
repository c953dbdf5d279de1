//! [`ParamType`] for the Rust types a field can have, and the value
//! constructors the derive's generated code calls for defaults.

use super::{ParamEnum, ParamType};
use crate::attrs::FromAttrValue;
use crate::dtype::DataType;
use crate::proto::attr_value::{ListValue, Value};
use crate::proto::{AttrValue, TensorShapeProto};

macro_rules! via_from_attr_value {
    ($($t:ty),*) => {$(
        impl ParamType for $t {
            const ATTR_TYPE: &'static str = <$t as FromAttrValue>::ATTR_TYPE;
            fn from_attr(value: &AttrValue) -> Option<Self> {
                <$t as FromAttrValue>::from_attr_value(value)
            }
        }
    )*};
}

via_from_attr_value!(
    i64,
    i32,
    f32,
    bool,
    String,
    DataType,
    TensorShapeProto,
    Vec<i64>,
    Vec<i32>,
    Vec<f32>,
    Vec<bool>,
    Vec<String>,
    Vec<DataType>,
    Vec<TensorShapeProto>
);

macro_rules! int_via_i64 {
    ($($t:ty),*) => {$(
        impl ParamType for $t {
            const ATTR_TYPE: &'static str = "int";
            fn from_attr(value: &AttrValue) -> Option<Self> {
                i64::from_attr(value).and_then(|i| <$t>::try_from(i).ok())
            }
        }
    )*};
}

int_via_i64!(i8, i16, isize, u8, u16, u32, u64, usize);

impl ParamType for f64 {
    const ATTR_TYPE: &'static str = "float";
    fn from_attr(value: &AttrValue) -> Option<Self> {
        f32::from_attr(value).map(f64::from)
    }
}

impl ParamType for Vec<f64> {
    const ATTR_TYPE: &'static str = "list(float)";
    fn from_attr(value: &AttrValue) -> Option<Self> {
        Vec::<f32>::from_attr(value).map(|v| v.into_iter().map(f64::from).collect())
    }
}

impl<T: ParamType> ParamType for Option<T> {
    const ATTR_TYPE: &'static str = T::ATTR_TYPE;
    const ENUMERATION: &'static [&'static str] = T::ENUMERATION;
    const OPTIONAL: bool = true;

    fn from_attr(value: &AttrValue) -> Option<Self> {
        T::from_attr(value).map(Some)
    }

    fn absent() -> Option<Self> {
        Some(None)
    }
}

fn value(v: Value) -> AttrValue {
    AttrValue { value: Some(v) }
}

fn list(l: ListValue) -> AttrValue {
    value(Value::List(Box::new(l)))
}

/// An `int` value.
pub fn int(i: i64) -> AttrValue {
    value(Value::I(i))
}

/// A `float` value.
pub fn float(f: f32) -> AttrValue {
    value(Value::F(f))
}

/// A `bool` value.
pub fn bool(b: bool) -> AttrValue {
    value(Value::B(b))
}

/// A `string` value.
pub fn string(s: &str) -> AttrValue {
    value(Value::S(s.as_bytes().to_vec()))
}

/// A `type` value.
pub fn dtype(t: DataType) -> AttrValue {
    value(Value::Type(t as i32))
}

/// A `shape` value from its dims (`-1`: unknown).
pub fn shape(dims: &[i64]) -> AttrValue {
    value(Value::Shape(crate::tensor::dims_proto(dims)))
}

/// A `list(int)` value.
pub fn ints(v: &[i64]) -> AttrValue {
    list(ListValue {
        i: v.to_vec(),
        ..Default::default()
    })
}

/// A `list(float)` value.
pub fn floats(v: &[f32]) -> AttrValue {
    list(ListValue {
        f: v.to_vec(),
        ..Default::default()
    })
}

/// A `list(bool)` value.
pub fn bools(v: &[bool]) -> AttrValue {
    list(ListValue {
        b: v.to_vec(),
        ..Default::default()
    })
}

/// A `list(string)` value.
pub fn strings(v: &[&str]) -> AttrValue {
    list(ListValue {
        s: v.iter().map(|s| s.as_bytes().to_vec()).collect(),
        ..Default::default()
    })
}

/// A `list(type)` value.
pub fn dtypes(v: &[DataType]) -> AttrValue {
    list(ListValue {
        r#type: v.iter().map(|&t| t as i32).collect(),
        ..Default::default()
    })
}

/// The variant of `E` a `string` value names.
pub fn enum_from_attr<E: ParamEnum>(value: &AttrValue) -> Option<E> {
    match &value.value {
        Some(Value::S(s)) => std::str::from_utf8(s).ok().and_then(E::from_name),
        _ => None,
    }
}

/// Fails compilation (in a `const`) when `value` is not in `names`: an enum
/// field's default must name a variant.
pub const fn assert_listed(names: &[&str], value: &str, message: &str) {
    let mut i = 0;
    while i < names.len() {
        if const_eq(names[i].as_bytes(), value.as_bytes()) {
            return;
        }
        i += 1;
    }
    panic!("{}", message);
}

const fn const_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}
