//! `GatherV2`, `Gather` and `GatherNd`.

use super::*;
use opforge_ops_base::args::{dims_product, int_values};
use opforge_ops_base::shape::*;

// GatherV2
// ---------------------------------------------------------------------------

/// `GatherV2`.
pub fn gather_v2() -> OpDefBuilder {
    OpDefBuilder::new("GatherV2")
        .input("params: Tparams")
        .input("indices: Tindices")
        .input("axis: Taxis")
        .attr("batch_dims: int = 0")
        .output("output: Tparams")
        .attr("Tparams: type")
        .attr("Tindices: {int16, int32, int64}")
        .attr("Taxis: {int32, int64}")
        .doc(
            "Gather slices from `params` axis `axis` according to `indices`.\n\n\
             The output has shape `params.shape[:axis] + indices.shape[batch_dims:] +\n\
             params.shape[axis + 1:]`. An index outside `[0, params.shape[axis])` is an\n\
             error.",
        )
}

pub(super) use opforge_ops_base::args::slice_debug_string;

/// Gathers rows of `inner` elements: output row `(b, o, i)` is input row
/// `(b, o, idx[b][i])` of a `[batch, outer, gather, inner]` params; an
/// index of [`SKIP`] gives a row of zeros (`GatherNd`'s ignored indices).
pub(super) struct GatherMover {
    idx: Vec<usize>,
    outer: usize,
    gather: usize,
    per_batch: usize,
    inner: usize,
}

/// The index of a [`GatherMover`] row that is zeros.
const SKIP: usize = usize::MAX;

impl MoveElements for GatherMover {
    fn run<T: Carrier>(&self, pool: &ThreadPool, srcs: &[&[T]], dst: &mut [T]) {
        let src = srcs[0];
        let inner = self.inner;
        for_each_chunk(pool, dst, inner, inner, |start, chunk| {
            let first = start / inner;
            for (r, row) in chunk.chunks_mut(inner).enumerate() {
                let r = first + r;
                let (bo, i) = (r / self.per_batch, r % self.per_batch);
                let b = bo / self.outer;
                let k = self.idx[b * self.per_batch + i];
                if k == SKIP {
                    row.fill(T::default());
                    continue;
                }
                let s = (bo * self.gather + k) * inner;
                row.clone_from_slice(&src[s..s + inner]);
            }
        });
    }
}

pub(super) struct GatherV2Op {
    batch_dims: i64,
}

impl CreateKernel for GatherV2Op {
    fn create(ctx: &OpKernelConstruction<'_>) -> Result<Self> {
        Ok(GatherV2Op {
            batch_dims: ctx.get_attr("batch_dims")?,
        })
    }
}

impl OpKernel for GatherV2Op {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        ensure!(
            ctx.input(0).rank() >= 1,
            InvalidArgument,
            "params must be at least 1 dimensional"
        );
        let axis_t = ctx.input(2);
        ensure!(axis_t.rank() == 0, InvalidArgument, "axis must be scalar");
        let axis = index_values(axis_t, "axis")?[0];
        gather(ctx, axis, self.batch_dims)
    }
}

