//! Attr values read from the host ([`FromAttrValue`]) and given to it
//! ([`AttrValue`]: the attrs of gradient calls and of declarative
//! gradients' nodes).

use core::ffi::c_void;

use core::marker::PhantomData;
use core::mem::size_of_val;

use opforge_abi::{
    OpforgeAttrValue, OpforgeCode, OpforgeFuncValue, OpforgeNamedAttr, OpforgeShapeValue,
    OpforgeStatus, OpforgeStr, OpforgeTensor, OPFORGE_ATTR_BOOL, OPFORGE_ATTR_FLOAT,
    OPFORGE_ATTR_FUNC, OPFORGE_ATTR_INT, OPFORGE_ATTR_KIND_MASK, OPFORGE_ATTR_LIST,
    OPFORGE_ATTR_PLACEHOLDER, OPFORGE_ATTR_SHAPE, OPFORGE_ATTR_STRING, OPFORGE_ATTR_TENSOR,
    OPFORGE_ATTR_TYPE, OPFORGE_TENSOR_CONTIGUOUS, OPFORGE_TENSOR_HOST_MEMORY, OPFORGE_UNKNOWN_RANK,
};

use crate::dtype::{DataType, Element};
use crate::host::Host;
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

/// Reads attr `name` as `T` through a host slot: `f` calls the slot with
/// the name and an out-struct (its struct_size set) for the host to fill.
pub(crate) fn read_attr<T: FromAttrValue>(
    host: &Host,
    name: &str,
    status: *mut OpforgeStatus,
    f: impl FnOnce(OpforgeStr, *mut OpforgeAttrValue) -> OpforgeCode,
) -> Result<T> {
    let mut value = OpforgeAttrValue::new();
    let code = f(OpforgeStr::from_text(name), &mut value);
    host.check(code, status)?;
    // SAFETY: the host filled `value`; what it points to lives at least as
    // long as this call (R7), and `convert` copies it out.
    unsafe { convert(name, &value) }
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

impl TensorAttr {
    /// A tensor of `values` (row-major) with `dims`; `InvalidArgument`
    /// unless the dims are non-negative and hold exactly that many values.
    ///
    /// ```
    /// use opforge_plugin::{DataType, TensorAttr};
    /// let t = TensorAttr::new(&[1.5f32, -2.0], &[2]).unwrap();
    /// assert_eq!(t.dtype, DataType::Float);
    /// assert_eq!(t.values::<f32>().unwrap(), [1.5, -2.0]);
    /// assert!(TensorAttr::new(&[1i32, 2, 3], &[2]).is_err());
    /// ```
    pub fn new<T: Element>(values: &[T], dims: &[i64]) -> Result<TensorAttr> {
        check_count(values.len(), dims)?;
        Ok(TensorAttr {
            dtype: T::DTYPE,
            dims: dims.to_vec(),
            bytes: bytes_of(values),
            strings: Vec::new(),
        })
    }

    /// A scalar tensor of `value` (what TensorFlow's `Const` holds for a
    /// number).
    pub fn scalar<T: Element>(value: T) -> TensorAttr {
        TensorAttr {
            dtype: T::DTYPE,
            dims: Vec::new(),
            bytes: bytes_of(&[value]),
            strings: Vec::new(),
        }
    }

    /// A `DT_STRING` tensor of `elements` (row-major) with `dims`.
    pub fn from_strings(elements: Vec<Vec<u8>>, dims: &[i64]) -> Result<TensorAttr> {
        check_count(elements.len(), dims)?;
        Ok(TensorAttr {
            dtype: DataType::String,
            dims: dims.to_vec(),
            bytes: Vec::new(),
            strings: elements,
        })
    }

    /// The elements as `T`, which must be the dtype's type.
    pub fn values<T: Element>(&self) -> Result<Vec<T>> {
        if self.dtype != T::DTYPE {
            return Err(Status::invalid_argument(format!(
                "a tensor attr of dtype {} read as {}",
                self.dtype,
                T::DTYPE
            )));
        }
        let size = core::mem::size_of::<T>();
        if self.bytes.len() % size != 0 {
            return Err(Status::invalid_argument(format!(
                "a {} tensor attr of {} bytes",
                self.dtype,
                self.bytes.len()
            )));
        }
        Ok(self
            .bytes
            .chunks_exact(size)
            // SAFETY: `size` bytes, read unaligned; every bit pattern is a
            // valid `T` (Element's contract).
            .map(|b| unsafe { b.as_ptr().cast::<T>().read_unaligned() })
            .collect())
    }

    /// The number of elements the dims hold.
    fn num_elements(&self) -> i64 {
        self.dims.iter().product()
    }
}

/// The bytes of `values` (native byte order).
fn bytes_of<T: Element>(values: &[T]) -> Vec<u8> {
    // SAFETY: an Element is a primitive number (or a u16 newtype) with no
    // padding (Element's contract: the dtype's size, every bit pattern
    // valid), so its `size_of_val` bytes are initialised; the byte slice
    // borrows `values` only for this copy.
    unsafe { core::slice::from_raw_parts(values.as_ptr().cast::<u8>(), size_of_val(values)) }
        .to_vec()
}

/// `n` values fit `dims` exactly (and no dim is negative).
fn check_count(n: usize, dims: &[i64]) -> Result<()> {
    let count = dims.iter().try_fold(
        1i64,
        |acc, &d| if d < 0 { None } else { acc.checked_mul(d) },
    );
    if count != i64::try_from(n).ok() {
        return Err(Status::invalid_argument(format!(
            "a tensor of {n} values cannot have dims {dims:?} (give non-negative dims whose \
             product is the number of values)"
        )));
    }
    Ok(())
}

/// An attr value the plugin gives the host: the attrs of a gradient's op
/// calls ([`GradientContext::call`](crate::GradientContext::call)) and of
/// declarative gradients' nodes ([`NodeAttr::Value`](crate::NodeAttr)), e.g.
/// the `value` and `dtype` of a `Const` node.
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
    /// `shape`.
    Shape(ShapeAttr),
    /// `tensor` ([`TensorAttr::new`], [`TensorAttr::scalar`]).
    Tensor(TensorAttr),
    /// `list(int)`.
    IntList(Vec<i64>),
    /// `list(float)`.
    FloatList(Vec<f32>),
    /// `list(bool)`.
    BoolList(Vec<bool>),
    /// `list(type)`.
    TypeList(Vec<DataType>),
    /// `list(string)`.
    StrList(Vec<String>),
    /// `list(shape)`.
    ShapeList(Vec<ShapeAttr>),
}

