//! Attr values read from the host ([`FromAttrValue`]) and given to it
//! ([`AttrValue`], for gradient calls).

use core::ffi::c_void;

use opforge_abi::{
    OpforgeAttrValue, OpforgeShapeValue, OpforgeStr, OPFORGE_ATTR_BOOL, OPFORGE_ATTR_FLOAT,
    OPFORGE_ATTR_INT, OPFORGE_ATTR_KIND_MASK, OPFORGE_ATTR_LIST, OPFORGE_ATTR_SHAPE,
    OPFORGE_ATTR_STRING, OPFORGE_ATTR_TYPE,
};

use crate::dtype::DataType;
use crate::status::{Result, Status};

/// The name of an attr kind, for messages.
pub(crate) fn kind_name(kind: u32) -> String {
    let base = match kind & OPFORGE_ATTR_KIND_MASK {
        0 => "none",
        1 => "int",
        2 => "float",
        3 => "bool",
        4 => "type",
        5 => "string",
        6 => "shape",
        7 => "tensor",
        8 => "func",
        9 => "placeholder",
        _ => return format!("kind {kind}"),
    };
    if kind & OPFORGE_ATTR_LIST != 0 {
        format!("list({base})")
    } else {
        base.to_string()
    }
}

/// A Rust value an attr converts to (`get_attr::<i64>("preserve_index")`).
pub trait FromAttrValue: Sized {
    /// The attr kind expected (an `OPFORGE_ATTR_*`, maybe `| LIST`).
    const KIND: u32;
    /// Converts a value of kind [`KIND`](Self::KIND).
    ///
    /// # Safety
    ///
    /// `value` must be a value the host filled, whose pointers are valid
    /// (rule R7).
    unsafe fn from_attr_value(value: &OpforgeAttrValue) -> Result<Self>;
}

/// Reads an attr filled by the host as `T`, checking its kind.
///
/// # Safety
///
/// As [`FromAttrValue::from_attr_value`].
pub(crate) unsafe fn convert<T: FromAttrValue>(name: &str, value: &OpforgeAttrValue) -> Result<T> {
    if value.kind != T::KIND {
        return Err(Status::invalid_argument(format!(
            "Attr {name} has type {}, not {}",
            kind_name(value.kind),
            kind_name(T::KIND)
        )));
    }
    // SAFETY: forwarded from the caller.
    unsafe { T::from_attr_value(value) }
}

/// The elements of a list attr.
///
/// # Safety
///
/// `value.list` must point at `list_len` elements of `T` (rule R7).
unsafe fn list<T: Copy>(value: &OpforgeAttrValue) -> &[T] {
    if value.list_len == 0 || value.list.is_null() {
        return &[];
    }
    // SAFETY: the caller guarantees the list's elements.
    unsafe { core::slice::from_raw_parts(value.list.cast::<T>(), value.list_len) }
}

fn bytes_to_string(s: OpforgeStr) -> String {
    // SAFETY: a string of a host-filled attr value (R7).
    String::from_utf8_lossy(unsafe { s.as_bytes() }).into_owned()
}

macro_rules! scalar {
    ($t:ty, $kind:expr, |$v:ident| $e:expr) => {
        impl FromAttrValue for $t {
            const KIND: u32 = $kind;
            unsafe fn from_attr_value($v: &OpforgeAttrValue) -> Result<Self> {
                Ok($e)
            }
        }
    };
}

