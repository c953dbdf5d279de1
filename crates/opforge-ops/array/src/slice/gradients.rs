//! Gradients of the joining, splitting, slicing and padding ops.

use opforge_core::attrs::{AttrMap, IntoAttrValue};
use opforge_core::autodiff::{GradientContext, Ops, OpsExt, Sym, SymArg};
use opforge_core::{
    register_gradient, register_not_differentiable, DataType, Result, Status, Tensor,
};
use opforge_ops_base::grad::{concat, set_input_grads};

/// An index vector constant of `dtype` (int32 or int64).
fn index_vector(o: &mut dyn Ops, dtype: DataType, v: &[i64]) -> Result<Sym> {
    let t = if dtype == DataType::Int64 {
        Tensor::from_slice(&[v.len() as i64], v)?
    } else {
        let v32: Vec<i32> = v.iter().map(|&x| x as i32).collect();
        Tensor::from_slice(&[v.len() as i64], &v32)?
    };
    o.constant(t)
}

fn one_output(mut r: Vec<Sym>, op: &str) -> Result<Sym> {
    r.pop()
        .ok_or_else(|| Status::internal(format!("{op} has no output")))
}

fn pack_list(o: &mut dyn Ops, xs: &[Sym], axis: i64) -> Result<Sym> {
    let mut attrs = AttrMap::new();
    attrs.insert("axis".to_string(), axis.into_attr_value());
    let r = o.call("Pack", &[SymArg::List(xs.to_vec())], &attrs)?;
    one_output(r, "Pack")
}

fn concat_v2_grad(ctx: &mut GradientContext<'_>) -> Result<()> {
    let g = ctx.grad()?;
    let values = &ctx.inputs()[ctx.input_range("values")?];
    let axis = ctx.input(ctx.input_range("axis")?.start);
    let (Some(&first), i32t) = (values.first(), DataType::Int32.into_attr_value()) else {
        return Ok(());
    };
    let rank = ctx.op1("Rank", &[first], &[])?;
    let ax = ctx.op1("Cast", &[axis], &[("DstT", i32t)])?;
    let ax = ctx.op1("FloorMod", &[ax, rank], &[])?;
    let one_i = ctx.constant(Tensor::scalar(1i32))?;
    let zero_i = ctx.constant(Tensor::scalar(0i32))?;
    let mask = ctx.op1("OneHot", &[ax, rank, one_i, zero_i], &[])?;
    let ax_v = ctx.int_vector(&[1])?;
    let ax_v = ctx.reshape(ax, ax_v)?;
    let one_v = ctx.int_vector(&[1])?;
    let mut offset: Option<Sym> = None;
    for (i, &x) in values.iter().enumerate() {
        let s = ctx.shape_of(x)?;
        let begin = match offset {
            None => ctx.zeros_like(s)?,
            Some(off) => ctx.mul(mask, off)?,
        };
        let dx = ctx.op1("Slice", &[g, begin, s], &[])?;
        ctx.set_input_grad(i, dx)?;
        let size = ctx.op1("Slice", &[s, ax_v, one_v], &[])?;
        offset = Some(match offset {
            None => size,
            Some(off) => ctx.add(off, size)?,
        });
    }
    Ok(())
}

/// `Concat`'s gradient, as TensorFlow's `_ConcatGradHelper`: the slices of
/// the incoming gradient at the `ConcatOffset`s of the inputs (the
/// dimension taken modulo the rank), of the inputs' shapes.
fn concat_grad(ctx: &mut GradientContext<'_>) -> Result<()> {
    let g = ctx.grad()?;
    let range = ctx.input_range("values")?;
    let values = &ctx.inputs()[range.clone()];
    let Some(&first) = values.first() else {
        return Ok(());
    };
    let rank = ctx.op1("Rank", &[first], &[])?;
    let dim = ctx.op1("FloorMod", &[ctx.input(0), rank], &[])?;
    let shapes = values
        .iter()
        .map(|&x| ctx.shape_of(x))
        .collect::<Result<Vec<_>>>()?;
    let offsets = ctx.call(
        "ConcatOffset",
        &[SymArg::One(dim), SymArg::List(shapes.clone())],
        &AttrMap::new(),
    )?;
    for (i, (&begin, &size)) in range.zip(offsets.iter().zip(&shapes)) {
        let dx = ctx.op1("Slice", &[g, begin, size], &[])?;
        ctx.set_input_grad(i, dx)?;
    }
    Ok(())
}

fn pack_grad(ctx: &mut GradientContext<'_>) -> Result<()> {
    let (g, n) = (ctx.grad()?, ctx.num_inputs());
    let axis: i64 = ctx.get_attr("axis")?;
    let mut attrs = AttrMap::new();
    attrs.insert("num".to_string(), (n as i64).into_attr_value());
    attrs.insert("axis".to_string(), axis.into_attr_value());
    let r = ctx.call("Unpack", &[SymArg::One(g)], &attrs)?;
    set_input_grads(ctx, r)
}

