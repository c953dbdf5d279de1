//! The native fast path of the generated op functions (`_C.OpFunction`)
//! and of `Tensor`'s operators.
//!
//! Every generated op function (`opforge.ops.add_v2`, `opforge.raw_ops.AddV2`,
//! a loaded library's `lib.zero_out`, the aliases `opforge.add`, ...) is an
//! [`OpFunction`]: a callable holding the op's call plan, built once
//! (argument slots by position and keyword, which attrs are hidden because
//! the inputs determine them, the defaults, the attr types) and, per set of
//! attr values, an [`opforge::eager::PreparedOp`] whose inline cache holds
//! the resolved attrs and kernel per input-dtype signature. A call whose
//! inputs are all `opforge.Tensor`s (or C-contiguous numeric numpy arrays
//! a Tensor can view as they are) and whose attrs are left to their
//! defaults or given as plain ints, floats, bools, strings or
//! `opforge.DType`s runs here, without Python code, and is recorded here
//! on the recording tapes. Any other call (Python values to convert,
//! lists, other attr values, a wrong number of arguments, ...) goes to the
//! function's Python fallback (`OpFunction.__wrapped__`, the generated
//! Python function), unchanged, so behaviour and error messages are the
//! fallback's. Errors of a call that ran here are the ones the fallback
//! would raise for it (the same runtime call underneath).
//!
//! CPython calls an `OpFunction` through the vectorcall protocol
//! ([`op_function_vectorcall`], enabled on the type by
//! [`enable_vectorcall`]): the arguments arrive as an array and a tuple of
//! keyword names, and a fallback call is passed on the same way.
//!
//! # The per-thread switch
//!
//! `_C.set_eager_fast_path(enabled)` turns the fast path off (or on again)
//! for the calling thread; it is on by default. While it is off, every
//! `OpFunction` call goes to its Python fallback and every `Tensor`
//! operator to its Python hook: graph mode turns it off while a graph is
//! the default, so that op functions add nodes instead of running.
//!
//! # Tapes
//!
//! The fast path records on the `_C.Tape`s that `_C.set_recording_tapes`
//! last gave for the thread (the Python layer gives the tapes of
//! `opforge._tape.active_tapes()` whenever that changes). Turning the fast
//! path back on marks that list stale: the next fast call first asks the
//! Python layer for it again (the `sync_tapes` hook), since what is active
//! may depend on what changed while the fast path was off.

use crate::convert::{is_exact_ndarray, ndarray_dtype, ndarray_tensor, ndarray_view};
use crate::errors;
use crate::exec::{context, DETACH_ELEMENTS};
use crate::hooks::hook;
use crate::tape::Tape;
use crate::tensor::PyTensor;
use crate::vectorcall::{forward_vectorcall, guarded, keyword_count};
use numpy::PyUntypedArray;
use opforge::attrs::AttrMap;
use opforge::eager::PreparedOp;
use opforge::proto::attr_value::Value;
use opforge::proto::AttrValue;
use opforge::{DataType, Registry, Tensor};
use pyo3::exceptions::PyRuntimeError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use smallvec::SmallVec;
use std::cell::{Cell, RefCell};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

/// What the fast path keeps per thread (one thread-local: each access
/// from this shared library is a call).
struct ThreadState {
    /// Whether `OpFunction` calls on this thread may run natively.
    fast: Cell<bool>,
    /// Whether `tapes` must be asked for again before it is used.
    stale: Cell<bool>,
    /// The tapes recording on this thread, as the Python layer last said.
    tapes: RefCell<Vec<Py<Tape>>>,
}

thread_local! {
    static STATE: ThreadState = const {
        ThreadState {
            fast: Cell::new(true),
            stale: Cell::new(false),
            tapes: RefCell::new(Vec::new()),
        }
    };
}

/// Whether the calling thread may have tapes recording or a default graph
/// (as the Python layer last said, or it may have changed since): a Python
/// kernel running here then sets them aside while its Python code runs
/// (`crate::pykernel`). A runtime worker never has either.
pub fn tapes_or_graphs() -> bool {
    STATE.with(|s| {
        !s.fast.get() || s.stale.get() || s.tapes.try_borrow().map_or(true, |t| !t.is_empty())
    })
}

