//! Python values to tensors: numpy arrays viewed without a copy when their
//! memory allows it, raw bytes and lists of strings copied. The Python
//! layer (`opforge/_convert.py`) applies TensorFlow's conversion rules and
//! brings every other value to one of these forms.

use crate::errors;
use crate::tensor::PyTensor;
use numpy::npyffi::flags::{NPY_ARRAY_ALIGNED, NPY_ARRAY_C_CONTIGUOUS};
use numpy::npyffi::{_PyArray_GET_ITEM_DATA, NpyTypes, PyArrayObject, NPY_TYPES};
use numpy::{PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use opforge::tensor::{Buffer, Location};
use opforge::{DataType, Tensor};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyList;
use smallvec::SmallVec;
use std::os::raw::{c_int, c_long};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicPtr, Ordering};

/// The opforge dtype of a numpy dtype (kind, item size), for the dtypes a
/// tensor can view directly.
fn dtype_of(kind: u8, itemsize: usize) -> Option<DataType> {
    Some(match (kind, itemsize) {
        (b'b', 1) => DataType::Bool,
        (b'i', 1) => DataType::Int8,
        (b'i', 2) => DataType::Int16,
        (b'i', 4) => DataType::Int32,
        (b'i', 8) => DataType::Int64,
        (b'u', 1) => DataType::UInt8,
        (b'u', 2) => DataType::UInt16,
        (b'u', 4) => DataType::UInt32,
        (b'u', 8) => DataType::UInt64,
        (b'f', 2) => DataType::Half,
        (b'f', 4) => DataType::Float,
        (b'f', 8) => DataType::Double,
        (b'c', 8) => DataType::Complex64,
        (b'c', 16) => DataType::Complex128,
        _ => return None,
    })
}

fn dims_of(shape: &[usize]) -> PyResult<smallvec::SmallVec<[i64; 6]>> {
    shape
        .iter()
        .map(|&d| i64::try_from(d).map_err(|_| PyValueError::new_err("a dimension is too large")))
        .collect()
}

/// numpy's array type, read from numpy's C API table once (a lookup in
/// the table on every check costs more than the rest of the check).
static ARRAY_TYPE: AtomicPtr<ffi::PyTypeObject> = AtomicPtr::new(std::ptr::null_mut());

/// Whether `v` is exactly a `numpy.ndarray` (not a subclass).
pub fn is_exact_ndarray(py: Python<'_>, v: &Bound<'_, PyAny>) -> bool {
    let mut array_type = ARRAY_TYPE.load(Ordering::Relaxed);
    if array_type.is_null() {
        // SAFETY: reads numpy's array type from its C API table (importing
        // numpy's C API on first use); numpy's types are static objects
        // that live as long as the process, so the pointer stays valid.
        array_type = unsafe { numpy::npyffi::get_type_object(py, NpyTypes::PyArray_Type) };
        ARRAY_TYPE.store(array_type, Ordering::Relaxed);
    }
    // SAFETY: `v` is a live object; its type is a field of its header.
    unsafe { ffi::Py_TYPE(v.as_ptr()) == array_type }
}

