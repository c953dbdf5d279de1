//! The diagonal ops of TensorFlow's `array_ops`: `Diag`, `DiagPart`,
//! `MatrixDiag`, `MatrixSetDiag`, `MatrixDiagPart` and `MatrixBandPart`.
//!
//! `Diag`, `DiagPart`, `MatrixDiag`, `MatrixDiagPart` and `MatrixSetDiag`
//! have TensorFlow's CPU kernels, as bodies of the element mover
//! (`opforge_ops_base::cpu::mover`: they only move elements, and write
//! zeros, the carrier's default, off the diagonal), and the gradients of
//! `array_grad.py`. `MatrixBandPart` (every element outside a central band
//! of each innermost matrix zeroed) is a body of the same mover, with
//! TensorFlow's checks of `num_lower`/`num_upper` and its gradient (the
//! band of the incoming gradient).

use opforge_core::autodiff::{GradientContext, OpsExt};
use opforge_core::device::ThreadPool;
use opforge_core::kernel::{
    CreateKernel, KernelDefBuilder, OpKernel, OpKernelConstruction, OpKernelContext,
};
use opforge_core::shape_inference::common::unchanged_shape;
use opforge_core::shape_inference::{DimensionHandle, InferenceContext};
use opforge_core::{
    ensure, register_gradient, register_kernel, register_op, DataType, OpDefBuilder, Result,
    Status, TensorShape,
};
use opforge_ops_base::cpu::mover::{
    for_each_chunk, for_each_rows, move_to_output, Carrier, MoveElements,
};
use opforge_ops_base::grad::one_op_grad;
use opforge_ops_base::shape::*;
use opforge_ops_base::types::POD_TYPES;

opforge_ops_base::dtype_table! {
    /// The dtypes of `Diag` and `DiagPart`: their OpDefs' type list (in
    /// TensorFlow's order) and their CPU kernels'.
    DIAG_TYPES, DIAG_SPEC => [BFloat16, Half, Float, Double, Int32, Int64, Complex64, Complex128]
}

#[cfg(test)]
mod tests;

