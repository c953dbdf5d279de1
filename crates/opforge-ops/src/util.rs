//! Building blocks shared by the kernels of the standard library:
//! elementwise maps sharded over the intra-op pool (reusing the input's
//! buffer when it may), NumPy/TensorFlow broadcasting, and reading shape
//! and axis arguments. An op author's kernel can use them too.

use opforge_core::device::ThreadPool;
use opforge_core::kernel::OpKernelContext;
use opforge_core::{DataType, Element, Result, Status, Tensor, TensorShape};
use std::marker::PhantomData;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Every numeric dtype with an element type: the floats (incl. half and
/// bfloat16), all signed and unsigned ints, and both complex types. Kernels
/// registered for "all number types" use this list.
pub const NUMERIC_KERNEL_TYPES: &[DataType] = &[
    DataType::Float,
    DataType::Double,
    DataType::Half,
    DataType::BFloat16,
    DataType::Int8,
    DataType::Int16,
    DataType::Int32,
    DataType::Int64,
    DataType::UInt8,
    DataType::UInt16,
    DataType::UInt32,
    DataType::UInt64,
    DataType::Complex64,
    DataType::Complex128,
];

/// The real types of [`NUMERIC_KERNEL_TYPES`]: every numeric dtype but the
/// complex ones.
pub const REAL_KERNEL_TYPES: &[DataType] = NUMERIC_KERNEL_TYPES.split_at(12).0;

/// Elementwise work below this many elements runs on the calling thread.
pub const PARALLEL_THRESHOLD: usize = 1 << 15;

/// Cost per element (in rough cycles) assumed for cheap elementwise work.
pub const CHEAP_COST: usize = 1;

/// How many shards elementwise work over `n` elements of `cost` per
/// element gets: one below [`PARALLEL_THRESHOLD`], else the pool's
/// [`ThreadPool::num_shards`] for the work.
pub fn elementwise_shards(pool: &ThreadPool, n: usize, cost: usize) -> usize {
    if n < PARALLEL_THRESHOLD {
        return 1;
    }
    pool.num_shards(n, cost.max(1) * 8)
}

/// The parallel-loop engine: runs `f(i)` for every `i < shards`, at most
/// the pool's thread count at once, and returns when all are done.
///
/// This and [`for_ranges`] / [`for_each_index`] are the only places where
/// the standard library's kernels reach the pool, through the pool's
/// non-generic [`ThreadPool::shard_dyn`]: the thread pool's machinery is
/// compiled once, and each kernel's own code is only its loop body.
#[inline(never)]
pub fn run_shards(pool: &ThreadPool, shards: usize, f: &(dyn Fn(usize) + Sync)) {
    match shards {
        0 => {}
        1 => f(0),
        // A cost per unit this high makes every unit its own shard (up to
        // the thread count).
        _ => pool.shard_dyn(shards, usize::MAX, &|start, end| (start..end).for_each(f)),
    }
}

/// Splits `[0, n)` into `shards` contiguous ranges of (nearly) equal length
/// and runs `f(start, end)` on each, in parallel (see [`run_shards`]).
#[inline(never)]
pub fn for_ranges(pool: &ThreadPool, n: usize, shards: usize, f: &(dyn Fn(usize, usize) + Sync)) {
    if n == 0 {
        return;
    }
    if shards <= 1 || n == 1 {
        return f(0, n);
    }
    let block = n.div_ceil(shards);
    run_shards(pool, n.div_ceil(block), &|i| {
        f(i * block, ((i + 1) * block).min(n))
    });
}

/// Runs `f(i)` for every `i < n`, the indices claimed in small batches by
/// the pool's threads as they come free (for items of uneven or large
/// cost: matrices of a batch, tiles of a reduction).
#[inline(never)]
pub fn for_each_index(pool: &ThreadPool, n: usize, f: &(dyn Fn(usize) + Sync)) {
    let threads = pool.num_threads().min(n);
    if threads <= 1 {
        return (0..n).for_each(f);
    }
    let batch = (n / (threads * 4)).max(1);
    let next = AtomicUsize::new(0);
    run_shards(pool, threads, &|_| loop {
        let start = next.fetch_add(batch, Ordering::Relaxed);
        if start >= n {
            return;
        }
        (start..(start + batch).min(n)).for_each(f);
    });
}

/// A mutable slice whose disjoint parts are handed to the shards of a
/// parallel loop (see [`chunks_in_shards`] and [`par_chunks`]).
struct Splitter<'a, T> {
    ptr: *mut T,
    len: usize,
    _slice: PhantomData<&'a mut [T]>,
}

