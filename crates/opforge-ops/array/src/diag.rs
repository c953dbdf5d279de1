//! The diagonal ops of TensorFlow's `array_ops`: `Diag`, `DiagPart`,
//! `MatrixDiag`, `MatrixSetDiag`, `MatrixDiagPart` and `MatrixBandPart`
//! (OpDefs and shape functions; no CPU kernels yet: running one eagerly
//! fails with TensorFlow's "No OpKernel was registered" error).

use opforge_core::shape_inference::common::unchanged_shape;
use opforge_core::shape_inference::{DimensionHandle, InferenceContext};
use opforge_core::{register_op, OpDefBuilder, Result, Status};
use opforge_ops_base::shape::*;

register_op!(OpDefBuilder::new("Diag")
    .input("diagonal: T")
    .output("output: T")
    .attr("T: {bfloat16, half, float, double, int32, int64, complex64, complex128}")
    .set_shape_fn(with_inputs(1, diag_shape))
    .doc(
        "Returns a diagonal tensor with the given diagonal values.\n\n\
         A diagonal of shape `[D1, ..., Dk]` gives an output of shape `[D1, ..., Dk, D1, ..., Dk]`.",
    ));

fn diag_shape(c: &mut InferenceContext) -> Result<()> {
    let i = c.input(0);
    let s = c.with_rank_at_least(i, 1)?;
    let out = c.concatenate(s, s)?;
    c.set_output(0, out);
    Ok(())
}

register_op!(OpDefBuilder::new("DiagPart")
    .input("input: T")
    .output("diagonal: T")
    .attr("T: {bfloat16, half, float, double, int32, int64, complex64, complex128}")
    .set_shape_fn(with_inputs(1, diag_part_shape))
    .doc(
        "Returns the diagonal part of the tensor.\n\n\
         The inverse of `Diag`: an input of shape `[D1, ..., Dk, D1, ..., Dk]` gives `[D1, ..., Dk]`.",
    ));

fn diag_part_shape(c: &mut InferenceContext) -> Result<()> {
    let input = c.input(0);
    let Some(dims) = c.dims(input).map(<[DimensionHandle]>::to_vec) else {
        let u = c.unknown_shape();
        c.set_output(0, u);
        return Ok(());
    };
    let rank = dims.len();
    if rank % 2 != 0 || rank == 0 {
        return Err(Status::invalid_argument(format!(
            "Input must have even and non-zero rank, input rank is {rank}"
        )));
    }
    let mid = rank / 2;
    let mut out = Vec::with_capacity(mid);
    for i in 0..mid {
        out.push(c.merge_dim(dims[i], dims[i + mid])?);
    }
    let s = c.make_shape_from_dims(out);
    c.set_output(0, s);
    Ok(())
}

register_op!(OpDefBuilder::new("MatrixDiag")
    .input("diagonal: T")
    .output("output: T")
    .attr("T: type")
    .set_shape_fn(with_inputs(1, matrix_diag_shape))
    .doc(
        "Returns a batched diagonal tensor with given batched diagonal values.\n\n\
         A diagonal of shape `[I, J, ..., N]` gives matrices of shape `[I, J, ..., N, N]`.",
    ));

fn matrix_diag_shape(c: &mut InferenceContext) -> Result<()> {
    let i = c.input(0);
    let s = c.with_rank_at_least(i, 1)?;
    if !c.rank_known(s) {
        let u = c.unknown_shape();
        c.set_output(0, u);
        return Ok(());
    }
    let last = c.dim(s, -1);
    let v = c.vector(last);
    let out = c.concatenate(s, v)?;
    c.set_output(0, out);
    Ok(())
}

register_op!(OpDefBuilder::new("MatrixSetDiag")
    .input("input: T")
    .input("diagonal: T")
    .output("output: T")
    .attr("T: type")
    .set_shape_fn(with_inputs(2, matrix_set_diag_shape))
    .doc(
        "Returns a batched matrix tensor with new batched diagonal values.\n\n\
         The main diagonals of the innermost matrices of `input` are replaced by `diagonal`.",
    ));

fn matrix_set_diag_shape(c: &mut InferenceContext) -> Result<()> {
    let (i0, i1) = (c.input(0), c.input(1));
    let input = c.with_rank_at_least(i0, 2)?;
    let mut diag = c.with_rank_at_least(i1, 1)?;
    if let Some(r) = c.rank(input) {
        diag = c.with_rank(i1, r - 1)?;
    }
    let (rows, cols) = (c.dim(input, -2), c.dim(input, -1));
    let smallest = c.min(rows, cols)?;
    let diag_last = c.dim(diag, -1);
    c.merge_dim(smallest, diag_last)?;
    let mut output = input;
    if c.rank_known(diag) && !c.fully_defined(input) {
        // Infer what the diagonal tells of the batch dims.
        let batch = c.subshape(diag, 0, Some(-1))?;
        let matrix = c.unknown_shape_of_rank(2);
        let from_diag = c.concatenate(batch, matrix)?;
        output = c.merge(input, from_diag)?;
    }
    c.set_output(0, output);
    Ok(())
}

register_op!(OpDefBuilder::new("MatrixDiagPart")
    .input("input: T")
    .output("diagonal: T")
    .attr("T: type")
    .set_shape_fn(with_inputs(1, matrix_diag_part_shape))
    .doc(
        "Returns the batched diagonal part of a batched tensor.\n\n\
         An input of shape `[I, J, ..., M, N]` gives diagonals of shape `[I, J, ..., min(M, N)]`.",
    ));

fn matrix_diag_part_shape(c: &mut InferenceContext) -> Result<()> {
    let i = c.input(0);
    let s = c.with_rank_at_least(i, 2)?;
    let Some(dims) = c.dims(s).map(<[DimensionHandle]>::to_vec) else {
        let u = c.unknown_shape();
        c.set_output(0, u);
        return Ok(());
    };
    let rank = dims.len();
    let mut out = dims[..rank - 2].to_vec();
    out.push(c.min(dims[rank - 2], dims[rank - 1])?);
    let s = c.make_shape_from_dims(out);
    c.set_output(0, s);
    Ok(())
}

register_op!(OpDefBuilder::new("MatrixBandPart")
    .input("input: T")
    .input("num_lower: Tindex")
    .input("num_upper: Tindex")
    .output("band: T")
    .attr("T: type")
    .attr("Tindex: {int32, int64} = DT_INT64")
    .set_shape_fn(with_inputs(1, unchanged_shape))
    .doc(
        "Copy a tensor setting everything outside a central band in each innermost matrix to zero.\n\n\
         `num_lower` and `num_upper` are the number of sub- and superdiagonals to keep (negative: all).",
    ));
