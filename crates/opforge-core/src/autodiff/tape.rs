//! The eager [`GradientTape`]: runs ops now and records them, so gradients
//! of recorded computations can be taken afterwards.

use super::{backprop, Ops, Record, Sym, SymArg, Syms};
use crate::attrs::{resolve_call, ArgTypes, AttrMap};
use crate::eager::{Arg, EagerContext};
use crate::registry::Registry;
use crate::{DataType, Result, Status, Tensor};
use std::collections::HashSet;
use std::sync::Arc;

/// Records eager op calls for differentiation (TensorFlow's `tf.GradientTape`).
///
/// Values are [`Sym`] handles: [`watch`](Self::watch) a tensor to get one,
/// call ops through the [`Ops`] interface, read results with
/// [`value`](Self::value), and ask for gradients with
/// [`gradient`](Self::gradient). The gradient computation is recorded too,
/// so a persistent tape can differentiate its own gradients.
pub struct GradientTape<'c> {
    ctx: &'c EagerContext,
    scope: u32,
    values: Vec<Tensor>,
    records: Vec<Record>,
    watched: HashSet<Sym>,
    persistent: bool,
    used: bool,
}

impl<'c> GradientTape<'c> {
    /// A tape running ops on `ctx`. A non-persistent tape answers one
    /// [`gradient`](Self::gradient) call.
    pub fn new(ctx: &'c EagerContext, persistent: bool) -> GradientTape<'c> {
        GradientTape {
            ctx,
            scope: Sym::new_scope(),
            values: Vec::new(),
            records: Vec::new(),
            watched: HashSet::new(),
            persistent,
            used: false,
        }
    }

    /// The scope of the handles this tape hands out ([`Sym::scope`]).
    pub fn scope(&self) -> u32 {
        self.scope
    }

    fn push(&mut self, t: Tensor) -> Sym {
        self.values.push(t);
        Sym::new(self.scope, self.values.len() as u32 - 1)
    }

    /// Starts watching a tensor: gradients can be taken with respect to it.
    pub fn watch(&mut self, t: Tensor) -> Sym {
        let s = self.push(t);
        self.watched.insert(s);
        s
    }

    /// The tensor of a handle (`InvalidArgument` for a handle this tape
    /// did not hand out).
    #[inline]
    pub fn value(&self, s: Sym) -> Result<&Tensor> {
        let i = s.check(self.scope, self.values.len(), "tape")?;
        Ok(&self.values[i])
    }

    /// The gradients of `target` with respect to `sources` (`None` for a
    /// source the target does not depend on, or that is neither watched nor
    /// computed from a watched value).
    pub fn gradient(&mut self, target: Sym, sources: &[Sym]) -> Result<Vec<Option<Sym>>> {
        self.gradient_of(&[target], &[None], sources)
    }

    /// The gradients of the sum of `targets` with respect to `sources`,
    /// each target weighted by its `target_grads` entry (TensorFlow's
    /// `output_gradients`; `None` means ones).
    pub fn gradient_of(
        &mut self,
        targets: &[Sym],
        target_grads: &[Option<Sym>],
        sources: &[Sym],
    ) -> Result<Vec<Option<Sym>>> {
        if self.used && !self.persistent {
            return Err(Status::failed_precondition(
                "gradient() can only be called once on a non-persistent tape; create it with persistent = true to ask again",
            ));
        }
        if target_grads.len() != targets.len() {
            return Err(Status::invalid_argument(format!(
                "{} targets but {} output gradients: give one per target (or none)",
                targets.len(),
                target_grads.len()
            )));
        }
        for &s in targets.iter().chain(sources) {
            self.value(s)?;
        }
        for s in target_grads.iter().flatten() {
            self.value(*s)?;
        }
        self.used = true;
        let records = self.records.clone();
        // As TensorFlow's tape: watched values, and every value computed from
        // one (intermediate results can be sources too).
        let mut tracked = self.watched.clone();
        for r in &records {
            if r.inputs.iter().any(|s| tracked.contains(s)) {
                tracked.extend(r.outputs.iter().copied());
            }
        }
        let grads = backprop(self, &records, targets, target_grads, sources)?;
        Ok(grads
            .into_iter()
            .zip(sources)
            .map(|(g, s)| if tracked.contains(s) { g } else { None })
            .collect())
    }

    /// Records a call that already ran (`outputs` are its results), as
    /// [`Ops::call`] records the calls it runs: a front end that executes
    /// ops itself (Python) keeps a tape this way. Its outputs' handles.
    pub fn record(
        &mut self,
        op: &str,
        inputs: &[SymArg],
        attrs: &AttrMap,
        outputs: Vec<Tensor>,
    ) -> Result<Vec<Sym>> {
        // Record every attr (given, inferred and defaulted), as a graph node
        // holds them, so that gradient functions read attrs alike in both.
        let arg_types: Vec<ArgTypes> = inputs
            .iter()
            .map(|a| match a {
                SymArg::One(s) => Ok(ArgTypes::Single(self.value(*s)?.dtype())),
                SymArg::List(l) => Ok(ArgTypes::List(
                    l.iter()
                        .map(|s| Ok(self.value(*s)?.dtype()))
                        .collect::<Result<_>>()?,
                )),
            })
            .collect::<Result<_>>()?;
        let data = self.ctx.registry().lookup(op)?;
        let attrs = resolve_call(&data.op_def, &arg_types, attrs)?.attrs;
        let outputs: Syms = outputs.into_iter().map(|t| self.push(t)).collect();
        let mut flat = Syms::new();
        for a in inputs {
            match a {
                SymArg::One(s) => flat.push(*s),
                SymArg::List(l) => flat.extend_from_slice(l),
            }
        }
        self.records.push(Record {
            op: op.into(),
            attrs,
            inputs: flat,
            outputs: outputs.clone(),
        });
        Ok(outputs.into_vec())
    }

    /// Records a call given as another tape recorded it: flat inputs and
    /// every attr already resolved (a [`Record`] moved between tapes).
    ///
    /// The op's name is shared (`Arc<str>`): a front end recording many
    /// calls of one op hands out clones of one name, so a record allocates
    /// nothing for it (nor for up to four inputs and outputs).
    pub fn record_flat(
        &mut self,
        op: Arc<str>,
        inputs: &[Sym],
        attrs: &AttrMap,
        outputs: impl IntoIterator<Item = Tensor>,
    ) -> Result<Syms> {
        for &s in inputs {
            s.check(self.scope, self.values.len(), "tape")?;
        }
        let mut syms = Syms::new();
        for t in outputs {
            syms.push(self.push(t));
        }
        self.records.push(Record {
            op,
            attrs: attrs.clone(),
            inputs: Syms::from_slice(inputs),
            outputs: syms.clone(),
        });
        Ok(syms)
    }

    /// A copy of the recorded op applications.
    pub fn records_snapshot(&self) -> Vec<Record> {
        self.records.clone()
    }

    /// [`gradient`](Self::gradient), as tensors.
    pub fn gradient_tensors(
        &mut self,
        target: Sym,
        sources: &[Sym],
    ) -> Result<Vec<Option<Tensor>>> {
        let g = self.gradient(target, sources)?;
        g.into_iter()
            .map(|g| g.map(|s| self.value(s).cloned()).transpose())
            .collect()
    }
}

impl Ops for GradientTape<'_> {
    fn call(&mut self, op: &str, inputs: &[SymArg], attrs: &AttrMap) -> Result<Vec<Sym>> {
        let args: Vec<Arg> = inputs
            .iter()
            .map(|a| {
                Ok(match a {
                    SymArg::One(s) => Arg::One(self.value(*s)?.clone()),
                    SymArg::List(l) => Arg::List(
                        l.iter()
                            .map(|s| self.value(*s).cloned())
                            .collect::<Result<_>>()?,
                    ),
                })
            })
            .collect::<Result<_>>()?;
        let outs = self.ctx.execute_args(op, args, attrs)?;
        self.record(op, inputs, attrs, outs)
    }

