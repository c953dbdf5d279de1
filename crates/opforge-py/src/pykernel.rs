//! Ops whose kernel is a Python callable: the machinery under
//! `opforge.numpy_function`, `opforge.py_function` and `opforge.operator`
//! (MXNet's `CustomOp`).
//!
//! `_C.register_python_op` registers a real registry op (an OpDef from
//! spec strings, a CPU kernel, an optional shape function written in
//! Python), owned by the Python owner like every other registration of the
//! package, so it runs eagerly, under tapes, in graphs and in
//! `opforge.gradients` like any op.
//!
//! **A call.** The kernel calls `func(call, inputs)`: `inputs` are the
//! input tensors (immutable `opforge.Tensor`s; `call.arrays()` gives
//! read-only zero-copy numpy views of them), and `call` a [`KernelCall`]
//! through which the function sets each output, either by writing a buffer
//! the call lends ([`KernelCall::allocate_output`]: a writable numpy array
//! over the output's memory, no copy, whose base is a [`LentBuffer`]) or
//! by handing a tensor or an array ([`KernelCall::set_output`]).
//!
//! **Lent buffers stop reaching the runtime when the call returns.** The
//! call is closed first (its methods then raise). An output buffer that
//! nothing in Python holds any more becomes the op's output as it is (no
//! copy); one that Python still holds (an array kept on `self`, in a
//! global, in a reference cycle) is copied, and the copy is the output, so
//! writes through the kept array reach nothing the runtime uses. Inputs
//! are immutable tensors: an array kept from one holds the tensor, and the
//! runtime never writes a tensor that is shared.
//!
//! **The GIL.** A kernel attaches to Python on the thread that runs it:
//! the calling thread of an eager op (which holds the GIL already), or a
//! worker of a graph run. Every graph run from Python releases the GIL
//! while it waits (`run.rs`), and no runtime lock is held across a kernel
//! call, so a worker waiting for the GIL waits only for Python code, never
//! for a thread that waits for it. Python code that runs ops of its own
//! from a worker shards them on the same pool: rayon lets the waiting
//! worker run its own shards, so they progress. Once the interpreter is
//! finalizing, kernels fail with `Cancelled` instead of attaching.
//!
//! **Errors.** An exception the function raises reaches the caller as
//! the same object (with a note naming the op and node; see
//! `errors::stash`), unless it is an `opforge.errors.OpError`, whose code
//! and message become the kernel's status (how `py_function` raises
//! TensorFlow's errors).

use crate::errors;
use crate::tensor::PyTensor;
use numpy::npyffi::flags::{NPY_ARRAY_CARRAY, NPY_ARRAY_CARRAY_RO};
use numpy::npyffi::{npy_intp, NpyTypes, NPY_TYPES, PY_ARRAY_API};
use opforge::kernel::{
    KernelDefBuilder, KernelRegistration, OpKernel, OpKernelContext, OutputRequest, RequestSupport,
};
use opforge::op_def::OpDefBuilder;
use opforge::registry::Registry;
use opforge::shape_inference::InferenceContext;
use opforge::{Code, DataType, Status, Tensor, TensorShape};
use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};
use smallvec::SmallVec;
use std::ffi::c_int;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// Set by the package's `atexit` hook: Python is shutting down, so a
/// kernel must not attach to it any more.
static FINALIZING: AtomicBool = AtomicBool::new(false);

/// Python kernels, shape functions and kernel factories running now.
static IN_FLIGHT: AtomicUsize = AtomicUsize::new(0);

/// One call into Python from the runtime, counted in [`IN_FLIGHT`];
/// `None` once the interpreter is finalizing (the caller then fails with
/// `Cancelled` and never attaches). The count is raised before the flag is
/// read and the shutdown sets the flag before it reads the count (both
/// sequentially consistent), so either the shutdown waits for this call or
/// the call sees the flag.
struct Entered;

impl Entered {
    fn new() -> opforge::Result<Entered> {
        IN_FLIGHT.fetch_add(1, Ordering::SeqCst);
        let entered = Entered;
        if FINALIZING.load(Ordering::SeqCst) {
            return Err(finalizing());
        }
        Ok(entered)
    }
}

impl Drop for Entered {
    fn drop(&mut self) {
        IN_FLIGHT.fetch_sub(1, Ordering::SeqCst);
    }
}

/// `_C.python_kernels_shutdown()`: called at interpreter exit (an `atexit`
/// hook, before the interpreter finalizes). From now on Python kernels fail
/// with `Cancelled` instead of attaching, and the calls under way (on
/// workers of graph runs) are given up to two seconds to finish, with the
/// GIL released: a thread that attaches while the interpreter finalizes
/// aborts the process.
#[pyfunction]
pub fn python_kernels_shutdown(py: Python<'_>) {
    FINALIZING.store(true, Ordering::SeqCst);
    py.detach(|| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
        while IN_FLIGHT.load(Ordering::SeqCst) > 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    });
}