/// `_C.set_eager_fast_path(enabled)`: turns the native fast path of op
/// functions and Tensor operators on or off for the calling thread (on by
/// default); returns the previous setting. While it is off, every op
/// function call runs its Python fallback. Turning it on makes the next
/// fast call ask the Python layer for the recording tapes again.
#[pyfunction]
pub fn set_eager_fast_path(enabled: bool) -> bool {
    STATE.with(|s| {
        let was = s.fast.replace(enabled);
        if enabled && !was {
            s.stale.set(true);
        }
        was
    })
}

/// `_C.eager_fast_path()`: whether the fast path is on for this thread.
#[pyfunction]
pub fn eager_fast_path() -> bool {
    STATE.with(|s| s.fast.get())
}

/// `_C.set_recording_tapes(tapes)`: the tapes the fast path records its
/// calls on, for the calling thread (innermost last), as
/// `opforge._tape.active_tapes()` gives them.
#[pyfunction]
pub fn set_recording_tapes(tapes: Vec<Py<Tape>>) -> PyResult<()> {
    let old = STATE.with(|s| {
        s.stale.set(false);
        s.tapes
            .try_borrow_mut()
            .map(|mut t| std::mem::replace(&mut *t, tapes))
    });
    drop(old.map_err(|_| PyRuntimeError::new_err("opforge: the tape list is in use"))?);
    Ok(())
}

/// The tapes a call records on (`Bound`: dropped here, on an attached
/// thread, without pyo3's deferred-decref pool).
type Tapes<'py> = SmallVec<[Bound<'py, Tape>; 2]>;

/// The outputs of a call.
type Outputs<'py> = SmallVec<[Bound<'py, PyTensor>; 2]>;

/// The tapes to record on, or `None` when the fast path must not run (it
/// is off on this thread, or the tape list could not be had). Asks the
/// Python layer for the list first when it is stale.
fn fast_tapes(py: Python<'_>) -> Option<Tapes<'_>> {
    let read = |s: &ThreadState| -> Option<Option<Tapes<'_>>> {
        if !s.fast.get() {
            return None;
        }
        if s.stale.get() {
            return Some(None);
        }
        let t = s.tapes.try_borrow().ok()?;
        Some(Some(t.iter().map(|x| x.bind(py).clone()).collect()))
    };
    match STATE.try_with(read).ok()?? {
        Some(t) => Some(t),
        None => {
            hook(py, "sync_tapes").ok()?.call0().ok()?;
            STATE.try_with(read).ok()??
        }
    }
}

/// How an attr's Python value becomes an `AttrValue` on the fast path.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum AttrKind {
    Int,
    Float,
    Bool,
    Str,
    Type,
    /// Only its default (left out) runs natively.
    Other,
}

/// One attr value of a call, as the key of its prepared op.
#[derive(Clone, PartialEq, Debug)]
enum AttrKey {
    /// Left out (or the default object itself, as the fallback treats it).
    Default,
    I(i64),
    /// The bits of the f64 (the attr is stored as f32 from it).
    F(u64),
    B(bool),
    S(Vec<u8>),
    T(i32),
}

impl AttrKey {
    fn value(&self) -> Option<AttrValue> {
        let v = match self {
            AttrKey::Default => return None,
            AttrKey::I(i) => Value::I(*i),
            AttrKey::F(bits) => Value::F(f64::from_bits(*bits) as f32),
            AttrKey::B(b) => Value::B(*b),
            AttrKey::S(s) => Value::S(s.clone()),
            AttrKey::T(t) => Value::Type(*t),
        };
        Some(AttrValue { value: Some(v) })
    }
}

/// The most parameters (inputs and visible attrs) a fast op function has.
const MAX_PARAMS: usize = 16;
/// The most attr-value combinations an op function keeps prepared ops for.
const PREPARED_PER_FUNCTION: usize = 8;

/// What running one op natively needs, built once per op function.
pub struct Plan {
    /// The op's name, shared with every record of a call on a tape.
    op: Arc<str>,
    /// Per input argument: its fixed dtype, if any.
    inputs: Vec<Option<DataType>>,
    /// Per visible attr: its name and kind.
    attrs: Vec<(String, AttrKind)>,
    /// The prepared op of calls leaving every attr to its default.
    defaults: OnceLock<Arc<PreparedOp>>,
    /// The prepared ops of other attr values (most recent last).
    prepared: Mutex<Vec<(Vec<AttrKey>, Arc<PreparedOp>)>>,
}