macro_rules! attr_from {
    ($($t:ty => $v:ident),* $(,)?) => {
        $(
            impl From<$t> for AttrValue {
                fn from(v: $t) -> Self {
                    AttrValue::$v(v)
                }
            }
        )*
    };
}

attr_from! {
    i64 => Int, f32 => Float, bool => Bool, DataType => Type, String => Str,
    ShapeAttr => Shape, TensorAttr => Tensor, Vec<i64> => IntList, Vec<f32> => FloatList,
    Vec<bool> => BoolList, Vec<DataType> => TypeList, Vec<String> => StrList,
    Vec<ShapeAttr> => ShapeList,
}

impl From<&str> for AttrValue {
    fn from(v: &str) -> Self {
        AttrValue::Str(v.to_string())
    }
}

/// The ABI record of an [`AttrValue`] with what it points to: the record's
/// pointers reach into the value (`'a`) and into this struct's heap
/// storage, which stays put when the struct moves.
pub(crate) struct AbiAttr<'a> {
    value: OpforgeAttrValue,
    /// `list(bool)` as the ABI's `uint8_t`s; string pointers of
    /// `list(string)` or of a string tensor's elements.
    _bytes: Vec<u8>,
    _strs: Vec<OpforgeStr>,
    /// The shape of `shape`, or the elements of `list(shape)`.
    _shapes: Vec<OpforgeShapeValue>,
    /// The view of `tensor`.
    _tensor: Option<Box<OpforgeTensor>>,
    _borrow: PhantomData<&'a AttrValue>,
}

