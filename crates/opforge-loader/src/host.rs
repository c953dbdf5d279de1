//! What every host function shares: statuses, reading plugin strings and
//! arrays, panic guards (R10: nothing unwinds into plugin frames), the
//! arena that keeps values lent to the plugin alive, and attr values.

use opforge_abi::*;
use opforge_core::proto::attr_value::Value as AV;
use opforge_core::proto::{AttrValue, TensorShapeProto};
use opforge_core::{Code, Result, Status, TensorShape};
use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Mutex;

/// What an `OpforgeStatus*` points to.
#[derive(Debug, Default)]
pub(crate) struct HostStatus {
    pub(crate) code: OpforgeCode,
    pub(crate) message: String,
    pub(crate) flags: u32,
}

impl HostStatus {
    pub(crate) fn as_ptr(&mut self) -> *mut OpforgeStatus {
        (self as *mut HostStatus).cast()
    }

    /// Writes `e` into the status behind `status` (if not NULL) and returns its code.
    ///
    /// # Safety
    /// `status` is NULL or a status the host handed out (R7).
    pub(crate) unsafe fn report(status: *mut OpforgeStatus, e: &Status) -> OpforgeCode {
        let code = e.code() as OpforgeCode;
        if !status.is_null() {
            // SAFETY: the caller guarantees a non-null `status` is a live
            // HostStatus the host created (statuses are only made by the host).
            let s = unsafe { &mut *status.cast::<HostStatus>() };
            s.code = code;
            s.message = e.message().to_string();
        }
        code
    }
}

/// A `Status` for a plugin callback that returned `code`, with the message
/// from `status`, naming `what` (e.g. "the compute of op 'ZeroOut'") and the
/// library (R8).
pub(crate) fn callback_error(
    library: &str,
    what: &str,
    code: OpforgeCode,
    status: &HostStatus,
) -> Status {
    let (canonical, unknown) = match Code::from_i32(code) {
        Some(Code::Ok) | None => (Code::Unknown, true),
        Some(c) => (c, false),
    };
    let mut msg = if status.message.is_empty() {
        format!("{what} failed with no message")
    } else {
        format!("{what} failed: {}", status.message)
    };
    if unknown {
        // R3: the integer the callback returned (its status may hold
        // another code, or none).
        msg.push_str(&format!(" (it returned the unknown code {code})"));
    }
    if status.flags & OPFORGE_STATUS_PANICKED != 0 {
        msg.push_str(" (the library caught a panic or exception)");
    }
    msg.push_str(&format!(" [library {library}]"));
    Status::new(canonical, msg)
}

/// Runs a host function body, catching panics (R10): a panic becomes
/// `on_panic`'s value.
pub(crate) fn guard<R>(on_panic: R, f: impl FnOnce() -> R) -> R {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(on_panic)
}

/// Runs a fallible host function body: an error is written to `status` and
/// its code returned; a panic is INTERNAL.
///
/// # Safety
/// `status` is NULL or a live host status.
#[inline]
pub(crate) unsafe fn guard_status(
    status: *mut OpforgeStatus,
    f: impl FnOnce() -> Result<()>,
) -> OpforgeCode {
    let r = catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|_| {
        Err(Status::internal(
            "an opforge host function panicked (a bug in opforge); the call failed and the \
             process goes on",
        ))
    });
    match r {
        Ok(()) => OPFORGE_OK,
        // SAFETY: forwarded from the caller.
        Err(e) => unsafe { HostStatus::report(status, &e) },
    }
}

/// The UTF-8 text of a plugin string (R5).
///
/// # Safety
/// `s.ptr` is NULL or points to `s.len` readable bytes that live for `'a`.
pub(crate) unsafe fn text<'a>(s: OpforgeStr, what: &str) -> Result<&'a str> {
    // SAFETY: forwarded.
    let bytes = unsafe { bytes(s, what)? };
    std::str::from_utf8(bytes)
        .map_err(|e| Status::invalid_argument(format!("{what} is not UTF-8 ({e})")))
}

/// The bytes of a plugin string.
///
/// # Safety
/// As [`text`].
pub(crate) unsafe fn bytes<'a>(s: OpforgeStr, what: &str) -> Result<&'a [u8]> {
    if s.len == 0 {
        return Ok(&[]);
    }
    if s.ptr.is_null() {
        return Err(Status::invalid_argument(format!(
            "{what}: a string of {} bytes with a NULL pointer",
            s.len
        )));
    }
    // SAFETY: non-null and `len` bytes readable (caller).
    Ok(unsafe { std::slice::from_raw_parts(s.ptr.cast::<u8>(), s.len) })
}

