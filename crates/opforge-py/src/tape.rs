//! `_C.Tape`: the native half of `opforge.GradientTape`. The Python layer
//! runs ops as usual and records each call on every active tape
//! ([`Tape::record`]); the tape maps the Python tensors it has seen to its
//! value handles and differentiates with the core's backprop, whose
//! gradient functions (Rust, op libraries, Python) run as eager ops.

use crate::errors;
use crate::exec::{attr_map, context};
use crate::tensor::PyTensor;
use opforge::attrs::AttrMap;
use opforge::autodiff::{GradientTape, Ops, Sym, SymArg};
use opforge::Registry;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

/// The scopes of the live tapes, on every thread. A tensor's slot that
/// names a scope not in here belongs to a dropped tape and may be claimed
/// again (a tape does not hold every tensor it records, so it cannot free
/// their slots when it goes).
static LIVE: Mutex<Vec<u32>> = Mutex::new(Vec::new());

/// Tensors that another tape found in a live tape's slot, by that slot's
/// handle: the tape of the handle may not hold them (see [`Tape`]), and an
/// outer tape that knows a tensor by its object needs the tape's
/// `object` for that handle to be that object (`forward_records`). Entries
/// go when the tape of their handle is dropped.
static LENT: Mutex<Vec<(Sym, Py<PyTensor>)>> = Mutex::new(Vec::new());

/// Whether the tape of `scope` is alive.
pub(crate) fn scope_is_live(scope: u32) -> bool {
    LIVE.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .contains(&scope)
}

/// A recording tape (`opforge.GradientTape` holds one).
///
/// The tape finds the handle of a Python tensor it has seen in the
/// tensor's own slot (`PyTensor::tape_sym`) when the slot is this tape's:
/// the common case of one tape recording costs no table lookup or insert
/// per op. A tensor whose slot another tape holds (nested tapes) is found
/// in `ids`, by address.
///
/// The tape keeps the Python tensors it will need again: those found by
/// address (their addresses must stay theirs), watched ones, the ones it
/// made itself, and every tensor while other tapes record too (an outer
/// tape differentiating this tape's gradient needs the same objects, see
/// `forward_records`). The results of the fast path with this tape the
/// only one recording are found by their slot alone and not kept: a long
/// tape then holds no Python object per op (keeping them made Python's
/// allocator take fresh memory for every result).
#[pyclass(unsendable, module = "opforge._C")]
pub struct Tape {
    tape: GradientTape<'static>,
    /// The scope of `tape`'s handles.
    scope: u32,
    /// Python tensor (by object address) -> its handle on this tape, for
    /// the tensors whose slot holds another tape's handle.
    ids: HashMap<usize, Sym, Hasher>,
    /// Handle index -> the Python tensor it was last given to, when kept
    /// (see above); holding the objects keeps their addresses (the keys of
    /// `ids`) theirs.
    objs: Vec<Option<Py<PyTensor>>>,
}

/// The tables' hasher (the keys are addresses and handles, not input an
/// attacker chooses).
type Hasher = foldhash::fast::RandomState;

impl Drop for Tape {
    fn drop(&mut self) {
        let mut live = LIVE.lock().unwrap_or_else(PoisonError::into_inner);
        live.retain(|&s| s != self.scope);
        drop(live);
        let mut lent = LENT.lock().unwrap_or_else(PoisonError::into_inner);
        if !lent.is_empty() {
            lent.retain(|(s, _)| s.scope() != self.scope);
        }
        drop(lent);
        // Free the slots of the tensors this tape holds at once (the others
        // are free to claim now that the scope is gone).
        for (i, o) in self.objs.iter().enumerate() {
            if let Some(o) = o {
                o.get().release_tape_sym(Sym::new(self.scope, i as u32));
            }
        }
    }
}

impl Tape {
    fn key(t: &Bound<'_, PyTensor>) -> usize {
        t.as_ptr() as usize
    }