impl<'a> AbiAttr<'a> {
    /// A record of `value` alone (no storage of its own).
    fn bare(value: OpforgeAttrValue) -> AbiAttr<'a> {
        AbiAttr {
            value,
            _bytes: Vec::new(),
            _strs: Vec::new(),
            _shapes: Vec::new(),
            _tensor: None,
            _borrow: PhantomData,
        }
    }

    /// A reference to the forward op's attr `name` (TensorFlow's `$T`),
    /// for the nodes of declarative gradients.
    pub(crate) fn placeholder(name: &'a str) -> AbiAttr<'a> {
        let mut v = OpforgeAttrValue::new();
        v.kind = OPFORGE_ATTR_PLACEHOLDER;
        v.s = OpforgeStr::from_text(name);
        AbiAttr::bare(v)
    }

    /// The record, valid while `self` lives.
    pub(crate) fn get(&self) -> &OpforgeAttrValue {
        &self.value
    }
}

/// The ABI form of a shape; it borrows the dims.
fn shape_abi(s: &ShapeAttr) -> OpforgeShapeValue {
    let mut v = OpforgeShapeValue::new();
    match &s.0 {
        None => v.rank = OPFORGE_UNKNOWN_RANK,
        Some(dims) => {
            // More dims than an i32 can count is no shape the host takes:
            // it sees rank -1 (unknown) for such a value.
            v.rank = i32::try_from(dims.len()).unwrap_or(OPFORGE_UNKNOWN_RANK);
            v.dims = if dims.is_empty() {
                core::ptr::null()
            } else {
                dims.as_ptr()
            };
        }
    }
    v
}