/// A plugin array of plain values (not versioned structs).
///
/// # Safety
/// `ptr` is NULL or points to `len` valid, aligned `T`s living for `'a`.
#[inline]
pub(crate) unsafe fn slice<'a, T>(ptr: *const T, len: usize, what: &str) -> Result<&'a [T]> {
    if len == 0 {
        return Ok(&[]);
    }
    if ptr.is_null() || (ptr as usize) % align_of::<T>() != 0 {
        return Err(Status::invalid_argument(format!(
            "{what}: {len} elements at a NULL or misaligned pointer"
        )));
    }
    // SAFETY: non-null, aligned, `len` elements (caller).
    Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
}

/// The `rank` dims a plugin passes at `dims` for a shape to make, refused
/// before any is read when `rank` is above TensorFlow's 254
/// (`TensorShape::check_rank`); `what` names them ("dims of output 0").
///
/// # Safety
/// As [`slice`]: `dims` is NULL or points to `rank` readable `i64`s that
/// live for `'a` (read only when `rank` is allowed).
pub(crate) unsafe fn plugin_dims<'a>(
    dims: *const i64,
    rank: impl Into<u64>,
    what: &str,
) -> Result<&'a [i64]> {
    let rank = rank.into();
    TensorShape::check_rank(rank).map_err(|e| e.prepend(format!("{what}: ")))?;
    // SAFETY: forwarded; `rank` <= 254 fits usize.
    unsafe { slice(dims, rank as usize, what) }
}

/// Reads a versioned in-struct (R1).
///
/// # Safety
/// `ptr` is NULL or points to a struct of this type with a valid struct_size.
pub(crate) unsafe fn read_struct<T: Versioned>(ptr: *const T) -> Result<T> {
    if ptr.is_null() || (ptr as usize) % align_of::<T>() != 0 {
        return Err(Status::invalid_argument(format!(
            "a NULL or misaligned {} pointer",
            T::NAME
        )));
    }
    // SAFETY: non-null, aligned, readable for its struct_size (caller).
    unsafe { T::read_from(ptr) }.map_err(|e| Status::invalid_argument(e.to_string()))
}

/// Reads an array of versioned structs, stepping by the first element's
/// struct_size (R1).
///
/// # Safety
/// `base` is NULL or points to `n` structs of this type, each
/// struct_size bytes long.
pub(crate) unsafe fn read_array<T: Versioned>(base: *const T, n: usize) -> Result<Vec<T>> {
    if n == 0 {
        return Ok(Vec::new());
    }
    // SAFETY: forwarded.
    let first = unsafe { read_struct(base)? };
    let stride = first.struct_size_of();
    let mut out = vec![first];
    for i in 1..n {
        // SAFETY: the caller guarantees `n` elements of `stride` bytes.
        let p = unsafe { base.cast::<u8>().add(i * stride) }.cast::<T>();
        // SAFETY: `p` is element `i` of the array the caller guarantees, aligned (same stride as the first).
        let e = unsafe { read_struct(p)? };
        if e.struct_size_of() != stride {
            return Err(Status::invalid_argument(format!(
                "element {i} of an array of {} has struct_size {}, the first has {stride} \
                 (every element must carry the same value)",
                T::NAME,
                e.struct_size_of()
            )));
        }
        out.push(e);
    }
    Ok(out)
}

/// The `struct_size` of a versioned struct.
pub(crate) trait StructSize {
    fn struct_size_of(&self) -> usize;
}

impl<T: Versioned> StructSize for T {
    fn struct_size_of(&self) -> usize {
        // SAFETY: every `Versioned` struct is #[repr(C)] and starts with
        // `struct_size: usize` (the trait's contract).
        unsafe { (self as *const T).cast::<usize>().read() }
    }
}

/// Writes a host-made out-struct into the plugin's (R1: the caller's
/// struct_size decides what fits).
///
/// # Safety
/// `dst` is NULL or a plugin out-struct of this type with its struct_size set.
#[inline]
pub(crate) unsafe fn write_struct<T: Versioned>(value: &T, dst: *mut T) -> Result<()> {
    if dst.is_null() || (dst as usize) % align_of::<T>() != 0 {
        return Err(Status::invalid_argument(format!(
            "a NULL or misaligned {} out-pointer",
            T::NAME
        )));
    }
    // SAFETY: non-null, aligned, writable for its struct_size (caller).
    unsafe { value.write_to(dst) }.map_err(|e| Status::invalid_argument(e.to_string()))
}