impl Plan {
    /// The op it runs.
    pub fn op(&self) -> &str {
        &self.op
    }

    /// Drops the kernels its prepared ops hold (they stay prepared): their
    /// next calls resolve the op again.
    pub fn release(&self) {
        if let Some(p) = self.defaults.get() {
            p.clear();
        }
        let prepared =
            std::mem::take(&mut *self.prepared.lock().unwrap_or_else(PoisonError::into_inner));
        drop(prepared);
    }

    /// The plan of op `op` with visible attrs `attrs` (in parameter
    /// order), or `None` when the op has list inputs or outputs (those
    /// calls always go to the Python fallback).
    fn new(op: &str, attrs: &[String]) -> Option<Plan> {
        let def = Registry::global().op_def(op).ok()?;
        let lists = def
            .input_arg
            .iter()
            .chain(&def.output_arg)
            .any(|a| !a.number_attr.is_empty() || !a.type_list_attr.is_empty());
        if lists {
            return None;
        }
        let inputs = def
            .input_arg
            .iter()
            .map(|a| DataType::from_i32(a.r#type).filter(|d| *d != DataType::Invalid))
            .collect();
        let mut kinds = Vec::with_capacity(attrs.len());
        for name in attrs {
            let a = def.attr.iter().find(|a| &a.name == name)?;
            let kind = match a.r#type.as_str() {
                "int" => AttrKind::Int,
                "float" => AttrKind::Float,
                "bool" => AttrKind::Bool,
                "string" => AttrKind::Str,
                "type" => AttrKind::Type,
                _ => AttrKind::Other,
            };
            kinds.push((name.clone(), kind));
        }
        Some(Plan {
            op: op.into(),
            inputs,
            attrs: kinds,
            defaults: OnceLock::new(),
            prepared: Mutex::new(Vec::new()),
        })
    }

    /// The prepared op of a call with these attr values (`None`: the
    /// runtime refuses to prepare it; the fallback will say why).
    fn prepared(&self, keys: &[AttrKey]) -> Option<Arc<PreparedOp>> {
        let mut map = AttrMap::new();
        for ((name, _), k) in self.attrs.iter().zip(keys) {
            if let Some(v) = k.value() {
                map.insert(name.clone(), v);
            }
        }
        context().prepare(&self.op, map).ok().map(Arc::new)
    }

    fn prepared_defaults(&self) -> Option<&PreparedOp> {
        if let Some(p) = self.defaults.get() {
            return Some(p);
        }
        let p = self.prepared(&[])?;
        Some(self.defaults.get_or_init(|| p))
    }

    fn prepared_for(&self, keys: &[AttrKey]) -> Option<Arc<PreparedOp>> {
        {
            let list = self.prepared.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some((_, p)) = list.iter().rev().find(|(k, _)| k.as_slice() == keys) {
                return Some(p.clone());
            }
        }
        let p = self.prepared(keys)?;
        let mut list = self.prepared.lock().unwrap_or_else(PoisonError::into_inner);
        if list.len() == PREPARED_PER_FUNCTION {
            list.remove(0);
        }
        list.push((keys.to_vec(), p.clone()));
        Some(p)
    }

    /// Runs `p` on `tensors`, records the call on `tapes` (with
    /// `objects`, the Python Tensors of the inputs, when there are tapes);
    /// the outputs as Python Tensors.
    fn run<'py>(
        &self,
        py: Python<'py>,
        p: &PreparedOp,
        tensors: Vec<Tensor>,
        objects: &[&Bound<'py, PyAny>],
        tapes: &[Bound<'py, Tape>],
    ) -> PyResult<Outputs<'py>> {
        let ctx = context();
        let big = tensors.iter().map(Tensor::num_elements).sum::<usize>() > DETACH_ELEMENTS;
        let result = if big {
            py.detach(|| ctx.run_prepared_outputs(p, tensors))
        } else {
            ctx.run_prepared_outputs(p, tensors)
        };
        let mut run = errors::check(py, result, Some(&self.op))?;
        let mut outs = Outputs::new();
        for t in std::mem::take(&mut run.outputs) {
            outs.push(new_tensor(py, t)?);
        }
        if !tapes.is_empty() {
            let attrs = run.attrs();
            let mut inputs: SmallVec<[Bound<'py, PyTensor>; 4]> = SmallVec::new();
            for o in objects {
                inputs.push(o.cast::<PyTensor>().map_err(PyErr::from)?.to_owned());
            }
            let sole = tapes.len() == 1;
            for tape in tapes {
                tape.try_borrow_mut()?
                    .record_resolved(&self.op, &inputs, attrs, &outs, sole)?;
            }
        }
        Ok(outs)
    }
}

/// A Python Tensor of `t`, left out of the cycle collector: a Tensor
/// holds no Python object, so it can be in no reference cycle, and
/// tracking the many small results of eager calls only makes collections
/// longer.
fn new_tensor(py: Python<'_>, t: Tensor) -> PyResult<Bound<'_, PyTensor>> {
    let obj = Bound::new(py, PyTensor::new(t))?;
    // SAFETY: `obj` is a live, fully initialized object of a GC type (as
    // checked); untracking only removes it from the collector's lists, and
    // CPython's deallocation copes with an untracked object.
    unsafe {
        if ffi::PyType_IS_GC(ffi::Py_TYPE(obj.as_ptr())) != 0
            && ffi::PyObject_GC_IsTracked(obj.as_ptr()) != 0
        {
            ffi::PyObject_GC_UnTrack(obj.as_ptr().cast());
        }
    }
    Ok(obj)
}

/// The dtype objects (`opforge.float32`, ...) by `DataType` number.
fn dtype_objects(py: Python<'_>) -> Option<&'static [Option<Py<PyAny>>]> {
    static DTYPES: OnceLock<Vec<Option<Py<PyAny>>>> = OnceLock::new();
    if let Some(d) = DTYPES.get() {
        return Some(d);
    }
    let list = hook(py, "dtypes").ok()?;
    let list = list.cast::<PyList>().ok()?;
    let objs = list
        .iter()
        .map(|o| (!o.is_none()).then(|| o.unbind()))
        .collect();
    Some(DTYPES.get_or_init(|| objs))
}

/// The key of attr value `v` of kind `kind`, when the fast path takes it
/// as it is (`None`: the fallback converts it, or refuses it).
fn attr_key(py: Python<'_>, kind: AttrKind, v: &Bound<'_, PyAny>) -> Option<AttrKey> {
    match kind {
        AttrKind::Int if v.is_exact_instance_of::<PyInt>() => {
            v.extract::<i64>().ok().map(AttrKey::I)
        }
        AttrKind::Float
            if v.is_exact_instance_of::<PyFloat>() || v.is_exact_instance_of::<PyInt>() =>
        {
            v.extract::<f64>().ok().map(|f| AttrKey::F(f.to_bits()))
        }
        AttrKind::Bool if v.is_exact_instance_of::<PyBool>() => {
            Some(AttrKey::B(v.is_truthy().ok()?))
        }
        AttrKind::Str => {
            if let Ok(s) = v.cast_exact::<PyString>() {
                return Some(AttrKey::S(s.to_str().ok()?.as_bytes().to_vec()));
            }
            let b = v.cast_exact::<PyBytes>().ok()?;
            Some(AttrKey::S(b.as_bytes().to_vec()))
        }
        AttrKind::Type => {
            let objs = dtype_objects(py)?;
            let code = objs
                .iter()
                .position(|o| o.as_ref().is_some_and(|o| o.as_ptr() == v.as_ptr()))?;
            let code = i32::try_from(code).ok()?;
            DataType::from_i32(code)
                .filter(|d| *d != DataType::Invalid)
                .map(|_| AttrKey::T(code))
        }
        _ => None,
    }
}

/// One parameter of an op function.
struct Param {
    /// The Python name (interned).
    name: Py<PyString>,
    /// The input argument, or visible attr, it sets.
    slot: Slot,
    /// The default object (`None`: a required parameter).
    default: Option<Py<PyAny>>,
}

#[derive(Clone, Copy)]
enum Slot {
    Input(usize),
    Attr(usize),
}

/// A generated op function (`opforge.ops.add_v2`, `opforge.raw_ops.AddV2`,
/// `lib.zero_out`): runs its op natively when the call allows it, else
/// calls its Python fallback (`__wrapped__`). The Python layer sets
/// `__name__`, `__qualname__`, `__doc__`, `__module__`, `__wrapped__` and
/// `_opforge_op` on it; it pickles by `_opforge_reduce` when set, else by
/// its module and name.
#[pyclass(module = "opforge", name = "OpFunction", frozen, dict, weakref)]
pub struct OpFunction {
    /// The function CPython's vectorcall protocol calls (the type's
    /// `tp_vectorcall_offset` points here, see [`enable_vectorcall`]).
    vectorcall: Option<ffi::vectorcallfunc>,
    /// `None`: every call goes to the fallback.
    plan: Option<Arc<Plan>>,
    params: Vec<Param>,
    /// Keyword arguments only (`opforge.raw_ops`).
    raw: bool,
    fallback: Py<PyAny>,
    /// The namedtuple class of an op with several outputs.
    result: Option<Py<PyAny>>,
}

#[pymethods]
impl OpFunction {
    /// `OpFunction(op, fallback, params, raw, result=None)`: `params` as
    /// the generated function's parameters before `name`, each
    /// `(python_name, arg_name, is_input, has_default, default)`.
    #[new]
    #[pyo3(signature = (op, fallback, params, raw, result=None))]
    fn new(
        py: Python<'_>,
        op: &str,
        fallback: Py<PyAny>,
        params: Vec<(String, String, bool, bool, Py<PyAny>)>,
        raw: bool,
        result: Option<Py<PyAny>>,
    ) -> PyResult<OpFunction> {
        let def = errors::check(py, Registry::global().op_def(op), None)?;
        let mut slots = Vec::with_capacity(params.len());
        let mut attrs = Vec::new();
        let mut ok = params.len() <= MAX_PARAMS;
        for (py_name, arg, is_input, has_default, default) in params {
            let slot = if is_input {
                match def.input_arg.iter().position(|a| a.name == arg) {
                    Some(i) => Slot::Input(i),
                    None => {
                        ok = false;
                        Slot::Input(0)
                    }
                }
            } else {
                attrs.push(arg);
                Slot::Attr(attrs.len() - 1)
            };
            slots.push(Param {
                name: PyString::intern(py, &py_name).unbind(),
                slot,
                default: has_default.then_some(default),
            });
        }
        let inputs = slots
            .iter()
            .filter(|p| matches!(p.slot, Slot::Input(_)))
            .count();
        ok &= inputs == def.input_arg.len();
        let plan = if ok {
            Plan::new(op, &attrs).map(Arc::new)
        } else {
            None
        };
        if let Some(plan) = &plan {
            crate::library::remember_plan(plan);
        }
        Ok(OpFunction {
            vectorcall: Some(op_function_vectorcall),
            plan,
            params: slots,
            raw,
            fallback,
            result,
        })
    }

    /// Whether calls can run natively (the op has no list inputs or
    /// outputs); the others always run the fallback.
    #[getter]
    fn _fast(&self) -> bool {
        self.plan.is_some()
    }

    /// A call through a tuple and a dict (CPython calls through
    /// [`op_function_vectorcall`] instead, without building them).
    #[pyo3(signature = (*args, **kwargs))]
    fn __call__<'py>(
        slf: &Bound<'py, Self>,
        args: &Bound<'py, PyTuple>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let this = slf.get();
        if let Some(plan) = &this.plan {
            let r = errors::guard(py, "op call", || {
                let kw = kwargs.into_iter().flat_map(|d| d.iter());
                this.call_fast(py, plan, args.len(), args.iter(), kw)
            })?;
            if let Some(r) = r {
                return Ok(r);
            }
        }
        this.fallback.bind(py).call(args, kwargs)
    }

    /// Pickling: `_opforge_reduce` when set (a loaded library's function
    /// pickles by the library's path), else the function's name, found
    /// again in its module.
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let dict = slf.getattr("__dict__")?;
        if let Ok(dict) = dict.cast::<PyDict>() {
            if let Some(r) = dict.get_item("_opforge_reduce")? {
                return Ok(r);
            }
        }
        slf.getattr("__name__")
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let module = slf.getattr("__module__")?;
        let name = slf.getattr("__name__")?;
        Ok(format!("<opforge op function {module}.{name}>"))
    }

    /// Descriptor protocol: bound as a method when read from an instance
    /// of a class that stores it, as the Python function it replaces.
    fn __get__<'py>(
        slf: Bound<'py, Self>,
        obj: Option<Bound<'py, PyAny>>,
        _owner: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        match obj {
            Some(obj) if !obj.is_none() => {
                let py = slf.py();
                py.import("types")?.getattr("MethodType")?.call1((slf, obj))
            }
            _ => Ok(slf.into_any()),
        }
    }
}

impl OpFunction {
    /// The call, run natively; `Ok(None)` when it is not one the fast path
    /// takes (the fallback then runs it).
    fn call_fast<'py>(
        &self,
        py: Python<'py>,
        plan: &Plan,
        nargs: usize,
        args: impl Iterator<Item = Bound<'py, PyAny>>,
        kwargs: impl Iterator<Item = (Bound<'py, PyAny>, Bound<'py, PyAny>)>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        // Bind the arguments as the fallback's signature would; anything
        // it would refuse is left to it.
        let n = self.params.len();
        if nargs > 0 && (self.raw || nargs > n + 1) {
            return Ok(None);
        }
        let mut values: SmallVec<[Option<Bound<'py, PyAny>>; 6]> = smallvec::smallvec![None; n];
        let mut name_given = nargs > n;
        for (i, a) in args.take(n).enumerate() {
            values[i] = Some(a);
        }
        for (k, v) in kwargs {
            let Ok(k) = k.cast::<PyString>() else {
                return Ok(None);
            };
            let found = match self
                .params
                .iter()
                .position(|p| p.name.as_ptr() == k.as_ptr())
            {
                Some(i) => Some(i),
                None => {
                    let k = k.to_str()?;
                    self.params
                        .iter()
                        .position(|p| p.name.bind(py).to_str().is_ok_and(|s| s == k))
                }
            };
            match found {
                Some(i) if values[i].is_none() => values[i] = Some(v),
                Some(_) => return Ok(None),
                None if !name_given && k.to_str()? == "name" => name_given = true,
                None => return Ok(None),
            }
        }
        let Some(tapes) = fast_tapes(py) else {
            return Ok(None);
        };
        // Inputs by argument, attrs as keys of their prepared op.
        let n_inputs = plan.inputs.len();
        let mut objects: SmallVec<[Option<&Bound<'py, PyAny>>; 4]> =
            smallvec::smallvec![None; plan.inputs.len()];
        let mut keys: SmallVec<[AttrKey; 4]> =
            smallvec::smallvec![AttrKey::Default; plan.attrs.len()];
        let mut all_default = true;
        for (p, v) in self.params.iter().zip(values.iter()) {
            match p.slot {
                Slot::Input(i) => match v {
                    Some(v) => objects[i] = Some(v),
                    None => return Ok(None),
                },
                Slot::Attr(j) => {
                    let key = match (v, &p.default) {
                        (None, None) => return Ok(None),
                        (None, Some(_)) => AttrKey::Default,
                        (Some(v), Some(d)) if v.as_ptr() == d.as_ptr() => AttrKey::Default,
                        (Some(v), _) => match attr_key(py, plan.attrs[j].1, v) {
                            Some(k) => k,
                            None => return Ok(None),
                        },
                    };
                    all_default &= key == AttrKey::Default;
                    keys[j] = key;
                }
            }
        }
        let mut tensors = Vec::with_capacity(n_inputs);
        let mut arrays = false;
        for v in objects.iter().take(n_inputs) {
            let Some(v) = v else { return Ok(None) };
            if let Ok(t) = v.cast_exact::<PyTensor>() {
                tensors.push(t.get().t.clone());
            } else if is_exact_ndarray(py, v) {
                arrays = true;
                if let Some(t) = ndarray_view(v, None) {
                    tensors.push(t);
                    continue;
                }
                let arr = v.cast::<PyUntypedArray>().map_err(PyErr::from)?;
                if ndarray_dtype(arr).is_none() {
                    return Ok(None);
                }
                match ndarray_tensor(arr, None) {
                    Ok(t) => tensors.push(t),
                    Err(_) => return Ok(None),
                }
            } else {
                return Ok(None);
            }
        }
        if arrays {
            // Converted values on a recording tape, and fixed-dtype inputs
            // of another dtype, are the fallback's (it converts them, or
            // raises, as TensorFlow does).
            let mismatch = plan
                .inputs
                .iter()
                .zip(&tensors)
                .any(|(want, t)| want.is_some_and(|d| d != t.dtype()));
            if mismatch || !tapes.is_empty() {
                return Ok(None);
            }
        }
        let held;
        let prepared: &PreparedOp = if all_default {
            match plan.prepared_defaults() {
                Some(p) => p,
                None => return Ok(None),
            }
        } else {
            match plan.prepared_for(&keys) {
                Some(p) => {
                    held = p;
                    &held
                }
                None => return Ok(None),
            }
        };
        let recorded: SmallVec<[&Bound<'py, PyAny>; 4]> = if tapes.is_empty() {
            SmallVec::new()
        } else {
            objects.iter().take(n_inputs).flatten().copied().collect()
        };
        // (The arrays' tensors release them at once when dropped here:
        // `convert::release_array` sees this thread holds the GIL.)
        let outs = plan.run(py, prepared, tensors, &recorded, &tapes)?;
        Ok(Some(self.wrap(py, outs)?))
    }

    /// The outputs as the fallback returns them: a namedtuple for several
    /// outputs, the Tensor for one, None for none.
    fn wrap<'py>(&self, py: Python<'py>, outs: Outputs<'py>) -> PyResult<Bound<'py, PyAny>> {
        if let Some(cls) = &self.result {
            return cls.bind(py).call1(PyTuple::new(py, outs)?);
        }
        wrap_plain(py, outs)
    }
}

fn wrap_plain<'py>(py: Python<'py>, mut outs: Outputs<'py>) -> PyResult<Bound<'py, PyAny>> {
    match outs.len() {
        0 => Ok(py.None().into_bound(py)),
        1 => Ok(outs
            .pop()
            .map(Bound::into_any)
            .unwrap_or_else(|| py.None().into_bound(py))),
        _ => Ok(PyList::new(py, outs)?.into_any()),
    }
}

/// The plan of an op a `Tensor` operator runs (`AddV2` for `+`, ...),
/// built on first use.
pub struct OperatorPlan {
    op: &'static str,
    plan: OnceLock<Option<Plan>>,
}

impl OperatorPlan {
    const fn new(op: &'static str) -> OperatorPlan {
        OperatorPlan {
            op,
            plan: OnceLock::new(),
        }
    }

