//! The softmax family kernels: `Softmax`, `LogSoftmax` and the cross entropies.

use super::*;

opforge_ops_base::dtype_table! {
    /// The dtypes the softmax and cross-entropy kernels are registered for
    /// (the float types, in TensorFlow's registration order).
    FLOAT_TYPES, FLOAT_SPEC, softmax_types => [Half, BFloat16, Float, Double]
}

// Softmax family
// ---------------------------------------------------------------------------

/// The softmax family computes in the accumulator type of its element
/// type (`f32` for `half`/`bfloat16`, the type itself otherwise):
/// `T: RealFloat` with `T::Acc: RealFloat`.
pub(crate) type Compute<T> = <T as Num>::Acc;

/// Elements of rowwise work (with an `exp` each) below which it runs on one thread.
pub(super) const ROWS_PARALLEL_MIN: usize = 1 << 13;

/// Runs `job(first_row, rows of out, the same rows of per_row)` over
/// blocks of whole rows of `out` (rows of `cols` elements; `per_row` has
/// one element per row), in parallel for large inputs.
pub(super) fn for_row_blocks<T: Send, L: Send>(
    pool: &ThreadPool,
    out: &mut [T],
    cols: usize,
    per_row: &mut [L],
    job: impl Fn(usize, &mut [T], &mut [L]) + Sync,
) {
    if out.is_empty() || cols == 0 {
        return;
    }
    let rows = out.len() / cols;
    debug_assert_eq!(per_row.len(), rows);
    let threads = pool.num_threads();
    if threads <= 1 || out.len() < ROWS_PARALLEL_MIN {
        job(0, out, per_row);
        return;
    }
    let per = rows
        .div_ceil(threads * 4)
        .max(ROWS_PARALLEL_MIN.div_ceil(4 * cols))
        .max(1);
    // Pair each block of rows with its per-row slots, then shard the pairs.
    let mut blocks: Vec<(&mut [T], &mut [L])> = out
        .chunks_mut(per * cols)
        .zip(per_row.chunks_mut(per))
        .collect();
    par_chunks(pool, &mut blocks, 1, &|c, b| {
        let (o, l) = &mut b[0];
        job(c * per, o, l)
    });
}

/// Folds `x` with 8 independent accumulators (so the loop vectorizes).
#[inline(always)]
pub(super) fn lanes<C: Copy>(x: &[C], id: C, f: impl Fn(C, C) -> C) -> C {
    let mut acc = [id; 8];
    let chunks = x.chunks_exact(8);
    let mut r = id;
    for &v in chunks.remainder() {
        r = f(r, v);
    }
    for c in chunks {
        for (a, &v) in acc.iter_mut().zip(c) {
            *a = f(*a, v);
        }
    }
    for a in acc {
        r = f(r, a);
    }
    r
}

/// The maximum of a row: -inf for an empty row; NaN elements are skipped
/// here and make the row NaN through the later arithmetic, as in Eigen.
#[inline(always)]
pub(super) fn row_max<F: RealFloat>(x: &[F]) -> F {
    lanes(x, F::NEG_INFINITY, |m, v| if v > m { v } else { m })
}

#[inline(always)]
pub(super) fn row_sum<F: RealFloat>(x: &[F]) -> F {
    lanes(x, F::ZERO, |a, b| a.add(b))
}

/// Shifts a row of logits by its maximum and exponentiates it:
/// `shifted[j] = logit[j] - max`, `exps[j] = exp(shifted[j])`; returns
/// `sum(exps)`.
#[inline(always)]
pub(super) fn shift_and_exp<F: RealFloat>(shifted: &mut [F], exps: &mut [F]) -> F {
    let max = row_max(shifted);
    for (s, e) in shifted.iter_mut().zip(exps.iter_mut()) {
        *s = (*s).sub(max);
        *e = s.vexp();
    }
    row_sum(exps)
}