// SAFETY: a `Splitter` only hands out `&mut [T]` parts of the slice it
// borrows mutably, and its users hand every part to one thread only
// (`get`'s contract), which is what sending `&mut [T]` (`T: Send`) allows.
unsafe impl<T: Send> Sync for Splitter<'_, T> {}

impl<'a, T> Splitter<'a, T> {
    fn new(slice: &'a mut [T]) -> Self {
        Splitter {
            ptr: slice.as_mut_ptr(),
            len: slice.len(),
            _slice: PhantomData,
        }
    }

    /// Elements `[start, end)`.
    ///
    /// # Safety
    /// The parts obtained from one `Splitter` and used at the same time must
    /// not overlap.
    #[allow(clippy::mut_from_ref)]
    unsafe fn get(&self, start: usize, end: usize) -> &mut [T] {
        assert!(start <= end && end <= self.len, "part out of range");
        // SAFETY: `[start, end)` lies inside the borrowed slice (checked
        // above), which stays mutably borrowed for `'a`; the caller
        // guarantees no other live part overlaps it.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(start), end - start) }
    }
}

/// Runs `f(offset, chunk)` over `data` cut into `shards` contiguous chunks
/// of whole `unit`s (`offset` is the chunk's first element), in parallel;
/// with one shard, `f(0, data)` on the calling thread. `data.len()` should
/// be a multiple of `unit` (the last chunk takes the rest).
pub fn chunks_in_shards<T: Send>(
    pool: &ThreadPool,
    data: &mut [T],
    unit: usize,
    shards: usize,
    f: &(dyn Fn(usize, &mut [T]) + Sync),
) {
    let (unit, len) = (unit.max(1), data.len());
    let units = len.div_ceil(unit);
    if shards <= 1 || units <= 1 {
        return f(0, data);
    }
    let parts = Splitter::new(data);
    for_ranges(pool, units, shards, &|start, end| {
        let (a, b) = (start * unit, (end * unit).min(len));
        // SAFETY: `for_ranges` passes disjoint unit ranges, so the element
        // ranges of concurrent calls are disjoint.
        f(a, unsafe { parts.get(a, b) })
    });
}

/// Runs `f(i, chunk)` over the consecutive `len`-element chunks of `data`,
/// in parallel on `pool` when it has several threads and there are several
/// chunks, the chunks claimed as threads come free (see
/// [`for_each_index`]). Usable by any kernel that writes disjoint chunks of
/// an output.
pub fn par_chunks<T: Send>(
    pool: &ThreadPool,
    data: &mut [T],
    len: usize,
    f: &(dyn Fn(usize, &mut [T]) + Sync),
) {
    let (len, total) = (len.max(1), data.len());
    if pool.num_threads() <= 1 || total <= len {
        for (i, c) in data.chunks_mut(len).enumerate() {
            f(i, c);
        }
        return;
    }
    let parts = Splitter::new(data);
    for_each_index(pool, total.div_ceil(len), &|i| {
        // SAFETY: `for_each_index` runs each index once, so the chunks of
        // concurrent calls are disjoint.
        f(i, unsafe { parts.get(i * len, ((i + 1) * len).min(total)) })
    });
}

/// `[f(0), ..., f(n - 1)]`, computed in parallel on `pool` (see [`par_chunks`]).
pub fn par_collect<A: Send + Clone>(
    pool: &ThreadPool,
    n: usize,
    init: A,
    f: &(dyn Fn(usize) -> A + Sync),
) -> Vec<A> {
    let mut v = vec![init; n];
    par_chunks(pool, &mut v, 1, &|i, c| c[0] = f(i));
    v
}