register_op!(OpDefBuilder::new("Diag")
    .input("diagonal: T")
    .output("output: T")
    .attr(format!("T: {{{DIAG_SPEC}}}"))
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
    .attr(format!("T: {{{DIAG_SPEC}}}"))
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

// ---------------------------------------------------------------------------
// CPU kernels
// ---------------------------------------------------------------------------

/// Rows of `n` elements, row `r` zero but for element `r % n`, which is
/// `src[r]`: `Diag` (one `[n, n]` matrix) and `MatrixDiag` (a batch of
/// them) alike.
struct DiagRows {
    n: usize,
}

impl MoveElements for DiagRows {
    fn run<T: Carrier>(&self, pool: &ThreadPool, srcs: &[&[T]], dst: &mut [T]) {
        let (src, n) = (srcs[0], self.n);
        for_each_rows(pool, dst, n, |first, rows| {
            for (i, row) in rows.chunks_mut(n).enumerate() {
                let r = first + i;
                row.fill(T::default());
                row[r % n].clone_from(&src[r]);
            }
        });
    }
}

/// The main diagonals of a batch of `[m, n]` matrices, `k = min(m, n)`
/// elements each: `DiagPart` (one `[n, n]` matrix) and `MatrixDiagPart`.
struct DiagParts {
    m: usize,
    n: usize,
    k: usize,
}

impl MoveElements for DiagParts {
    fn run<T: Carrier>(&self, pool: &ThreadPool, srcs: &[&[T]], dst: &mut [T]) {
        let (src, (m, n, k)) = (srcs[0], (self.m, self.n, self.k));
        for_each_rows(pool, dst, k, |first, rows| {
            for (i, row) in rows.chunks_mut(k).enumerate() {
                let base = (first + i) * m * n;
                for (j, d) in row.iter_mut().enumerate() {
                    d.clone_from(&src[base + j * n + j]);
                }
            }
        });
    }
}

/// A batch of `[m, n]` matrices (`srcs[0]`) with their main diagonals
/// (`k = min(m, n)` elements each) replaced by `srcs[1]`: `MatrixSetDiag`.
struct SetDiags {
    m: usize,
    n: usize,
    k: usize,
}

impl MoveElements for SetDiags {
    fn run<T: Carrier>(&self, pool: &ThreadPool, srcs: &[&[T]], dst: &mut [T]) {
        let (input, diag) = (srcs[0], srcs[1]);
        let (mn, n, k) = (self.m * self.n, self.n, self.k);
        for_each_chunk(pool, dst, mn, 8 * mn, |start, chunk| {
            chunk.clone_from_slice(&input[start..start + chunk.len()]);
            for (b, matrix) in chunk.chunks_mut(mn).enumerate() {
                let d = &diag[(start / mn + b) * k..][..k];
                for (j, v) in d.iter().enumerate() {
                    matrix[j * n + j].clone_from(v);
                }
            }
        });
    }
}

/// A batch of `[m, n]` matrices (`srcs[0]`) with every element outside the
/// band zeroed: `(i, j)` is kept when `i - j <= lower` and `j - i <= upper`
/// (`None`: no limit): `MatrixBandPart`.
struct BandParts {
    m: usize,
    n: usize,
    lower: Option<usize>,
    upper: Option<usize>,
}

impl MoveElements for BandParts {
    fn run<T: Carrier>(&self, pool: &ThreadPool, srcs: &[&[T]], dst: &mut [T]) {
        let input = srcs[0];
        let (m, n, mn) = (self.m, self.n, self.m * self.n);
        let (lower, upper) = (self.lower, self.upper);
        for_each_chunk(pool, dst, mn, 2 * mn, |start, chunk| {
            for (b, matrix) in chunk.chunks_mut(mn).enumerate() {
                let src = &input[start + b * mn..][..mn];
                for i in 0..m {
                    for j in 0..n {
                        let keep =
                            lower.is_none_or(|l| i <= j + l) && upper.is_none_or(|u| j <= i + u);
                        matrix[i * n + j] = if keep {
                            src[i * n + j].clone()
                        } else {
                            T::default()
                        };
                    }
                }
            }
        });
    }
}

/// `MatrixBandPart`: the central band of each innermost matrix.
struct MatrixBandPartOp;

impl CreateKernel for MatrixBandPartOp {
    fn create(_: &OpKernelConstruction<'_>) -> Result<Self> {
        Ok(MatrixBandPartOp)
    }
}

/// `num_lower`/`num_upper`: a scalar, negative (no limit) or at most `max`
/// (TensorFlow's messages).
fn band_limit(t: &opforge_core::Tensor, what: &str, of: &str, max: usize) -> Result<Option<usize>> {
    ensure!(
        t.rank() == 0,
        InvalidArgument,
        "{what} must be scalar, got shape {}",
        t.shape()
    );
    let v = match t.dtype() {
        DataType::Int32 => i64::from(t.scalar_value::<i32>()?),
        _ => t.scalar_value::<i64>()?,
    };
    ensure!(
        v <= max as i64,
        InvalidArgument,
        "{what} must be negative or less or equal to number of {of} ({max}) got: {v}"
    );
    Ok(usize::try_from(v).ok())
}

impl OpKernel for MatrixBandPartOp {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let input = ctx.input(0).clone();
        let (m, n) = matrix_dims(&input)?;
        let lower = band_limit(ctx.input(1), "num_lower", "rows", m)?;
        let upper = band_limit(ctx.input(2), "num_upper", "columns", n)?;
        let shape = input.shape().clone();
        move_to_output(ctx, 0, &[&input], shape, &BandParts { m, n, lower, upper })
    }
}

/// `Diag`: `[D1, ..., Dk]` to `[D1, ..., Dk, D1, ..., Dk]`, zero but for
/// `output[i1, ..., ik, i1, ..., ik] = diagonal[i1, ..., ik]`.
struct DiagOp;

impl CreateKernel for DiagOp {
    fn create(_: &OpKernelConstruction<'_>) -> Result<Self> {
        Ok(DiagOp)
    }
}