fn finalizing() -> Status {
    Status::new(
        Code::Cancelled,
        "the Python interpreter is shutting down: Python kernels no longer run",
    )
}

/// One output of a call: lent to Python, or set.
enum Out {
    Lent(Py<LentBuffer>),
    Set(Tensor),
}

/// One call of a Python kernel, as the function sees it
/// (`opforge._C.KernelCall`); closed when the function returns.
#[pyclass(module = "opforge._C", name = "KernelCall")]
pub struct KernelCall {
    op: String,
    node: String,
    /// The input tensors (the list the function gets), for `arrays`.
    inputs: Py<PyList>,
    output_types: Vec<DataType>,
    outputs: Vec<Option<Out>>,
    /// What the runtime asks of each output.
    requests: Vec<OutputRequest>,
    /// For an `Add` request: the accumulator, lent by `allocate_output`.
    accumulators: Vec<Option<Tensor>>,
    open: bool,
}

impl KernelCall {
    fn check(&self, i: usize) -> PyResult<DataType> {
        if !self.open {
            return Err(PyRuntimeError::new_err(format!(
                "this call of op '{}' (node '{}') has returned: its outputs can no longer be set",
                self.op, self.node
            )));
        }
        self.output_types.get(i).copied().ok_or_else(|| {
            PyValueError::new_err(format!(
                "op '{}' has {} outputs; there is no output {i}",
                self.op,
                self.output_types.len()
            ))
        })
    }

    fn dtype_error(&self, i: usize, want: DataType, got: DataType) -> PyErr {
        PyValueError::new_err(format!(
            "output {i} of op '{}' (node '{}') must be {want}, not {got}",
            self.op, self.node
        ))
    }
}

#[pymethods]
impl KernelCall {
    /// The op's name.
    #[getter]
    fn op_name(&self) -> &str {
        &self.op
    }

    /// The node's name (the op's name for an eager call).
    #[getter]
    fn node_name(&self) -> &str {
        &self.node
    }

    /// What the runtime asks of each output, in MXNet's words: `'write'`,
    /// `'null'` (nobody reads it: the kernel may skip it), `'add'`
    /// (`allocate_output` lends the accumulator: add the result into it).
    /// Only requests the op declared it handles; `'write'` otherwise.
    #[getter]
    fn requests(&self) -> Vec<&'static str> {
        self.requests.iter().map(|r| r.name()).collect()
    }

    /// The outputs' dtypes, as `DataType` numbers.
    #[getter]
    fn output_dtypes(&self) -> Vec<i32> {
        self.output_types.iter().map(|d| *d as i32).collect()
    }

    /// A new buffer for output `i` of shape `shape`, lent for this call,
    /// as a writable numpy array over it (its base is the [`LentBuffer`];
    /// uninitialized memory: the function writes every element).
    fn allocate_output<'py>(
        &mut self,
        py: Python<'py>,
        i: usize,
        shape: Vec<i64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let dtype = self.check(i)?;
        let Some(npy) = npy_type(dtype) else {
            return Err(PyTypeError::new_err(format!(
                "output {i} of op '{}' is {dtype}, which has no numpy buffer: set it with \
                 set_output",
                self.op
            )));
        };
        let shape = errors::check(py, TensorShape::new(&shape), Some(&self.op))?;
        let t = match self.accumulators.get_mut(i).and_then(Option::take) {
            // An `Add` request: the accumulator, holding the sum so far.
            Some(acc) => {
                if acc.shape() != &shape {
                    let want = acc.dims().to_vec();
                    self.accumulators[i] = Some(acc);
                    return Err(PyValueError::new_err(format!(
                        "output {i} of op '{}' is requested with 'add' into an accumulator of \
                         shape {want:?}; allocate_output asked for {:?}",
                        self.op,
                        shape.dims()
                    )));
                }
                acc
            }
            None => errors::check(py, Tensor::zeros_with_shape(dtype, shape), Some(&self.op))?,
        };
        let (lent, array) = lend(py, t, npy)?;
        self.outputs[i] = Some(Out::Lent(lent));
        Ok(array)
    }

    /// Read-only numpy views of the inputs (no copy; each keeps its tensor
    /// alive); for an input numpy cannot view as it is (strings, bfloat16),
    /// what `Tensor.numpy()` gives.
    fn arrays<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let out = PyList::empty(py);
        for item in self.inputs.bind(py).iter() {
            out.append(input_array(py, &item)?)?;
        }
        Ok(out)
    }

    /// Sets output `i` to `value`: an `opforge.Tensor` (kept as it is: it
    /// is immutable) or a numpy array (copied).
    fn set_output(&mut self, i: usize, value: &Bound<'_, PyAny>) -> PyResult<()> {
        let py = value.py();
        let dtype = self.check(i)?;
        let t = if let Ok(t) = value.cast::<PyTensor>() {
            t.get().t.clone()
        } else if let Ok(arr) = value.cast::<numpy::PyUntypedArray>() {
            let t = crate::convert::ndarray_tensor(arr, None)?;
            // A view of the caller's array would change with it: copy.
            errors::check(py, t.deep_copy(), Some(&self.op))?
        } else {
            return Err(PyTypeError::new_err(format!(
                "output {i} of op '{}' takes an opforge.Tensor or a numpy array, not {}",
                self.op,
                value.get_type().name()?
            )));
        };
        if t.dtype() != dtype {
            return Err(self.dtype_error(i, dtype, t.dtype()));
        }
        self.outputs[i] = Some(Out::Set(t));
        Ok(())
    }
}