scalar!(i64, OPFORGE_ATTR_INT, |v| v.i);
scalar!(f32, OPFORGE_ATTR_FLOAT, |v| v.f);
scalar!(bool, OPFORGE_ATTR_BOOL, |v| v.b != 0);
scalar!(DataType, OPFORGE_ATTR_TYPE, |v| DataType(v.r#type));
scalar!(String, OPFORGE_ATTR_STRING, |v| bytes_to_string(v.s));

impl FromAttrValue for i32 {
    const KIND: u32 = OPFORGE_ATTR_INT;
    unsafe fn from_attr_value(v: &OpforgeAttrValue) -> Result<Self> {
        i32::try_from(v.i).map_err(|_| {
            Status::invalid_argument(format!("Attr value {} does not fit in int32", v.i))
        })
    }
}

macro_rules! lists {
    ($t:ty, $elem:ty, $kind:expr, |$x:ident| $e:expr) => {
        impl FromAttrValue for Vec<$t> {
            const KIND: u32 = $kind | OPFORGE_ATTR_LIST;
            unsafe fn from_attr_value(v: &OpforgeAttrValue) -> Result<Self> {
                // SAFETY: a host-filled list of this kind holds `$elem`s.
                Ok(unsafe { list::<$elem>(v) }.iter().map(|&$x| $e).collect())
            }
        }
    };
}

lists!(i64, i64, OPFORGE_ATTR_INT, |x| x);
lists!(f32, f32, OPFORGE_ATTR_FLOAT, |x| x);
lists!(bool, u8, OPFORGE_ATTR_BOOL, |x| x != 0);
lists!(DataType, i32, OPFORGE_ATTR_TYPE, |x| DataType(x));
lists!(
    String,
    OpforgeStr,
    OPFORGE_ATTR_STRING,
    |x| bytes_to_string(x)
);

/// A `shape` attr: `None` for unknown rank, `-1` for an unknown dim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShapeAttr(pub Option<Vec<i64>>);

impl FromAttrValue for ShapeAttr {
    const KIND: u32 = OPFORGE_ATTR_SHAPE;
    unsafe fn from_attr_value(v: &OpforgeAttrValue) -> Result<Self> {
        if v.shape.is_null() {
            return Err(Status::invalid_argument("a shape attr without a shape"));
        }
        // SAFETY: a host-filled shape value (R7), prefix-read (R1).
        let s = unsafe { <OpforgeShapeValue as opforge_abi::Versioned>::read_from(v.shape) }
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
        if s.rank < 0 {
            return Ok(ShapeAttr(None));
        }
        let dims = if s.rank == 0 || s.dims.is_null() {
            Vec::new()
        } else {
            // SAFETY: `rank` dims (header).
            unsafe { core::slice::from_raw_parts(s.dims, s.rank as usize) }.to_vec()
        };
        Ok(ShapeAttr(Some(dims)))
    }
}

/// An attr value the plugin gives the host (attrs of a gradient's op
/// calls).
#[derive(Clone, Debug, PartialEq)]
pub enum AttrValue {
    /// `int`.
    Int(i64),
    /// `float`.
    Float(f32),
    /// `bool`.
    Bool(bool),
    /// `type`.
    Type(DataType),
    /// `string` (bytes).
    Str(String),
    /// `list(int)`.
    IntList(Vec<i64>),
    /// `list(type)`.
    TypeList(Vec<DataType>),
}

impl From<i64> for AttrValue {
    fn from(v: i64) -> Self {
        AttrValue::Int(v)
    }
}
impl From<f32> for AttrValue {
    fn from(v: f32) -> Self {
        AttrValue::Float(v)
    }
}
impl From<bool> for AttrValue {
    fn from(v: bool) -> Self {
        AttrValue::Bool(v)
    }
}
impl From<DataType> for AttrValue {
    fn from(v: DataType) -> Self {
        AttrValue::Type(v)
    }
}
impl From<&str> for AttrValue {
    fn from(v: &str) -> Self {
        AttrValue::Str(v.to_string())
    }
}

impl AttrValue {
    /// The ABI record of this value; it borrows from `self`.
    pub(crate) fn to_abi(&self) -> OpforgeAttrValue {
        let mut v = OpforgeAttrValue::new();
        match self {
            AttrValue::Int(i) => {
                v.kind = OPFORGE_ATTR_INT;
                v.i = *i;
            }
            AttrValue::Float(f) => {
                v.kind = OPFORGE_ATTR_FLOAT;
                v.f = *f;
            }
            AttrValue::Bool(b) => {
                v.kind = OPFORGE_ATTR_BOOL;
                v.b = u8::from(*b);
            }
            AttrValue::Type(t) => {
                v.kind = OPFORGE_ATTR_TYPE;
                v.r#type = t.0;
            }
            AttrValue::Str(s) => {
                v.kind = OPFORGE_ATTR_STRING;
                v.s = OpforgeStr::from_text(s);
            }
            AttrValue::IntList(l) => {
                v.kind = OPFORGE_ATTR_INT | OPFORGE_ATTR_LIST;
                v.list = l.as_ptr().cast::<c_void>();
                v.list_len = l.len();
            }
            AttrValue::TypeList(l) => {
                v.kind = OPFORGE_ATTR_TYPE | OPFORGE_ATTR_LIST;
                v.list = l.as_ptr().cast::<c_void>();
                v.list_len = l.len();
            }
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn convert_checks_the_kind() {
        let v = AttrValue::Int(4).to_abi();
        // SAFETY: made from a live AttrValue.
        assert_eq!(unsafe { convert::<i64>("n", &v) }, Ok(4));
        // SAFETY: as above.
        let e = unsafe { convert::<f32>("n", &v) }.unwrap_err();
        assert_eq!(e.message, "Attr n has type int, not float");
        let l = AttrValue::IntList(vec![1, 2]);
        let v = l.to_abi();
        // SAFETY: as above.
        assert_eq!(unsafe { convert::<Vec<i64>>("l", &v) }, Ok(vec![1, 2]));
        assert_eq!(
            kind_name(OPFORGE_ATTR_LIST | OPFORGE_ATTR_TYPE),
            "list(type)"
        );
    }
}