impl OpKernel for DiagOp {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let diagonal = ctx.input(0).clone();
        ensure!(
            diagonal.rank() != 0,
            InvalidArgument,
            "Input must be at least rank 1, got 0"
        );
        let mut dims = diagonal.dims().to_vec();
        dims.extend_from_slice(diagonal.dims());
        let shape = TensorShape::new(&dims)?;
        let n = diagonal.num_elements();
        move_to_output(ctx, 0, &[&diagonal], shape, &DiagRows { n })
    }
}

/// `DiagPart`: `[D1, ..., Dk, D1, ..., Dk]` to its diagonal `[D1, ..., Dk]`.
struct DiagPartOp;

impl CreateKernel for DiagPartOp {
    fn create(_: &OpKernelConstruction<'_>) -> Result<Self> {
        Ok(DiagPartOp)
    }
}

impl OpKernel for DiagPartOp {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let input = ctx.input(0).clone();
        let rank = input.rank();
        ensure!(
            rank % 2 == 0 && rank > 0,
            InvalidArgument,
            "The rank of the tensor should be even and positive, got shape {}",
            input.shape()
        );
        let half = rank / 2;
        let dims = input.dims();
        for i in 0..half {
            ensure!(
                dims[i] == dims[i + half],
                InvalidArgument,
                "Invalid shape {}: dimensions {i} and {} do not match.",
                input.shape(),
                i + half
            );
        }
        let shape = TensorShape::new(&dims[..half])?;
        let n = shape.num_elements();
        move_to_output(ctx, 0, &[&input], shape, &DiagParts { m: n, n, k: n })
    }
}

/// `MatrixDiag`: `[..., N]` to `[..., N, N]`.
struct MatrixDiagOp;

impl CreateKernel for MatrixDiagOp {
    fn create(_: &OpKernelConstruction<'_>) -> Result<Self> {
        Ok(MatrixDiagOp)
    }
}

impl OpKernel for MatrixDiagOp {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let diagonal = ctx.input(0).clone();
        ensure!(
            diagonal.rank() >= 1,
            InvalidArgument,
            "diagonal must be at least 1-dim, received shape: {}",
            diagonal.shape()
        );
        let mut dims = diagonal.dims().to_vec();
        let n = dims[dims.len() - 1];
        dims.push(n);
        let shape = TensorShape::new(&dims)?;
        move_to_output(ctx, 0, &[&diagonal], shape, &DiagRows { n: n as usize })
    }
}

/// `MatrixDiagPart`: `[..., M, N]` to `[..., min(M, N)]`.
struct MatrixDiagPartOp;

impl CreateKernel for MatrixDiagPartOp {
    fn create(_: &OpKernelConstruction<'_>) -> Result<Self> {
        Ok(MatrixDiagPartOp)
    }
}

/// The `(m, n)` of the innermost matrices of `t`, after TensorFlow's
/// "input must be at least 2-dim" check.
fn matrix_dims(t: &opforge_core::Tensor) -> Result<(usize, usize)> {
    let rank = t.rank();
    ensure!(
        rank >= 2,
        InvalidArgument,
        "input must be at least 2-dim, received shape: {}",
        t.shape()
    );
    Ok((t.dims()[rank - 2] as usize, t.dims()[rank - 1] as usize))
}

impl OpKernel for MatrixDiagPartOp {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let input = ctx.input(0).clone();
        let (m, n) = matrix_dims(&input)?;
        let k = m.min(n);
        let rank = input.rank();
        let mut dims = input.dims()[..rank - 2].to_vec();
        dims.push(k as i64);
        let shape = TensorShape::new(&dims)?;
        move_to_output(ctx, 0, &[&input], shape, &DiagParts { m, n, k })
    }
}

/// `MatrixSetDiag`: `input` with the main diagonals of its innermost
/// matrices replaced by `diagonal`.
struct MatrixSetDiagOp;

impl CreateKernel for MatrixSetDiagOp {
    fn create(_: &OpKernelConstruction<'_>) -> Result<Self> {
        Ok(MatrixSetDiagOp)
    }
}