pub(super) fn softmax_rows<T: RealFloat>(
    pool: &ThreadPool,
    x: &[T],
    out: &mut [T],
    cols: usize,
    log: bool,
) where
    Compute<T>: RealFloat,
{
    let mut rows = vec![(); out.len().checked_div(cols).unwrap_or(0)];
    for_row_blocks(pool, out, cols, &mut rows, |r0, o, _| {
        let mut scratch: Vec<Compute<T>> = vec![Compute::<T>::ZERO; 2 * cols];
        let (shifted, exps) = scratch.split_at_mut(cols);
        for (k, orow) in o.chunks_mut(cols).enumerate() {
            let xrow = &x[(r0 + k) * cols..(r0 + k + 1) * cols];
            for (s, v) in shifted.iter_mut().zip(xrow) {
                *s = v.to_acc();
            }
            let sum = shift_and_exp(shifted, exps);
            if log {
                // logsoftmax = shifted - log(sum(exp(shifted))).
                let ls = sum.ln();
                for (o, &s) in orow.iter_mut().zip(shifted.iter()) {
                    *o = T::from_acc(s.sub(ls));
                }
            } else {
                // softmax = exp(shifted) * (1 / sum).
                let inv = sum.recip();
                for (o, &e) in orow.iter_mut().zip(exps.iter()) {
                    *o = T::from_acc(e.mul(inv));
                }
            }
        }
    });
}

pub(super) struct SoftmaxKernel {
    log: bool,
}

pub(super) fn softmax_compute<T: RealFloat>(log: bool, ctx: &mut OpKernelContext<'_>) -> Result<()>
where
    Compute<T>: RealFloat,
{
    let x = ctx.input(0).clone();
    let shape = x.shape().clone();
    let cols = shape.dims().last().copied().unwrap_or(0) as usize;
    let pool = ctx.thread_pool();
    ctx.allocate_output(0, shape)?;
    let out = ctx.output_mut(0)?;
    softmax_rows(pool, x.flat::<T>()?, out.flat_mut::<T>()?, cols, log);
    Ok(())
}

impl OpKernel for SoftmaxKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let x = ctx.input(0);
        ensure!(
            x.rank() >= 1,
            InvalidArgument,
            "logits must have >= 1 dimension, got {}",
            fmt_shape(x.dims())
        );
        let dt = x.dtype();
        let log = self.log;
        softmax_types!(dt, T => softmax_compute::<T>(log, ctx),
            Err(Status::unimplemented(format!("no softmax for {dt}"))))
    }
}

register_kernel!(
    KernelDefBuilder::new("Softmax").type_constraint_list("T", FLOAT_TYPES),
    fn = |_| Ok(Box::new(SoftmaxKernel { log: false }))
);
register_kernel!(
    KernelDefBuilder::new("LogSoftmax").type_constraint_list("T", FLOAT_TYPES),
    fn = |_| Ok(Box::new(SoftmaxKernel { log: true }))
);

/// A rank-<=2 input broadcast to `[rows, cols]`: its padded dims.
#[derive(Clone, Copy)]
pub(super) struct Bcast2 {
    rows: usize,
    cols: usize,
}

impl Bcast2 {
    fn new(dims: &[i64]) -> Bcast2 {
        let d = |i: usize| -> usize {
            let off = 2 - dims.len().min(2);
            if i < off {
                1
            } else {
                dims[i - off] as usize
            }
        };
        Bcast2 {
            rows: d(0),
            cols: d(1),
        }
    }

    #[inline(always)]
    fn row<'a, T>(&self, data: &'a [T], r: usize) -> &'a [T] {
        let r = if self.rows == 1 { 0 } else { r };
        &data[r * self.cols..(r + 1) * self.cols]
    }

    #[inline(always)]
    fn at<T: Copy>(&self, row: &[T], j: usize) -> T {
        if self.cols == 1 {
            row[0]
        } else {
            row[j]
        }
    }
}

/// One row of softmax cross entropy with dense labels: returns the loss
/// `sum(labels * (log(sum(exp(shifted))) - shifted))` and writes the
/// backprop `softmax - labels`. `scratch` holds `2 * cols` values.
#[inline(always)]
pub(super) fn xent_row<T: RealFloat>(
    logit: impl Fn(usize) -> Compute<T>,
    label: impl Fn(usize) -> Compute<T>,
    cols: usize,
    scratch: &mut [Compute<T>],
    back: &mut [T],
) -> Compute<T>
where
    Compute<T>: RealFloat,
{
    let (shifted, exps) = scratch.split_at_mut(cols);
    for (j, s) in shifted.iter_mut().enumerate() {
        *s = logit(j);
    }
    let sum = shift_and_exp(shifted, exps);
    let log_sum = sum.ln();
    // Four partial losses break the dependency chain of the sum.
    let mut loss = [Compute::<T>::ZERO; 4];
    for (j, (b, (&s, &e))) in back
        .iter_mut()
        .zip(shifted.iter().zip(exps.iter()))
        .enumerate()
    {
        let l = label(j);
        loss[j % 4] = loss[j % 4].add(l.mul(log_sum.sub(s)));
        *b = T::from_acc(e.div(sum).sub(l));
    }
    (loss[0].add(loss[1])).add(loss[2].add(loss[3]))
}