/// An output buffer lent to Python for one kernel call
/// (`opforge._C.LentBuffer`): the base object of the writable numpy array
/// `allocate_output` returns, holding the only reference to the output's
/// tensor while the call runs. Nothing else reads or writes the tensor's
/// bytes through the runtime until the call returns: then the kernel takes
/// the tensor when nothing in Python holds this object any more, and copies
/// it otherwise (the array kept then writes only this object's tensor).
#[pyclass(module = "opforge._C", name = "LentBuffer")]
pub struct LentBuffer {
    t: Tensor,
}

#[pymethods]
impl LentBuffer {
    /// The output's dims.
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.t.dims())
    }

    /// The output's dtype, as a `DataType` number.
    #[getter]
    fn dtype_enum(&self) -> i32 {
        self.t.dtype() as i32
    }
}

/// A read-only numpy view of `item` (an `opforge.Tensor`), no copy, its
/// base the tensor object; for a dtype numpy cannot view as it is (strings,
/// bfloat16), what `Tensor.numpy()` gives.
fn input_array<'py>(py: Python<'py>, item: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let t = item.cast::<PyTensor>().map_err(PyErr::from)?;
    let tensor = &t.get().t;
    let Some(npy) = npy_type(tensor.dtype()) else {
        return crate::hooks::hook(py, "numpy")?.call1((item,));
    };
    let data = match tensor.host_data() {
        Some((p, _)) => p.cast_mut(),
        None if tensor.num_elements() == 0 => std::ptr::null_mut(),
        None => return crate::hooks::hook(py, "numpy")?.call1((item,)),
    };
    // SAFETY: `data` is the tensor's host data (C order, `dims` of its
    // dtype), valid while the tensor lives, which the array's base (the
    // `opforge.Tensor` object holding it) ensures; the array is read-only
    // and the tensor immutable. Null for an empty tensor: numpy allocates.
    unsafe { array_over(py, data, npy, tensor.dims(), false, item.clone()) }
}

/// Lends `t` (a tensor nothing else holds) for one call: the
/// [`LentBuffer`] holding it, and a writable numpy array (of type `npy`)
/// over its memory whose base is that buffer.
fn lend<'py>(
    py: Python<'py>,
    t: Tensor,
    npy: NPY_TYPES,
) -> PyResult<(Py<LentBuffer>, Bound<'py, PyAny>)> {
    let dims = t.dims().to_vec();
    let lent = Bound::new(py, LentBuffer { t })?;
    let data = {
        let mut b = lent.borrow_mut();
        b.t.host_data_mut().map_or(std::ptr::null_mut(), |(p, _)| p)
    };
    // SAFETY: `data` is the buffer of the tensor the `LentBuffer` alone
    // holds (fresh or the runtime's accumulator, not shared), valid for the
    // array's bytes (C order, `dims` of the dtype) while the buffer lives,
    // which the array's base reference ensures; null only for an empty
    // tensor (numpy then allocates its own zero bytes).
    let array = unsafe { array_over(py, data, npy, &dims, true, lent.clone().into_any())? };
    Ok((lent.unbind(), array))
}

/// The numpy type number of a dtype numpy holds as it is.
fn npy_type(d: DataType) -> Option<NPY_TYPES> {
    let long = std::mem::size_of::<std::os::raw::c_long>() == 8;
    Some(match d {
        DataType::Float => NPY_TYPES::NPY_FLOAT,
        DataType::Double => NPY_TYPES::NPY_DOUBLE,
        DataType::Half => NPY_TYPES::NPY_HALF,
        DataType::Int8 => NPY_TYPES::NPY_BYTE,
        DataType::UInt8 => NPY_TYPES::NPY_UBYTE,
        DataType::Int16 => NPY_TYPES::NPY_SHORT,
        DataType::UInt16 => NPY_TYPES::NPY_USHORT,
        DataType::Int32 => NPY_TYPES::NPY_INT,
        DataType::UInt32 => NPY_TYPES::NPY_UINT,
        DataType::Int64 if long => NPY_TYPES::NPY_LONG,
        DataType::Int64 => NPY_TYPES::NPY_LONGLONG,
        DataType::UInt64 if long => NPY_TYPES::NPY_ULONG,
        DataType::UInt64 => NPY_TYPES::NPY_ULONGLONG,
        DataType::Bool => NPY_TYPES::NPY_BOOL,
        DataType::Complex64 => NPY_TYPES::NPY_CFLOAT,
        DataType::Complex128 => NPY_TYPES::NPY_CDOUBLE,
        _ => return None,
    })
}