/// Gradients of a multi-output op, with zeros for the outputs without one.
fn filled(ctx: &mut GradientContext<'_>) -> Result<Vec<Sym>> {
    (0..ctx.num_outputs())
        .map(|i| match ctx.output_grad(i) {
            Some(g) => Ok(g),
            None => ctx.zeros_like(ctx.output(i)),
        })
        .collect()
}

fn unpack_grad(ctx: &mut GradientContext<'_>) -> Result<()> {
    let axis: i64 = ctx.get_attr("axis")?;
    let gs = filled(ctx)?;
    let dx = pack_list(ctx, &gs, axis)?;
    ctx.set_input_grad(0, dx)
}

fn split_grad(ctx: &mut GradientContext<'_>) -> Result<()> {
    let (gs, axis) = (filled(ctx)?, ctx.input(0));
    let dvalue = concat(ctx, &gs, axis)?;
    ctx.set_input_grad(1, dvalue)
}

fn slice_grad(ctx: &mut GradientContext<'_>) -> Result<()> {
    let (g, x, begin, y) = (ctx.grad()?, ctx.input(0), ctx.input(1), ctx.output(0));
    let idx = ctx.dtype(begin).into_attr_value();
    let out_size = ctx.op1("Shape", &[y], &[("out_type", idx.clone())])?;
    let in_size = ctx.op1("Shape", &[x], &[("out_type", idx)])?;
    let col = ctx.int_vector(&[-1, 1])?;
    let before = ctx.reshape(begin, col)?;
    let rest = ctx.sub(in_size, out_size)?;
    let rest = ctx.sub(rest, begin)?;
    let after = ctx.reshape(rest, col)?;
    let one = ctx.constant(Tensor::scalar(1i32))?;
    let paddings = concat(ctx, &[before, after], one)?;
    let dx = ctx.op1("Pad", &[g, paddings], &[])?;
    ctx.set_input_grad(0, dx)
}

fn tile_grad(ctx: &mut GradientContext<'_>) -> Result<()> {
    let (g, x, multiples) = (ctx.grad()?, ctx.input(0), ctx.input(1));
    let idx = ctx.dtype(multiples).into_attr_value();
    let in_shape = ctx.op1("Shape", &[x], &[("out_type", idx)])?;
    // [m0, d0, m1, d1, ...]
    let pairs = pack_list(ctx, &[multiples, in_shape], 1)?;
    let mdt = ctx.dtype(multiples);
    let flat = index_vector(ctx, mdt, &[-1])?;
    let split_shape = ctx.reshape(pairs, flat)?;
    let n = ctx.op1("Size", &[split_shape], &[])?;
    let zero = ctx.constant(Tensor::scalar(0i32))?;
    let two = ctx.constant(Tensor::scalar(2i32))?;
    let axes = ctx.op1("Range", &[zero, n, two], &[])?;
    let g = ctx.reshape(g, split_shape)?;
    let summed = ctx.op1("Sum", &[g, axes], &[("keep_dims", false.into_attr_value())])?;
    ctx.set_input_grad(0, summed)
}

fn pad_grad(ctx: &mut GradientContext<'_>) -> Result<()> {
    let (g, x, paddings) = (ctx.grad()?, ctx.input(0), ctx.input(1));
    let dt = ctx.dtype(paddings);
    let b = index_vector(ctx, dt, &[0, 0])?;
    let s = index_vector(ctx, dt, &[-1, 1])?;
    let before = ctx.op1("Slice", &[paddings, b, s], &[])?;
    let flat = index_vector(ctx, dt, &[-1])?;
    let begin = ctx.reshape(before, flat)?;
    let sizes = ctx.op1("Shape", &[x], &[("out_type", dt.into_attr_value())])?;
    let dx = ctx.op1("Slice", &[g, begin, sizes], &[])?;
    ctx.set_input_grad(0, dx)
}

/// `MirrorPad`'s gradient is `MirrorPadGrad` of the incoming gradient, and
/// `MirrorPadGrad`'s is `MirrorPad` (both linear, adjoint to each other).
fn mirror_pad_grad(ctx: &mut GradientContext<'_>) -> Result<()> {
    let (g, paddings) = (ctx.grad()?, ctx.input(1));
    let adjoint = if ctx.op_name() == "MirrorPad" {
        "MirrorPadGrad"
    } else {
        "MirrorPad"
    };
    let mode: String = ctx.get_attr("mode")?;
    let r = ctx.op1(adjoint, &[g, paddings], &[("mode", mode.into_attr_value())])?;
    ctx.set_input_grad(0, r)
}

register_gradient!("ConcatV2", concat_v2_grad);
register_gradient!("Concat", concat_grad);
register_gradient!("MirrorPad", mirror_pad_grad);
register_gradient!("MirrorPadGrad", mirror_pad_grad);
register_not_differentiable!("ConcatOffset");
// No input to differentiate (TensorFlow registers no gradient for it).
register_not_differentiable!("_ParallelConcatStart");
register_gradient!("Pack", pack_grad);
register_gradient!("Unpack", unpack_grad);
register_gradient!("Split", split_grad);
register_gradient!("Slice", slice_grad);
register_gradient!("Tile", tile_grad);
register_gradient!("Pad", pad_grad);
register_gradient!("PadV2", pad_grad);
