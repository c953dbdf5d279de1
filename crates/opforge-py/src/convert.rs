//! Python values to tensors: numpy arrays viewed without a copy when their
//! memory allows it, raw bytes and lists of strings copied. The Python
//! layer (`opforge/_convert.py`) applies TensorFlow's conversion rules and
//! brings every other value to one of these forms.

use crate::errors;
use crate::tensor::PyTensor;
use numpy::npyffi::_PyArray_GET_ITEM_DATA;
use numpy::{PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use opforge::tensor::{Buffer, Location};
use opforge::{DataType, Tensor};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyList;
use std::ptr::NonNull;

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
    {
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
        let dims = dims_of(arr.shape())?;
        let n: usize = arr.shape().iter().product();
        let len = n * dtype.size();
        // SAFETY: `as_array_ptr` is the live ndarray's object; reading its
        // `data` field is what numpy's own PyArray_DATA does.
        let data = unsafe { (*_PyArray_GET_ITEM_DATA(arr.as_array_ptr())).data }.cast::<u8>();
        let native = descr.is_native_byteorder() != Some(false);
        let viewable = arr.is_c_contiguous()
            && arr.is_aligned()
            && native
            && (data as usize) % dtype.size().max(1) == 0;
        let t = match NonNull::new(data) {
            Some(ptr) if viewable && len > 0 => {
                // The array, owned by the buffer until `release_array`.
                let owner = arr.clone().into_any().into_ptr();
                let owner = NonNull::new(owner.cast::<()>())
                    .ok_or_else(|| PyValueError::new_err("a null ndarray"))?;
                // SAFETY: `ptr` points to the array's `len` initialized
                // bytes (C-contiguous, so exactly n * itemsize from `data`),
                // valid values of `dtype` (same kind and size, or a
                // same-size reinterpretation the caller asked for). The
                // array stays alive, with this memory, until the release
                // drops `owner`, a reference of its own (an ndarray with a
                // live reference cannot be resized); `release_array` is
                // sound once from any thread. The buffer is read-only, so
                // opforge never writes it; Python code writing the array
                // meanwhile is the caller's race, as with any numpy view.
                let buf = unsafe {
                    Buffer::from_foreign_read_only_raw(
                        ptr,
                        len,
                        Location::Host,
                        release_array,
                        owner,
                    )
                };
                errors::check(py, Tensor::from_buffer(dtype, &dims, buf), None)?
            }
            _ => {
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
                // SAFETY: as above; `c` is a C-contiguous native-order
                // array of the same dtype and shape, alive for this call.
                let data = unsafe { (*_PyArray_GET_ITEM_DATA(c.as_array_ptr())).data }.cast::<u8>();
                let bytes: &[u8] = if len == 0 || data.is_null() {
                    &[]
                } else {
                    // SAFETY: `data` holds `len` initialized bytes (see above).
                    unsafe { std::slice::from_raw_parts(data, len) }
                };
                errors::check(
                    py,
                    Tensor::from_bytes(
                        dtype,
                        errors::check(py, opforge::TensorShape::new(&dims), None)?,
                        bytes,
                    ),
                    None,
                )?
            }
        };
        Ok(t)
    }
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
