//! `ScatterNd`: zeros of a given shape with `updates` added at `indices`.

use super::gather::{ignores_bad_indices, slice_debug_string};
use super::*;
use opforge_ops_base::args::{dims_product, make_shape};
use opforge_ops_base::cpu::elem::Num;
use opforge_ops_base::cpu::scatter::{scatter_add_rows, SKIP};
use opforge_ops_base::shape::with_inputs;
use opforge_ops_base::types::NUMERIC_KERNEL_TYPES;

/// `ScatterNd`.
pub fn scatter_nd() -> OpDefBuilder {
    OpDefBuilder::new("ScatterNd")
        .input("indices: Tindices")
        .input("updates: T")
        .input("shape: Tindices")
        .output("output: T")
        .attr("T: type")
        .attr("Tindices: {int16, int32, int64}")
        .attr("bad_indices_policy: string = ''")
        .doc(
            "Scatters `updates` into a tensor of shape `shape` according to `indices`.\n\n\
             The output is zeros of `shape` with each slice `updates[i]` added at\n\
             `output[indices[i]]` (duplicate indices add up). `indices` has shape\n\
             `[..., nd]` and `updates` shape `indices.shape[:-1] + shape[nd:]`.",
        )
}

/// TensorFlow's `ScatterNdShapeHelper` for `ScatterNd`: the output is the
/// shape given by the `shape` input, whose trailing dims must agree with
/// those of `updates`, and whose leading `indices.shape[:-1]` must agree
/// with those of `updates`.
pub(super) fn scatter_nd_shape(c: &mut InferenceContext) -> Result<()> {
    let indices = c.input(0);
    let indices = c.with_rank_at_least(indices, 1)?;
    let updates = c.input(1);
    let updates = c.with_rank_at_least(updates, 1)?;
    let output = c.make_shape_from_shape_tensor(2)?;
    let out_n = c.num_elements(output);
    let (ind_n, upd_n) = (c.num_elements(indices), c.num_elements(updates));
    if out_n == Some(0) && (ind_n.is_some_and(|n| n > 0) || upd_n.is_some_and(|n| n > 0)) {
        return Err(Status::invalid_argument(
            "Indices and updates specified for empty input",
        ));
    }
    if let (Some(irank), Some(urank)) = (c.rank(indices), c.rank(updates)) {
        let outer_dims = irank as i64 - 1;
        let ixdim = c.dim(indices, -1);
        if let Some(ix) = c.value(ixdim) {
            let prefix_indices = c.subshape(indices, 0, Some(outer_dims))?;
            let prefix_updates = c.subshape(updates, 0, Some(outer_dims))?;
            if let Err(e) = c.merge(prefix_indices, prefix_updates) {
                return Err(Status::invalid_argument(format!(
                    "Dimensions [0,{outer_dims}) of indices[shape={}] = {} must match dimensions [0,{outer_dims}) of updates[shape={}] = {}: {}",
                    c.debug_string(indices),
                    c.debug_string(prefix_indices),
                    c.debug_string(updates),
                    c.debug_string(prefix_updates),
                    e.message()
                )));
            }
            let suffix_output = c.subshape(output, ix, None)?;
            let suffix_updates = c.subshape(updates, outer_dims, None)?;
            if let Err(e) = c.merge(suffix_output, suffix_updates) {
                let out_rank = c
                    .rank(output)
                    .map_or_else(|| "?".to_string(), |r| r.to_string());
                return Err(Status::invalid_argument(format!(
                    "Dimensions [{ix},{out_rank}) of input[shape={}] = {} must match dimensions [{outer_dims},{urank}) of updates[shape={}] = {}: {}",
                    c.debug_string(output),
                    c.debug_string(suffix_output),
                    c.debug_string(updates),
                    c.debug_string(suffix_updates),
                    e.message()
                )));
            }
        }
    }
    c.set_output(0, output);
    Ok(())
}

/// TensorFlow's `ValidEmptyOutputShape`: indices and updates both empty, or
/// all three counts non-zero.
fn valid_empty_output_shape(inputs: i64, indices: i64, updates: i64) -> bool {
    (indices == 0 && updates == 0) || (inputs != 0 && indices != 0 && updates != 0)
}

/// The `ScatterNd` kernel, with TensorFlow's checks (in its order) and
/// messages. Duplicate indices add up, in index order (strings
/// concatenate, bools or).
pub(super) struct ScatterNdOp {
    ignore_bad: bool,
}

impl CreateKernel for ScatterNdOp {
    fn create(ctx: &OpKernelConstruction<'_>) -> Result<Self> {
        let policy: String = ctx.get_attr("bad_indices_policy")?;
        Ok(ScatterNdOp {
            ignore_bad: ignores_bad_indices(&policy)?,
        })
    }
}

