//! Attr values read from the host ([`FromAttrValue`]) and given to it
//! ([`AttrValue`], for gradient calls).

use core::ffi::c_void;

use opforge_abi::{
    OpforgeAttrValue, OpforgeFuncValue, OpforgeNamedAttr, OpforgeShapeValue, OpforgeStr,
    OpforgeTensor, OPFORGE_ATTR_BOOL, OPFORGE_ATTR_FLOAT, OPFORGE_ATTR_FUNC, OPFORGE_ATTR_INT,
    OPFORGE_ATTR_KIND_MASK, OPFORGE_ATTR_LIST, OPFORGE_ATTR_SHAPE, OPFORGE_ATTR_STRING,
    OPFORGE_ATTR_TENSOR, OPFORGE_ATTR_TYPE, OPFORGE_TENSOR_CONTIGUOUS,
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
        // SAFETY: a host-filled value's shape (caller).
        unsafe { shape_value(v.shape) }
    }
}

/// Reads a shape value the host filled.
///
/// # Safety
///
/// `p` must be a host-filled shape value (R7).
unsafe fn shape_value(p: *const OpforgeShapeValue) -> Result<ShapeAttr> {
    if p.is_null() {
        return Err(Status::invalid_argument("a shape attr without a shape"));
    }
    // SAFETY: the caller's guarantee; a prefix read (R1).
    let s = unsafe { <OpforgeShapeValue as opforge_abi::Versioned>::read_from(p) }
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

impl FromAttrValue for Vec<ShapeAttr> {
    const KIND: u32 = OPFORGE_ATTR_SHAPE | OPFORGE_ATTR_LIST;
    unsafe fn from_attr_value(v: &OpforgeAttrValue) -> Result<Self> {
        if v.list_len == 0 || v.list.is_null() {
            return Ok(Vec::new());
        }
        // SAFETY: a host-filled list of shape values, stepped by the first
        // element's struct_size (R1, OPFORGE_ARRAY_AT).
        let stride = unsafe { *(v.list as *const usize) };
        (0..v.list_len)
            .map(|i| {
                let p = (v.list as *const u8).wrapping_add(i * stride) as *const OpforgeShapeValue;
                // SAFETY: element `i` of the host's array (R1, R7).
                unsafe { shape_value(p) }
            })
            .collect()
    }
}

/// A `tensor` attr, copied: dtype, dims, and the elements' bytes
/// (row-major; for `DT_STRING`, `strings` instead).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorAttr {
    /// The dtype.
    pub dtype: DataType,
    /// The dims.
    pub dims: Vec<i64>,
    /// The elements' bytes (not `DT_STRING`).
    pub bytes: Vec<u8>,
    /// The elements (`DT_STRING`).
    pub strings: Vec<Vec<u8>>,
}

impl FromAttrValue for TensorAttr {
    const KIND: u32 = OPFORGE_ATTR_TENSOR;
    unsafe fn from_attr_value(v: &OpforgeAttrValue) -> Result<Self> {
        if v.tensor.is_null() {
            return Err(Status::invalid_argument("a tensor attr without a tensor"));
        }
        // SAFETY: a host-filled tensor view (R7), prefix-read (R1).
        let t = unsafe { <OpforgeTensor as opforge_abi::Versioned>::read_from(v.tensor) }
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
        let dims = if t.rank == 0 || t.dims.is_null() {
            Vec::new()
        } else {
            // SAFETY: `rank` dims (header).
            unsafe { core::slice::from_raw_parts(t.dims, t.rank as usize) }.to_vec()
        };
        if t.flags & OPFORGE_TENSOR_CONTIGUOUS == 0 {
            return Err(Status::unimplemented("a non-contiguous tensor attr"));
        }
        let dtype = DataType(t.dtype);
        let n = usize::try_from(t.num_elements).unwrap_or(0);
        let mut out = TensorAttr {
            dtype,
            dims,
            bytes: Vec::new(),
            strings: Vec::new(),
        };
        if n == 0 || t.data.is_null() {
            return Ok(out);
        }
        if dtype == DataType::String {
            // SAFETY: a DT_STRING view holds `num_elements` OpforgeStr
            // (header), each living as the view.
            let strs = unsafe { core::slice::from_raw_parts(t.data as *const OpforgeStr, n) };
            // SAFETY: as above.
            out.strings = strs
                .iter()
                .map(|s| unsafe { s.as_bytes() }.to_vec())
                .collect();
        } else {
            // SAFETY: `byte_len` bytes of the view's data (header).
            out.bytes =
                unsafe { core::slice::from_raw_parts(t.data as *const u8, t.byte_len as usize) }
                    .to_vec();
        }
        Ok(out)
    }
}