/// Writes a plain value through a plugin out-pointer.
///
/// # Safety
/// `dst` is NULL or valid for a write of `T`.
#[inline]
pub(crate) unsafe fn write_out<T>(dst: *mut T, v: T, what: &str) -> Result<()> {
    if dst.is_null() || (dst as usize) % align_of::<T>() != 0 {
        return Err(Status::invalid_argument(format!(
            "{what}: a NULL or misaligned out-pointer"
        )));
    }
    // SAFETY: non-null, aligned (checked), writable (caller).
    unsafe { dst.write(v) };
    Ok(())
}

/// A plugin pointer moved across threads (user data, state, callbacks'
/// arguments). The plugin promises they may be used from any thread (R9).
#[derive(Clone, Copy, Debug)]
pub(crate) struct SendPtr(pub(crate) *mut c_void);
// SAFETY: R9 of the header: user pointers, kernel state and foreign memory
// may be used from any thread; the host never dereferences them itself.
unsafe impl Send for SendPtr {}
// SAFETY: R9 as for Send: the plugin allows use from any thread, and the host only passes the pointer on.
unsafe impl Sync for SendPtr {}

impl SendPtr {
    /// The pointer (a method, so closures capture the whole `SendPtr`).
    pub(crate) fn get(self) -> *mut c_void {
        self.0
    }
}

/// Heap blocks the host lends to the plugin (dims, strides, attr values,
/// string tables): each item is allocated once and never changed or moved
/// (a `Box`'s contents stay put when the Vec grows), and lives as the arena.
#[derive(Default)]
pub(crate) struct Arena {
    items: Mutex<Vec<Item>>,
}

#[allow(dead_code)] // the fields are only read through the pointers lent to the plugin
enum Item {
    I64(Box<[i64]>),
    F32(Box<[f32]>),
    U8(Box<[u8]>),
    I32(Box<[i32]>),
    Strs(Box<[OpforgeStr]>),
    Shapes(Box<[OpforgeShapeValue]>),
    Shape(Box<OpforgeShapeValue>),
    /// The host tensor a tensor attr's view points into.
    Tensor(opforge_core::Tensor),
    Views(Box<[OpforgeTensor]>),
    Funcs(Box<[OpforgeFuncValue]>),
    Named(Box<[OpforgeNamedAttr]>),
    Values(Box<[OpforgeAttrValue]>),
}

// SAFETY: the items are owned heap blocks the host writes only before
// lending them; afterwards only the plugin reads them, through raw pointers
// (R7), from the thread of the context that lent them.
unsafe impl Send for Arena {}
// SAFETY: as above; the Vec itself is behind a Mutex.
unsafe impl Sync for Arena {}

impl Arena {
    fn push(&self, item: Item) {
        self.items
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(item);
    }

    pub(crate) fn i64s(&self, v: &[i64]) -> *const i64 {
        if v.is_empty() {
            return std::ptr::null();
        }
        let b: Box<[i64]> = v.into();
        let p = b.as_ptr();
        self.push(Item::I64(b));
        p
    }

    fn f32s(&self, v: &[f32]) -> *const f32 {
        let b: Box<[f32]> = v.into();
        let p = b.as_ptr();
        self.push(Item::F32(b));
        p
    }

    fn u8s(&self, v: Vec<u8>) -> *const u8 {
        let b: Box<[u8]> = v.into();
        let p = b.as_ptr();
        self.push(Item::U8(b));
        p
    }

    fn i32s(&self, v: &[i32]) -> *const i32 {
        let b: Box<[i32]> = v.into();
        let p = b.as_ptr();
        self.push(Item::I32(b));
        p
    }

    /// A host string lent to the plugin.
    pub(crate) fn str(&self, s: &[u8]) -> OpforgeStr {
        if s.is_empty() {
            return OpforgeStr::EMPTY;
        }
        let p = self.u8s(s.to_vec());
        OpforgeStr {
            ptr: p.cast(),
            len: s.len(),
        }
    }

    pub(crate) fn strs(&self, v: Vec<OpforgeStr>) -> *const OpforgeStr {
        let b: Box<[OpforgeStr]> = v.into();
        let p = b.as_ptr();
        self.push(Item::Strs(b));
        p
    }