    /// The handle of `t` on this tape, if it has one.
    fn lookup(&self, t: &Bound<'_, PyTensor>) -> Option<Sym> {
        match t.get().tape_sym() {
            Some(s) if s.scope() == self.scope => Some(s),
            _ if self.ids.is_empty() => None,
            _ => self.ids.get(&Self::key(t)).copied(),
        }
    }

    /// The handle of `t`, recording it as a constant if the tape has not
    /// seen it (a value from outside the recorded computation).
    fn sym(&mut self, t: &Bound<'_, PyTensor>) -> PyResult<Sym> {
        self.sym_kept(t, true)
    }

    /// [`sym`](Self::sym); `keep`: keep `t` even when its slot finds it.
    fn sym_kept(&mut self, t: &Bound<'_, PyTensor>, keep: bool) -> PyResult<Sym> {
        if let Some(s) = self.lookup(t) {
            return Ok(s);
        }
        let s = errors::check(t.py(), self.tape.constant(t.get().t.clone()), None)?;
        self.remember_kept(t, s, keep);
        Ok(s)
    }

    fn remember(&mut self, t: &Bound<'_, PyTensor>, s: Sym) {
        self.remember_kept(t, s, true)
    }

    /// Gives `t` the handle `s`: in its slot when the slot is free (or
    /// this tape's, or a dropped tape's), else in `ids`. `keep`: hold `t`
    /// even when its slot has the handle (a tensor found by address is
    /// always held).
    fn remember_kept(&mut self, t: &Bound<'_, PyTensor>, s: Sym, keep: bool) {
        let claimed = t.get().claim_tape_sym(s);
        if !claimed {
            self.ids.insert(Self::key(t), s);
            // The slot is a live tape's, which may not hold `t`: lend it.
            if let Some(other) = t.get().tape_sym() {
                let mut lent = LENT.lock().unwrap_or_else(PoisonError::into_inner);
                // Checked again under the lock: a tape dropped meanwhile (on
                // another thread) has already cleared its entries.
                if scope_is_live(other.scope()) && !lent.iter().any(|(s, _)| *s == other) {
                    lent.push((other, t.clone().unbind()));
                }
            }
        }
        let i = s.index() as usize;
        let obj = (keep || !claimed).then(|| t.clone().unbind());
        if i == self.objs.len() {
            // The common case: the handle the tape just made.
            self.objs.push(obj);
            return;
        }
        if self.objs.len() < i {
            self.objs.resize_with(i, || None);
        }
        match self.objs.get_mut(i) {
            Some(slot) => *slot = obj,
            None => self.objs.push(obj),
        }
    }

