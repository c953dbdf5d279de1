//! NumPy/TensorFlow broadcasting and the elementwise kernel bodies built
//! on it: [`unary_same`], [`unary_map`], [`binary_same`] (in place in an
//! input's buffer when it may) and [`binary_map`].

use super::elem::Num;
use super::par::{chunks_in_shards, elementwise_shards, par_map, par_map_inplace, par_zip};
use crate::args::fmt_shape;
use opforge_core::device::ThreadPool;
use opforge_core::kernel::OpKernelContext;
use opforge_core::{Element, Result, Status, TensorShape};

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
        par_map_inplace(pool, ctx.output_mut(0)?.flat_bits_mut::<T>()?, cost, f);
    } else {
        let (ins, out) = ctx.inputs_and_output(0)?;
        par_map(
            pool,
            ins[0].flat_bits::<T>()?,
            out.flat_bits_mut::<T>()?,
            cost,
            f,
        );
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
    par_map(
        pool,
        ins[0].flat_bits::<T>()?,
        out.flat_bits_mut::<U>()?,
        cost,
        f,
    );
    Ok(())
}

/// The broadcast shape of two shapes under NumPy rules, or TensorFlow's
/// `Incompatible shapes: [2,3] vs. [4]` error.
///
/// ```
/// use opforge_ops_base::cpu::broadcast::broadcast_shapes;
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
            // Saturating here and in the strides: only an empty output (a
            // zero dim) can have dims whose product passes usize::MAX, and
            // then no row is ever visited (found by scripts/hostile-cli:
            // Sub of [4, 1] and [0, 3, 5, 0, 2, 3, 4, 2^63 - 1]).
            if pattern.last() == Some(&p) {
                let last = dims.last_mut().expect("a dim per pattern");
                *last = last.saturating_mul(d);
            } else {
                dims.push(d);
                pattern.push(p);
            }
        }
        let strides = |broadcast: &dyn Fn(&(bool, bool)) -> bool| -> Vec<usize> {
            let mut s = vec![0; dims.len()];
            let mut acc: usize = 1;
            for i in (0..dims.len()).rev() {
                if !broadcast(&pattern[i]) {
                    s[i] = acc;
                    acc = acc.saturating_mul(dims[i]);
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
    // An innermost dim broadcast in both inputs has size 1 in the output
    // and is collapsed away, so at most one stride is 0.
    match (sa, sb) {
        (_, 0) => {
            let y = b[0];
            out.iter_mut().zip(a).for_each(|(o, &x)| *o = f(x, y))
        }
        (0, _) => {
            let x = a[0];
            out.iter_mut().zip(b).for_each(|(o, &y)| *o = f(x, y))
        }
        _ => out
            .iter_mut()
            .zip(a)
            .zip(b)
            .for_each(|((o, &x), &y)| *o = f(x, y)),
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
        let r = f(a.flat_bits::<T>()?[0], b.flat_bits::<T>()?[0]);
        ctx.forward_input_or_allocate_output_like(&[0, 1], 0, 0)?;
        ctx.output_mut(0)?.flat_bits_mut::<T>()?[0] = r;
        return Ok(());
    }
    let (plan, forwarded) = same_output(ctx)?;
    let pool = ctx.thread_pool();
    match forwarded {
        Some(forwarded) => {
            // The output holds the forwarded input's values; combine in place.
            let (ins, out) = ctx.inputs_and_output(0)?;
            let other = ins[1 - forwarded].flat_bits::<T>()?;
            let out = out.flat_bits_mut::<T>()?;
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
                ins[0].flat_bits::<T>()?,
                ins[1].flat_bits::<T>()?,
                out.flat_bits_mut::<T>()?,
                cost,
                f,
            );
        }
    }
    Ok(())
}

/// [`binary_same`] for an output the runtime requests with `Add`
/// (`OutputRequest::Add`, MXNet's `kAddTo`): output 0 is already set,
/// holding the accumulator, and `f(x, y)` (with broadcasting) is added
/// into it. An accumulator of another shape than the result is
/// `InvalidArgument`. With broadcasting the result is computed in a
/// scratch buffer first.
pub fn binary_same_add<T: Num>(
    ctx: &mut OpKernelContext<'_>,
    cost: usize,
    f: impl Fn(T, T) -> T + Sync,
) -> Result<()> {
    let plan = broadcast_plan(ctx)?;
    let pool = ctx.thread_pool();
    let op = ctx.op_def().name.clone();
    let (ins, out) = ctx.inputs_and_output(0)?;
    let want = match &plan {
        Some((_, shape)) => shape,
        None => ins[0].shape(),
    };
    if out.shape() != want {
        return Err(Status::invalid_argument(format!(
            "{op}: output 0 is requested with Add into an accumulator of shape {}, but the \
             result has shape {want}",
            out.shape()
        )));
    }
    let (a, b) = (ins[0].flat_bits::<T>()?, ins[1].flat_bits::<T>()?);
    let out = out.flat_bits_mut::<T>()?;
    let shards = elementwise_shards(pool, out.len(), cost + 1);
    match plan {
        None => chunks_in_shards(pool, out, 1, shards, &|off, o| {
            let (a, b) = (&a[off..off + o.len()], &b[off..off + o.len()]);
            for ((o, &x), &y) in o.iter_mut().zip(a).zip(b) {
                *o = o.add(f(x, y));
            }
        }),
        Some((plan, _)) => {
            let mut tmp = vec![T::default(); out.len()];
            broadcast_zip(pool, &plan, a, b, &mut tmp, cost, f);
            chunks_in_shards(pool, out, 1, shards, &|off, o| {
                let t = &tmp[off..off + o.len()];
                for (o, &t) in o.iter_mut().zip(t) {
                    *o = o.add(t);
                }
            });
        }
    }
    Ok(())
}

/// The non-generic part of [`binary_same`] (compiled once, not per op and
/// dtype): the broadcast plan (`None` for inputs of one shape) and output 0,
/// an input forwarded (its index) or a new tensor.
#[inline(never)]
fn same_output(ctx: &mut OpKernelContext<'_>) -> Result<(Option<BroadcastPlan>, Option<usize>)> {
    Ok(match broadcast_plan(ctx)? {
        None => (
            None,
            ctx.forward_input_or_allocate_output_like(&[0, 1], 0, 0)?,
        ),
        Some((plan, shape)) => {
            let f = ctx.forward_input_or_allocate_output(&[0, 1], 0, &shape)?;
            (Some(plan), f)
        }
    })
}

/// The non-generic part of [`binary_map`]: the broadcast plan (`None` for
/// inputs of one shape) and output 0 allocated with the output shape.
#[inline(never)]
fn map_output(ctx: &mut OpKernelContext<'_>) -> Result<Option<BroadcastPlan>> {
    Ok(match broadcast_plan(ctx)? {
        None => {
            let shape = ctx.input(0).shape().clone();
            ctx.allocate_output(0, shape)?;
            None
        }
        Some((plan, shape)) => {
            ctx.allocate_output(0, shape)?;
            Some(plan)
        }
    })
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
    let plan = map_output(ctx)?;
    let pool = ctx.thread_pool();
    let (ins, out) = ctx.inputs_and_output(0)?;
    zip_planned(
        pool,
        plan.as_ref(),
        ins[0].flat_bits::<T>()?,
        ins[1].flat_bits::<T>()?,
        out.flat_bits_mut::<U>()?,
        cost,
        f,
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::{index_tensor, index_values, normalize_axis};
    use crate::cpu::par::par_map;
    use crate::types::{NUMERIC_KERNEL_TYPES, REAL_KERNEL_TYPES};
    use opforge_core::DataType;
    use proptest::prelude::*;

    /// Found by scripts/hostile-cli: an empty broadcast whose other dims
    /// multiply past usize::MAX.
    #[test]
    fn a_plan_for_an_empty_output_with_huge_dims() {
        let plan = BroadcastPlan::new(&[4, 1], &[0, 3, 5, 0, 2, 3, 4, i64::MAX]).unwrap();
        assert_eq!(plan.out_shape, [0, 3, 5, 0, 2, 3, 4, i64::MAX]);
        assert!(plan.dims.contains(&0));
    }

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