/// The largest value of the index dtype (int32 or int64).
fn index_max(dtype: DataType) -> i64 {
    if dtype == DataType::Int32 {
        i64::from(i32::MAX)
    } else {
        i64::MAX
    }
}

impl OpKernel for ScatterNdOp {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let (indices, updates, shape_t) = (ctx.input(0), ctx.input(1), ctx.input(2));
        ensure!(
            indices.rank() >= 1,
            InvalidArgument,
            "Indices shape must have rank at least one. Found:{}",
            indices.shape()
        );
        ensure!(
            updates.rank() >= 1,
            InvalidArgument,
            "Updates shape must have rank at least one. Found:{}",
            updates.shape()
        );
        let shape = make_shape(&index_values(shape_t, "shape")?)?;
        ensure!(
            valid_empty_output_shape(
                shape_t.num_elements() as i64,
                indices.num_elements() as i64,
                updates.num_elements() as i64
            ),
            InvalidArgument,
            "Indices and updates specified for empty output shape"
        );
        let (idims, udims, sdims) = (indices.dims(), updates.dims(), shape.dims());
        let outer_dims = idims.len() - 1;
        for (i, d) in idims[..outer_dims].iter().enumerate() {
            // TensorFlow reads past the updates' rank here (a crash); a
            // missing dim is a mismatch.
            ensure!(
                udims.get(i) == Some(d),
                InvalidArgument,
                "Dimensions [0,{outer_dims}) of indices[shape={}] must match dimensions [0,{outer_dims}) of updates[shape={}]",
                indices.shape(),
                updates.shape()
            );
        }
        let ix = idims[outer_dims];
        let suffix_err = || {
            Status::invalid_argument(format!(
                "Dimensions [{ix},{}) of input[shape={}] must match dimensions [{outer_dims},{}) of updates[shape={}]",
                sdims.len(),
                shape,
                udims.len(),
                updates.shape()
            ))
        };
        if (udims.len() - outer_dims) as i64 != sdims.len() as i64 - ix {
            return Err(suffix_err());
        }
        // Here `ix <= rank(shape)`, and the two suffixes have one length.
        let ix = ix as usize;
        if udims[outer_dims..] != sdims[ix..] {
            return Err(suffix_err());
        }
        ensure!(
            shape_t.rank() == 1,
            InvalidArgument,
            "Shape must be a vector"
        );
        // TensorFlow's `PrepareAndValidateInputs`.
        ensure!(
            !sdims.is_empty(),
            InvalidArgument,
            "Output must be at least 1-D, got shape: {shape}"
        );
        ensure!(
            valid_empty_output_shape(
                shape.num_elements() as i64,
                indices.num_elements() as i64,
                updates.num_elements() as i64
            ),
            InvalidArgument,
            "Indices and updates specified for empty output.  indices shape: {}",
            indices.shape()
        );
        ensure!(
            udims[0] == idims[0],
            InvalidArgument,
            "Dimensions [0,1) of indices[shape={}] = {} must match dimensions [0,1) of updates[shape={}] = {}",
            indices.shape(),
            idims[0],
            updates.shape(),
            udims[0]
        );
        validate_update_shape(sdims, idims, udims, &shape, indices, updates)?;
        let index_dtype = indices.dtype();
        let max = index_max(index_dtype);
        let n_big = indices.num_elements() as i64;
        ensure!(
            n_big <= max,
            InvalidArgument,
            "indices has too many elements for {index_dtype} indexing: {n_big} > {max}"
        );
        ensure!(
            sdims[0] <= max,
            InvalidArgument,
            "params_shape[0] too large for {index_dtype} indexing: {} > {max}",
            sdims[0]
        );
        let slice_dim = if idims.len() > 1 { ix } else { 1 };
        // Dims after a zero may multiply past 2^63 (an empty output):
        // saturated, that is "too large", as it is.
        let slice_size = dims_product(sdims.get(slice_dim..).unwrap_or(&[]));
        ensure!(
            slice_size <= max,
            InvalidArgument,
            "slice size is too large for indexing: {slice_size} > {max}"
        );
        let num_updates = indices.num_elements() / slice_dim.max(1);
        let dtype = updates.dtype();
        if shape.num_elements() == 0 {
            return ctx.set_output(0, empty(dtype, shape)?);
        }
        ensure!(
            (1..=7).contains(&slice_dim),
            InvalidArgument,
            "Only indices.shape[-1] values between 1 and 5 are currently supported.  Requested rank: {slice_dim}"
        );
        // The output row of every update (`SKIP` for an ignored bad index).
        let values = int_values(indices, "indices")?;
        let prefix = &sdims[..slice_dim];
        let strides = strides_of(&prefix.iter().map(|&d| d as usize).collect::<Vec<_>>());
        let mut rows = Vec::with_capacity(num_updates);
        let mut bad = None;
        for (u, tuple) in values.chunks_exact(slice_dim).take(num_updates).enumerate() {
            let mut row = 0usize;
            let mut ok = true;
            for ((&v, &d), &s) in tuple.iter().zip(prefix).zip(&strides) {
                if v < 0 || v >= d {
                    ok = false;
                    break;
                }
                row += v as usize * s;
            }
            if !ok {
                // TensorFlow reports the last bad index.
                bad = Some(u);
            }
            rows.push(if ok { row } else { SKIP });
        }
        if let (Some(u), false) = (bad, self.ignore_bad) {
            let tuple: Vec<String> = values[u * slice_dim..(u + 1) * slice_dim]
                .iter()
                .map(i64::to_string)
                .collect();
            return Err(Status::invalid_argument(format!(
                "indices{} = [{}] does not index into shape {shape}",
                slice_debug_string(&idims[..outer_dims], u),
                tuple.join(", ")
            )));
        }
        let slice = slice_size as usize;
        let pool = ctx.thread_pool();
        let updates = ctx.input(1).clone();
        let out = ctx.allocate_output(0, shape)?;
        match dtype {
            DataType::Bool => scatter_add_rows(
                pool,
                out.flat_mut::<bool>()?,
                slice,
                updates.flat::<bool>()?,
                &rows,
                &false,
                |a, b| *a |= *b,
            ),
            DataType::String => scatter_add_rows(
                pool,
                out.strings_mut()?,
                slice,
                updates.strings()?,
                &rows,
                &Vec::new(),
                |a, b| a.extend_from_slice(b),
            ),
            dt => opforge_ops_base::numeric_types!(dt, T => scatter_add_rows(
                pool,
                out.flat_mut::<T>()?,
                slice,
                updates.flat::<T>()?,
                &rows,
                &T::ZERO,
                |a, b| *a = a.add(*b),
            ), {
                return Err(Status::internal(format!(
                    "ScatterNd has no CPU implementation for dtype {dt}"
                )))
            }),
        }
        Ok(())
    }
}