/// A C-order numpy array of type `npy` and shape `dims` over `data`,
/// whose base is `base` (numpy keeps a reference to it as long as the
/// array, or any view of it, lives).
///
/// # Safety
/// `data` is valid for reads (and writes when `writable`) of the array's
/// bytes while `base` lives, aligned for the type; or null for an empty
/// array (numpy then allocates).
unsafe fn array_over<'py>(
    py: Python<'py>,
    data: *mut u8,
    npy: NPY_TYPES,
    dims: &[i64],
    writable: bool,
    base: Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    let mut dims: SmallVec<[npy_intp; 6]> = dims.iter().map(|&d| d as npy_intp).collect();
    let flags = if writable {
        NPY_ARRAY_CARRAY
    } else {
        NPY_ARRAY_CARRAY_RO
    };
    // SAFETY: numpy's C API, with the GIL (`py`): the descriptor reference
    // `PyArray_NewFromDescr` steals is the new one `DescrFromType` returns;
    // the caller vouches for `data` (see above); `dims` outlives the call.
    let arr = unsafe {
        let descr = PY_ARRAY_API.PyArray_DescrFromType(py, npy as c_int);
        if descr.is_null() {
            return Err(PyErr::fetch(py));
        }
        PY_ARRAY_API.PyArray_NewFromDescr(
            py,
            numpy::npyffi::get_type_object(py, NpyTypes::PyArray_Type),
            descr,
            dims.len() as c_int,
            dims.as_mut_ptr(),
            std::ptr::null_mut(),
            data.cast(),
            flags,
            std::ptr::null_mut(),
        )
    };
    if arr.is_null() {
        return Err(PyErr::fetch(py));
    }
    // SAFETY: `arr` is a new reference to the array just made.
    let arr = unsafe { Bound::from_owned_ptr(py, arr) };
    if !data.is_null() {
        // SAFETY: `arr` is a fresh array without a base; `SetBaseObject`
        // steals the reference `into_ptr` gives it.
        let rc =
            unsafe { PY_ARRAY_API.PyArray_SetBaseObject(py, arr.as_ptr().cast(), base.into_ptr()) };
        if rc != 0 {
            return Err(PyErr::fetch(py));
        }
    }
    Ok(arr)
}

/// The kernel of an op written in Python.
struct PyKernel {
    body: Body,
    /// The requests beyond `Write` the op's Python code handles.
    support: RequestSupport,
}

/// How a Python kernel runs its Python code.
enum Body {
    /// `f(call, inputs)` (see the module documentation).
    Call(Py<PyAny>),
    /// MXNet's `CustomOp.forward`, called with its views made here.
    Forward(CustomForward),
}

/// Changed by `_C.python_kernel_plans_changed()` (a custom operator type
/// registered again): every [`ForwardPlan`] made before is stale.
static PLAN_GENERATION: AtomicU64 = AtomicU64::new(0);

/// `_C.python_kernel_plans_changed()`: makes custom-op kernels ask their
/// planner again.
#[pyfunction]
pub fn python_kernel_plans_changed() {
    PLAN_GENERATION.fetch_add(1, Ordering::AcqRel);
}

/// The forward kernel of an MXNet custom operator: per input shapes,
/// `planner(in_shapes)` gives `(out_shapes, forward, aux, ndarray_class,
/// is_train)` once; each call then makes the views (`ndarray_class` over
/// read-only arrays of the inputs and writable arrays of lent outputs) and
/// calls `forward(is_train, req, in_data, out_data, aux)`, with no Python
/// code of opforge's own in between.
struct CustomForward {
    planner: Py<PyAny>,
    /// (input dims, each rank first) -> plan. Few entries (one per input
    /// shape the node sees): a list.
    plans: Mutex<Vec<(ShapesKey, Arc<ForwardPlan>)>>,
}

/// The input dims of a call, each input's rank first.
type ShapesKey = SmallVec<[i64; 8]>;

/// What a custom operator's planner returns (see [`CustomForward`]).
type PlannerResult = (Vec<Vec<i64>>, Py<PyAny>, Py<PyAny>, Py<PyAny>, bool);