    /// The Python tensor of handle `s` (made, and remembered, if the
    /// handle has none yet: a value the tape computed itself).
    fn object<'py>(&mut self, py: Python<'py>, s: Sym) -> PyResult<Bound<'py, PyTensor>> {
        if let Some(Some(o)) = self.objs.get(s.index() as usize) {
            return Ok(o.bind(py).clone());
        }
        let lent = LENT
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .find(|(l, _)| *l == s)
            .map(|(_, o)| o.clone_ref(py));
        if let Some(o) = lent {
            let o = o.into_bound(py);
            self.remember(&o, s);
            return Ok(o);
        }
        let t = Bound::new(py, self.tensor_of(py, s)?)?;
        self.remember(&t, s);
        Ok(t)
    }

    fn sym_arg(&mut self, op: &str, v: &Bound<'_, PyAny>) -> PyResult<SymArg> {
        if let Ok(t) = v.cast::<PyTensor>() {
            return Ok(SymArg::One(self.sym(t)?));
        }
        if v.is_instance_of::<PyList>() || v.is_instance_of::<PyTuple>() {
            let mut l = Vec::new();
            for item in v.try_iter()? {
                let item = item?;
                let t = item.cast::<PyTensor>().map_err(|_| {
                    PyTypeError::new_err(format!("op '{op}': list items must be Tensors"))
                })?;
                l.push(self.sym(t)?);
            }
            return Ok(SymArg::List(l));
        }
        Err(PyTypeError::new_err(format!(
            "op '{op}': inputs must be Tensors or lists of Tensors"
        )))
    }

    /// Records a call the native fast path ran (`crate::fast`): one
    /// Tensor per input argument and output, `attrs` every attr of the
    /// call, resolved (as [`record`](Self::record) would resolve them).
    /// `sole`: this tape is the only one recording the call.
    pub(crate) fn record_resolved(
        &mut self,
        op: &Arc<str>,
        inputs: &[Bound<'_, PyTensor>],
        attrs: &AttrMap,
        outputs: &[Bound<'_, PyTensor>],
        sole: bool,
    ) -> PyResult<()> {
        let Some(first) = inputs.first().or(outputs.first()) else {
            return Ok(());
        };
        let py = first.py();
        let mut args: smallvec::SmallVec<[Sym; 4]> = smallvec::SmallVec::new();
        for t in inputs {
            args.push(self.sym_kept(t, !sole)?);
        }
        let outs = outputs.iter().map(|t| t.get().t.clone());
        let syms = errors::check(
            py,
            self.tape.record_flat(op.clone(), &args, attrs, outs),
            Some(op),
        )?;
        for (t, s) in outputs.iter().zip(syms) {
            self.remember_kept(t, s, !sole);
        }
        Ok(())
    }

    fn tensor_of(&self, py: Python<'_>, s: Sym) -> PyResult<PyTensor> {
        Ok(PyTensor::new(
            errors::check(py, self.tape.value(s), None)?.clone(),
        ))
    }
}

#[pymethods]
impl Tape {
    #[new]
    #[pyo3(signature = (persistent=false))]
    fn new(persistent: bool) -> Tape {
        let tape = GradientTape::new(context(), persistent);
        LIVE.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(tape.scope());
        Tape {
            scope: tape.scope(),
            tape,
            ids: HashMap::default(),
            objs: Vec::new(),
        }
    }

    /// Watches `t`: gradients can be taken with respect to it and to what
    /// is computed from it after this call.
    fn watch(&mut self, t: Bound<'_, PyTensor>) {
        let s = self.tape.watch(t.get().t.clone());
        self.remember(&t, s);
    }

    /// Whether the tape has a handle for `t`.
    fn knows(&self, t: Bound<'_, PyTensor>) -> bool {
        self.lookup(&t).is_some()
    }

    /// Records a call that ran: `inputs` as for `_C.execute`, `attrs` as
    /// given to it, `outputs` the flat list of its result tensors.
    fn record(
        &mut self,
        op: &str,
        inputs: Bound<'_, PyList>,
        attrs: Bound<'_, PyDict>,
        outputs: Bound<'_, PyList>,
    ) -> PyResult<()> {
        let py = inputs.py();
        errors::guard(py, "GradientTape.record", || {
            let reg = errors::check(py, Registry::global().lookup(op), None)?;
            let map = attr_map(&reg.op_def, &attrs)?;
            let mut args = Vec::with_capacity(inputs.len());
            for v in inputs.iter() {
                args.push(self.sym_arg(op, &v)?);
            }
            let mut outs = Vec::with_capacity(outputs.len());
            let mut objs = Vec::with_capacity(outputs.len());
            for o in outputs.iter() {
                let t = o
                    .cast::<PyTensor>()
                    .map_err(|_| PyTypeError::new_err("outputs must be Tensors"))?
                    .clone();
                outs.push(t.get().t.clone());
                objs.push(t);
            }
            let syms = errors::check(py, self.tape.record(op, &args, &map, outs), Some(op))?;
            for (t, s) in objs.iter().zip(syms) {
                self.remember(t, s);
            }
            Ok(())
        })
    }

    /// How many calls the tape has recorded.
    fn num_records(&self) -> usize {
        self.tape.records_snapshot().len()
    }

    /// The recorded calls, for debugging: `(op, input handles, output
    /// handles)`, handles as value indices on this tape.
    fn records(&self) -> Vec<(String, Vec<u32>, Vec<u32>)> {
        self.tape
            .records_snapshot()
            .iter()
            .map(|r| {
                let idx = |s: &[Sym]| s.iter().map(|s| s.index()).collect();
                (r.op.to_string(), idx(&r.inputs), idx(&r.outputs))
            })
            .collect()
    }

    /// Records on `other` the calls this tape recorded from record `since`
    /// on (a gradient computation), with the same Python tensors, so that
    /// an outer tape can differentiate an inner tape's gradient.
    fn forward_records(&mut self, other: &mut Tape, since: usize) -> PyResult<()> {
        Python::attach(|py| {
            errors::guard(py, "GradientTape.gradient", || {
                let records = self.tape.records_snapshot();
                for r in records.iter().skip(since) {
                    let mut args = Vec::with_capacity(r.inputs.len());
                    for &s in &r.inputs {
                        let o = self.object(py, s)?;
                        args.push(other.sym(&o)?);
                    }
                    let mut outs = Vec::with_capacity(r.outputs.len());
                    let mut objs = Vec::with_capacity(r.outputs.len());
                    for &s in &r.outputs {
                        let o = self.object(py, s)?;
                        outs.push(o.get().t.clone());
                        objs.push(o);
                    }
                    let syms = errors::check(
                        py,
                        other.tape.record_flat(r.op.clone(), &args, &r.attrs, outs),
                        Some(&r.op),
                    )?;
                    for (o, s) in objs.iter().zip(syms) {
                        other.remember(o, s);
                    }
                }
                Ok(())
            })
        })
    }

    /// Records a run of a graph (an `opforge.function` call) node by node:
    /// `feeds` pairs each fed output (`(node, index)`) with the Python
    /// tensor fed; `fetched` pairs every output of the other nodes the
    /// run computed with its value; `watch` lists outputs to watch instead
    /// of recording how they were computed (variable reads). Each node
    /// whose outputs were all fetched is recorded with its op and attrs,
    /// in graph order, so the tape differentiates the call exactly as if
    /// its ops had run eagerly. Returns how many nodes were recorded.
    fn record_graph(
        &mut self,
        graph: PyRef<'_, crate::graph::PyGraph>,
        feeds: Vec<((usize, usize), Bound<'_, PyTensor>)>,
        fetched: Vec<((usize, usize), Bound<'_, PyTensor>)>,
        watch: Vec<(usize, usize)>,
    ) -> PyResult<usize> {
        let py = graph.py();
        errors::guard(py, "GradientTape.record", || {
            let mut syms: HashMap<(usize, usize), Sym> = HashMap::new();
            for (r, t) in &feeds {
                let s = self.sym(t)?;
                syms.insert(*r, s);
            }
            let values: HashMap<(usize, usize), &Bound<'_, PyTensor>> =
                fetched.iter().map(|(r, t)| (*r, t)).collect();
            let watched: std::collections::HashSet<(usize, usize)> = watch.into_iter().collect();
            let mut recorded = 0;
            for (i, n) in graph.graph().nodes().iter().enumerate() {
                let k = n.output_types.len();
                if k == 0 || (0..k).any(|j| syms.contains_key(&(i, j))) {
                    continue;
                }
                let Some(outs) = (0..k)
                    .map(|j| values.get(&(i, j)).copied())
                    .collect::<Option<Vec<_>>>()
                else {
                    continue;
                };
                if (0..k).all(|j| watched.contains(&(i, j))) {
                    for (j, t) in outs.iter().enumerate() {
                        let s = self.tape.watch(t.get().t.clone());
                        self.remember(t, s);
                        syms.insert((i, j), s);
                    }
                    continue;
                }
                let mut args = Vec::with_capacity(n.inputs.len());
                for o in &n.inputs {
                    let r = (o.node.index(), o.index);
                    let s =
                        match syms.get(&r) {
                            Some(&s) => s,
                            None => {
                                return Err(PyValueError::new_err(format!(
                                "node '{}': input {}:{} was neither fed nor computed by the run",
                                n.name, o.node.index(), o.index
                            )))
                            }
                        };
                    args.push(s);
                }
                let ts: Vec<opforge::Tensor> = outs.iter().map(|t| t.get().t.clone()).collect();
                let out_syms = errors::check(
                    py,
                    self.tape
                        .record_flat(n.op.as_str().into(), &args, &n.attrs, ts),
                    Some(&n.op),
                )?;
                for (j, (t, s)) in outs.iter().zip(out_syms).enumerate() {
                    self.remember(t, s);
                    syms.insert((i, j), s);
                }
                recorded += 1;
            }
            Ok(recorded)
        })
    }

    /// The gradients of the sum of `targets` (each weighted by its
    /// `output_gradients` entry, ones by default) with respect to
    /// `sources`: a Tensor or None per source.
    #[pyo3(signature = (targets, sources, output_gradients=None))]
    fn gradient<'py>(
        &mut self,
        targets: Bound<'py, PyList>,
        sources: Bound<'py, PyList>,
        output_gradients: Option<Bound<'py, PyList>>,
    ) -> PyResult<Bound<'py, PyList>> {
        let py = targets.py();
        errors::guard(py, "GradientTape.gradient", || {
            let mut ts = Vec::new();
            for t in targets.iter() {
                let t = t
                    .cast::<PyTensor>()
                    .map_err(|_| PyTypeError::new_err("targets must be Tensors"))?
                    .clone();
                match self.lookup(&t) {
                    Some(s) => ts.push(s),
                    // Not computed on the tape: it depends on no source.
                    None => continue,
                }
            }
            let mut grads: Vec<Option<Sym>> = vec![None; ts.len()];
            if let Some(og) = &output_gradients {
                if og.len() != targets.len() {
                    return Err(PyValueError::new_err(format!(
                        "{} targets but {} output_gradients",
                        targets.len(),
                        og.len()
                    )));
                }
                let mut k = 0;
                for (t, g) in targets.iter().zip(og.iter()) {
                    let t = t.cast::<PyTensor>().map_err(PyErr::from)?.clone();
                    if self.lookup(&t).is_none() {
                        continue;
                    }
                    if !g.is_none() {
                        let g = g
                            .cast::<PyTensor>()
                            .map_err(|_| {
                                PyTypeError::new_err("output_gradients must be Tensors or None")
                            })?
                            .clone();
                        grads[k] = Some(errors::check(
                            py,
                            self.tape.constant(g.get().t.clone()),
                            None,
                        )?);
                    }
                    k += 1;
                }
            }
            let mut srcs = Vec::new();
            let mut known = Vec::new();
            for s in sources.iter() {
                let s = s
                    .cast::<PyTensor>()
                    .map_err(|_| PyTypeError::new_err("sources must be Tensors"))?
                    .clone();
                match self.lookup(&s) {
                    Some(sym) => {
                        srcs.push(sym);
                        known.push(true);
                    }
                    None => known.push(false),
                }
            }
            let out = PyList::empty(py);
            let result = if ts.is_empty() || srcs.is_empty() {
                vec![None; srcs.len()]
            } else {
                errors::check(py, self.tape.gradient_of(&ts, &grads, &srcs), None)?
            };
            let mut it = result.into_iter();
            for k in known {
                let g = if k { it.next().flatten() } else { None };
                match g {
                    Some(s) => out.append(self.object(py, s)?)?,
                    None => out.append(py.None())?,
                }
            }
            Ok(out)
        })
    }
}