/// The engine of `GatherV2` and `Gather`: output 0 is `params` (input 0)
/// gathered along `axis` (in `[-rank, rank)`) at `indices` (input 1), with
/// `batch_dims` leading batch dimensions, checked as TensorFlow's
/// `GatherOp` does.
pub(super) fn gather(ctx: &mut OpKernelContext<'_>, axis: i64, batch_dims: i64) -> Result<()> {
    let (params, indices) = (ctx.input(0), ctx.input(1));
    ensure!(
        params.rank() >= 1,
        InvalidArgument,
        "params must be at least 1 dimensional"
    );
    let mut axis = axis;
    let prank = params.rank() as i64;
    let min_rank = if axis < 0 {
        axis.checked_neg().unwrap_or(i64::MAX)
    } else {
        axis.saturating_add(1)
    };
    ensure!(
        prank >= min_rank,
        InvalidArgument,
        "Shape must be at least rank {min_rank} but is rank {prank}"
    );
    if axis < 0 {
        axis += prank;
    }
    let irank = indices.rank() as i64;
    let mut batch_dims = batch_dims;
    if batch_dims != 0 {
        ensure!(
            batch_dims >= -irank && batch_dims <= irank,
            InvalidArgument,
            "Expected batch_dims in the range [{}, {irank}], but got {batch_dims}",
            -irank
        );
        if batch_dims < 0 {
            batch_dims += irank;
        }
        ensure!(
            batch_dims < prank,
            InvalidArgument,
            "batch_dims ({batch_dims}) must be less than rank(params) ({prank})."
        );
        ensure!(
            axis >= batch_dims,
            InvalidArgument,
            "batch_dims ({batch_dims}) must be less than or equal to axis ({axis})."
        );
        for i in 0..batch_dims as usize {
            let (p, q) = (params.dims()[i], indices.dims()[i]);
            ensure!(
                p == q,
                InvalidArgument,
                "params.shape[{i}]: {p} should be equal to indices.shape[{i}]: {q}"
            );
        }
    }
    let (axis, batch_dims) = (axis as usize, batch_dims as usize);
    let pdims = params.dims();
    let gather = pdims[axis];
    let index_max = index_max(indices.dtype());
    ensure!(
        gather <= index_max,
        InvalidArgument,
        "params.shape[{axis}] too large for {} indexing: {gather} > {index_max}",
        indices.dtype()
    );
    let mut out_dims: Vec<i64> = pdims[..axis].to_vec();
    out_dims.extend_from_slice(&indices.dims()[batch_dims..]);
    out_dims.extend_from_slice(&pdims[axis + 1..]);
    let shape = TensorShape::new(&out_dims)?;
    let n = indices.num_elements();
    let dtype = params.dtype();
    // The batch, outer and inner dims are all in the output's shape, so
    // when the output has elements their products fit; when it has none
    // (a zero anywhere) they may not (found by scripts/hostile-cli: params
    // [0, 2^63 - 1, 3, 1, 2]), and there is nothing to gather.
    if n == 0 || shape.num_elements() == 0 {
        return ctx.set_output(0, empty(dtype, shape)?);
    }
    let batch: usize = pdims[..batch_dims].iter().map(|&d| d as usize).product();
    let outer: usize = pdims[batch_dims..axis]
        .iter()
        .map(|&d| d as usize)
        .product();
    let inner: usize = pdims[axis + 1..].iter().map(|&d| d as usize).product();
    let values = int_values(indices, "indices")?;
    let mut idx = Vec::with_capacity(values.len());
    for (i, &v) in values.iter().enumerate() {
        ensure!(
            v >= 0 && v < gather,
            InvalidArgument,
            "indices{} = {v} is not in [0, {gather})",
            slice_debug_string(indices.dims(), i)
        );
        idx.push(v as usize);
    }
    let mover = GatherMover {
        idx,
        outer,
        gather: gather as usize,
        per_batch: n / batch,
        inner,
    };
    let out = move_elements(ctx.device(), dtype, &[params], shape, &mover)?;
    ctx.set_output(0, out)
}

/// The largest value of the index dtype `dtype` (int16, int32 or int64).
fn index_max(dtype: DataType) -> i64 {
    match dtype {
        DataType::Int16 => i64::from(i16::MAX),
        DataType::Int32 => i64::from(i32::MAX),
        _ => i64::MAX,
    }
}

/// `GatherV2`: `params.shape[:axis] + indices.shape[batch_dims:] +
/// params.shape[axis + 1:]` for a constant `axis`; without it, unknown dims
/// of that rank where the ranks are known.
pub(super) fn gather_v2_shape(c: &mut InferenceContext) -> Result<()> {
    let params = c.input(0);
    let params = c.with_rank_at_least(params, 1)?;
    let indices = c.input(1);
    let axis_shape = c.input(2);
    c.with_rank(axis_shape, 0)?;
    let Some(axis_t) = c.input_tensor(2).cloned() else {
        let out = match (c.rank(params), c.rank(indices)) {
            (Some(p), Some(i)) => {
                let batch_dims: i32 = c.get_attr("batch_dims")?;
                let rank = p as i64 + i as i64 - 1 - i64::from(batch_dims);
                if rank >= 0 {
                    c.unknown_shape_of_rank(rank as usize)
                } else {
                    c.unknown_shape()
                }
            }
            _ => c.unknown_shape(),
        };
        c.set_output(0, out);
        return Ok(());
    };
    let axis = *index_values(&axis_t, "axis")?
        .first()
        .ok_or_else(|| Status::invalid_argument("axis must be a scalar"))?;
    let min_rank = if axis < 0 {
        axis.unsigned_abs()
    } else {
        axis as u64 + 1
    };
    c.with_rank_at_least(params, min_rank as usize)?;
    let mut batch_dims = i64::from(c.get_attr::<i32>("batch_dims")?);
    c.with_rank_at_least(indices, batch_dims.unsigned_abs() as usize)?;
    if batch_dims < 0 {
        // An unknown rank counts as -1, as in TensorFlow.
        batch_dims += c.rank(indices).map_or(-1, |r| r as i64);
    }
    c.with_rank_at_least(params, (batch_dims + 1).max(0) as usize)?;
    let outer = c.subshape(params, 0, Some(axis))?;
    let inner = c.subshape(indices, batch_dims, None)?;
    let mut out = c.concatenate(outer, inner)?;
    if axis != -1 {
        // Saturating: on params of unknown rank no check bounded the axis.
        let suffix = c.subshape(params, axis.saturating_add(1), None)?;
        out = c.concatenate(out, suffix)?;
    }
    c.set_output(0, out);
    Ok(())
}