/// The opforge dtype of a builtin numpy type number, for the numeric
/// types a tensor can view directly.
fn builtin_dtype(num: c_int) -> Option<DataType> {
    const fn n(t: NPY_TYPES) -> c_int {
        t as c_int
    }
    let (long, ulong) = if std::mem::size_of::<c_long>() == 8 {
        (DataType::Int64, DataType::UInt64)
    } else {
        (DataType::Int32, DataType::UInt32)
    };
    Some(match num {
        x if x == n(NPY_TYPES::NPY_FLOAT) => DataType::Float,
        x if x == n(NPY_TYPES::NPY_DOUBLE) => DataType::Double,
        x if x == n(NPY_TYPES::NPY_INT) => DataType::Int32,
        x if x == n(NPY_TYPES::NPY_LONG) => long,
        x if x == n(NPY_TYPES::NPY_LONGLONG) => DataType::Int64,
        x if x == n(NPY_TYPES::NPY_BOOL) => DataType::Bool,
        x if x == n(NPY_TYPES::NPY_BYTE) => DataType::Int8,
        x if x == n(NPY_TYPES::NPY_UBYTE) => DataType::UInt8,
        x if x == n(NPY_TYPES::NPY_SHORT) => DataType::Int16,
        x if x == n(NPY_TYPES::NPY_USHORT) => DataType::UInt16,
        x if x == n(NPY_TYPES::NPY_UINT) => DataType::UInt32,
        x if x == n(NPY_TYPES::NPY_ULONG) => ulong,
        x if x == n(NPY_TYPES::NPY_ULONGLONG) => DataType::UInt64,
        x if x == n(NPY_TYPES::NPY_HALF) => DataType::Half,
        x if x == n(NPY_TYPES::NPY_CFLOAT) => DataType::Complex64,
        x if x == n(NPY_TYPES::NPY_CDOUBLE) => DataType::Complex128,
        _ => return None,
    })
}

/// A tensor over the memory of `v`, a `numpy.ndarray` (or subclass), when
/// the common case applies: a builtin numeric dtype in native byte order,
/// C-contiguous, aligned, at least one element. `None` otherwise: the
/// general [`ndarray_tensor`] copies every other array. `as_dtype`
/// reinterprets the elements as another dtype of the same size (the
/// caller checked the sizes).
///
/// The hot path of calls on numpy arrays: it reads numpy's array and
/// descriptor structs directly instead of through numpy's API. The fields
/// it reads (`data`, `nd`, `dimensions`, `flags`, `descr`; the descr's
/// `byteorder` and `type_num`) sit at the same offsets in numpy 1.x and
/// 2.x (numpy 2 moved only fields after `type_num`).
pub fn ndarray_view(v: &Bound<'_, PyAny>, as_dtype: Option<DataType>) -> Option<Tensor> {
    let arr = v.as_ptr().cast::<PyArrayObject>();
    // SAFETY: the caller passes an ndarray (or a subclass, whose objects
    // start with the same struct), alive for this call (`v`).
    let (data, nd, dims_ptr, flags, descr) = unsafe {
        let f = &(*arr).fields;
        (f.data, f.nd, f.dimensions, f.flags, f.descr)
    };
    const VIEWABLE: c_int = NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED;
    if flags & VIEWABLE != VIEWABLE || descr.is_null() {
        return None;
    }
    // SAFETY: `descr` is the live array's descriptor (it holds a
    // reference); `fields` is the prefix every numpy version shares.
    let (byteorder, type_num) =
        unsafe { ((*descr).fields.byteorder as u8, (*descr).fields.type_num) };
    let dtype = builtin_dtype(type_num)?;
    let dtype = match as_dtype {
        Some(d) if d.size() == dtype.size() => d,
        Some(_) => return None,
        None => dtype,
    };
    let native = match byteorder {
        b'=' | b'|' => true,
        b'<' => cfg!(target_endian = "little"),
        b'>' => cfg!(target_endian = "big"),
        _ => false,
    };
    if !native {
        return None;
    }
    let nd = usize::try_from(nd).ok()?;
    let mut dims = SmallVec::<[i64; 6]>::with_capacity(nd);
    let mut n: usize = 1;
    for i in 0..nd {
        // SAFETY: `dimensions` holds `nd` entries.
        let d = unsafe { *dims_ptr.add(i) };
        n = n.checked_mul(usize::try_from(d).ok()?)?;
        dims.push(d as i64);
    }
    let len = n.checked_mul(dtype.size())?;
    let ptr = NonNull::new(data.cast::<u8>())?;
    if len == 0 || (ptr.as_ptr() as usize) % dtype.size() != 0 {
        return None;
    }
    // A reference of the buffer's own, given back by `release_array`.
    let owner = NonNull::new(v.clone().into_ptr().cast::<()>())?;
    // SAFETY: `ptr` points to the array's `len` initialized bytes
    // (C-contiguous: exactly n * itemsize from `data`), valid values of
    // `dtype` (the builtin type of that number in native byte order, or a
    // same-size reinterpretation the caller asked for). The array stays
    // alive, with this memory, until the release drops `owner`, a
    // reference of its own (an ndarray with a live reference cannot be
    // resized); `release_array` is sound once from any thread. The buffer
    // is read-only, so opforge never writes it; Python code writing the
    // array meanwhile is the caller's race, as with any numpy view.
    let buf = unsafe {
        Buffer::from_foreign_read_only_raw(ptr, len, Location::Host, release_array, owner)
    };
    // (On an error the buffer is dropped, which releases the array.)
    Tensor::from_buffer(dtype, &dims, buf).ok()
}