    /// `op(inputs)` run natively when the fast path takes it (every input
    /// a Tensor, the fast path on for this thread); `None` otherwise (the
    /// operator's Python hook then runs it).
    pub fn call<'py>(&self, inputs: &[&Bound<'py, PyAny>]) -> Option<PyResult<Bound<'py, PyAny>>> {
        let first = inputs.first()?;
        let py = first.py();
        let tapes = fast_tapes(py)?;
        let plan = self.plan.get_or_init(|| Plan::new(self.op, &[])).as_ref()?;
        if inputs.len() != plan.inputs.len() {
            return None;
        }
        let mut tensors = Vec::with_capacity(inputs.len());
        for v in inputs {
            tensors.push(v.cast_exact::<PyTensor>().ok()?.get().t.clone());
        }
        let prepared = plan.prepared_defaults()?;
        Some(errors::guard(py, "op call", || {
            let outs = plan.run(py, prepared, tensors, inputs, &tapes)?;
            wrap_plain(py, outs)
        }))
    }
}

macro_rules! operators {
    ($($name:ident = $op:literal),* $(,)?) => {
        $(
            #[doc = concat!("The `", $op, "` op of a Tensor operator.")]
            pub static $name: OperatorPlan = OperatorPlan::new($op);
        )*

        /// Every Tensor operator's plan.
        static OPERATORS: &[&OperatorPlan] = &[$(&$name),*];

        /// Makes the Tensor operators of `ops` let go of their prepared
        /// kernels (see [`Plan::release`]).
        pub fn release_operator_kernels(ops: &[String]) {
            for o in OPERATORS {
                if let Some(Some(p)) = o.plan.get() {
                    if ops.iter().any(|op| op == p.op()) {
                        p.release();
                    }
                }
            }
        }
    };
}

