//! `opforge.Tensor`: an immutable opforge tensor seen from Python, with the
//! buffer protocol (read-only, zero-copy: `numpy.asarray(t)` views the
//! tensor's memory and keeps the tensor alive).

use crate::errors;
use crate::fast;
use crate::hooks::hook;
use opforge::autodiff::Sym;
use opforge::{DataType, Tensor};
use pyo3::exceptions::{PyBufferError, PyTypeError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyTuple};
use std::ffi::{c_int, CStr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// An immutable n-dimensional array of one dtype (`opforge.Tensor`).
#[pyclass(name = "Tensor", module = "opforge", frozen, weakref)]
pub struct PyTensor {
    pub(crate) t: Tensor,
    /// The dims and byte strides the buffer protocol hands out, made on
    /// the first export (most tensors, op results, never need them): they
    /// live as long as the object, which every exported view keeps alive.
    layout: OnceLock<Layout>,
    /// The handle one recording tape gave this tensor, packed (scope in
    /// the high half, index in the low; 0 for none): that tape finds the
    /// tensor's handle here instead of in a table (see `crate::tape`).
    tape_sym: AtomicU64,
}

/// A handle as the slot stores it (never 0: scopes start at 1).
fn pack_sym(s: Sym) -> u64 {
    (u64::from(s.scope()) << 32) | u64::from(s.index())
}

/// A tensor's dims and byte strides, for the buffer protocol.
type Layout = (Box<[isize]>, Box<[isize]>);

impl PyTensor {
    /// Wraps `t`.
    pub fn new(t: Tensor) -> PyTensor {
        PyTensor {
            t,
            layout: OnceLock::new(),
            tape_sym: AtomicU64::new(0),
        }
    }

    /// The handle a tape left in this tensor's slot, if any.
    pub(crate) fn tape_sym(&self) -> Option<Sym> {
        let v = self.tape_sym.load(Ordering::Relaxed);
        (v != 0).then(|| Sym::new((v >> 32) as u32, v as u32))
    }

    /// Puts `s` in the slot if the slot is free, holds a handle of the
    /// same tape (scope), or one of a tape that was dropped; whether it did.
    pub(crate) fn claim_tape_sym(&self, s: Sym) -> bool {
        let new = pack_sym(s);
        let mut cur = self.tape_sym.load(Ordering::Relaxed);
        loop {
            let scope = (cur >> 32) as u32;
            if cur != 0 && scope != s.scope() && crate::tape::scope_is_live(scope) {
                return false;
            }
            match self.tape_sym.compare_exchange_weak(
                cur,
                new,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(v) => cur = v,
            }
        }
    }

    /// Frees the slot if it holds `s` (its tape is going away).
    pub(crate) fn release_tape_sym(&self, s: Sym) {
        let _ =
            self.tape_sym
                .compare_exchange(pack_sym(s), 0, Ordering::Relaxed, Ordering::Relaxed);
    }

    /// The dims and C-order byte strides of the buffer protocol.
    fn layout(&self) -> &Layout {
        self.layout.get_or_init(|| {
            let shape: Box<[isize]> = self.t.dims().iter().map(|&d| d as isize).collect();
            let mut strides = vec![0isize; shape.len()].into_boxed_slice();
            let mut acc = self.t.dtype().size() as isize;
            for i in (0..shape.len()).rev() {
                strides[i] = acc;
                acc = acc.saturating_mul(shape[i].max(1));
            }
            (shape, strides)
        })
    }
}

/// The PEP 3118 format of a dtype whose bytes numpy can view directly
/// (`bfloat16` goes as its raw 16 bits, `H`; the Python layer reinterprets it).
fn buffer_format(d: DataType) -> Option<&'static CStr> {
    Some(match d {
        DataType::Float => c"f",
        DataType::Double => c"d",
        DataType::Half => c"e",
        DataType::BFloat16 | DataType::UInt16 => c"H",
        DataType::Int8 => c"b",
        DataType::UInt8 => c"B",
        DataType::Int16 => c"h",
        DataType::Int32 => c"i",
        DataType::UInt32 => c"I",
        DataType::Int64 => c"q",
        DataType::UInt64 => c"Q",
        DataType::Bool => c"?",
        DataType::Complex64 => c"Zf",
        DataType::Complex128 => c"Zd",
        _ => return None,
    })
}