/// What [`CustomForward`] needs for inputs of one shape.
struct ForwardPlan {
    generation: u64,
    out_shapes: Vec<TensorShape>,
    forward: Py<PyAny>,
    aux: Py<PyAny>,
    ndarray: Py<PyAny>,
    is_train: bool,
}

/// How many input shapes a custom-op kernel keeps plans for.
const MAX_PLANS: usize = 16;

impl CustomForward {
    fn plan(&self, py: Python<'_>, inputs: &[Tensor]) -> PyResult<Arc<ForwardPlan>> {
        let key: ShapesKey = inputs
            .iter()
            .flat_map(|t| std::iter::once(t.rank() as i64).chain(t.dims().iter().copied()))
            .collect();
        let generation = PLAN_GENERATION.load(Ordering::Acquire);
        {
            let plans = self.plans.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some((_, p)) = plans
                .iter()
                .find(|(k, p)| *k == key && p.generation == generation)
            {
                return Ok(p.clone());
            }
        }
        // Python runs with no lock held.
        let shapes = PyTuple::new(py, inputs.iter().map(|t| t.dims().to_vec()))?;
        let r = self.planner.bind(py).call1((shapes,))?;
        let (outs, forward, aux, ndarray, is_train): PlannerResult = r.extract()?;
        let mut out_shapes = Vec::with_capacity(outs.len());
        for d in outs {
            out_shapes.push(
                TensorShape::new(&d).map_err(|e| PyValueError::new_err(e.message().to_string()))?,
            );
        }
        let plan = Arc::new(ForwardPlan {
            generation,
            out_shapes,
            forward,
            aux,
            ndarray,
            is_train,
        });
        let mut plans = self.plans.lock().unwrap_or_else(PoisonError::into_inner);
        plans.retain(|(_, p)| p.generation == generation);
        if plans.len() >= MAX_PLANS {
            plans.remove(0);
        }
        plans.push((key, plan.clone()));
        Ok(plan)
    }

    /// Runs `forward` for one call: the outputs it was lent.
    fn run(
        &self,
        py: Python<'_>,
        inputs: &[Tensor],
        output_types: &[DataType],
        requests: &[OutputRequest],
        mut accumulators: Vec<Option<Tensor>>,
    ) -> PyResult<Vec<Option<Out>>> {
        let plan = self.plan(py, inputs)?;
        if plan.out_shapes.len() != output_types.len() {
            return Err(PyValueError::new_err(format!(
                "infer_shape gave {} output shapes for {} outputs",
                plan.out_shapes.len(),
                output_types.len()
            )));
        }
        let view = ViewMaker::new(plan.ndarray.bind(py));
        let in_data = PyList::empty(py);
        for t in inputs {
            let item = Bound::new(py, PyTensor::new(t.clone()))?.into_any();
            in_data.append(view.make(input_array(py, &item)?)?)?;
        }
        let out_data = PyList::empty(py);
        let mut outs = Vec::with_capacity(output_types.len());
        for (i, (shape, &dtype)) in plan.out_shapes.iter().zip(output_types).enumerate() {
            let npy = npy_type(dtype).ok_or_else(|| {
                PyTypeError::new_err(format!("output {i} is {dtype}, which has no numpy buffer"))
            })?;
            let t = match accumulators.get_mut(i).and_then(Option::take) {
                Some(acc) if acc.shape() == shape => acc,
                Some(acc) => {
                    return Err(PyValueError::new_err(format!(
                        "output {i} is requested with 'add' into an accumulator of shape {:?}; \
                         infer_shape gives {:?}",
                        acc.dims(),
                        shape.dims()
                    )))
                }
                None => Tensor::zeros_with_shape(dtype, shape.clone())
                    .map_err(|e| PyValueError::new_err(e.message().to_string()))?,
            };
            let (lent, array) = lend(py, t, npy)?;
            outs.push(Some(Out::Lent(lent)));
            out_data.append(view.make(array)?)?;
        }
        let req = PyList::new(
            py,
            requests
                .iter()
                .map(|r| request_name(py, *r))
                .collect::<PyResult<SmallVec<[_; 4]>>>()?,
        )?;
        let args = PyTuple::new(
            py,
            [
                plan.is_train.into_pyobject(py)?.to_owned().into_any(),
                req.into_any(),
                in_data.into_any(),
                out_data.into_any(),
                plan.aux.bind(py).clone(),
            ],
        )?;
        call_maybe_paused(py, plan.forward.bind(py), args)?;
        Ok(outs)
    }
}

/// Makes `CustomOp` views: instances of the plan's view class
/// (`opforge.operator.NDArray`, whose slot `_a` holds the array). A class
/// that keeps `object.__new__` gets its instances as `object.__new__(cls)`
/// plus the slot's assignment, with no Python frame (calling the class would
/// run its `__init__`); any other class is called with the array.
struct ViewMaker<'a, 'py> {
    cls: &'a Bound<'py, PyAny>,
    /// `cls`'s `tp_new` is `object`'s.
    object_new: bool,
}