/// `out[i] = f(x[i])`, sharded over `pool` for large slices.
pub fn par_map<T: Copy + Sync, U: Send>(
    pool: &ThreadPool,
    x: &[T],
    out: &mut [U],
    cost: usize,
    f: impl Fn(T) -> U + Sync,
) {
    let shards = elementwise_shards(pool, out.len(), cost);
    chunks_in_shards(pool, out, 1, shards, &|off, o| {
        let x = &x[off..off + o.len()];
        o.iter_mut().zip(x).for_each(|(o, &v)| *o = f(v))
    });
}

/// `x[i] = f(x[i])` in place, sharded over `pool` for large slices.
pub fn par_map_inplace<T: Copy + Send + Sync>(
    pool: &ThreadPool,
    x: &mut [T],
    cost: usize,
    f: impl Fn(T) -> T + Sync,
) {
    let shards = elementwise_shards(pool, x.len(), cost);
    chunks_in_shards(pool, x, 1, shards, &|_, x| {
        x.iter_mut().for_each(|v| *v = f(*v))
    });
}

/// `out[i] = f(a[i], b[i])`, sharded.
pub fn par_zip<T: Copy + Sync, U: Send>(
    pool: &ThreadPool,
    a: &[T],
    b: &[T],
    out: &mut [U],
    cost: usize,
    f: impl Fn(T, T) -> U + Sync,
) {
    let shards = elementwise_shards(pool, out.len(), cost);
    chunks_in_shards(pool, out, 1, shards, &|off, o| {
        let (a, b) = (&a[off..off + o.len()], &b[off..off + o.len()]);
        for ((o, &x), &y) in o.iter_mut().zip(a).zip(b) {
            *o = f(x, y);
        }
    });
}

/// A unary kernel body for `T -> T` ops: output 0 = `f` of input 0,
/// computed in place when input 0's buffer may be reused.
pub fn unary_same<T: Element>(
    ctx: &mut OpKernelContext<'_>,
    cost: usize,
    f: impl Fn(T) -> T + Sync,
) -> Result<()> {
    let pool = ctx.thread_pool();
    if ctx
        .forward_input_or_allocate_output_like(&[0], 0, 0)?
        .is_some()
    {
        par_map_inplace(pool, ctx.output_mut(0)?.flat_mut::<T>()?, cost, f);
    } else {
        let (ins, out) = ctx.inputs_and_output(0)?;
        par_map(pool, ins[0].flat::<T>()?, out.flat_mut::<T>()?, cost, f);
    }
    Ok(())
}

/// A unary kernel body for `T -> U` ops (no buffer reuse).
pub fn unary_map<T: Element, U: Element>(
    ctx: &mut OpKernelContext<'_>,
    cost: usize,
    f: impl Fn(T) -> U + Sync,
) -> Result<()> {
    let shape = ctx.input(0).shape().clone();
    ctx.allocate_output(0, shape)?;
    let pool = ctx.thread_pool();
    let (ins, out) = ctx.inputs_and_output(0)?;
    par_map(pool, ins[0].flat::<T>()?, out.flat_mut::<U>()?, cost, f);
    Ok(())
}

/// The broadcast shape of two shapes under NumPy rules, or TensorFlow's
/// `Incompatible shapes: [2,3] vs. [4]` error.
///
/// ```
/// use opforge_ops::util::broadcast_shapes;
/// assert_eq!(broadcast_shapes(&[2, 1, 3], &[4, 1]).unwrap(), vec![2, 4, 3]);
/// assert!(broadcast_shapes(&[2, 3], &[4]).is_err());
/// ```
pub fn broadcast_shapes(a: &[i64], b: &[i64]) -> Result<Vec<i64>> {
    let rank = a.len().max(b.len());
    let mut out = vec![0; rank];
    for i in 0..rank {
        let da = if i + a.len() >= rank {
            a[i + a.len() - rank]
        } else {
            1
        };
        let db = if i + b.len() >= rank {
            b[i + b.len() - rank]
        } else {
            1
        };
        out[i] = if da == db || db == 1 {
            da
        } else if da == 1 {
            db
        } else {
            return Err(Status::invalid_argument(format!(
                "Incompatible shapes: {} vs. {}",
                fmt_shape(a),
                fmt_shape(b)
            )));
        };
    }
    Ok(out)
}