operators! {
    ADD = "AddV2",
    SUB = "Sub",
    MUL = "Mul",
    REAL_DIV = "RealDiv",
    FLOOR_DIV = "FloorDiv",
    FLOOR_MOD = "FloorMod",
    MAT_MUL = "MatMul",
    LOGICAL_AND = "LogicalAnd",
    LOGICAL_OR = "LogicalOr",
    POW = "Pow",
    LESS = "Less",
    LESS_EQUAL = "LessEqual",
    EQUAL = "Equal",
    NOT_EQUAL = "NotEqual",
    GREATER = "Greater",
    GREATER_EQUAL = "GreaterEqual",
    NEG = "Neg",
    ABS = "Abs",
    INVERT = "Invert",
}

/// `OpFunction`'s vectorcall entry: CPython calls it with the positional
/// arguments and keyword values in one array and the keyword names in a
/// tuple, so a call builds no tuple or dict. The fast path binds them
/// directly; the fallback is called through vectorcall too.
///
/// # Safety
/// CPython's vectorcall contract: `callable` is a live `OpFunction` (this
/// function is only reached through its type's `tp_vectorcall_offset`),
/// `args` holds `PyVectorcall_NARGS(nargsf)` positional arguments followed
/// by one value per name of `kwnames` (a tuple of str, or null), all
/// borrowed for the call, and the calling thread is attached to the
/// interpreter.
unsafe extern "C" fn op_function_vectorcall(
    callable: *mut ffi::PyObject,
    args: *const *mut ffi::PyObject,
    nargsf: usize,
    kwnames: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    // SAFETY: the thread is attached (the contract). pyo3 does not count
    // it as attached here (that costs a `PyGILState_Ensure`/`Release`
    // pair, 15-20 ns, a tenth of a call), so a `Py` dropped directly in
    // this call would be released through pyo3's deferred pool: the fast
    // path drops none (it holds `Bound`s), and the tensors of numpy array
    // arguments release their array through `convert::release_array`,
    // which asks CPython whether the thread holds the GIL.
    let py = unsafe { Python::assume_attached() };
    // SAFETY: forwarded from this function's own contract.
    unsafe { vectorcall_attached(py, callable, args, nargsf, kwnames) }
}