/// One row of sparse softmax cross entropy: the loss
/// `log(sum(exp(shifted))) - shifted[target]` and the backprop
/// `softmax - one_hot(target)`.
#[inline(always)]
pub(super) fn sparse_xent_row<T: RealFloat>(
    logits: &[T],
    target: usize,
    scratch: &mut [Compute<T>],
    back: &mut [T],
) -> Compute<T>
where
    Compute<T>: RealFloat,
{
    let cols = logits.len();
    let (shifted, exps) = scratch.split_at_mut(cols);
    for (s, v) in shifted.iter_mut().zip(logits) {
        *s = v.to_acc();
    }
    let sum = shift_and_exp(shifted, exps);
    for (b, &e) in back.iter_mut().zip(exps.iter()) {
        *b = T::from_acc(e.div(sum));
    }
    back[target] = T::from_acc(exps[target].div(sum).sub(Compute::<T>::ONE));
    sum.ln().sub(shifted[target])
}

pub(super) struct XentKernel;

pub(super) fn xent_compute<T: RealFloat>(ctx: &mut OpKernelContext<'_>) -> Result<()>
where
    Compute<T>: RealFloat,
{
    let (logits, labels) = (ctx.input(0).clone(), ctx.input(1).clone());
    let shape: Vec<i64> = if logits.shape() == labels.shape() {
        logits.dims().to_vec()
    } else {
        broadcast_shapes(logits.dims(), labels.dims()).map_err(|_| {
            Status::invalid_argument(format!(
                "logits and labels must be broadcastable: logits_size={} labels_size={}",
                fmt_shape(logits.dims()),
                fmt_shape(labels.dims())
            ))
        })?
    };
    ensure!(
        shape.len() == 2,
        InvalidArgument,
        "logits and labels must be either 2-dimensional, or broadcasted to be 2-dimensional"
    );
    let (rows, cols) = (shape[0] as usize, shape[1] as usize);
    let (bl, bt) = (Bcast2::new(logits.dims()), Bcast2::new(labels.dims()));
    let (lx, tx) = (logits.flat::<T>()?, labels.flat::<T>()?);
    let pool = ctx.thread_pool();
    // One loss per row, before any output: `rows` may be huge with no
    // elements (a `[2^40, 0]` input), so it goes through the limit.
    let mut loss = opforge_core::tensor::limit::filled_vec(rows, Compute::<T>::ZERO, || {
        format!("the losses of {rows} rows")
    })?;
    ctx.allocate_output(1, TensorShape::new(&shape)?)?;
    let back = ctx.output_mut(1)?.flat_mut::<T>()?;
    for_row_blocks(pool, back, cols, &mut loss, |r0, b, loss| {
        let mut shifted = vec![Compute::<T>::ZERO; 2 * cols];
        for (k, (brow, loss)) in b.chunks_mut(cols).zip(loss.iter_mut()).enumerate() {
            let (lrow, trow) = (bl.row(lx, r0 + k), bt.row(tx, r0 + k));
            *loss = xent_row::<T>(
                |j| bl.at(lrow, j).to_acc(),
                |j| bt.at(trow, j).to_acc(),
                cols,
                &mut shifted,
                brow,
            );
        }
    });
    set_loss_output::<T>(ctx, &loss)
}

impl OpKernel for XentKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let dt = ctx.input(0).dtype();
        softmax_types!(dt, T => xent_compute::<T>(ctx),
            Err(Status::unimplemented(format!("no cross entropy for {dt}"))))
    }
}

register_kernel!(
    KernelDefBuilder::new("SoftmaxCrossEntropyWithLogits").type_constraint_list("T", FLOAT_TYPES),
    fn = |_| Ok(Box::new(XentKernel))
);

/// Output 0 of the cross-entropy ops: the per-row losses, in `T`.
pub(super) fn set_loss_output<T: RealFloat>(
    ctx: &mut OpKernelContext<'_>,
    loss: &[Compute<T>],
) -> Result<()>
where
    Compute<T>: RealFloat,
{
    ctx.allocate_output(0, TensorShape::vector(loss.len()))?;
    let out = ctx.output_mut(0)?.flat_mut::<T>()?;
    for (o, &l) in out.iter_mut().zip(loss) {
        *o = T::from_acc(l);
    }
    Ok(())
}