/// `[2,3]`, as TensorFlow prints shapes.
pub fn fmt_shape(dims: &[i64]) -> String {
    let parts: Vec<String> = dims.iter().map(i64::to_string).collect();
    format!("[{}]", parts.join(","))
}

/// The axes of `out_shape` along which an input of `in_shape` was broadcast,
/// so its gradient must be summed over them (TensorFlow's
/// `BroadcastGradientArgs`): the leading axes the input lacks, and every
/// axis where the input has size 1 (including axes where the output has
/// size 1 too, as TensorFlow reports them).
pub fn broadcast_reduction_axes(in_shape: &[i64], out_shape: &[i64]) -> Vec<i64> {
    let offset = out_shape.len() - in_shape.len().min(out_shape.len());
    (0..out_shape.len())
        .filter(|&i| i < offset || in_shape[i - offset] == 1)
        .map(|i| i as i64)
        .collect()
}

/// A broadcasting plan: output dims collapsed so that each dim is either
/// broadcast or not for each input, with the inputs' strides per dim.
#[derive(Clone, Debug, PartialEq)]
pub struct BroadcastPlan {
    /// The (uncollapsed) output shape.
    pub out_shape: Vec<i64>,
    /// Collapsed output dims.
    pub dims: Vec<usize>,
    /// Stride of input a per collapsed dim (0 where broadcast).
    pub a_strides: Vec<usize>,
    /// Stride of input b per collapsed dim (0 where broadcast).
    pub b_strides: Vec<usize>,
}

impl BroadcastPlan {
    /// The plan for inputs of shapes `a` and `b`.
    pub fn new(a: &[i64], b: &[i64]) -> Result<BroadcastPlan> {
        let out_shape = broadcast_shapes(a, b)?;
        let rank = out_shape.len();
        let pad = |s: &[i64]| -> Vec<i64> {
            let mut v = vec![1; rank - s.len()];
            v.extend_from_slice(s);
            v
        };
        let (pa, pb) = (pad(a), pad(b));
        // Collapse adjacent dims with the same broadcast pattern; drop size-1 output dims.
        let mut dims: Vec<usize> = Vec::new();
        let mut pattern: Vec<(bool, bool)> = Vec::new();
        for i in 0..rank {
            let d = out_shape[i] as usize;
            if d == 1 {
                continue;
            }
            let p = (pa[i] == 1, pb[i] == 1);
            if pattern.last() == Some(&p) {
                *dims.last_mut().expect("a dim per pattern") *= d;
            } else {
                dims.push(d);
                pattern.push(p);
            }
        }
        let strides = |broadcast: &dyn Fn(&(bool, bool)) -> bool| -> Vec<usize> {
            let mut s = vec![0; dims.len()];
            let mut acc = 1;
            for i in (0..dims.len()).rev() {
                if !broadcast(&pattern[i]) {
                    s[i] = acc;
                    acc *= dims[i];
                }
            }
            s
        };
        let a_strides = strides(&|p| p.0);
        let b_strides = strides(&|p| p.1);
        Ok(BroadcastPlan {
            out_shape,
            dims,
            a_strides,
            b_strides,
        })
    }

    /// Calls `row(out_offset, a_offset, b_offset, len, a_step, b_step)` for
    /// every innermost row of rows `[start, end)`.
    fn for_rows(
        &self,
        start: usize,
        end: usize,
        mut row: impl FnMut(usize, usize, usize, usize, usize, usize),
    ) {
        let n = self.dims.len();
        if n == 0 {
            if start == 0 && end > 0 {
                row(0, 0, 0, 1, 0, 0);
            }
            return;
        }
        let inner = self.dims[n - 1];
        let (sa, sb) = (self.a_strides[n - 1], self.b_strides[n - 1]);
        for r in start..end {
            let (mut rem, mut ao, mut bo) = (r, 0, 0);
            for d in (0..n - 1).rev() {
                let i = rem % self.dims[d];
                rem /= self.dims[d];
                ao += i * self.a_strides[d];
                bo += i * self.b_strides[d];
            }
            row(r * inner, ao, bo, inner, sa, sb);
        }
    }

