//! The native half of `opforge.operator.Custom` (MXNet's `mx.nd.Custom`):
//! the common call goes from Python straight to the custom operator's op
//! function, with no Python frame of opforge's; `crate::pykernel` runs the
//! operator's kernels.

use crate::tensor::PyTensor;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use smallvec::SmallVec;

thread_local! {
    /// Whether custom operators called on this thread run in training mode
    /// (`opforge.operator.train_mode()`).
    static TRAINING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// `_C.set_custom_training(on)`: `train_mode()` on this thread; the
/// previous setting.
#[pyfunction]
pub fn set_custom_training(on: bool) -> bool {
    TRAINING.with(|t| t.replace(on))
}

/// `opforge.operator.Custom(*inputs, op_type, name=None, **params)`: runs
/// the custom operator `op_type` (registered with `register`) on `inputs`,
/// with `params` passed to its prop's `__init__`; one tensor for one
/// output, else a list (MXNet's `mx.nd.Custom`); in a graph, adds the op's
/// node.
///
/// `_C.CustomCaller`: the common call,
/// `Custom(*tensors, op_type=name)` eagerly with no tape recording and no
/// parameters, goes straight to the op function the Python layer prepared
/// for the type and the inputs' dtypes (`table[op_type]` lists `(dtype
/// enums, fn, attrs)`, attrs passed after the inputs); every other call runs
/// `fallback` (the Python `Custom`), which prepares the table.
#[pyclass(module = "opforge._C", name = "CustomCaller", frozen)]
pub struct CustomCaller {
    /// The function CPython's vectorcall protocol calls
    /// ([`custom_caller_vectorcall`], see [`enable_vectorcall`]).
    vectorcall: Option<ffi::vectorcallfunc>,
    table: Py<PyDict>,
    fallback: Py<PyAny>,
}

#[pymethods]
impl CustomCaller {
    #[new]
    fn new(table: Py<PyDict>, fallback: Py<PyAny>) -> CustomCaller {
        CustomCaller {
            vectorcall: Some(custom_caller_vectorcall),
            table,
            fallback,
        }
    }

    /// Calls through `tp_call` (CPython prefers the vectorcall entry, so
    /// hardly any call comes here) take the general path.
    #[pyo3(signature = (*args, **kwargs))]
    fn __call__<'py>(
        &self,
        py: Python<'py>,
        args: &Bound<'py, PyTuple>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.fallback.bind(py).call(args, kwargs)
    }
}

/// Makes CPython call `CustomCaller`s through [`custom_caller_vectorcall`].
/// Called once, when the module is made.
pub fn enable_vectorcall(py: Python<'_>) -> PyResult<()> {
    let probe = Bound::new(py, CustomCaller::new(PyDict::new(py).unbind(), py.None()))?;
    let field = std::ptr::addr_of!(probe.get().vectorcall);
    // SAFETY: `field` is the probe's `vectorcall` field, which every
    // CustomCaller has at the same offset and sets in `new`.
    unsafe { crate::vectorcall::set_vectorcall_field(probe.as_any(), field) }
}

/// `CustomCaller`'s vectorcall entry: the common call is recognised and
/// made from the arguments as CPython passes them (no tuple or dict); any
/// other goes to the fallback as it came.
///
/// # Safety
/// CPython's vectorcall contract: `callable` is a live `CustomCaller` (this
/// function is only reached through its type's `tp_vectorcall_offset`),
/// `args` holds `PyVectorcall_NARGS(nargsf)` positional arguments followed
/// by one value per name of `kwnames` (a tuple of str, or null), all
/// borrowed for the call, and the calling thread is attached.
unsafe extern "C" fn custom_caller_vectorcall(
    callable: *mut ffi::PyObject,
    args: *const *mut ffi::PyObject,
    nargsf: usize,
    kwnames: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    // SAFETY: the thread is attached (the contract); the fast path holds
    // only `Bound`s (see `fast::op_function_vectorcall` on why).
    let py = unsafe { Python::assume_attached() };
    // SAFETY: `nargsf` comes from CPython as the contract says.
    let nargs = unsafe { ffi::PyVectorcall_NARGS(nargsf) } as usize;
    crate::vectorcall::guarded(py, "a custom operator call", || {
        // SAFETY: `callable` is a live CustomCaller, borrowed for the call.
        let slf = unsafe { Borrowed::from_ptr(py, callable) };
        let this = slf.cast::<CustomCaller>().map_err(PyErr::from)?.get();
        // SAFETY: `args` holds `nargs` positional arguments, then one value
        // per keyword name (the contract), all live for the call.
        let argv = unsafe {
            std::slice::from_raw_parts(args, nargs + crate::vectorcall::keyword_count(kwnames))
        };
        // SAFETY: as above: the arguments and names CPython passed.
        if let Some(r) = unsafe { this.fast(py, argv, nargs, kwnames) }? {
            return Ok(r);
        }
        // SAFETY: passed on as CPython gave them (the same contract).
        unsafe { crate::vectorcall::forward_vectorcall(py, &this.fallback, args, nargsf, kwnames) }
    })
}