impl<'a, 'py> ViewMaker<'a, 'py> {
    fn new(cls: &'a Bound<'py, PyAny>) -> Self {
        let object_new = cls.cast::<pyo3::types::PyType>().is_ok_and(|t| {
            // SAFETY: reads the `tp_new` slots of a live type object (`t`,
            // held) and of the static `object` type, with the GIL. Both are
            // C functions of libpython (one address each), compared as
            // addresses.
            unsafe {
                (*t.as_type_ptr()).tp_new.map(|f| f as usize)
                    == (*std::ptr::addr_of!(ffi::PyBaseObject_Type))
                        .tp_new
                        .map(|f| f as usize)
            }
        });
        ViewMaker { cls, object_new }
    }

    fn make(&self, array: Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let py = self.cls.py();
        if !self.object_new {
            return self.cls.call1((array,));
        }
        let empty = pyo3::types::PyTuple::empty(py);
        // SAFETY: `cls` is a type whose `tp_new` is `object`'s (checked in
        // `new`), so `object.__new__(cls)` with no arguments is what calling
        // `cls.__new__(cls)` does; it returns a new reference or null with
        // the error set. `empty` outlives the call.
        let view = unsafe {
            let new = (*std::ptr::addr_of!(ffi::PyBaseObject_Type))
                .tp_new
                .ok_or_else(|| PyTypeError::new_err("object has no tp_new"))?;
            Bound::from_owned_ptr_or_err(
                py,
                new(
                    self.cls.as_ptr().cast(),
                    empty.as_ptr(),
                    std::ptr::null_mut(),
                ),
            )?
        };
        view.setattr(pyo3::intern!(py, "_a"), array)?;
        Ok(view)
    }
}

/// `req`'s entries: MXNet's names ([`OutputRequest::name`]), each string
/// made once.
fn request_name(py: Python<'_>, r: OutputRequest) -> PyResult<Bound<'_, pyo3::types::PyString>> {
    static NAMES: [pyo3::sync::PyOnceLock<Py<pyo3::types::PyString>>; 4] = [
        pyo3::sync::PyOnceLock::new(),
        pyo3::sync::PyOnceLock::new(),
        pyo3::sync::PyOnceLock::new(),
        pyo3::sync::PyOnceLock::new(),
    ];
    let i = match r {
        OutputRequest::Null => 0,
        OutputRequest::Write => 1,
        OutputRequest::InPlace => 2,
        OutputRequest::Add => 3,
    };
    Ok(NAMES[i]
        .get_or_init(py, || pyo3::types::PyString::intern(py, r.name()).unbind())
        .bind(py)
        .clone())
}

/// Calls `f(*args)`, with this thread's tapes and graphs set aside when it
/// may have any (`_pykernel.paused`, through the `run_paused` hook).
fn call_maybe_paused<'py>(
    py: Python<'py>,
    f: &Bound<'py, PyAny>,
    args: Bound<'py, PyTuple>,
) -> PyResult<Bound<'py, PyAny>> {
    if crate::fast::tapes_or_graphs() {
        crate::hooks::hook(py, "run_paused")?.call1((f, args))
    } else {
        f.call(args, None)
    }
}

impl OpKernel for PyKernel {
    fn supported_requests(&self) -> RequestSupport {
        self.support
    }

    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> opforge::Result<()> {
        let _entered = Entered::new()?;
        let n = ctx.num_outputs();
        let output_types: Vec<DataType> = (0..n).map(|i| ctx.output_type(i)).collect();
        let requests: Vec<OutputRequest> = (0..n).map(|i| ctx.output_request(i)).collect();
        let mut accumulators: Vec<Option<Tensor>> = Vec::with_capacity(n);
        for (i, r) in requests.iter().enumerate() {
            accumulators.push(if *r == OutputRequest::Add {
                // Set by the runtime, not shared (`call_kernel_with`).
                Some(std::mem::replace(ctx.output_mut(i)?, Tensor::scalar(0u8)))
            } else {
                None
            });
        }
        let outs = Python::attach(|py| -> opforge::Result<Vec<Tensor>> {
            let op = &ctx.op_def().name;
            let node = ctx.node_name();
            let outputs = match &self.body {
                Body::Call(f) => run_call(
                    py,
                    f,
                    ctx.inputs(),
                    op,
                    node,
                    output_types,
                    &requests,
                    accumulators,
                ),
                Body::Forward(cf) => {
                    cf.run(py, ctx.inputs(), &output_types, &requests, accumulators)
                }
            };
            let outputs = outputs.map_err(|e| {
                kernel_error(
                    py,
                    e,
                    &format!("the Python kernel of op '{op}' (node '{node}')"),
                )
            })?;
            let mut tensors = Vec::with_capacity(n);
            for (i, out) in outputs.into_iter().enumerate() {
                tensors.push(match out {
                    Some(Out::Set(t)) => t,
                    Some(Out::Lent(lent)) => take_lent(py, lent)?,
                    // Nobody reads it: it may stay unset.
                    None if requests[i] == OutputRequest::Null => Tensor::scalar(0u8),
                    None if requests[i] == OutputRequest::Add => {
                        return Err(Status::invalid_argument(format!(
                            "the Python kernel of op '{op}' (node '{node}') was asked to add \
                             output {i} into its accumulator and did not ask for it \
                             (allocate_output)"
                        )))
                    }
                    None => {
                        return Err(Status::invalid_argument(format!(
                            "the Python kernel of op '{op}' (node '{node}') did not set output {i}"
                        )))
                    }
                });
            }
            Ok(tensors)
        })?;
        for (i, t) in outs.into_iter().enumerate() {
            if requests[i] == OutputRequest::Null {
                continue;
            }
            ctx.set_output(i, t)?;
        }
        Ok(())
    }
}