    fn rows(&self) -> (usize, usize) {
        match self.dims.split_last() {
            Some((&inner, outer)) => (outer.iter().product(), inner),
            None => (1, 1),
        }
    }
}

#[inline(always)]
fn row_loop<T: Copy, U>(
    out: &mut [U],
    a: &[T],
    b: &[T],
    sa: usize,
    sb: usize,
    f: &impl Fn(T, T) -> U,
) {
    match (sa, sb) {
        (1, 1) => out
            .iter_mut()
            .zip(a)
            .zip(b)
            .for_each(|((o, &x), &y)| *o = f(x, y)),
        (1, 0) => {
            let y = b[0];
            out.iter_mut().zip(a).for_each(|(o, &x)| *o = f(x, y))
        }
        (0, 1) => {
            let x = a[0];
            out.iter_mut().zip(b).for_each(|(o, &y)| *o = f(x, y))
        }
        _ => {
            let (x, y) = (a[0], b[0]);
            out.iter_mut().for_each(|o| *o = f(x, y))
        }
    }
}

/// `out = f(a, b)` with broadcasting, sharded over rows.
pub fn broadcast_zip<T: Copy + Sync, U: Send>(
    pool: &ThreadPool,
    plan: &BroadcastPlan,
    a: &[T],
    b: &[T],
    out: &mut [U],
    cost: usize,
    f: impl Fn(T, T) -> U + Sync,
) {
    if out.is_empty() {
        return;
    }
    if a.len() == out.len() && b.len() == out.len() {
        return par_zip(pool, a, b, out, cost, f);
    }
    // A scalar against a tensor: one pass, no row bookkeeping.
    if a.len() == 1 && b.len() == out.len() {
        let x = a[0];
        return par_map(pool, b, out, cost, |y| f(x, y));
    }
    if b.len() == 1 && a.len() == out.len() {
        let y = b[0];
        return par_map(pool, a, out, cost, |x| f(x, y));
    }
    let (rows, inner) = plan.rows();
    let shards = elementwise_shards(pool, out.len(), cost).min(rows);
    chunks_in_shards(pool, out, inner, shards, &|off, out| {
        let start = off / inner;
        plan.for_rows(
            start,
            start + out.len() / inner,
            |oo, ao, bo, len, sa, sb| {
                let o = &mut out[oo - off..oo - off + len];
                let a = &a[ao..ao + (len - 1) * sa + 1];
                let b = &b[bo..bo + (len - 1) * sb + 1];
                row_loop(o, a, b, sa, sb, &f);
            },
        );
    });
}