impl CustomCaller {
    /// The fast call's result, or `None` when the call is not the common
    /// one (or not prepared yet).
    ///
    /// # Safety
    /// `argv` and `kwnames` are a vectorcall's arguments: `nargs`
    /// positional ones, then one per name of `kwnames` (null or a tuple of
    /// str), live for the call.
    unsafe fn fast<'py>(
        &self,
        py: Python<'py>,
        argv: &[*mut ffi::PyObject],
        nargs: usize,
        kwnames: *mut ffi::PyObject,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        if crate::vectorcall::keyword_count(kwnames) != 1
            || crate::fast::tapes_or_graphs()
            || TRAINING.with(|t| t.get())
        {
            return Ok(None);
        }
        // SAFETY: `kwnames` is a tuple of one str (checked above).
        let name = unsafe { Borrowed::from_ptr(py, ffi::PyTuple_GET_ITEM(kwnames, 0)) };
        if !name.eq(pyo3::intern!(py, "op_type"))? {
            return Ok(None);
        }
        // SAFETY: `argv[nargs]` is the value of `op_type`, live for the call.
        let op_type = unsafe { Borrowed::from_ptr(py, argv[nargs]) };
        let mut enums: SmallVec<[i32; 4]> = SmallVec::new();
        for &a in &argv[..nargs] {
            // SAFETY: a positional argument, live for the call.
            let a = unsafe { Borrowed::from_ptr(py, a) };
            match a.cast_exact::<PyTensor>() {
                Ok(t) => enums.push(t.get().t.dtype() as i32),
                Err(_) => return Ok(None),
            }
        }
        let Some(plans) = self.table.bind(py).get_item(op_type)? else {
            return Ok(None);
        };
        let plans = plans.cast_into::<PyList>().map_err(PyErr::from)?;
        let mut found = None;
        for plan in plans.iter() {
            let plan = plan.cast_into::<PyTuple>().map_err(PyErr::from)?;
            let key = plan
                .get_item(0)?
                .cast_into::<PyTuple>()
                .map_err(PyErr::from)?;
            if key.len() == enums.len()
                && key
                    .iter()
                    .zip(&enums)
                    .all(|(k, &e)| k.extract::<i32>().is_ok_and(|k| k == e))
            {
                found = Some(plan);
                break;
            }
        }
        let Some(plan) = found else { return Ok(None) };
        let (f, attrs) = (plan.get_item(1)?, plan.get_item(2)?);
        let attrs = attrs.cast_into::<PyTuple>().map_err(PyErr::from)?;
        let mut call: SmallVec<[*mut ffi::PyObject; 8]> = argv[..nargs].iter().copied().collect();
        call.extend(attrs.iter_borrowed().map(|a| a.as_ptr()));
        // SAFETY: `f` is a live callable; `call` holds the inputs (live for
        // this call) and the attr values (held by `attrs`), borrowed, as
        // positional arguments.
        let out = unsafe {
            Bound::from_owned_ptr_or_err(
                py,
                ffi::PyObject_Vectorcall(
                    f.as_ptr(),
                    call.as_ptr(),
                    call.len(),
                    std::ptr::null_mut(),
                ),
            )
        }?;
        if out.is_exact_instance_of::<PyTensor>() {
            return Ok(Some(out));
        }
        Ok(Some(
            PyList::new(py, out.try_iter()?.collect::<PyResult<Vec<_>>>()?)?.into_any(),
        ))
    }
}