/// TensorFlow's `ValidateScatterNdUpdateShape`: `updates.shape` must be
/// `indices.shape[:batch_dim] + shape[slice_dim:]`.
fn validate_update_shape(
    sdims: &[i64],
    idims: &[i64],
    udims: &[i64],
    shape: &TensorShape,
    indices: &Tensor,
    updates: &Tensor,
) -> Result<()> {
    let (slice_dim, batch_dim) = if idims.len() > 1 {
        (idims[idims.len() - 1], idims.len() - 1)
    } else {
        (1, 1)
    };
    let prefix_err = || {
        Status::invalid_argument(format!(
            "Dimensions [0,{batch_dim}) of indices[shape={}] must match dimensions [0,{batch_dim}) of updates[shape={}]",
            indices.shape(),
            updates.shape()
        ))
    };
    let suffix_err = || {
        Status::invalid_argument(format!(
            "Dimensions [{slice_dim},{}) of input[shape={shape}] must match dimensions [{slice_dim},{}) of updates[shape={}]",
            sdims.len(),
            udims.len(),
            updates.shape()
        ))
    };
    if udims.len() < batch_dim {
        return Err(prefix_err());
    }
    let inner = (udims.len() - batch_dim) as i64;
    if (sdims.len() as i64) < slice_dim.saturating_add(inner)
        || udims.len() as i64 != batch_dim as i64 + sdims.len() as i64 - slice_dim
    {
        return Err(suffix_err());
    }
    if udims[..batch_dim] != idims[..batch_dim] {
        return Err(prefix_err());
    }
    let slice_dim = slice_dim as usize;
    if udims[batch_dim..] != sdims[slice_dim..slice_dim + inner as usize] {
        return Err(suffix_err());
    }
    Ok(())
}

register_op!(scatter_nd().set_shape_fn(with_inputs(3, scatter_nd_shape)));
register_kernel!(
    KernelDefBuilder::new("ScatterNd")
        .type_constraint_list(
            "T",
            &types(&[NUMERIC_KERNEL_TYPES, &[DataType::Bool, DataType::String]])
        )
        .type_constraint_list("Tindices", INDEX_TYPES)
        .host_memory("shape"),
    ScatterNdOp
);