/// A binary kernel body for `(T, T) -> T` ops with broadcasting: output 0 =
/// `f(input 0, input 1)`, computed in place in an input's buffer when that
/// input has the output's shape and may be reused.
pub fn binary_same<T: Element>(
    ctx: &mut OpKernelContext<'_>,
    cost: usize,
    f: impl Fn(T, T) -> T + Sync,
) -> Result<()> {
    // One element each, of one shape (scalars): no plan, no sharding.
    let (a, b) = (ctx.input(0), ctx.input(1));
    if a.num_elements() == 1 && a.shape() == b.shape() {
        let r = f(a.flat::<T>()?[0], b.flat::<T>()?[0]);
        ctx.forward_input_or_allocate_output_like(&[0, 1], 0, 0)?;
        ctx.output_mut(0)?.flat_mut::<T>()?[0] = r;
        return Ok(());
    }
    let (plan, forwarded) = match broadcast_plan(ctx)? {
        None => (
            None,
            ctx.forward_input_or_allocate_output_like(&[0, 1], 0, 0)?,
        ),
        Some((plan, shape)) => {
            let f = ctx.forward_input_or_allocate_output(&[0, 1], 0, &shape)?;
            (Some(plan), f)
        }
    };
    let pool = ctx.thread_pool();
    match forwarded {
        Some(forwarded) => {
            // The output holds the forwarded input's values; combine in place.
            let (ins, out) = ctx.inputs_and_output(0)?;
            let other = ins[1 - forwarded].flat::<T>()?;
            let out = out.flat_mut::<T>()?;
            if other.len() == out.len() {
                let shards = elementwise_shards(pool, out.len(), cost);
                chunks_in_shards(pool, out, 1, shards, &|off, o| {
                    let y = &other[off..off + o.len()];
                    if forwarded == 0 {
                        o.iter_mut().zip(y).for_each(|(o, &y)| *o = f(*o, y));
                    } else {
                        o.iter_mut().zip(y).for_each(|(o, &x)| *o = f(x, *o));
                    }
                });
            } else if let [y] = other {
                // A scalar against the forwarded tensor: in place.
                let y = *y;
                if forwarded == 0 {
                    par_map_inplace(pool, out, cost, |o| f(o, y));
                } else {
                    par_map_inplace(pool, out, cost, |o| f(y, o));
                }
            } else {
                // The other input is broadcast: the output's own values are read from a copy.
                let mine = out.to_vec();
                let (a, b) = if forwarded == 0 {
                    (&mine[..], other)
                } else {
                    (other, &mine[..])
                };
                let plan = plan.ok_or_else(|| Status::internal("broadcast without a plan"))?;
                broadcast_zip(pool, &plan, a, b, out, cost, f);
            }
        }
        None => {
            let (ins, out) = ctx.inputs_and_output(0)?;
            zip_planned(
                pool,
                plan.as_ref(),
                ins[0].flat::<T>()?,
                ins[1].flat::<T>()?,
                out.flat_mut::<T>()?,
                cost,
                f,
            );
        }
    }
    Ok(())
}

/// The broadcast plan of a binary kernel's two inputs and the output
/// shape, or `None` when both inputs have the same shape (the common case,
/// which needs no plan: the output has that shape).
fn broadcast_plan(ctx: &OpKernelContext<'_>) -> Result<Option<(BroadcastPlan, TensorShape)>> {
    let (a, b) = (ctx.input(0), ctx.input(1));
    if a.shape() == b.shape() {
        return Ok(None);
    }
    let plan = BroadcastPlan::new(a.dims(), b.dims())?;
    let shape = TensorShape::new(&plan.out_shape)?;
    Ok(Some((plan, shape)))
}

/// [`broadcast_zip`], or [`par_zip`] when there is no plan (same shapes).
fn zip_planned<T: Copy + Sync, U: Send>(
    pool: &ThreadPool,
    plan: Option<&BroadcastPlan>,
    a: &[T],
    b: &[T],
    out: &mut [U],
    cost: usize,
    f: impl Fn(T, T) -> U + Sync,
) {
    match plan {
        Some(plan) => broadcast_zip(pool, plan, a, b, out, cost, f),
        None => par_zip(pool, a, b, out, cost, f),
    }
}

/// A binary kernel body for `(T, T) -> U` ops with broadcasting (comparisons).
pub fn binary_map<T: Element, U: Element>(
    ctx: &mut OpKernelContext<'_>,
    cost: usize,
    f: impl Fn(T, T) -> U + Sync,
) -> Result<()> {
    let plan = match broadcast_plan(ctx)? {
        None => {
            let shape = ctx.input(0).shape().clone();
            ctx.allocate_output(0, shape)?;
            None
        }
        Some((plan, shape)) => {
            ctx.allocate_output(0, shape)?;
            Some(plan)
        }
    };
    let pool = ctx.thread_pool();
    let (ins, out) = ctx.inputs_and_output(0)?;
    zip_planned(
        pool,
        plan.as_ref(),
        ins[0].flat::<T>()?,
        ins[1].flat::<T>()?,
        out.flat_mut::<U>()?,
        cost,
        f,
    );
    Ok(())
}

/// The values of an int32 or int64 tensor as `i64`s (shape and index arguments).
pub fn index_values(t: &Tensor, what: &str) -> Result<Vec<i64>> {
    match t.dtype() {
        DataType::Int32 => Ok(t.flat::<i32>()?.iter().map(|&v| v as i64).collect()),
        DataType::Int64 => Ok(t.flat::<i64>()?.to_vec()),
        other => Err(Status::invalid_argument(format!(
            "{what} must be int32 or int64, not {other}"
        ))),
    }
}