/// A `func` attr (TensorFlow's `NameAttrList`): the function's name and the
/// names of the attrs bound to it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FuncAttr {
    /// The function's name.
    pub name: String,
    /// The names of its bound attrs.
    pub attr_names: Vec<String>,
}

impl FromAttrValue for FuncAttr {
    const KIND: u32 = OPFORGE_ATTR_FUNC;
    unsafe fn from_attr_value(v: &OpforgeAttrValue) -> Result<Self> {
        if v.func.is_null() {
            return Err(Status::invalid_argument("a func attr without a function"));
        }
        // SAFETY: a host-filled func value (R7), prefix-read (R1).
        let f = unsafe { <OpforgeFuncValue as opforge_abi::Versioned>::read_from(v.func) }
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
        let mut attr_names = Vec::new();
        if f.num_attrs > 0 && !f.attrs.is_null() {
            // SAFETY: the first element carries the stride (R1).
            let stride = unsafe { (*f.attrs).struct_size };
            for i in 0..f.num_attrs {
                let p = (f.attrs as *const u8).wrapping_add(i * stride) as *const OpforgeNamedAttr;
                // SAFETY: element `i` of the host's array (R1, R7).
                let a = unsafe { <OpforgeNamedAttr as opforge_abi::Versioned>::read_from(p) }
                    .map_err(|e| Status::invalid_argument(e.to_string()))?;
                attr_names.push(bytes_to_string(a.name));
            }
        }
        Ok(FuncAttr {
            name: bytes_to_string(f.name),
            attr_names,
        })
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

    #[test]
    fn shapes_tensors_and_funcs() {
        let dims = [2i64, -1];
        let mut sv = OpforgeShapeValue::new();
        sv.rank = 2;
        sv.dims = dims.as_ptr();
        let unknown = OpforgeShapeValue {
            rank: -1,
            ..OpforgeShapeValue::new()
        };
        let list = [sv, unknown];
        let mut v = OpforgeAttrValue::new();
        v.kind = OPFORGE_ATTR_SHAPE | OPFORGE_ATTR_LIST;
        v.list = list.as_ptr().cast();
        v.list_len = 2;
        // SAFETY: `v` points at live values.
        let shapes = unsafe { convert::<Vec<ShapeAttr>>("s", &v) }.unwrap();
        assert_eq!(shapes, [ShapeAttr(Some(vec![2, -1])), ShapeAttr(None)]);

        let data = [1i32, 2, 3];
        let tdims = [3i64];
        let mut t = OpforgeTensor::new();
        t.dtype = DataType::Int32.0;
        t.rank = 1;
        t.dims = tdims.as_ptr();
        t.data = data.as_ptr() as *mut c_void;
        t.byte_len = 12;
        t.num_elements = 3;
        t.flags = OPFORGE_TENSOR_CONTIGUOUS;
        let mut v = OpforgeAttrValue::new();
        v.kind = OPFORGE_ATTR_TENSOR;
        v.tensor = &t;
        // SAFETY: `v` points at live values.
        let ta = unsafe { convert::<TensorAttr>("t", &v) }.unwrap();
        assert_eq!(
            (ta.dtype, ta.dims.as_slice()),
            (DataType::Int32, &[3i64][..])
        );
        assert_eq!(ta.bytes, [1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0]);

        let inner = AttrValue::Int(1).to_abi();
        let mut na = OpforgeNamedAttr::new();
        na.name = OpforgeStr::from_text("k");
        na.value = &inner;
        let mut f = OpforgeFuncValue::new();
        f.name = OpforgeStr::from_text("MyFn");
        f.attrs = &na;
        f.num_attrs = 1;
        let mut v = OpforgeAttrValue::new();
        v.kind = OPFORGE_ATTR_FUNC;
        v.func = &f;
        // SAFETY: `v` points at live values.
        let fa = unsafe { convert::<FuncAttr>("f", &v) }.unwrap();
        assert_eq!(fa.name, "MyFn");
        assert_eq!(fa.attr_names, ["k"]);
    }
}
