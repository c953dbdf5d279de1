//! Gradients of the indexing ops.

use opforge_core::attrs::IntoAttrValue;
use opforge_core::autodiff::{GradientContext, Ops, OpsExt, Sym};
use opforge_core::proto::AttrValue;
use opforge_core::{register_gradient, register_not_differentiable, DataType, Result, Status};
use opforge_ops_base::grad::{attr_or, cast, concat_vectors};

fn transpose_grad(ctx: &mut GradientContext<'_>) -> Result<()> {
    let (g, perm) = (ctx.grad()?, ctx.input(1));
    let inv = ctx.op1("InvertPermutation", &[perm], &[])?;
    let dx = ctx.op1("Transpose", &[g, inv], &[])?;
    ctx.set_input_grad(0, dx)
}

fn reverse_grad(ctx: &mut GradientContext<'_>) -> Result<()> {
    let (g, axes) = (ctx.grad()?, ctx.input(1));
    let dx = ctx.op1(ctx.op_name(), &[g, axes], &[])?;
    ctx.set_input_grad(0, dx)
}

fn gather_v2_grad(ctx: &mut GradientContext<'_>) -> Result<()> {
    let g = ctx.grad()?;
    let batch_dims: i64 = ctx.get_attr("batch_dims").unwrap_or(0);
    if batch_dims != 0 {
        return Err(Status::unimplemented(
            "the gradient of GatherV2 with batch_dims != 0",
        ));
    }
    let (params, indices, axis) = (ctx.input(0), ctx.input(1), ctx.input(2));
    let dx = gather_params_grad(ctx, g, params, indices, axis)?;
    ctx.set_input_grad(0, dx)
}

/// `Gather`'s gradient: `GatherV2`'s along axis 0 (TensorFlow builds the
/// same `IndexedSlices` for both).
fn gather_grad(ctx: &mut GradientContext<'_>) -> Result<()> {
    let g = ctx.grad()?;
    let axis = ctx.constant(opforge_core::Tensor::scalar(0i32))?;
    let (params, indices) = (ctx.input(0), ctx.input(1));
    let dx = gather_params_grad(ctx, g, params, indices, axis)?;
    ctx.set_input_grad(0, dx)
}

/// The gradient `g` of a gather of `params` along `axis` at `indices`,
/// scattered back into the shape of `params` (duplicates summed).
fn gather_params_grad(
    o: &mut dyn Ops,
    g: Sym,
    params: Sym,
    indices: Sym,
    axis: Sym,
) -> Result<Sym> {
    let i32t = DataType::Int32.into_attr_value();
    let keep = [("keep_dims", true.into_attr_value())];
    let ps = o.shape_of(params)?;
    let rank = o.op1("Rank", &[params], &[])?;
    let ax = o.op1("Cast", &[axis], &[("DstT", i32t.clone())])?;
    let ax = o.op1("FloorMod", &[ax, rank], &[])?;
    let one_v = o.int_vector(&[1])?;
    let ax_v = o.reshape(ax, one_v)?;
    let zero_v = o.int_vector(&[0])?;
    let minus_one_v = o.int_vector(&[-1])?;
    let red0 = o.int_vector(&[0])?;
    // outer = prod(ps[:axis]), n = ps[axis], inner = prod(ps[axis+1:]) (as [1] vectors).
    let outer_dims = o.op1("Slice", &[ps, zero_v, ax_v], &[])?;
    let outer = o.op1("Prod", &[outer_dims, red0], &keep)?;
    let n = o.op1("Slice", &[ps, ax_v, one_v], &[])?;
    let ax1 = o.add(ax_v, one_v)?;
    let inner_dims = o.op1("Slice", &[ps, ax1, minus_one_v], &[])?;
    let inner = o.op1("Prod", &[inner_dims, red0], &keep)?;
    let k = o.op1("Size", &[indices], &[("out_type", i32t)])?;
    let k_v = o.reshape(k, one_v)?;
    // g as [outer, K, inner] -> [K, outer * inner].
    let s3 = concat_vectors(o, &[outer, k_v, inner])?;
    let g3 = o.reshape(g, s3)?;
    let perm = o.int_vector(&[1, 0, 2])?;
    let gt = o.op1("Transpose", &[g3, perm], &[])?;
    let m = o.mul(outer, inner)?;
    let s2 = concat_vectors(o, &[k_v, m])?;
    let g2 = o.reshape(gt, s2)?;
    // Summed per index: [N, outer * inner].
    let flat = o.reshape(indices, minus_one_v)?;
    let empty = o.int_vector(&[])?;
    let depth = o.reshape(n, empty)?;
    let r = o.op1("UnsortedSegmentSum", &[g2, flat, depth], &[])?;
    let s3b = concat_vectors(o, &[n, outer, inner])?;
    let r3 = o.reshape(r, s3b)?;
    let rt = o.op1("Transpose", &[r3, perm], &[])?;
    o.reshape(rt, ps)
}