impl AttrValue {
    /// The ABI record of this value (with its storage); it borrows from
    /// `self`.
    pub(crate) fn to_abi(&self) -> AbiAttr<'_> {
        let mut a = AbiAttr::bare(OpforgeAttrValue::new());
        let v = &mut a.value;
        let list = |v: &mut OpforgeAttrValue, kind: u32, p: *const c_void, n: usize| {
            v.kind = kind | OPFORGE_ATTR_LIST;
            v.list = p;
            v.list_len = n;
        };
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
            AttrValue::Shape(s) => {
                a._shapes.push(shape_abi(s));
                v.kind = OPFORGE_ATTR_SHAPE;
                v.shape = a._shapes.as_ptr();
            }
            AttrValue::Tensor(t) => {
                let mut view = OpforgeTensor::new();
                view.dtype = t.dtype.0;
                // As for shapes: a rank beyond u32 is refused by the host
                // (its dims would not match the elements).
                view.rank = u32::try_from(t.dims.len()).unwrap_or(u32::MAX);
                view.dims = t.dims.as_ptr();
                view.num_elements = t.num_elements();
                view.flags = OPFORGE_TENSOR_CONTIGUOUS | OPFORGE_TENSOR_HOST_MEMORY;
                if t.dtype == DataType::String {
                    a._strs = t
                        .strings
                        .iter()
                        .map(|s| OpforgeStr::from_bytes(s))
                        .collect();
                    view.data = a._strs.as_ptr() as *mut c_void;
                    view.byte_len = size_of_val(a._strs.as_slice()) as u64;
                } else {
                    // Read-only: the view is not WRITABLE.
                    view.data = t.bytes.as_ptr() as *mut c_void;
                    view.byte_len = t.bytes.len() as u64;
                }
                let view = Box::new(view);
                v.kind = OPFORGE_ATTR_TENSOR;
                v.tensor = &*view;
                a._tensor = Some(view);
            }
            AttrValue::IntList(l) => list(v, OPFORGE_ATTR_INT, l.as_ptr().cast(), l.len()),
            AttrValue::FloatList(l) => list(v, OPFORGE_ATTR_FLOAT, l.as_ptr().cast(), l.len()),
            AttrValue::BoolList(l) => {
                a._bytes = l.iter().map(|&b| u8::from(b)).collect();
                list(v, OPFORGE_ATTR_BOOL, a._bytes.as_ptr().cast(), l.len());
            }
            // DataType is a transparent i32, OpforgeDType's type.
            AttrValue::TypeList(l) => list(v, OPFORGE_ATTR_TYPE, l.as_ptr().cast(), l.len()),
            AttrValue::StrList(l) => {
                a._strs = l.iter().map(|s| OpforgeStr::from_text(s)).collect();
                list(v, OPFORGE_ATTR_STRING, a._strs.as_ptr().cast(), l.len());
            }
            AttrValue::ShapeList(l) => {
                a._shapes = l.iter().map(shape_abi).collect();
                list(v, OPFORGE_ATTR_SHAPE, a._shapes.as_ptr().cast(), l.len());
            }
        }
        a
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn convert_checks_the_kind() {
        let v = AttrValue::Int(4).to_abi();
        // SAFETY: made from a live AttrValue.
        assert_eq!(unsafe { convert::<i64>("n", v.get()) }, Ok(4));
        // SAFETY: as above.
        let e = unsafe { convert::<f32>("n", v.get()) }.unwrap_err();
        assert_eq!(e.message, "Attr n has type int, not float");
        let l = AttrValue::IntList(vec![1, 2]);
        let v = l.to_abi();
        // SAFETY: as above.
        assert_eq!(unsafe { convert::<Vec<i64>>("l", v.get()) }, Ok(vec![1, 2]));
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
        na.value = inner.get();
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

    /// Reads `value`'s ABI record back as `T` (the host side's reading,
    /// implemented apart from the writing).
    fn round_trip<T: FromAttrValue>(value: &AttrValue) -> Result<T> {
        let abi = value.to_abi();
        // SAFETY: the record and its storage live in `abi`, borrowing
        // `value`, both alive for the call.
        unsafe { convert::<T>("a", abi.get()) }
    }

    #[test]
    fn every_attr_value_round_trips_through_its_abi_record() {
        let shape = ShapeAttr(Some(vec![2, -1, 3]));
        let scalar_shape = ShapeAttr(Some(vec![]));
        let unknown = ShapeAttr(None);
        assert_eq!(
            round_trip::<ShapeAttr>(&shape.clone().into()),
            Ok(shape.clone())
        );
        assert_eq!(
            round_trip::<ShapeAttr>(&AttrValue::Shape(scalar_shape.clone())),
            Ok(scalar_shape.clone())
        );
        assert_eq!(
            round_trip::<ShapeAttr>(&AttrValue::Shape(unknown.clone())),
            Ok(unknown.clone())
        );
        let shapes = vec![shape, unknown, scalar_shape];
        assert_eq!(
            round_trip::<Vec<ShapeAttr>>(&AttrValue::ShapeList(shapes.clone())),
            Ok(shapes)
        );
        assert_eq!(
            round_trip::<Vec<f32>>(&vec![1.5f32, -0.25].into()),
            Ok(vec![1.5, -0.25])
        );
        assert_eq!(
            round_trip::<Vec<bool>>(&vec![true, false, true].into()),
            Ok(vec![true, false, true])
        );
        assert_eq!(
            round_trip::<Vec<String>>(&vec!["a".to_string(), String::new()].into()),
            Ok(vec!["a".to_string(), String::new()])
        );
        assert_eq!(
            round_trip::<Vec<DataType>>(&vec![DataType::Half, DataType::Int64].into()),
            Ok(vec![DataType::Half, DataType::Int64])
        );
        assert_eq!(
            round_trip::<Vec<f32>>(&AttrValue::FloatList(vec![])),
            Ok(vec![])
        );

        let t = TensorAttr::new(&[1.5f64, -2.0, 0.25, 8.0], &[2, 2]).unwrap();
        assert_eq!(round_trip::<TensorAttr>(&t.clone().into()), Ok(t.clone()));
        assert_eq!(t.values::<f64>(), Ok(vec![1.5, -2.0, 0.25, 8.0]));
        let s = TensorAttr::scalar(-7i32);
        assert_eq!(s.dims, [] as [i64; 0]);
        assert_eq!(round_trip::<TensorAttr>(&s.clone().into()), Ok(s));
        let e = TensorAttr::new(&[0u8; 0], &[]).unwrap_err();
        assert!(e.message.contains("cannot have dims []"), "{}", e.message);
        assert!(TensorAttr::new(&[1f32, 2.0], &[-1, -2]).is_err());
        let strs = TensorAttr::from_strings(vec![b"x".to_vec(), b"".to_vec()], &[2]).unwrap();
        assert_eq!(round_trip::<TensorAttr>(&strs.clone().into()), Ok(strs));
        // A value read as another kind names both.
        let e = round_trip::<ShapeAttr>(&AttrValue::FloatList(vec![1.0])).unwrap_err();
        assert_eq!(e.message, "Attr a has type list(float), not shape");
        let e = t.values::<f32>().unwrap_err();
        assert_eq!(e.message, "a tensor attr of dtype double read as float");
    }
}