pub(super) struct SparseXentKernel;

pub(super) fn sparse_xent_compute<T: RealFloat>(ctx: &mut OpKernelContext<'_>) -> Result<()>
where
    Compute<T>: RealFloat,
{
    let (logits, labels) = (ctx.input(0).clone(), ctx.input(1).clone());
    ensure!(
        logits.rank() == 2,
        InvalidArgument,
        "logits must be 2-D, but got shape {}",
        fmt_shape(logits.dims())
    );
    ensure!(
        labels.rank() == 1,
        InvalidArgument,
        "labels must be 1-D, but got shape {}",
        fmt_shape(labels.dims())
    );
    ensure!(
        logits.dims()[0] == labels.dims()[0],
        InvalidArgument,
        "logits and labels must have the same first dimension, got logits shape {} and labels shape {}",
        fmt_shape(logits.dims()),
        fmt_shape(labels.dims())
    );
    ensure!(
        logits.dims()[1] > 0,
        InvalidArgument,
        "Must have at least one class, but got logits shape {}",
        fmt_shape(logits.dims())
    );
    let (rows, cols) = (logits.dims()[0] as usize, logits.dims()[1] as usize);
    let label_values = index_values(&labels, "labels")?;
    if let (Some(&lo), Some(&hi)) = (label_values.iter().min(), label_values.iter().max()) {
        if lo < 0 || hi >= cols as i64 {
            let bad = if lo < 0 { lo } else { hi };
            let all: Vec<String> = label_values.iter().map(i64::to_string).collect();
            return Err(Status::invalid_argument(format!(
                "Received a label value of {bad} which is outside the valid range of [0, {cols}).  \
                 Label values: {}",
                all.join(" ")
            )));
        }
    }
    let lx = logits.flat::<T>()?;
    let pool = ctx.thread_pool();
    // One loss per row, before any output: `rows` may be huge with no
    // elements (a `[2^40, 0]` input), so it goes through the limit.
    let mut loss = opforge_core::tensor::limit::filled_vec(rows, Compute::<T>::ZERO, || {
        format!("the losses of {rows} rows")
    })?;
    let labels = &label_values;
    if ctx.output_request(1) == OutputRequest::Null {
        // Nobody reads the backprop: the losses alone, a row's backprop in
        // a scratch row (an evaluation's loss costs no [rows, cols] buffer).
        let per = rows.div_ceil(pool.num_threads() * 4).max(1);
        par_chunks(pool, &mut loss, per, &|i, l| {
            let mut shifted = vec![Compute::<T>::ZERO; 2 * cols];
            let mut back = vec![T::default(); cols];
            for (k, loss) in l.iter_mut().enumerate() {
                let r = i * per + k;
                let lrow = &lx[r * cols..(r + 1) * cols];
                *loss = sparse_xent_row::<T>(lrow, labels[r] as usize, &mut shifted, &mut back);
            }
        });
        return set_loss_output::<T>(ctx, &loss);
    }
    ctx.allocate_output(1, logits.shape().clone())?;
    let back = ctx.output_mut(1)?.flat_mut::<T>()?;
    for_row_blocks(pool, back, cols, &mut loss, |r0, b, loss| {
        let mut shifted = vec![Compute::<T>::ZERO; 2 * cols];
        for (k, (brow, loss)) in b.chunks_mut(cols).zip(loss.iter_mut()).enumerate() {
            let r = r0 + k;
            let lrow = &lx[r * cols..(r + 1) * cols];
            *loss = sparse_xent_row::<T>(lrow, labels[r] as usize, &mut shifted, brow);
        }
    });
    set_loss_output::<T>(ctx, &loss)
}

impl OpKernel for SparseXentKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let dt = ctx.input(0).dtype();
        softmax_types!(dt, T => sparse_xent_compute::<T>(ctx),
            Err(Status::unimplemented(format!("no cross entropy for {dt}"))))
    }

    /// `Null` for `backprop` when only the loss is read (an evaluation).
    fn supported_requests(&self) -> RequestSupport {
        RequestSupport::NULL
    }
}

register_kernel!(
    KernelDefBuilder::new("SparseSoftmaxCrossEntropyWithLogits")
        .type_constraint_list("T", FLOAT_TYPES)
        .type_constraint_list("Tlabels", &[DataType::Int32, DataType::Int64]),
    fn = |_| Ok(Box::new(SparseXentKernel))
);

// ---------------------------------------------------------------------------