/// The forward op's `bad_indices_policy` as attrs for the op of its
/// gradient: `IGNORE` is passed on (an ignored index contributes nothing to
/// the forward result, so its gradient is dropped too, where TensorFlow's
/// gradient would fail on it); the other policies are the default.
fn policy_attrs(ctx: &GradientContext<'_>) -> Result<Vec<(&'static str, AttrValue)>> {
    let policy: String = attr_or(ctx, "bad_indices_policy", String::new())?;
    Ok(if policy == "IGNORE" {
        vec![("bad_indices_policy", policy.into_attr_value())]
    } else {
        Vec::new()
    })
}

/// `GatherNd`: TensorFlow's `_GatherNdGrad`, the gradient scattered back
/// into the shape of `params` by `ScatterNd(indices, grad, shape(params))`
/// (duplicate indices sum). TensorFlow returns `IndexedSlices` when
/// `indices` is `[N, 1]`; the dense `ScatterNd` is its value. int16 indices
/// are cast to int32 (`ScatterNd`'s CPU kernel takes int32/int64). A
/// vector of indices (one index tuple), which `ScatterNd` does not take
/// (TensorFlow's gradient fails on it), is scattered as a batch of one.
fn gather_nd_grad(ctx: &mut GradientContext<'_>) -> Result<()> {
    let mut g = ctx.grad()?;
    let (params, mut indices) = (ctx.input(0), ctx.input(1));
    if ctx.dtype(indices) == DataType::Int16 {
        indices = cast(ctx, indices, DataType::Int32)?;
    }
    if ctx.shape(indices).is_some_and(|s| s.len() == 1) {
        let zero = ctx.constant(opforge_core::Tensor::scalar(0i32))?;
        indices = ctx.op1("ExpandDims", &[indices, zero], &[])?;
        g = ctx.op1("ExpandDims", &[g, zero], &[])?;
    }
    let out_type = ctx.dtype(indices).into_attr_value();
    let shape = ctx.op1("Shape", &[params], &[("out_type", out_type)])?;
    let attrs = policy_attrs(ctx)?;
    let dx = ctx.op1("ScatterNd", &[indices, g, shape], &attrs)?;
    ctx.set_input_grad(0, dx)
}

/// `ScatterNd`: TensorFlow's `_ScatterNdGrad`, `GatherNd(grad, indices)`
/// for `updates`; none for `indices` and `shape`.
fn scatter_nd_grad(ctx: &mut GradientContext<'_>) -> Result<()> {
    let (g, indices) = (ctx.grad()?, ctx.input(0));
    let attrs = policy_attrs(ctx)?;
    let du = ctx.op1("GatherNd", &[g, indices], &attrs)?;
    ctx.set_input_grad(1, du)
}

/// `ReverseSequence` only permutes: its gradient permutes back, the same
/// `ReverseSequence` of the incoming gradient.
fn reverse_sequence_grad(ctx: &mut GradientContext<'_>) -> Result<()> {
    let (g, seq_lengths) = (ctx.grad()?, ctx.input(1));
    let seq_dim: i64 = ctx.get_attr("seq_dim")?;
    let batch_dim: i64 = ctx.get_attr("batch_dim")?;
    let r = ctx.op1(
        "ReverseSequence",
        &[g, seq_lengths],
        &[
            ("seq_dim", seq_dim.into_attr_value()),
            ("batch_dim", batch_dim.into_attr_value()),
        ],
    )?;
    ctx.set_input_grad(0, r)
}

register_gradient!("Transpose", transpose_grad);
register_gradient!("Reverse", reverse_grad);
register_gradient!("ReverseV2", reverse_grad);
register_gradient!("GatherV2", gather_v2_grad);
register_gradient!("Gather", gather_grad);
register_gradient!("ReverseSequence", reverse_sequence_grad);
register_not_differentiable!("OneHot");
// Integer in, integer out: no gradient flows (TensorFlow registers none).
register_not_differentiable!("UnravelIndex");
register_gradient!("GatherNd", gather_nd_grad);
register_gradient!("ScatterNd", scatter_nd_grad);
