//! Reverse-mode differentiation over a recorded list of op applications,
//! shared by graph `gradients()` and the eager `GradientTape`.

use super::{
    is_differentiable_dtype, Gradient, GradientContext, GradientFn, Ops, OpsExt, Sym, AUTODIFF_OPS,
};
use crate::attrs::AttrMap;
use crate::{Result, Status};
use smallvec::SmallVec;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// The handles of a record's inputs or outputs: inline up to four (most
/// ops), so recording an op on a tape allocates nothing for them.
pub type Syms = SmallVec<[Sym; 4]>;

/// One op application: what ran, on what, producing what.
#[derive(Clone, Debug)]
pub struct Record {
    /// The op (shared: a tape records the same op many times).
    pub op: Arc<str>,
    /// Its attrs.
    pub attrs: AttrMap,
    /// Its flat inputs.
    pub inputs: Syms,
    /// Its flat outputs.
    pub outputs: Syms,
}

/// The gradients of `ys` (seeded with `grad_ys`, default ones) with respect
/// to `xs`, through `records` (in forward order), computed with ops called
/// on `o` and the [`Gradient`] attributes of `o`'s registry. `None` where no
/// gradient flows to an x. `FailedPrecondition` if the registry lacks an op
/// of [`AUTODIFF_OPS`].
pub fn backprop(
    o: &mut dyn Ops,
    records: &[Record],
    ys: &[Sym],
    grad_ys: &[Option<Sym>],
    xs: &[Sym],
) -> Result<Vec<Option<Sym>>> {
    o.registry().require_ops(AUTODIFF_OPS, "autodiff")?;
    // Ops on a path from some x to some y.
    let mut from_x: HashSet<Sym> = xs.iter().copied().collect();
    let mut forward = vec![false; records.len()];
    for (i, r) in records.iter().enumerate() {
        if r.inputs.iter().any(|s| from_x.contains(s)) {
            forward[i] = true;
            from_x.extend(r.outputs.iter().copied());
        }
    }
    let mut to_y: HashSet<Sym> = ys.iter().copied().collect();
    let mut relevant = vec![false; records.len()];
    for (i, r) in records.iter().enumerate().rev() {
        if forward[i] && r.outputs.iter().any(|s| to_y.contains(s)) {
            relevant[i] = true;
            to_y.extend(r.inputs.iter().copied());
        }
    }
    // Gradient contributions per value; summed when first read.
    let mut contributions: HashMap<Sym, Vec<Sym>> = HashMap::new();
    for (k, &y) in ys.iter().enumerate() {
        let seed = match grad_ys.get(k).copied().flatten() {
            Some(g) => g,
            None => o.ones_like(y)?,
        };
        contributions.entry(y).or_default().push(seed);
    }
    let mut summed: HashMap<Sym, Sym> = HashMap::new();
    let mut total = |o: &mut dyn Ops,
                     s: Sym,
                     contributions: &mut HashMap<Sym, Vec<Sym>>|
     -> Result<Option<Sym>> {
        if let Some(&g) = summed.get(&s) {
            return Ok(Some(g));
        }
        match contributions.remove(&s) {
            None => Ok(None),
            Some(gs) => {
                let g = o.add_n(&gs)?;
                summed.insert(s, g);
                Ok(Some(g))
            }
        }
    };
    for (i, r) in records.iter().enumerate().rev() {
        if !relevant[i] {
            continue;
        }
        let mut out_grads = Vec::with_capacity(r.outputs.len());
        for &s in &r.outputs {
            out_grads.push(total(o, s, &mut contributions)?);
        }
        if out_grads.iter().all(Option::is_none)
            || !r
                .inputs
                .iter()
                .any(|&s| is_differentiable_dtype(o.dtype(s)))
        {
            continue;
        }
        let gradient = o.registry().attr::<Gradient>(&r.op);
        let f = match gradient.as_deref() {
            Some(GradientFn::Fn(f)) => f.clone(),
            Some(GradientFn::NotDifferentiable) => continue,
            None => {
                return Err(Status::not_found(format!(
                    "No gradient defined for op '{}'. Register one with register_gradient!(\"{}\", ...), or \
                     register_not_differentiable!(\"{}\") if no gradient flows through it",
                    r.op, r.op, r.op
                )))
            }
        };
        let mut ctx = GradientContext::new(o, &r.op, &r.attrs, &r.inputs, &r.outputs, &out_grads);
        let in_grads = f(&mut ctx)
            .and_then(|()| ctx.into_input_grads())
            .map_err(|e| e.prepend(format!("In the gradient of {}: ", r.op)))?;
        for (&input, g) in r.inputs.iter().zip(in_grads) {
            if let Some(g) = g {
                if is_differentiable_dtype(o.dtype(input)) {
                    contributions.entry(input).or_default().push(g);
                }
            }
        }
    }
    xs.iter()
        .map(|&x| total(o, x, &mut contributions))
        .collect()
}