    fn shape_value(&self, p: &TensorShapeProto) -> OpforgeShapeValue {
        let mut v = OpforgeShapeValue::new();
        if p.unknown_rank {
            v.rank = OPFORGE_UNKNOWN_RANK;
        } else {
            let dims: Vec<i64> = p.dim.iter().map(|d| d.size.max(-1)).collect();
            v.rank = i32::try_from(dims.len()).unwrap_or(i32::MAX);
            v.dims = self.i64s(&dims);
        }
        v
    }

    /// A read-only view of a tensor attr: the proto is decoded into a host
    /// tensor that the arena keeps, so the view's data, dims and strides
    /// live as the arena (for kernel creation: until destroy). DT_STRING
    /// tensors are views of OpforgeStr (the header's representation);
    /// resource and variant tensors are UNIMPLEMENTED.
    fn tensor_view(&self, p: &opforge_core::proto::TensorProto) -> Result<OpforgeTensor> {
        let mut t = opforge_core::Tensor::from_proto(p)
            .map_err(|e| e.prepend("a tensor attr value cannot be decoded: "))?;
        let v = crate::kernel::view_pub(&mut t, self)?;
        // The view points into `t`'s buffer (a heap block that moving `t`
        // does not move), kept alive here.
        self.push(Item::Tensor(t));
        Ok(v)
    }

    /// A func attr (NameAttrList): the name and its attrs, sorted by name,
    /// each an attr value as [`attr`](Self::attr) lends it (an empty list
    /// has kind LIST with no element kind: the function's OpDef is not
    /// known here).
    fn func_value(&self, f: &opforge_core::proto::NameAttrList) -> Result<OpforgeFuncValue> {
        let mut values = Vec::with_capacity(f.attr.len());
        for v in f.attr.values() {
            values.push(self.attr(v, OPFORGE_ATTR_NONE)?);
        }
        let values: Box<[OpforgeAttrValue]> = values.into();
        let named: Vec<OpforgeNamedAttr> = f
            .attr
            .keys()
            .zip(values.iter())
            .map(|(name, value)| {
                let mut n = OpforgeNamedAttr::new();
                n.name = self.str(name.as_bytes());
                n.value = value;
                n
            })
            .collect();
        let named: Box<[OpforgeNamedAttr]> = named.into();
        let mut out = OpforgeFuncValue::new();
        out.name = self.str(f.name.as_bytes());
        out.num_attrs = named.len();
        out.attrs = if named.is_empty() {
            std::ptr::null()
        } else {
            named.as_ptr()
        };
        self.push(Item::Values(values));
        self.push(Item::Named(named));
        Ok(out)
    }

