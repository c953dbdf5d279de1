//! The gradient of `StridedSlice`.

use opforge_core::attrs::{AttrMap, IntoAttrValue};
use opforge_core::autodiff::{GradientContext, Ops, Sym, SymArg};
use opforge_core::{register_gradient, Result, Status};

const MASKS: [&str; 5] = [
    "begin_mask",
    "end_mask",
    "ellipsis_mask",
    "new_axis_mask",
    "shrink_axis_mask",
];

fn masks(ctx: &GradientContext<'_>) -> AttrMap {
    MASKS
        .iter()
        .filter_map(|&k| ctx.attrs().get(k).map(|v| (k.to_string(), v.clone())))
        .collect()
}

fn call1(o: &mut dyn Ops, name: &str, inputs: &[Sym], attrs: &AttrMap) -> Result<Sym> {
    let args: Vec<SymArg> = inputs.iter().map(|&s| SymArg::One(s)).collect();
    o.call(name, &args, attrs)?
        .pop()
        .ok_or_else(|| Status::internal(format!("{name} has no output")))
}

fn strided_slice_grad(ctx: &mut GradientContext<'_>) -> Result<()> {
    let g = ctx.grad()?;
    let (x, begin, end, strides) = (ctx.input(0), ctx.input(1), ctx.input(2), ctx.input(3));
    let idx = ctx.dtype(begin).into_attr_value();
    let mut attrs = AttrMap::new();
    attrs.insert("out_type".to_string(), idx);
    let shape = call1(ctx, "Shape", &[x], &attrs)?;
    let masks = masks(ctx);
    let dx = call1(
        ctx,
        "StridedSliceGrad",
        &[shape, begin, end, strides, g],
        &masks,
    )?;
    ctx.set_input_grad(0, dx)
}

fn strided_slice_grad_grad(ctx: &mut GradientContext<'_>) -> Result<()> {
    let g = ctx.grad()?;
    let (begin, end, strides) = (ctx.input(1), ctx.input(2), ctx.input(3));
    let masks = masks(ctx);
    let ddy = call1(ctx, "StridedSlice", &[g, begin, end, strides], &masks)?;
    ctx.set_input_grad(4, ddy)
}

register_gradient!("StridedSlice", strided_slice_grad);
register_gradient!("StridedSliceGrad", strided_slice_grad_grad);