    fn dtype(&self, s: Sym) -> DataType {
        self.value(s).map_or(DataType::Invalid, Tensor::dtype)
    }

    fn shape(&self, s: Sym) -> Option<Vec<i64>> {
        Some(self.value(s).ok()?.dims().to_vec())
    }

    fn registry(&self) -> &Registry {
        self.ctx.registry()
    }

    fn constant(&mut self, t: Tensor) -> Result<Sym> {
        Ok(self.push(t))
    }

    fn value_of(&self, s: Sym) -> Option<&Tensor> {
        self.value(s).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_of_another_tape_or_past_the_end_are_refused() {
        let ctx = EagerContext::new(1).unwrap();
        let mut a = GradientTape::new(&ctx, false);
        let mut b = GradientTape::new(&ctx, false);
        let x = a.watch(Tensor::scalar(1.5f32));
        let e = b.value(x).unwrap_err();
        assert!(e.message().contains("belongs to another tape"), "{e}");
        let past = Sym::new(a.scope(), 5);
        let e = a.value(past).unwrap_err();
        assert!(
            e.message()
                .contains("is not a value of this tape (it has 1 values)"),
            "{e}"
        );
        // Recording with a foreign input fails and records nothing.
        let out = Tensor::scalar(1.5f32);
        assert!(b
            .record_flat("Identity".into(), &[x], &AttrMap::new(), [out])
            .is_err());
        assert!(b.records_snapshot().is_empty());
        assert_eq!(a.value(x).unwrap().flat::<f32>().unwrap(), &[1.5]);
    }
}
