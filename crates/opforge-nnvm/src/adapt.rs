//! Adapters both ways between the NNVM forms and core's one vocabulary:
//! [`FInferShape`](crate::FInferShape) <-> core's `ShapeFn`, and
//! [`FGradient`](crate::FGradient) <-> core's `Gradient` (the one gradient
//! form, `fn(&mut GradientContext) -> Result<()>`).

use crate::attrs::{FGradientFn, InferShapeFn, NodeAttrs, TShape};
use opforge_core::autodiff::{GradFunction, GradientContext, GradientFn, OpsExt, Sym};
use opforge_core::proto::OpDef;
use opforge_core::shape_inference::{InferenceContext, ShapeFunction, ShapeHandle};
use opforge_core::Status;
use std::sync::Arc;

/// Core's shape function for an op with NNVM shape inference: reads the
/// node's input shapes, runs `infer` (with `num_outputs` outputs, hidden
/// ones included, and `parse` giving the parameter struct if the op has an
/// attribute parser), writes back the inputs it refined and the first
/// `visible` outputs. Outputs it leaves unknown stay unknown.
pub fn shape_fn_from_infer_shape(
    infer: Arc<InferShapeFn>,
    num_outputs: usize,
    visible: usize,
) -> Arc<ShapeFunction> {
    Arc::new(move |ic: &mut InferenceContext| {
        let op = ic.op_def().name.clone();
        let node = ic.node_name().to_string();
        let mut ins: Vec<TShape> = (0..ic.num_inputs())
            .map(|i| read_shape(ic, ic.input(i)))
            .collect();
        let before = ins.clone();
        let mut outs = vec![TShape::unknown(); num_outputs];
        let attrs = ic.attrs().clone();
        let node_attrs = NodeAttrs::new(&op, &node, &attrs, None);
        infer(&node_attrs, &mut ins, &mut outs)?;
        for (i, (now, was)) in ins.iter().zip(&before).enumerate() {
            if now != was {
                let s = ic.make_partial_shape(now.as_partial());
                ic.set_input(i, s);
            }
        }
        for (j, s) in outs.iter().take(visible).enumerate() {
            let h = ic.make_partial_shape(s.as_partial());
            ic.set_output(j, h);
        }
        Ok(())
    })
}

fn read_shape(ic: &InferenceContext, s: ShapeHandle) -> TShape {
    match ic.dims(s) {
        None => TShape::unknown(),
        Some(dims) => {
            let dims: Vec<i64> = dims.iter().map(|&d| ic.value(d).unwrap_or(-1)).collect();
            TShape::new(&dims)
        }
    }
}

/// NNVM shape inference for an op with core's shape function `f` (for op
/// `op_def`): runs `f` on what is known of the inputs and merges what it
/// sets into the inputs and outputs (a conflict with a shape already known
/// is `InvalidArgument` naming the op and the argument). Answers whether
/// every input and output shape is known afterwards.
pub fn infer_shape_from_shape_fn(op_def: Arc<OpDef>, f: Arc<ShapeFunction>) -> Arc<InferShapeFn> {
    Arc::new(
        move |attrs: &NodeAttrs<'_>, ins: &mut [TShape], outs: &mut [TShape]| {
            let partial: Vec<Option<Vec<i64>>> = ins
                .iter()
                .map(|s| s.as_partial().map(<[i64]>::to_vec))
                .collect();
            let mut ic =
                InferenceContext::new(&op_def, attrs.name(), attrs.attrs(), &partial, outs.len());
            f(&mut ic)?;
            ic.check_accesses()?;
            for (i, s) in ins.iter_mut().enumerate() {
                let got = read_shape(&ic, ic.input(i));
                s.assign(&got, &format!("{}: input {i}", op_def.name))?;
            }
            for (j, s) in outs.iter_mut().enumerate() {
                if let Some(h) = ic.output(j) {
                    let got = read_shape(&ic, h);
                    s.assign(&got, &format!("{}: output {j}", op_def.name))?;
                }
            }
            Ok(ins.iter().chain(outs.iter()).all(TShape::is_known))
        },
    )
}

/// Core's gradient for an op with an NNVM gradient: gives `f` one gradient
/// per output (`ZerosLike` of the output where none flows) and sets the
/// input gradients it returns. A result with another length than the op's
/// number of inputs is `InvalidArgument` naming the op.
pub fn gradient_from_fgradient(f: Arc<FGradientFn>) -> GradientFn {
    GradientFn::from_fn(move |ctx: &mut GradientContext<'_>| {
        let mut ograds = Vec::with_capacity(ctx.num_outputs());
        for i in 0..ctx.num_outputs() {
            let g = match ctx.output_grad(i) {
                Some(g) => g,
                None => {
                    let y = ctx.output(i);
                    ctx.zeros_like(y)?
                }
            };
            ograds.push(g);
        }
        let grads = f(ctx, &ograds)?;
        if grads.len() != ctx.num_inputs() {
            return Err(Status::invalid_argument(format!(
                "the FGradient of op '{}' returned {} gradient entries; the op has {} inputs",
                ctx.op_name(),
                grads.len(),
                ctx.num_inputs()
            )));
        }
        for (i, g) in grads.into_iter().enumerate() {
            if let Some(g) = g {
                ctx.set_input_grad(i, g)?;
            }
        }
        Ok(())
    })
}

/// The NNVM gradient of an op with core's gradient `g`: runs `g` in a
/// gradient context whose output gradients are `ograds` and returns the
/// input gradients it set. `None` for a non-differentiable op (it has no
/// `FGradient`, as in MXNet).
pub fn fgradient_from_gradient(g: &GradientFn) -> Option<Arc<FGradientFn>> {
    let f: Arc<GradFunction> = match g {
        GradientFn::Fn(f) => f.clone(),
        GradientFn::NotDifferentiable => return None,
    };
    Some(Arc::new(
        move |ctx: &mut GradientContext<'_>, ograds: &[Sym]| {
            let (op, attrs, inputs, outputs) =
                (ctx.op_name(), ctx.attrs(), ctx.inputs(), ctx.outputs());
            let ograds: Vec<Option<Sym>> = ograds.iter().copied().map(Some).collect();
            let mut inner = GradientContext::new(ctx, op, attrs, inputs, outputs, &ograds);
            f(&mut inner)?;
            inner.into_input_grads()
        },
    ))
}