/// Runs `f(call, inputs)` for one call: the outputs the call was given.
#[allow(clippy::too_many_arguments)]
fn run_call(
    py: Python<'_>,
    f: &Py<PyAny>,
    tensors: &[Tensor],
    op: &str,
    node: &str,
    output_types: Vec<DataType>,
    requests: &[OutputRequest],
    accumulators: Vec<Option<Tensor>>,
) -> PyResult<Vec<Option<Out>>> {
    let inputs = PyList::empty(py);
    for t in tensors {
        inputs.append(PyTensor::new(t.clone()))?;
    }
    let n = output_types.len();
    let call = Py::new(
        py,
        KernelCall {
            op: op.to_string(),
            node: node.to_string(),
            inputs: inputs.clone().unbind(),
            output_types,
            outputs: (0..n).map(|_| None).collect(),
            requests: requests.to_vec(),
            accumulators,
            open: true,
        },
    )?;
    let args = PyTuple::new(
        py,
        [call.clone_ref(py).into_any(), inputs.into_any().unbind()],
    )?;
    let result = call_maybe_paused(py, f.bind(py), args);
    // Close the call before anything else: a kept `call` can set nothing
    // from now on.
    let outputs = {
        let mut c = call.borrow_mut(py);
        c.open = false;
        std::mem::take(&mut c.outputs)
    };
    result?;
    Ok(outputs)
}

/// The output a lent buffer holds: taken when nothing else holds the
/// buffer, else copied (the holder keeps the original, which no tensor
/// shares).
fn take_lent(py: Python<'_>, lent: Py<LentBuffer>) -> opforge::Result<Tensor> {
    // SAFETY: `lent` is a live object (this function holds a reference);
    // reading its reference count with the GIL held is what
    // `sys.getrefcount` does.
    let refs = unsafe { ffi::Py_REFCNT(lent.as_ptr()) };
    if refs == 1 {
        let mut b = lent.borrow_mut(py);
        let empty = Tensor::scalar(0u8);
        return Ok(std::mem::replace(&mut b.t, empty));
    }
    lent.borrow(py).t.deep_copy()
}

/// The status of an exception a Python kernel raised: an `OpError`'s own
/// code and message, else the exception kept to be raised again as
/// itself.
fn kernel_error(py: Python<'_>, e: PyErr, what: &str) -> Status {
    let value = e.value(py);
    if let (Ok(code), Ok(message)) = (value.getattr("error_code"), value.getattr("message")) {
        if let (Ok(code), Ok(message)) = (code.extract::<i32>(), message.extract::<String>()) {
            if let Some(code) = Code::from_i32(code) {
                return Status::new(code, message);
            }
        }
    }
    errors::stash(py, e, what)
}