    /// An attr value lent to the plugin. `list_kind` is the element kind of
    /// the attr's OpDef type, for empty lists.
    pub(crate) fn attr(&self, v: &AttrValue, list_kind: u32) -> Result<OpforgeAttrValue> {
        let mut out = OpforgeAttrValue::new();
        let Some(value) = &v.value else {
            return Ok(out); // OPFORGE_ATTR_NONE
        };
        match value {
            AV::I(i) => {
                out.kind = OPFORGE_ATTR_INT;
                out.i = *i;
            }
            AV::F(f) => {
                out.kind = OPFORGE_ATTR_FLOAT;
                out.f = *f;
            }
            AV::B(b) => {
                out.kind = OPFORGE_ATTR_BOOL;
                out.b = u8::from(*b);
            }
            AV::Type(t) => {
                out.kind = OPFORGE_ATTR_TYPE;
                out.r#type = *t;
            }
            AV::S(s) => {
                out.kind = OPFORGE_ATTR_STRING;
                out.s = self.str(s);
            }
            AV::Shape(p) => {
                out.kind = OPFORGE_ATTR_SHAPE;
                let b = Box::new(self.shape_value(p));
                out.shape = &*b;
                self.push(Item::Shape(b));
            }
            AV::List(l) => {
                let (kind, ptr, len): (u32, *const c_void, usize) = if !l.i.is_empty() {
                    (OPFORGE_ATTR_INT, self.i64s(&l.i).cast(), l.i.len())
                } else if !l.f.is_empty() {
                    (OPFORGE_ATTR_FLOAT, self.f32s(&l.f).cast(), l.f.len())
                } else if !l.b.is_empty() {
                    let b: Vec<u8> = l.b.iter().map(|&b| u8::from(b)).collect();
                    (OPFORGE_ATTR_BOOL, self.u8s(b).cast(), l.b.len())
                } else if !l.r#type.is_empty() {
                    (
                        OPFORGE_ATTR_TYPE,
                        self.i32s(&l.r#type).cast(),
                        l.r#type.len(),
                    )
                } else if !l.s.is_empty() {
                    let v: Vec<OpforgeStr> = l.s.iter().map(|s| self.str(s)).collect();
                    (OPFORGE_ATTR_STRING, self.strs(v).cast(), l.s.len())
                } else if !l.shape.is_empty() {
                    let v: Vec<OpforgeShapeValue> =
                        l.shape.iter().map(|p| self.shape_value(p)).collect();
                    let b: Box<[OpforgeShapeValue]> = v.into();
                    let p = b.as_ptr();
                    self.push(Item::Shapes(b));
                    (OPFORGE_ATTR_SHAPE, p.cast(), l.shape.len())
                } else if !l.tensor.is_empty() {
                    let mut v = Vec::with_capacity(l.tensor.len());
                    for t in &l.tensor {
                        v.push(self.tensor_view(t)?);
                    }
                    let b: Box<[OpforgeTensor]> = v.into();
                    let p = b.as_ptr();
                    self.push(Item::Views(b));
                    (OPFORGE_ATTR_TENSOR, p.cast(), l.tensor.len())
                } else if !l.func.is_empty() {
                    let mut v = Vec::with_capacity(l.func.len());
                    for f in &l.func {
                        v.push(self.func_value(f)?);
                    }
                    let b: Box<[OpforgeFuncValue]> = v.into();
                    let p = b.as_ptr();
                    self.push(Item::Funcs(b));
                    (OPFORGE_ATTR_FUNC, p.cast(), l.func.len())
                } else {
                    (list_kind, std::ptr::null(), 0)
                };
                out.kind = kind | OPFORGE_ATTR_LIST;
                out.list = ptr;
                out.list_len = len;
            }
            AV::Tensor(t) => {
                out.kind = OPFORGE_ATTR_TENSOR;
                let b: Box<[OpforgeTensor]> = vec![self.tensor_view(t)?].into();
                out.tensor = b.as_ptr();
                self.push(Item::Views(b));
            }
            AV::Func(f) => {
                out.kind = OPFORGE_ATTR_FUNC;
                let b: Box<[OpforgeFuncValue]> = vec![self.func_value(f)?].into();
                out.func = b.as_ptr();
                self.push(Item::Funcs(b));
            }
            AV::Placeholder(p) => {
                out.kind = OPFORGE_ATTR_PLACEHOLDER;
                out.s = self.str(p.as_bytes());
            }
        }
        Ok(out)
    }
}

/// The element kind of an OpDef attr type (`list(int)` -> INT), for empty lists.
pub(crate) fn list_kind(attr_type: &str) -> u32 {
    let inner = attr_type
        .strip_prefix("list(")
        .and_then(|s| s.strip_suffix(')'))
        .unwrap_or(attr_type);
    match inner {
        "int" => OPFORGE_ATTR_INT,
        "float" => OPFORGE_ATTR_FLOAT,
        "bool" => OPFORGE_ATTR_BOOL,
        "type" => OPFORGE_ATTR_TYPE,
        "string" => OPFORGE_ATTR_STRING,
        "shape" => OPFORGE_ATTR_SHAPE,
        "tensor" => OPFORGE_ATTR_TENSOR,
        "func" => OPFORGE_ATTR_FUNC,
        _ => OPFORGE_ATTR_NONE,
    }
}

