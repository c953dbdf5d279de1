//! The gradient piece of `NnvmAbs`, in a file of its own: pieces of one op
//! from several files (or crates) merge.

use opforge_core::autodiff::{GradientContext, OpsExt, Sym};
use opforge_core::Result;
use opforge_nnvm::{nnvm_register_op, FGradient};
use std::sync::Arc;

/// d|x| = sign(x) * dy, built from other ops (`Sign`, `Mul`).
fn abs_gradient(ctx: &mut GradientContext<'_>, ograds: &[Sym]) -> Result<Vec<Option<Sym>>> {
    let x = ctx.input(0);
    let sign = ctx.op1("Sign", &[x], &[])?;
    Ok(vec![Some(ctx.mul(ograds[0], sign)?)])
}

nnvm_register_op!("NnvmAbs", |op| op
    .set_attr::<FGradient>(Arc::new(abs_gradient)));