/// Calls the Python shape function `f(input_shapes, attrs)`: input shapes
/// as lists of dims (None for an unknown dim) or None for an unknown rank;
/// it returns one such shape per output.
fn call_shape_fn(f: &Py<PyAny>, c: &mut InferenceContext) -> opforge::Result<()> {
    let _entered = Entered::new()?;
    Python::attach(|py| {
        let run = |c: &mut InferenceContext| -> PyResult<Vec<Option<Vec<Option<i64>>>>> {
            let shapes = PyList::empty(py);
            for i in 0..c.num_inputs() {
                let s = c.input(i);
                match c.dims(s) {
                    None => shapes.append(py.None())?,
                    Some(dims) => {
                        let dims: Vec<Option<i64>> = dims.iter().map(|&d| c.value(d)).collect();
                        shapes.append(PyList::new(py, dims)?)?
                    }
                }
            }
            let attrs = pyo3::types::PyDict::new(py);
            for (k, v) in c.attrs() {
                attrs.set_item(k, crate::attrs::attr_to_py(py, v)?)?;
            }
            f.bind(py).call1((shapes, attrs))?.extract()
        };
        let outs = run(c).map_err(|e| {
            let what = format!("the Python shape function of op '{}'", c.op_def().name);
            kernel_error(py, e, &what)
        })?;
        if outs.len() != c.num_outputs() {
            return Err(Status::invalid_argument(format!(
                "the Python shape function of op '{}' returned {} shapes for {} outputs",
                c.op_def().name,
                outs.len(),
                c.num_outputs()
            )));
        }
        for (i, s) in outs.into_iter().enumerate() {
            let h = match s {
                None => c.unknown_shape(),
                Some(dims) => {
                    let dims: Vec<i64> = dims.into_iter().map(|d| d.unwrap_or(-1)).collect();
                    c.make_partial_shape(Some(&dims))
                }
            };
            c.set_output(i, h);
        }
        Ok(())
    })
}

/// `_C.register_python_op(name, inputs, outputs, attrs, doc, factory,
/// shape_fn, stateful, location)`: registers op `name` (spec strings as
/// `OpDefBuilder` takes them) with a CPU kernel made by
/// `factory(attrs, node_name)` (once per node, or per eager call
/// signature: it returns the callable `f(call, inputs)` that runs each
/// call) and `shape_fn` (or unknown output shapes) as its shape function,
/// owned by the Python owner. With `forward`, the op is an MXNet custom
/// operator's forward: `factory` returns the planner of [`CustomForward`]
/// instead. `requests` names the output requests beyond
/// `'write'` the Python code handles (`'null'`, `'add'`; see
/// [`KernelCall::requests`]); the runtime asks only for those.
#[pyfunction]
#[pyo3(signature = (name, inputs, outputs, attrs, doc, factory, shape_fn, stateful, location, requests=Vec::new(), forward=false))]
#[allow(clippy::too_many_arguments)]
pub fn register_python_op(
    py: Python<'_>,
    name: &str,
    inputs: Vec<String>,
    outputs: Vec<String>,
    attrs: Vec<String>,
    doc: &str,
    factory: Py<PyAny>,
    shape_fn: Option<Py<PyAny>>,
    stateful: bool,
    location: &str,
    requests: Vec<String>,
    forward: bool,
) -> PyResult<()> {
    let mut support = RequestSupport::WRITE_ONLY;
    for r in &requests {
        support = support
            | match r.as_str() {
                "write" => RequestSupport::WRITE_ONLY,
                "null" => RequestSupport::NULL,
                "add" => RequestSupport::ADD,
                other => {
                    return Err(PyValueError::new_err(format!(
                        "op '{name}': unknown output request '{other}' (a Python kernel may \
                         handle 'null' and 'add')"
                    )))
                }
            };
    }
    let mut b = OpDefBuilder::new(name);
    for s in inputs {
        b = b.input(s);
    }
    for s in outputs {
        b = b.output(s);
    }
    for s in attrs {
        b = b.attr(s);
    }
    if !doc.is_empty() {
        b = b.doc(doc);
    }
    if stateful {
        b = b.stateful();
    }
    b = match shape_fn {
        Some(f) => b.set_shape_fn(move |c| call_shape_fn(&f, c)),
        None => b.set_shape_fn(|c| {
            for i in 0..c.num_outputs() {
                let u = c.unknown_shape();
                c.set_output(i, u);
            }
            Ok(())
        }),
    };
    let r = Registry::global();
    let registrar = r.registrar(crate::grad::owner(), location);
    errors::check(py, registrar.op(b), None)?;
    let factory = std::sync::Arc::new(factory);
    let reg =
        KernelRegistration::with_factory(KernelDefBuilder::new(name).device("CPU"), move |c| {
            let _entered = Entered::new()?;
            Python::attach(|py| {
                let made = (|| -> PyResult<Py<PyAny>> {
                    let attrs = pyo3::types::PyDict::new(py);
                    for (k, v) in c.attrs() {
                        attrs.set_item(k, crate::attrs::attr_to_py(py, v)?)?;
                    }
                    Ok(factory.bind(py).call1((attrs, c.node_name()))?.unbind())
                })();
                let func = made.map_err(|e| {
                    let what = format!("the Python kernel factory of op '{}'", c.op_def().name);
                    kernel_error(py, e, &what)
                })?;
                let body = if forward {
                    Body::Forward(CustomForward {
                        planner: func,
                        plans: Mutex::new(Vec::new()),
                    })
                } else {
                    Body::Call(func)
                };
                Ok(Box::new(PyKernel { body, support }) as Box<dyn OpKernel>)
            })
        });
    errors::check(py, registrar.kernel(reg), None)
}
