//! `BroadcastTo`, `BroadcastArgs` and `BroadcastGradientArgs`.

use super::*;

// BroadcastTo, BroadcastArgs, BroadcastGradientArgs
// ---------------------------------------------------------------------------

/// `BroadcastTo`.
pub fn broadcast_to() -> OpDefBuilder {
    OpDefBuilder::new("BroadcastTo")
        .input("input: T")
        .input("shape: Tidx")
        .output("output: T")
        .attr("T: type")
        .attr("Tidx: {int32, int64} = DT_INT32")
        .doc(
            "Broadcast an array for a compatible shape.\n\n\
             Broadcasting makes `input` have the shape `shape` by repeating it along\n\
             dimensions of size 1 and new leading dimensions, following NumPy's rules.",
        )
}

/// `BroadcastArgs`.
pub fn broadcast_args() -> OpDefBuilder {
    OpDefBuilder::new("BroadcastArgs")
        .input("s0: T")
        .input("s1: T")
        .output("r0: T")
        .attr(format!("T: {{{INDEX_SPEC}}} = DT_INT32"))
        .doc(
            "Return the shape of s0 op s1 with broadcast.\n\n\
             Given `s0` and `s1`, tensors that represent shapes, compute `r0`, the\n\
             broadcasted shape. `s0`, `s1` and `r0` are all integer vectors.",
        )
}

/// `BroadcastGradientArgs`.
pub fn broadcast_gradient_args() -> OpDefBuilder {
    OpDefBuilder::new("BroadcastGradientArgs")
        .input("s0: T")
        .input("s1: T")
        .output("r0: T")
        .output("r1: T")
        .attr(format!("T: {{{INDEX_SPEC}}} = DT_INT32"))
        .doc(
            "Return the reduction indices for computing gradients of s0 op s1 with broadcast.\n\n\
             This is typically used by gradient computations for a broadcasting operation.",
        )
}

pub(super) struct BroadcastToOp;

impl OpKernel for BroadcastToOp {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let shape_t = ctx.input(1);
        ensure!(
            shape_t.rank() == 1,
            InvalidArgument,
            "shape must be a vector of {{int32,int64}}, got shape {}",
            fmt_shape(shape_t.dims())
        );
        let out_shape = make_shape(&index_values(shape_t, "shape")?)?;
        let input = ctx.input(0);
        if &out_shape == input.shape() {
            let t = ctx.take_input(0);
            return ctx.set_output(0, t);
        }
        let (in_dims, out_dims) = (input.dims(), out_shape.dims());
        ensure!(
            in_dims.len() <= out_dims.len(),
            InvalidArgument,
            "Rank of input ({}) must be no greater than rank of output shape ({}).",
            in_dims.len(),
            out_dims.len()
        );
        if out_shape.num_elements() == 0 {
            let out = ctx.allocate_temp(input.dtype(), out_shape)?;
            return ctx.set_output(0, out);
        }
        let out = if in_dims.is_empty() {
            move_elements(ctx.device(), input.dtype(), &[input], out_shape, &FillValue)?
        } else {
            let full = broadcast_shapes(in_dims, out_dims).map_err(|_| {
                Status::invalid_argument(format!(
                    "Incompatible shapes: {} vs. {}",
                    fmt_shape(in_dims),
                    fmt_shape(out_dims)
                ))
            })?;
            ensure!(
                full.as_slice() == out_dims,
                InvalidArgument,
                "Unable to broadcast tensor of shape {} to tensor of shape {}",
                fmt_shape(in_dims),
                fmt_shape(out_dims)
            );
            let plan = BroadcastPlan::new(in_dims, out_dims)?;
            move_elements(
                ctx.device(),
                input.dtype(),
                &[input],
                out_shape,
                &BroadcastRows { plan: &plan },
            )?
        };
        ctx.set_output(0, out)
    }
}

/// Reads the two shape vectors of `BroadcastArgs` / `BroadcastGradientArgs`
/// and checks that they broadcast; returns them and the broadcast shape.
pub(super) fn shape_pair(ctx: &OpKernelContext<'_>) -> Result<(Vec<i64>, Vec<i64>, Vec<i64>)> {
    let mut shapes = Vec::with_capacity(2);
    for i in 0..2 {
        let t = ctx.input(i);
        ensure!(
            t.rank() == 1,
            InvalidArgument,
            "In[{i}] must be a vector.{}",
            fmt_shape(t.dims())
        );
        shapes.push(index_values(t, "shape")?);
    }
    let s1 = shapes.pop().unwrap_or_default();
    let s0 = shapes.pop().unwrap_or_default();
    let out = broadcast_shapes(&s0, &s1)?;
    Ok((s0, s1, out))
}