/// Normalizes `axis` into `[0, rank)`, accepting `[-rank, rank)`.
pub fn normalize_axis(axis: i64, rank: usize, what: &str) -> Result<usize> {
    let r = rank as i64;
    if axis < -r || axis >= r {
        return Err(Status::invalid_argument(format!(
            "{what} {axis} is out of range: it must be in [{}, {r}) for a tensor of rank {rank}",
            -r
        )));
    }
    Ok(if axis < 0 {
        (axis + r) as usize
    } else {
        axis as usize
    })
}

/// A tensor of `i64` values in the dtype `dtype` (int32 or int64), for shape outputs.
pub fn index_tensor(dtype: DataType, dims: &[i64], values: &[i64]) -> Result<Tensor> {
    match dtype {
        DataType::Int32 => {
            let v: Vec<i32> = values
                .iter()
                .map(|&x| {
                    i32::try_from(x)
                        .map_err(|_| Status::invalid_argument(format!("{x} does not fit in int32")))
                })
                .collect::<Result<_>>()?;
            Tensor::from_vec(dims, v)
        }
        DataType::Int64 => Tensor::from_slice(dims, values),
        other => Err(Status::invalid_argument(format!(
            "index outputs must be int32 or int64, not {other}"
        ))),
    }
}

/// Gradient helper for broadcasting binary ops: given the gradients `gx`,
/// `gy` of the broadcast output, sums each over the axes its input was
/// broadcast along and reshapes it to that input's shape (TensorFlow's
/// `BroadcastGradientArgs` + `Sum` + `Reshape` pattern). When both inputs'
/// shapes are fully known and equal, the gradients are returned as they are.
pub fn unbroadcast_grads(
    o: &mut dyn opforge_core::autodiff::Ops,
    x: opforge_core::autodiff::Sym,
    y: opforge_core::autodiff::Sym,
    gx: Option<opforge_core::autodiff::Sym>,
    gy: Option<opforge_core::autodiff::Sym>,
) -> Result<(
    Option<opforge_core::autodiff::Sym>,
    Option<opforge_core::autodiff::Sym>,
)> {
    use opforge_core::attrs::IntoAttrValue;
    use opforge_core::autodiff::{OpsExt, SymArg};
    let (sx, sy) = (o.shape(x), o.shape(y));
    if let (Some(a), Some(b)) = (&sx, &sy) {
        if a == b && a.iter().all(|&d| d >= 0) {
            return Ok((gx, gy));
        }
    }
    let shape_x = o.shape_of(x)?;
    let shape_y = o.shape_of(y)?;
    let r = o.call(
        "BroadcastGradientArgs",
        &[SymArg::One(shape_x), SymArg::One(shape_y)],
        &opforge_core::attrs::AttrMap::new(),
    )?;
    let reduce =
        |o: &mut dyn opforge_core::autodiff::Ops, g: Option<_>, axes, shape| -> Result<Option<_>> {
            let Some(g) = g else { return Ok(None) };
            let summed = o.op1(
                "Sum",
                &[g, axes],
                &[("keep_dims", IntoAttrValue::into_attr_value(false))],
            )?;
            Ok(Some(o.reshape(summed, shape)?))
        };
    let gx = reduce(o, gx, r[0], shape_x)?;
    let gy = reduce(o, gy, r[1], shape_y)?;
    Ok((gx, gy))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn real_kernel_types_are_the_numeric_ones_without_complex() {
        let want: Vec<DataType> = NUMERIC_KERNEL_TYPES
            .iter()
            .copied()
            .filter(|d| !d.is_complex())
            .collect();
        assert_eq!(REAL_KERNEL_TYPES, &want[..]);
    }

    fn naive(a: &[i64], av: &[i64], b: &[i64], bv: &[i64]) -> (Vec<i64>, Vec<i64>) {
        let out = broadcast_shapes(a, b).unwrap();
        let n: i64 = out.iter().product();
        let idx = |shape: &[i64], coord: &[i64]| -> usize {
            let off = coord.len() - shape.len();
            let mut i = 0;
            for (k, &d) in shape.iter().enumerate() {
                i = i * d + if d == 1 { 0 } else { coord[k + off] };
            }
            i as usize
        };
        let mut res = Vec::new();
        for lin in 0..n {
            let mut coord = vec![0; out.len()];
            let mut rem = lin;
            for k in (0..out.len()).rev() {
                coord[k] = rem % out[k];
                rem /= out[k];
            }
            res.push(av[idx(a, &coord)] * 1000 + bv[idx(b, &coord)]);
        }
        (out, res)
    }

    fn shape_pair() -> impl Strategy<Value = (Vec<i64>, Vec<i64>)> {
        prop::collection::vec((1i64..4, any::<bool>(), any::<bool>()), 0..5).prop_flat_map(|dims| {
            let a: Vec<i64> = dims
                .iter()
                .map(|&(d, ba, _)| if ba { 1 } else { d })
                .collect();
            let b: Vec<i64> = dims
                .iter()
                .map(|&(d, _, bb)| if bb { 1 } else { d })
                .collect();
            (0..=a.len(), 0..=b.len())
                .prop_map(move |(ca, cb)| (a[ca..].to_vec(), b[cb..].to_vec()))
        })
    }

    proptest! {
        #[test]
        fn broadcast_zip_matches_a_naive_loop((a, b) in shape_pair(), threads in 1usize..3) {
            let pool = ThreadPool::new(threads).unwrap();
            let na: i64 = a.iter().product();
            let nb: i64 = b.iter().product();
            let av: Vec<i64> = (0..na).collect();
            let bv: Vec<i64> = (0..nb).map(|v| v + 1).collect();
            let (out_shape, want) = naive(&a, &av, &b, &bv);
            let plan = BroadcastPlan::new(&a, &b).unwrap();
            prop_assert_eq!(&plan.out_shape, &out_shape);
            let mut got = vec![0i64; want.len()];
            broadcast_zip(&pool, &plan, &av, &bv, &mut got, 1, |x, y| x * 1000 + y);
            prop_assert_eq!(got, want);
        }
    }

    #[test]
    fn large_broadcasts_shard_correctly() {
        let pool = ThreadPool::new(2).unwrap();
        let (rows, cols) = (300, 257);
        let a: Vec<f32> = (0..rows * cols).map(|v| v as f32).collect();
        let b: Vec<f32> = (0..cols).map(|v| v as f32 * 0.5).collect();
        let plan = BroadcastPlan::new(&[rows as i64, cols as i64], &[cols as i64]).unwrap();
        let mut out = vec![0f32; rows * cols];
        broadcast_zip(&pool, &plan, &a, &b, &mut out, 1, |x, y| x + y);
        for r in [0, 150, 299] {
            for c in [0, 100, 256] {
                assert_eq!(out[r * cols + c], (r * cols + c) as f32 + c as f32 * 0.5);
            }
        }
        let x: Vec<f32> = (0..100_000).map(|v| v as f32).collect();
        let mut y = vec![0f32; x.len()];
        par_map(&pool, &x, &mut y, 1, |v| v * 2.0);
        assert_eq!(y[99_999], 199_998.0);
    }

    #[test]
    fn reduction_axes_and_indices() {
        assert_eq!(broadcast_reduction_axes(&[3], &[2, 3]), vec![0]);
        assert_eq!(broadcast_reduction_axes(&[2, 1], &[2, 3]), vec![1]);
        assert_eq!(broadcast_reduction_axes(&[], &[2, 3]), vec![0, 1]);
        assert_eq!(normalize_axis(-1, 3, "axis").unwrap(), 2);
        assert!(normalize_axis(3, 3, "axis")
            .unwrap_err()
            .message()
            .contains("must be in [-3, 3)"));
        assert_eq!(
            index_values(
                &index_tensor(DataType::Int32, &[2], &[4, 5]).unwrap(),
                "shape"
            )
            .unwrap(),
            vec![4, 5]
        );
        assert!(index_tensor(DataType::Int32, &[1], &[1 << 40]).is_err());
    }
}