/// `_C.from_numpy(array, as_dtype=None)`: a tensor over a numpy array's
/// memory, without a copy, when the array is C-contiguous, aligned, in
/// native byte order and of a numeric dtype: the tensor is read-only and
/// keeps the array alive (no kernel writes it or forwards it to an
/// output). Otherwise the values are copied. `as_dtype` (a `DataType`
/// number of the same item size) reinterprets the bytes: `bfloat16` arrays
/// of `ml_dtypes` arrive as `uint16`.
#[pyfunction]
#[pyo3(signature = (array, as_dtype=None))]
pub fn from_numpy(array: Bound<'_, PyAny>, as_dtype: Option<i32>) -> PyResult<PyTensor> {
    let py = array.py();
    errors::guard(py, "from_numpy", || {
        let arr = array
            .cast::<PyUntypedArray>()
            .map_err(|_| PyTypeError::new_err("from_numpy takes a numpy.ndarray"))?;
        Ok(PyTensor::new(ndarray_tensor(arr, as_dtype)?))
    })
}

/// The opforge dtype of a numpy array's elements, if a tensor can hold
/// them as they are.
pub fn ndarray_dtype(arr: &Bound<'_, PyUntypedArray>) -> Option<DataType> {
    let descr = arr.dtype();
    dtype_of(descr.kind(), descr.itemsize())
}

/// The tensor `_C.from_numpy(arr, as_dtype)` makes (see there): a
/// zero-copy view when the array's memory allows it, else a copy.
pub fn ndarray_tensor(arr: &Bound<'_, PyUntypedArray>, as_dtype: Option<i32>) -> PyResult<Tensor> {
    let py = arr.py();
    let descr = arr.dtype();
    let Some(mut dtype) = dtype_of(descr.kind(), descr.itemsize()) else {
        return Err(PyTypeError::new_err(format!(
            "numpy dtype {} has no opforge equivalent",
            descr.str()?
        )));
    };
    if let Some(code) = as_dtype {
        let d = DataType::from_i32(code)
            .ok_or_else(|| PyValueError::new_err(format!("no dtype {code}")))?;
        if d.size() != dtype.size() {
            return Err(PyValueError::new_err(format!(
                "cannot view {dtype} data as {d}: item sizes differ"
            )));
        }
        dtype = d;
    }
    if let Some(t) = ndarray_view(arr.as_any(), as_dtype.map(|_| dtype)) {
        return Ok(t);
    }
    let dims = dims_of(arr.shape())?;
    let n: usize = arr.shape().iter().product();
    let len = n * dtype.size();
    // A copy, in C order, through numpy itself.
    let c = py
        .import("numpy")?
        .call_method1("ascontiguousarray", (arr,))?;
    let c = c.cast::<PyUntypedArray>().map_err(PyErr::from)?;
    let cdescr = c.dtype();
    let c = if cdescr.is_native_byteorder() == Some(false) {
        let native = cdescr.call_method1("newbyteorder", ("=",))?;
        c.call_method1("astype", (native,))?
    } else {
        c.clone().into_any()
    };
    let c = c.cast::<PyUntypedArray>().map_err(PyErr::from)?;
    // SAFETY: `c` is a live C-contiguous native-order array of the same
    // item size and shape (numpy's own copy); reading its `data` field is
    // what numpy's PyArray_DATA does.
    let data = unsafe { (*_PyArray_GET_ITEM_DATA(c.as_array_ptr())).data }.cast::<u8>();
    let bytes: &[u8] = if len == 0 || data.is_null() {
        &[]
    } else {
        // SAFETY: `data` holds `len` initialized bytes (n items of
        // `dtype`'s size, C-contiguous), alive while `c` is.
        unsafe { std::slice::from_raw_parts(data, len) }
    };
    let shape = errors::check(py, opforge::TensorShape::new(&dims), None)?;
    errors::check(py, Tensor::from_bytes(dtype, shape, bytes), None)
}