impl OpKernel for MatrixSetDiagOp {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let input = ctx.input(0).clone();
        let diagonal = ctx.input(1).clone();
        let (m, n) = matrix_dims(&input)?;
        ensure!(
            diagonal.rank() >= 1,
            InvalidArgument,
            "diagonal must be at least 1-dim, received shape: {}",
            diagonal.shape()
        );
        let k = m.min(n);
        let rank = input.rank();
        let mut expected = input.dims()[..rank - 2].to_vec();
        expected.push(k as i64);
        ensure!(
            diagonal.dims() == expected.as_slice(),
            InvalidArgument,
            "Either first dimensions of diagonal don't match input.shape[:-2], or \
             diagonal.shape[:-1] is not equal to the longests diagonal in range \
             [lower_diag_index:upper_diag_index].\nInput shape: {}\nDiagonal shape: {}\n\
             Expected diagonal shape: {}",
            input.shape(),
            diagonal.shape(),
            TensorShape::new(&expected)?
        );
        let shape = input.shape().clone();
        move_to_output(ctx, 0, &[&input, &diagonal], shape, &SetDiags { m, n, k })
    }
}

register_kernel!(
    KernelDefBuilder::new("Diag").type_constraint_list("T", DIAG_TYPES),
    DiagOp
);
register_kernel!(
    KernelDefBuilder::new("MatrixBandPart").type_constraint_list("T", POD_TYPES),
    MatrixBandPartOp
);
register_kernel!(
    KernelDefBuilder::new("DiagPart").type_constraint_list("T", DIAG_TYPES),
    DiagPartOp
);
register_kernel!(
    KernelDefBuilder::new("MatrixDiag").type_constraint_list("T", POD_TYPES),
    MatrixDiagOp
);
register_kernel!(
    KernelDefBuilder::new("MatrixDiagPart").type_constraint_list("T", POD_TYPES),
    MatrixDiagPartOp
);
register_kernel!(
    KernelDefBuilder::new("MatrixSetDiag").type_constraint_list("T", POD_TYPES),
    MatrixSetDiagOp
);

// ---------------------------------------------------------------------------
// Gradients (TensorFlow's array_grad.py)
// ---------------------------------------------------------------------------

// `Diag`, `DiagPart`, `MatrixDiag`: the adjoint op on the gradient.
register_gradient!("Diag", |ctx| one_op_grad(ctx, "DiagPart"));
register_gradient!("DiagPart", |ctx| one_op_grad(ctx, "Diag"));
register_gradient!("MatrixDiag", |ctx| one_op_grad(ctx, "MatrixDiagPart"));

/// `MatrixDiagPart`: the gradient on the diagonal of zeros shaped like the
/// input (TensorFlow's `matrix_set_diag(zeros_like(input), grad)`, which
/// for square matrices is its `matrix_diag(grad)`).
fn matrix_diag_part_grad(ctx: &mut GradientContext<'_>) -> Result<()> {
    let g = ctx.grad()?;
    let zeros = ctx.zeros_like(ctx.input(0))?;
    let dx = ctx.op1("MatrixSetDiag", &[zeros, g], &[])?;
    ctx.set_input_grad(0, dx)
}

/// `MatrixSetDiag`: the gradient with its diagonals zeroed for `input`, its
/// diagonals for `diagonal` (TensorFlow's `_MatrixSetDiagGrad`).
fn matrix_set_diag_grad(ctx: &mut GradientContext<'_>) -> Result<()> {
    let g = ctx.grad()?;
    let diag = ctx.op1("MatrixDiagPart", &[g], &[])?;
    let zeros = ctx.zeros_like(diag)?;
    let input = ctx.op1("MatrixSetDiag", &[g, zeros], &[])?;
    ctx.set_input_grad(0, input)?;
    ctx.set_input_grad(1, diag)
}

register_gradient!("MatrixDiagPart", matrix_diag_part_grad);
register_gradient!("MatrixSetDiag", matrix_set_diag_grad);

/// `MatrixBandPart`: the same band of the gradient (`array_grad.py`'s
/// `_MatrixBandPartGrad`); the band limits get none.
fn matrix_band_part_grad(ctx: &mut GradientContext<'_>) -> Result<()> {
    let (g, lower, upper) = (ctx.grad()?, ctx.input(1), ctx.input(2));
    let band = ctx.op1("MatrixBandPart", &[g, lower, upper], &[])?;
    ctx.set_input_grad(0, band)
}

register_gradient!("MatrixBandPart", matrix_band_part_grad);