register_op!(gather_v2().set_shape_fn(gather_v2_shape));
register_kernel!(
    KernelDefBuilder::new("GatherV2")
        .type_constraint_list("Tparams", &types(&[&all_types(), QUANTIZED]))
        .type_constraint_list(
            "Tindices",
            &[DataType::Int16, DataType::Int32, DataType::Int64]
        )
        .host_memory("axis"),
    GatherV2Op
);

// ---------------------------------------------------------------------------

// Gather, GatherNd
// ---------------------------------------------------------------------------

register_op!(OpDefBuilder::new("Gather")
    .input("params: Tparams")
    .input("indices: Tindices")
    .attr("validate_indices: bool = true")
    .output("output: Tparams")
    .attr("Tparams: type")
    .attr("Tindices: {int32,int64}")
    .set_shape_fn(with_inputs(2, gather_shape))
    .doc(
        "Gather slices from `params` according to `indices`.\n\n\
         The output has shape `indices.shape + params.shape[1:]`.",
    ));

fn gather_shape(c: &mut InferenceContext) -> Result<()> {
    let params = c.input(0);
    c.with_rank_at_least(params, 1)?;
    let inner = c.subshape(params, 1, None)?;
    let indices = c.input(1);
    let out = c.concatenate(indices, inner)?;
    c.set_output(0, out);
    Ok(())
}

register_op!(OpDefBuilder::new("GatherNd")
    .input("params: Tparams")
    .input("indices: Tindices")
    .output("output: Tparams")
    .attr("Tparams: type")
    .attr("Tindices: {int16, int32, int64}")
    .attr("bad_indices_policy: string = ''")
    .set_shape_fn(with_inputs(2, gather_nd_shape))
    .doc(
        "Gather slices from `params` into a Tensor with shape specified by `indices`.\n\n\
         The output has shape `indices.shape[:-1] + params.shape[indices.shape[-1]:]`.",
    ));

/// TensorFlow's `GatherNdShape`.
pub(crate) fn gather_nd_shape(c: &mut InferenceContext) -> Result<()> {
    let params = c.input(0);
    let i = c.input(1);
    let indices = c.with_rank_at_least(i, 1)?;
    let r_dim = c.dim(indices, -1);
    let (Some(params_rank), Some(r)) = (c.rank(params), c.value(r_dim)) else {
        let u = c.unknown_shape();
        c.set_output(0, u);
        return Ok(());
    };
    if r > params_rank as i64 {
        return Err(Status::invalid_argument(format!(
            "indices.shape[-1] must be <= params.rank, but saw indices shape: {} and params shape: {}",
            c.debug_string(indices),
            c.debug_string(params)
        )));
    }
    let indices_slice = c.subshape(indices, 0, Some(-1))?;
    let params_slice = c.subshape(params, r, None)?;
    let out = c.concatenate(indices_slice, params_slice)?;
    c.set_output(0, out);
    Ok(())
}

register_kernel!(
    KernelDefBuilder::new("Gather")
        .type_constraint_list("Tparams", &types(&[&all_types(), QUANTIZED]))
        .type_constraint_list("Tindices", INDEX_TYPES),
    fn = |_| Ok(Box::new(GatherOp))
);

/// `Gather`: `GatherV2` along axis 0 without batch dimensions (its
/// `validate_indices` is ignored: indices are always checked, as in
/// TensorFlow).
pub(super) struct GatherOp;

impl OpKernel for GatherOp {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        gather(ctx, 0, 0)
    }
}

/// What `GatherNd` does with an index outside `params` (its
/// `bad_indices_policy`): fail (`""`, `DEFAULT`, `ERROR`) or give zeros
/// (`IGNORE`).
pub(super) fn ignores_bad_indices(policy: &str) -> Result<bool> {
    match policy {
        "" | "DEFAULT" | "ERROR" => Ok(false),
        "IGNORE" => Ok(true),
        other => Err(Status::invalid_argument(format!(
            "Unknown bad indices handling attribute: {other}"
        ))),
    }
}

/// `GatherNd`: row `i` of `indices` (viewed as `[N, nd]`) picks the slice
/// `params[indices[i]]` of `params.shape[nd:]`. Runs as a `GatherV2` body
/// over `params` viewed as `[prod(params.shape[:nd]), slice]`, with the
/// index tuples flattened.
pub(super) struct GatherNdOp {
    ignore_bad: bool,
}