/// `_C.from_bytes(dtype, shape, data)`: a tensor with a copy of `data`
/// (any object with the buffer protocol; exactly the tensor's byte size).
#[pyfunction]
pub fn from_bytes(dtype: i32, shape: Vec<i64>, data: Bound<'_, PyAny>) -> PyResult<PyTensor> {
    let py = data.py();
    errors::guard(py, "from_bytes", || {
        let d = DataType::from_i32(dtype)
            .ok_or_else(|| PyValueError::new_err(format!("no dtype {dtype}")))?;
        let buf = pyo3::buffer::PyBuffer::<u8>::get(&data)?;
        let bytes = buf.to_vec(py)?;
        let shape = errors::check(py, opforge::TensorShape::new(&shape), None)?;
        Ok(PyTensor::new(errors::check(
            py,
            Tensor::from_bytes(d, shape, &bytes),
            None,
        )?))
    })
}

/// `_C.from_strings(shape, items)`: a `string` tensor of `bytes` items.
#[pyfunction]
pub fn from_strings(shape: Vec<i64>, items: Bound<'_, PyList>) -> PyResult<PyTensor> {
    let py = items.py();
    errors::guard(py, "from_strings", || {
        let mut values = Vec::with_capacity(items.len());
        for item in items.iter() {
            values.push(item.extract::<Vec<u8>>().map_err(|_| {
                PyTypeError::new_err(format!(
                    "a string tensor takes bytes or str, not {}",
                    item.get_type()
                        .name()
                        .map(|n| n.to_string())
                        .unwrap_or_default()
                ))
            })?);
        }
        Ok(PyTensor::new(errors::check(
            py,
            Tensor::from_strings(&shape, values),
            None,
        )?))
    })
}

/// Gives back the array reference a buffer of `ndarray_tensor` held.
///
/// # Safety
/// `ctx` is a strong reference to a Python object (`into_ptr` of a `Py`),
/// given up here, once.
unsafe fn release_array(ctx: NonNull<()>) {
    const _: () = assert!(
        std::mem::size_of::<Py<PyAny>>() == std::mem::size_of::<NonNull<pyo3::ffi::PyObject>>()
    );
    let obj = ctx.cast::<pyo3::ffi::PyObject>();
    // SAFETY: `PyGILState_Check` may be called from any thread; it is
    // exact here because pyo3 extensions are not loaded into
    // subinterpreters (which would turn the check off).
    if unsafe { pyo3::ffi::PyGILState_Check() } == 1 {
        // SAFETY: this thread holds the GIL, and `obj` is a strong
        // reference given up here (the function's contract).
        unsafe { pyo3::ffi::Py_DecRef(obj.as_ptr()) };
        return;
    }
    // SAFETY: `Py<T>` is `#[repr(transparent)]` over the object's
    // `NonNull<PyObject>` (pyo3's instance.rs; the sizes are checked
    // above), so this is the `Py` whose reference `ndarray_tensor` took.
    // Dropped without the GIL, pyo3 defers the release to its pool (never
    // an attach on a worker thread).
    let owner: Py<PyAny> = unsafe { std::mem::transmute(obj) };
    drop(owner);
}