#[pymethods]
impl PyTensor {
    /// The dtype (an `opforge.DType`).
    #[getter]
    fn dtype<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        hook(py, "dtypes")?.get_item(self.t.dtype() as i32)
    }

    /// The dtype's TensorFlow `DataType` number.
    #[getter]
    fn _dtype_enum(&self) -> i32 {
        self.t.dtype() as i32
    }

    /// The shape, as a tuple of ints.
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.t.dims().iter().copied())
    }

    /// The number of dimensions.
    #[getter]
    fn ndim(&self) -> usize {
        self.t.rank()
    }

    /// The number of elements.
    #[getter]
    fn size(&self) -> usize {
        self.t.num_elements()
    }

    /// The address of the first byte (0 for non-numeric tensors): lets
    /// tests check that numpy views share memory with the tensor.
    #[getter]
    fn _data_ptr(&self) -> usize {
        self.t.bytes().map_or(0, |b| b.as_ptr() as usize)
    }

    /// The elements of a `string` tensor, as bytes, flat.
    fn _strings<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let s = errors::check(py, self.t.strings(), None)?;
        PyList::new(py, s.iter().map(|b| PyBytes::new(py, b)))
    }

    fn __len__(&self) -> PyResult<usize> {
        match self.t.dims().first() {
            Some(&d) => Ok(d as usize),
            None => Err(PyTypeError::new_err("len() of a 0-d tensor")),
        }
    }

    fn __repr__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        hook(slf.py(), "repr")?.call1((slf,))
    }

    fn __str__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        hook(slf.py(), "str")?.call1((slf,))
    }

    /// The values as a numpy array: a read-only view of the tensor's memory
    /// (no copy) for numeric dtypes, an object array of `bytes` for strings.
    fn numpy<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        hook(slf.py(), "numpy")?.call1((slf,))
    }

    #[pyo3(signature = (dtype=None, copy=None))]
    fn __array__<'py>(
        slf: &Bound<'py, Self>,
        dtype: Option<Bound<'py, PyAny>>,
        copy: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        hook(slf.py(), "array")?.call1((slf, dtype, copy))
    }

    fn __getitem__<'py>(
        slf: &Bound<'py, Self>,
        key: Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        hook(slf.py(), "getitem")?.call1((slf, key))
    }

    fn __bool__(slf: &Bound<'_, Self>) -> PyResult<bool> {
        hook(slf.py(), "scalar")?.call1((slf,))?.is_truthy()
    }

    fn __float__(slf: &Bound<'_, Self>) -> PyResult<f64> {
        hook(slf.py(), "scalar")?.call1((slf,))?.extract()
    }

    fn __int__(slf: &Bound<'_, Self>) -> PyResult<i64> {
        hook(slf.py(), "scalar")?
            .call1((slf,))?
            .call_method0("__int__")?
            .extract()
    }

    fn __index__(slf: &Bound<'_, Self>) -> PyResult<i64> {
        if !slf.get().t.dtype().is_integer() {
            return Err(PyTypeError::new_err(
                "only integer tensors can be used as an index",
            ));
        }
        Self::__int__(slf)
    }

    /// DLPack export (through numpy's exporter over the zero-copy view:
    /// read-only, so consumers need DLPack >= 1.0, which carries the flag).
    #[pyo3(signature = (*, stream=None, max_version=None, dl_device=None, copy=None))]
    fn __dlpack__<'py>(
        slf: &Bound<'py, Self>,
        stream: Option<Bound<'py, PyAny>>,
        max_version: Option<Bound<'py, PyAny>>,
        dl_device: Option<Bound<'py, PyAny>>,
        copy: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        hook(slf.py(), "dlpack")?.call1((slf, stream, max_version, dl_device, copy))
    }

    /// `(kDLCPU, 0)`: opforge tensors seen from Python live in host memory.
    fn __dlpack_device__(&self) -> (i32, i32) {
        (1, 0)
    }

    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        hook(slf.py(), "reduce")?.call1((slf,))
    }

    fn __neg__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        if let Some(r) = fast::NEG.call(&[slf.as_any()]) {
            return r;
        }
        hook(slf.py(), "unary")?.call1(("Neg", slf))
    }

    fn __abs__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        if let Some(r) = fast::ABS.call(&[slf.as_any()]) {
            return r;
        }
        hook(slf.py(), "unary")?.call1(("Abs", slf))
    }

    fn __invert__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        if let Some(r) = fast::INVERT.call(&[slf.as_any()]) {
            return r;
        }
        hook(slf.py(), "unary")?.call1(("Invert", slf))
    }

    fn __add__<'py>(
        slf: &Bound<'py, Self>,
        other: Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        if let Some(r) = fast::ADD.call(&[slf.as_any(), &other]) {
            return r;
        }
        hook(slf.py(), "binary")?.call1(("AddV2", slf, other, false))
    }

    fn __radd__<'py>(
        slf: &Bound<'py, Self>,
        other: Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        hook(slf.py(), "binary")?.call1(("AddV2", slf, other, true))
    }

    fn __sub__<'py>(
        slf: &Bound<'py, Self>,
        other: Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        if let Some(r) = fast::SUB.call(&[slf.as_any(), &other]) {
            return r;
        }
        hook(slf.py(), "binary")?.call1(("Sub", slf, other, false))
    }

    fn __rsub__<'py>(
        slf: &Bound<'py, Self>,
        other: Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        hook(slf.py(), "binary")?.call1(("Sub", slf, other, true))
    }

    fn __mul__<'py>(
        slf: &Bound<'py, Self>,
        other: Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        if let Some(r) = fast::MUL.call(&[slf.as_any(), &other]) {
            return r;
        }
        hook(slf.py(), "binary")?.call1(("Mul", slf, other, false))
    }

    fn __rmul__<'py>(
        slf: &Bound<'py, Self>,
        other: Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        hook(slf.py(), "binary")?.call1(("Mul", slf, other, true))
    }

    fn __truediv__<'py>(
        slf: &Bound<'py, Self>,
        other: Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        if let Some(r) = fast::REAL_DIV.call(&[slf.as_any(), &other]) {
            return r;
        }
        hook(slf.py(), "binary")?.call1(("RealDiv", slf, other, false))
    }

    fn __rtruediv__<'py>(
        slf: &Bound<'py, Self>,
        other: Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        hook(slf.py(), "binary")?.call1(("RealDiv", slf, other, true))
    }

    fn __floordiv__<'py>(
        slf: &Bound<'py, Self>,
        other: Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        if let Some(r) = fast::FLOOR_DIV.call(&[slf.as_any(), &other]) {
            return r;
        }
        hook(slf.py(), "binary")?.call1(("FloorDiv", slf, other, false))
    }

    fn __rfloordiv__<'py>(
        slf: &Bound<'py, Self>,
        other: Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        hook(slf.py(), "binary")?.call1(("FloorDiv", slf, other, true))
    }

    fn __mod__<'py>(
        slf: &Bound<'py, Self>,
        other: Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        if let Some(r) = fast::FLOOR_MOD.call(&[slf.as_any(), &other]) {
            return r;
        }
        hook(slf.py(), "binary")?.call1(("FloorMod", slf, other, false))
    }

    fn __rmod__<'py>(
        slf: &Bound<'py, Self>,
        other: Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        hook(slf.py(), "binary")?.call1(("FloorMod", slf, other, true))
    }

    fn __matmul__<'py>(
        slf: &Bound<'py, Self>,
        other: Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        if let Some(r) = fast::MAT_MUL.call(&[slf.as_any(), &other]) {
            return r;
        }
        hook(slf.py(), "binary")?.call1(("MatMul", slf, other, false))
    }

    fn __rmatmul__<'py>(
        slf: &Bound<'py, Self>,
        other: Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        hook(slf.py(), "binary")?.call1(("MatMul", slf, other, true))
    }

    fn __and__<'py>(
        slf: &Bound<'py, Self>,
        other: Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        if let Some(r) = fast::LOGICAL_AND.call(&[slf.as_any(), &other]) {
            return r;
        }
        hook(slf.py(), "binary")?.call1(("LogicalAnd", slf, other, false))
    }

    fn __rand__<'py>(
        slf: &Bound<'py, Self>,
        other: Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        hook(slf.py(), "binary")?.call1(("LogicalAnd", slf, other, true))
    }

    fn __or__<'py>(
        slf: &Bound<'py, Self>,
        other: Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        if let Some(r) = fast::LOGICAL_OR.call(&[slf.as_any(), &other]) {
            return r;
        }
        hook(slf.py(), "binary")?.call1(("LogicalOr", slf, other, false))
    }

    fn __ror__<'py>(
        slf: &Bound<'py, Self>,
        other: Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        hook(slf.py(), "binary")?.call1(("LogicalOr", slf, other, true))
    }

    fn __pow__<'py>(
        slf: &Bound<'py, Self>,
        other: Bound<'py, PyAny>,
        modulo: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        pow(slf, other, modulo, false)
    }

    fn __rpow__<'py>(
        slf: &Bound<'py, Self>,
        other: Bound<'py, PyAny>,
        modulo: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        pow(slf, other, modulo, true)
    }

    /// Element-wise comparisons (`Less`, `Equal`, ...), as TensorFlow 2's
    /// tensors (which are therefore not hashable).
    fn __richcmp__<'py>(
        slf: &Bound<'py, Self>,
        other: Bound<'py, PyAny>,
        op: pyo3::basic::CompareOp,
    ) -> PyResult<Bound<'py, PyAny>> {
        use pyo3::basic::CompareOp::*;
        let (name, plan) = match op {
            Lt => ("Less", &fast::LESS),
            Le => ("LessEqual", &fast::LESS_EQUAL),
            Eq => ("Equal", &fast::EQUAL),
            Ne => ("NotEqual", &fast::NOT_EQUAL),
            Gt => ("Greater", &fast::GREATER),
            Ge => ("GreaterEqual", &fast::GREATER_EQUAL),
        };
        if let Some(r) = plan.call(&[slf.as_any(), &other]) {
            return r;
        }
        hook(slf.py(), "binary")?.call1((name, slf, other, false))
    }

    /// Buffer protocol: read-only, C-contiguous, numeric dtypes only.
    ///
    /// # Safety
    /// `view` is the caller's `Py_buffer` to fill (CPython's contract).
    unsafe fn __getbuffer__(
        slf: Bound<'_, Self>,
        view: *mut ffi::Py_buffer,
        flags: c_int,
    ) -> PyResult<()> {
        if view.is_null() {
            return Err(PyBufferError::new_err("View is null"));
        }
        if (flags & ffi::PyBUF_WRITABLE) == ffi::PyBUF_WRITABLE {
            return Err(PyBufferError::new_err(
                "opforge tensors are immutable: their buffers are read-only",
            ));
        }
        let this = slf.get();
        let dtype = this.t.dtype();
        let Some(format) = buffer_format(dtype) else {
            return Err(PyBufferError::new_err(format!(
                "a {dtype} tensor has no buffer (use .numpy())"
            )));
        };
        let bytes = errors::check(slf.py(), this.t.bytes(), None)?;
        let ptr = bytes.as_ptr();
        let len = bytes.len();
        let (shape, strides) = this.layout();
        let ndim = shape.len();
        let shape_ptr = shape.as_ptr() as *mut isize;
        let strides_ptr = strides.as_ptr() as *mut isize;
        // SAFETY: `view` is non-null and CPython's to fill. Every pointer we
        // store stays valid while `view.obj` (this tensor, kept alive by the
        // reference stored in it) lives: the data is the tensor's immutable
        // storage, `shape`/`strides` are its own slices, set once (a
        // `OnceLock`) and never changed or moved after, and `format` is static.
        unsafe {
            (*view).obj = slf.into_any().into_ptr();
            (*view).buf = ptr as *mut std::ffi::c_void;
            (*view).len = len as isize;
            (*view).readonly = 1;
            (*view).itemsize = dtype.size() as isize;
            (*view).format = if (flags & ffi::PyBUF_FORMAT) == ffi::PyBUF_FORMAT {
                format.as_ptr() as *mut std::ffi::c_char
            } else {
                std::ptr::null_mut()
            };
            (*view).ndim = ndim as c_int;
            (*view).shape = if (flags & ffi::PyBUF_ND) == ffi::PyBUF_ND {
                shape_ptr
            } else {
                std::ptr::null_mut()
            };
            (*view).strides = if (flags & ffi::PyBUF_STRIDES) == ffi::PyBUF_STRIDES {
                strides_ptr
            } else {
                std::ptr::null_mut()
            };
            (*view).suboffsets = std::ptr::null_mut();
            (*view).internal = std::ptr::null_mut();
        }
        Ok(())
    }

    /// Nothing to free: every pointer of the view belongs to the tensor.
    ///
    /// # Safety
    /// CPython's contract for `bf_releasebuffer`.
    unsafe fn __releasebuffer__(&self, _view: *mut ffi::Py_buffer) {}
}

/// `Pow` for `__pow__`/`__rpow__` (a modulo is not supported).
fn pow<'py>(
    slf: &Bound<'py, PyTensor>,
    other: Bound<'py, PyAny>,
    modulo: Option<Bound<'py, PyAny>>,
    reflected: bool,
) -> PyResult<Bound<'py, PyAny>> {
    if modulo.is_some() {
        return Err(PyTypeError::new_err("pow() with a modulo is not supported"));
    }
    if !reflected {
        if let Some(r) = fast::POW.call(&[slf.as_any(), &other]) {
            return r;
        }
    }
    hook(slf.py(), "binary")?.call1(("Pow", slf, other, reflected))
}