impl CreateKernel for GatherNdOp {
    fn create(ctx: &OpKernelConstruction<'_>) -> Result<Self> {
        let policy: String = ctx.get_attr("bad_indices_policy")?;
        Ok(GatherNdOp {
            ignore_bad: ignores_bad_indices(&policy)?,
        })
    }
}

impl OpKernel for GatherNdOp {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let (params, indices) = (ctx.input(0), ctx.input(1));
        ensure!(
            params.rank() >= 1,
            InvalidArgument,
            "params must be at least a vector"
        );
        ensure!(
            indices.rank() >= 1,
            InvalidArgument,
            "indices must be at least a vector"
        );
        let (pdims, idims) = (params.dims(), indices.dims());
        let nd = idims[idims.len() - 1];
        let prank = pdims.len();
        ensure!(
            nd <= prank as i64,
            InvalidArgument,
            "index innermost dimension length must be <= params rank; saw: {nd} vs. {prank}"
        );
        let nd = nd as usize;
        let batch_shape = &idims[..idims.len() - 1];
        // A product from the first dim: bounded by the shape's own check.
        let n: i64 = batch_shape.iter().product();
        ensure!(
            n <= i64::from(i32::MAX),
            InvalidArgument,
            "indices has too many elements for int indexing: {n} > {}",
            i32::MAX
        );
        let index_max = index_max(indices.dtype());
        let total = params.num_elements() as i64;
        ensure!(
            total <= index_max,
            InvalidArgument,
            "params.NumElements() too large for {} indexing: {total} > {index_max}",
            indices.dtype()
        );
        let mut out_dims = batch_shape.to_vec();
        out_dims.extend_from_slice(&pdims[nd..]);
        let shape = TensorShape::new(&out_dims)?;
        // Past 2^63 only when the output is empty (too large, as TensorFlow).
        let slice = dims_product(&pdims[nd..]);
        ensure!(
            slice <= index_max,
            InvalidArgument,
            "slice size is too large for indexing: {slice} > {index_max}"
        );
        let dtype = params.dtype();
        if n == 0 {
            return ctx.set_output(0, empty(dtype, shape)?);
        }
        ensure!(
            total > 0,
            InvalidArgument,
            "Requested more than 0 entries, but params is empty.  Params shape: {}",
            params.shape()
        );
        ensure!(
            nd <= 7,
            InvalidArgument,
            "Only indices.shape[-1] values between 1 and 7 are currently supported.  Requested rank: {nd}"
        );
        let values = int_values(indices, "indices")?;
        let strides = strides_of(&pdims[..nd].iter().map(|&d| d as usize).collect::<Vec<_>>());
        let mut idx = Vec::with_capacity(n as usize);
        let mut bad = None;
        for (row, tuple) in values.chunks(nd.max(1)).take(n as usize).enumerate() {
            let mut flat = 0usize;
            let mut ok = true;
            for (k, &v) in tuple.iter().take(nd).enumerate() {
                if v < 0 || v >= pdims[k] {
                    ok = false;
                    break;
                }
                flat += v as usize * strides[k];
            }
            if ok {
                idx.push(flat);
            } else {
                // TensorFlow reports the last bad index.
                bad = Some(row);
                idx.push(SKIP);
            }
        }
        if nd == 0 {
            idx.resize(n as usize, 0);
        }
        if let (Some(row), false) = (bad, self.ignore_bad) {
            let tuple: Vec<String> = values[row * nd..(row + 1) * nd]
                .iter()
                .map(i64::to_string)
                .collect();
            return Err(Status::invalid_argument(format!(
                "indices{} = [{}] does not index into param shape {}, node name: {}",
                slice_debug_string(batch_shape, row),
                tuple.join(", "),
                params.shape(),
                ctx.node_name()
            )));
        }
        let mover = GatherMover {
            idx,
            outer: 1,
            gather: pdims[..nd].iter().product::<i64>() as usize,
            per_batch: n as usize,
            inner: slice as usize,
        };
        let out = move_elements(ctx.device(), dtype, &[params], shape, &mover)?;
        ctx.set_output(0, out)
    }
}

register_kernel!(
    KernelDefBuilder::new("GatherNd")
        .type_constraint_list(
            "Tparams",
            &types(&[
                &all_types(),
                &[DataType::QInt8, DataType::QUInt8, DataType::QInt32]
            ])
        )
        .type_constraint_list(
            "Tindices",
            &[DataType::Int16, DataType::Int32, DataType::Int64]
        ),
    GatherNdOp
);