pub(super) struct BroadcastArgsOp;

impl OpKernel for BroadcastArgsOp {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let (_, _, out) = shape_pair(ctx)?;
        let t = index_tensor(ctx.output_type(0), &[out.len() as i64], &out)?;
        ctx.set_output(0, t)
    }
}

pub(super) struct BroadcastGradientArgsOp;

impl OpKernel for BroadcastGradientArgsOp {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let (s0, s1, out) = shape_pair(ctx)?;
        // TensorFlow's BCast takes a fast path for identical shapes that
        // reports no reduction at all (even for dimensions of size 1).
        let (r0, r1) = if s0 == s1 {
            (Vec::new(), Vec::new())
        } else {
            (
                broadcast_reduction_axes(&s0, &out),
                broadcast_reduction_axes(&s1, &out),
            )
        };
        let dtype = ctx.output_type(0);
        ctx.set_output(0, index_tensor(dtype, &[r0.len() as i64], &r0)?)?;
        ctx.set_output(1, index_tensor(dtype, &[r1.len() as i64], &r1)?)
    }
}

/// `BroadcastTo`: the shape held by `shape`, whose dims must equal the
/// input's dims greater than 1 (aligned at the end).
pub(super) fn broadcast_to_shape(c: &mut InferenceContext) -> Result<()> {
    let shape_in = c.input(1);
    c.with_rank(shape_in, 1)?;
    let mut out = c.make_shape_from_shape_tensor(1)?;
    let input = c.input(0);
    let (Some(out_rank), true) = (c.rank(out), c.rank_known(input)) else {
        c.set_output(0, out);
        return Ok(());
    };
    let input = c.with_rank_at_most(input, out_rank)?;
    let in_dims = c.dims(input).map(<[_]>::to_vec).unwrap_or_default();
    for (i, &in_dim) in in_dims.iter().rev().enumerate() {
        if c.raw_value(in_dim) > 1 {
            let idx = (out_rank - i - 1) as i64;
            let out_dim = c.dim(out, idx);
            let merged = c.merge_dim(in_dim, out_dim)?;
            out = c.replace_dim(out, idx, merged)?;
        }
    }
    c.set_output(0, out);
    Ok(())
}

/// `BroadcastArgs`: a vector as long as the longer input vector.
pub(super) fn broadcast_args_shape(c: &mut InferenceContext) -> Result<()> {
    let (x, y) = (c.input(0), c.input(1));
    c.with_rank(x, 1)?;
    c.with_rank(y, 1)?;
    let (dx, dy) = (c.dim(x, 0), c.dim(y, 0));
    let len = match (c.value(dx), c.value(dy)) {
        (Some(a), Some(b)) => a.max(b),
        _ => -1,
    };
    let out = c.vector(len);
    c.set_output(0, out);
    Ok(())
}

/// `BroadcastGradientArgs`: two vectors of unknown length.
pub(super) fn broadcast_gradient_args_shape(c: &mut InferenceContext) -> Result<()> {
    let (x, y) = (c.input(0), c.input(1));
    c.with_rank(x, 1)?;
    c.with_rank(y, 1)?;
    for i in 0..2 {
        let out = c.vector(-1);
        c.set_output(i, out);
    }
    Ok(())
}

register_op!(broadcast_to().set_shape_fn(broadcast_to_shape));
register_op!(broadcast_args().set_shape_fn(broadcast_args_shape));
register_op!(broadcast_gradient_args().set_shape_fn(broadcast_gradient_args_shape));
register_kernel!(
    KernelDefBuilder::new("BroadcastTo")
        .type_constraint_list("T", &all_types())
        .host_memory("shape"),
    fn = |_| Ok(Box::new(BroadcastToOp))
);
register_kernel!(
    KernelDefBuilder::new("BroadcastArgs")
        .type_constraint_list("T", INDEX_TYPES)
        .host_memory("s0")
        .host_memory("s1")
        .host_memory("r0"),
    fn = |_| Ok(Box::new(BroadcastArgsOp))
);
register_kernel!(
    KernelDefBuilder::new("BroadcastGradientArgs")
        .type_constraint_list("T", INDEX_TYPES)
        .host_memory("s0")
        .host_memory("s1")
        .host_memory("r0")
        .host_memory("r1"),
    fn = |_| Ok(Box::new(BroadcastGradientArgsOp))
);

// ---------------------------------------------------------------------------