/// [`op_function_vectorcall`] on an attached thread.
///
/// # Safety
/// As [`op_function_vectorcall`].
unsafe fn vectorcall_attached(
    py: Python<'_>,
    callable: *mut ffi::PyObject,
    args: *const *mut ffi::PyObject,
    nargsf: usize,
    kwnames: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    // SAFETY: `nargsf` comes from CPython as the contract says.
    let nargs = unsafe { ffi::PyVectorcall_NARGS(nargsf) } as usize;
    let nkw = keyword_count(kwnames);
    guarded(py, "op call", || {
        // SAFETY: `callable` is a live OpFunction, borrowed for the call.
        let slf = unsafe { Borrowed::from_ptr(py, callable) };
        let slf = slf.cast::<OpFunction>().map_err(PyErr::from)?;
        let this = slf.get();
        if let Some(plan) = &this.plan {
            // SAFETY: `args` holds `nargs + nkw` live borrowed objects
            // (the contract); each is turned into an owned reference.
            let item = |i: usize| unsafe { Bound::from_borrowed_ptr(py, *args.add(i)) };
            let kw = (0..nkw).map(|i| {
                // SAFETY: `kwnames` is a tuple of `nkw` names.
                let k = unsafe {
                    Bound::from_borrowed_ptr(
                        py,
                        ffi::PyTuple_GET_ITEM(kwnames, i as ffi::Py_ssize_t),
                    )
                };
                (k, item(nargs + i))
            });
            if let Some(r) = this.call_fast(py, plan, nargs, (0..nargs).map(item), kw)? {
                return Ok(r);
            }
        }
        // SAFETY: the fallback is a live callable; the arguments are passed
        // on as CPython gave them (the same contract).
        unsafe { forward_vectorcall(py, &this.fallback, args, nargsf, kwnames) }
    })
}

/// Makes CPython call `OpFunction`s through [`op_function_vectorcall`].
/// Called once, when the module is made.
pub fn enable_vectorcall(py: Python<'_>) -> PyResult<()> {
    let probe = Bound::new(
        py,
        OpFunction {
            vectorcall: Some(op_function_vectorcall),
            plan: None,
            params: Vec::new(),
            raw: false,
            fallback: py.None(),
            result: None,
        },
    )?;
    let field = std::ptr::addr_of!(probe.get().vectorcall);
    // SAFETY: `field` is the probe's `vectorcall` field, the field every
    // OpFunction keeps at the same offset.
    unsafe { crate::vectorcall::set_vectorcall_field(probe.as_any(), field) }
}