/// Reads attr `name` of a node into the plugin's out-struct.
///
/// # Safety
/// `value` is NULL or a plugin OpforgeAttrValue with its struct_size set.
pub(crate) unsafe fn read_attr(
    op_def: &opforge_core::proto::OpDef,
    attrs: &opforge_core::attrs::AttrMap,
    arena: &Arena,
    name: OpforgeStr,
    value: *mut OpforgeAttrValue,
) -> Result<()> {
    // SAFETY: plugin string (R5).
    let name = unsafe { text(name, "attr name")? };
    let v = attrs.get(name).ok_or_else(|| {
        Status::not_found(format!(
            "{} has no attr named '{name}' (its attrs: {})",
            op_def.name,
            op_def
                .attr
                .iter()
                .map(|a| a.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ))
    })?;
    let kind = op_def
        .attr
        .iter()
        .find(|a| a.name == name)
        .map_or(OPFORGE_ATTR_NONE, |a| list_kind(&a.r#type));
    let out = arena.attr(v, kind)?;
    // SAFETY: forwarded.
    unsafe { write_struct(&out, value) }
}

/// Row-major strides of `dims`, in elements.
pub(crate) fn row_major_strides(dims: &[i64]) -> Vec<i64> {
    let mut s = vec![1i64; dims.len()];
    for i in (0..dims.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1].saturating_mul(dims[i + 1].max(1));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use opforge_core::proto::attr_value::ListValue;
    use opforge_core::proto::NameAttrList;
    use opforge_core::{DataType, Tensor};

    fn av(v: AV) -> AttrValue {
        AttrValue { value: Some(v) }
    }

    fn tensor_attr(t: &Tensor) -> AttrValue {
        av(AV::Tensor(Box::new(t.to_proto().unwrap())))
    }

    /// Reads a host-made view back (what a plugin sees).
    fn read_view(v: &OpforgeTensor) -> (i32, Vec<i64>, Vec<i64>, Vec<u8>) {
        // SAFETY: a view the arena of the test made and still holds.
        unsafe {
            let dims = slice(v.dims, v.rank as usize, "dims").unwrap().to_vec();
            let strides = slice(v.strides, v.rank as usize, "strides")
                .unwrap()
                .to_vec();
            let data = slice(v.data.cast::<u8>().cast_const(), v.byte_len as usize, "d")
                .unwrap()
                .to_vec();
            (v.dtype, dims, strides, data)
        }
    }

    #[test]
    fn tensor_attrs_are_lent_as_views_the_arena_keeps() {
        let arena = Arena::default();
        let t = Tensor::from_vec(&[2, 3], vec![1f32, 2., 3., 4., 5., 6.]).unwrap();
        let out = arena.attr(&tensor_attr(&t), OPFORGE_ATTR_NONE).unwrap();
        assert_eq!(out.kind, OPFORGE_ATTR_TENSOR);
        // SAFETY: the arena holds the view.
        let view = unsafe { read_struct(out.tensor) }.unwrap();
        assert_eq!(view.num_elements, 6);
        assert_ne!(view.flags & OPFORGE_TENSOR_CONTIGUOUS, 0);
        assert_eq!(view.flags & OPFORGE_TENSOR_WRITABLE, 0);
        assert_eq!(view.data as usize % 4, 0, "aligned to its element size");
        let (dtype, dims, strides, data) = read_view(&view);
        assert_eq!(dtype, DataType::Float as i32);
        assert_eq!((dims, strides), (vec![2, 3], vec![3, 1]));
        let want: Vec<u8> = [1f32, 2., 3., 4., 5., 6.]
            .iter()
            .flat_map(|x| x.to_ne_bytes())
            .collect();
        assert_eq!(data, want);
        // Back into a host value (attrs of gradient calls): the same tensor.
        // SAFETY: as above.
        let back = unsafe { crate::grad::attr_from_c(&out) }.unwrap();
        let Some(AV::Tensor(p)) = back.value else {
            panic!("{back:?}")
        };
        assert_eq!(Tensor::from_proto(&p).unwrap(), t);

        // Strings: a view of OpforgeStr (the header's DT_STRING form).
        let s = Tensor::from_strings(&[2], vec![b"ab".to_vec(), b"".to_vec()]).unwrap();
        let out = arena.attr(&tensor_attr(&s), OPFORGE_ATTR_NONE).unwrap();
        // SAFETY: as above.
        let view = unsafe { read_struct(out.tensor) }.unwrap();
        assert_eq!(view.dtype, DataType::String as i32);
        // SAFETY: a DT_STRING view holds num_elements OpforgeStr.
        let elems: Vec<Vec<u8>> = unsafe {
            slice(view.data.cast::<OpforgeStr>().cast_const(), 2, "s")
                .unwrap()
                .iter()
                .map(|e| bytes(*e, "e").unwrap().to_vec())
                .collect()
        };
        assert_eq!(elems, [b"ab".to_vec(), Vec::new()]);
        // SAFETY: as above.
        let back = unsafe { crate::grad::attr_from_c(&out) }.unwrap();
        let Some(AV::Tensor(p)) = back.value else {
            panic!("{back:?}")
        };
        assert_eq!(Tensor::from_proto(&p).unwrap(), s);

        // A scalar, and a list of tensors.
        let a = Tensor::from_vec(&[], vec![7i32]).unwrap();
        let list = av(AV::List(Box::new(ListValue {
            tensor: vec![a.to_proto().unwrap(), t.to_proto().unwrap()],
            ..Default::default()
        })));
        let out = arena.attr(&list, OPFORGE_ATTR_TENSOR).unwrap();
        assert_eq!(out.kind, OPFORGE_ATTR_TENSOR | OPFORGE_ATTR_LIST);
        // SAFETY: the arena's array of list_len views.
        let views = unsafe { read_array(out.list.cast::<OpforgeTensor>(), out.list_len) }.unwrap();
        assert_eq!(views.len(), 2);
        assert_eq!(read_view(&views[0]).3, 7i32.to_ne_bytes());
        assert_eq!(views[0].rank, 0);
        assert_eq!(read_view(&views[1]).1, [2, 3]);
        // SAFETY: as above.
        let back = unsafe { crate::grad::attr_from_c(&out) }.unwrap();
        let Some(AV::List(l)) = back.value else {
            panic!("{back:?}")
        };
        assert_eq!(Tensor::from_proto(&l.tensor[0]).unwrap(), a);
    }

    #[test]
    fn func_attrs_carry_their_name_and_attrs() {
        let arena = Arena::default();
        let mut inner = NameAttrList {
            name: "Inner".into(),
            ..Default::default()
        };
        inner.attr.insert("k".into(), av(AV::I(3)));
        let mut f = NameAttrList {
            name: "MyFn".into(),
            ..Default::default()
        };
        f.attr
            .insert("T".into(), av(AV::Type(DataType::Float as i32)));
        f.attr.insert("g".into(), av(AV::Func(inner)));
        f.attr.insert("n".into(), av(AV::I(-4)));
        let value = av(AV::Func(f.clone()));
        let out = arena.attr(&value, OPFORGE_ATTR_NONE).unwrap();
        assert_eq!(out.kind, OPFORGE_ATTR_FUNC);
        // SAFETY: the arena holds the func value and everything it points to.
        unsafe {
            let fv = read_struct(out.func).unwrap();
            assert_eq!(text(fv.name, "n").unwrap(), "MyFn");
            let attrs = read_array(fv.attrs, fv.num_attrs).unwrap();
            let names: Vec<&str> = attrs.iter().map(|a| text(a.name, "n").unwrap()).collect();
            assert_eq!(names, ["T", "g", "n"]);
            let t = read_struct(attrs[0].value).unwrap();
            assert_eq!(
                (t.kind, t.r#type),
                (OPFORGE_ATTR_TYPE, DataType::Float as i32)
            );
            let g = read_struct(attrs[1].value).unwrap();
            assert_eq!(g.kind, OPFORGE_ATTR_FUNC);
            let gv = read_struct(g.func).unwrap();
            assert_eq!(text(gv.name, "n").unwrap(), "Inner");
            let n = read_struct(attrs[2].value).unwrap();
            assert_eq!((n.kind, n.i), (OPFORGE_ATTR_INT, -4));
            // Back into a host value: the same NameAttrList.
            assert_eq!(crate::grad::attr_from_c(&out).unwrap(), value);
        }
        // A list of funcs.
        let list = av(AV::List(Box::new(ListValue {
            func: vec![f.clone(), NameAttrList::default()],
            ..Default::default()
        })));
        let out = arena.attr(&list, OPFORGE_ATTR_FUNC).unwrap();
        assert_eq!(out.kind, OPFORGE_ATTR_FUNC | OPFORGE_ATTR_LIST);
        // SAFETY: as above.
        assert_eq!(unsafe { crate::grad::attr_from_c(&out) }.unwrap(), list);
    }

    #[test]
    fn resource_tensors_are_unimplemented() {
        let arena = Arena::default();
        let p = opforge_core::proto::TensorProto {
            dtype: DataType::Resource as i32,
            resource_handle_val: vec![Default::default()],
            ..Default::default()
        };
        let e = arena
            .attr(&av(AV::Tensor(Box::new(p))), OPFORGE_ATTR_NONE)
            .unwrap_err();
        assert_eq!(e.code(), Code::Unimplemented, "{e}");
        assert!(e.message().contains("not readable"), "{e}");
    }
}
