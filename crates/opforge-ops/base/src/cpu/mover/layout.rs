//! Layouts shared by the mover's bodies: strided views of a source
//! ([`StridedView`], copied by [`gather`] / the [`CopyView`] body) and the
//! joining of rows ([`concat_rows`] / the [`ConcatRows`] body), with the
//! multi-index helpers of the row loops.

use super::{for_each_rows, Carrier, MoveElements};
use crate::cpu::par::{par_chunks, PARALLEL_THRESHOLD};
use opforge_core::device::ThreadPool;

/// How many shards `n` elements of copying are split into.
fn copy_shards(pool: &ThreadPool, n: usize) -> usize {
    if n < PARALLEL_THRESHOLD {
        1
    } else {
        pool.num_shards(n, 8)
    }
}

/// Joins rows: output row `r` is row `r` of every input in turn, where input
/// `i` has rows of `row_lens[i]` elements (ConcatV2 and Pack).
pub fn concat_rows<T: Carrier>(
    pool: &ThreadPool,
    inputs: &[&[T]],
    row_lens: &[usize],
    out: &mut [T],
) {
    let out_row: usize = row_lens.iter().sum();
    if out_row == 0 || out.is_empty() {
        return;
    }
    let rows = out.len() / out_row;
    let shards = copy_shards(pool, out.len());
    if shards > 1 && rows < shards * 4 {
        // A few long rows (e.g. a concat along axis 0): copy the pieces, cut
        // to shard size, in parallel.
        let max_piece = out.len().div_ceil(shards);
        let mut pieces: Vec<(&mut [T], &[T])> = Vec::new();
        let mut rest = out;
        for r in 0..rows {
            for (inp, &len) in inputs.iter().zip(row_lens) {
                let (dst, tail) = std::mem::take(&mut rest).split_at_mut(len);
                rest = tail;
                let src = &inp[r * len..(r + 1) * len];
                pieces.extend(dst.chunks_mut(max_piece).zip(src.chunks(max_piece)));
            }
        }
        par_chunks(pool, &mut pieces, 1, &|_, p| {
            for (d, s) in p {
                d.clone_from_slice(s)
            }
        });
        return;
    }
    for_each_rows(pool, out, out_row, |first, chunk| {
        for (k, orow) in chunk.chunks_mut(out_row).enumerate() {
            let r = first + k;
            let mut off = 0;
            for (inp, &len) in inputs.iter().zip(row_lens) {
                orow[off..off + len].clone_from_slice(&inp[r * len..(r + 1) * len]);
                off += len;
            }
        }
    });
}

/// A strided view of a flat, row-major source: element `(i_0, ..., i_k)` of
/// the view is `src[base + Σ i_j * strides[j]]` (strides may be negative).
/// Dimensions of size 1 are dropped and dimensions that are contiguous with
/// the next are merged, so the innermost loop runs as long as it can.
#[derive(Clone, Debug, PartialEq)]
pub struct StridedView {
    /// The flat index of the view's first element.
    pub base: i64,
    /// The view's dimensions (size-1 dimensions dropped, contiguous ones merged).
    pub sizes: Vec<usize>,
    /// The source stride of each dimension.
    pub strides: Vec<i64>,
}

impl StridedView {
    /// The view of no elements.
    pub fn empty() -> StridedView {
        StridedView {
            base: 0,
            sizes: vec![0],
            strides: vec![1],
        }
    }

    /// The view of `(size, stride)` dimensions (outermost first) starting at `base`.
    /// A view with no elements is `sizes == [0]` (its other dims and
    /// strides, which may multiply past i64, are never used).
    pub fn new(base: i64, dims: impl IntoIterator<Item = (usize, i64)>) -> StridedView {
        let dims: Vec<(usize, i64)> = dims.into_iter().collect();
        if dims.iter().any(|&(n, _)| n == 0) {
            return StridedView::empty();
        }
        let mut sizes: Vec<usize> = Vec::new();
        let mut strides: Vec<i64> = Vec::new();
        for (n, s) in dims {
            if n == 1 {
                continue;
            }
            match (sizes.last_mut(), strides.last_mut()) {
                (Some(ln), Some(ls)) if *ls == n as i64 * s => {
                    *ln *= n;
                    *ls = s;
                }
                _ => {
                    sizes.push(n);
                    strides.push(s);
                }
            }
        }
        if sizes.is_empty() {
            sizes.push(1);
            strides.push(1);
        }
        StridedView {
            base,
            sizes,
            strides,
        }
    }

    /// The view of the row-major tensor of shape `dims` where dimension `i`
    /// starts at `begin[i]`, has `sizes[i]` elements and steps by `steps[i]`.
    ///
    /// A tensor or slice with no elements gives the empty view: the strides
    /// of `[0, 2^62, 4]` would overflow, and nothing is read.
    pub fn of_slice(dims: &[i64], begin: &[i64], sizes: &[i64], steps: &[i64]) -> StridedView {
        if dims.contains(&0) || sizes.contains(&0) {
            return StridedView::empty();
        }
        let mut in_strides = vec![1i64; dims.len()];
        for i in (0..dims.len().saturating_sub(1)).rev() {
            in_strides[i] = in_strides[i + 1] * dims[i + 1];
        }
        let base = (0..dims.len()).map(|i| begin[i] * in_strides[i]).sum();
        // A step matters only where two or more elements are taken, and is
        // then smaller than the dimension (a step of i64::MAX on a
        // one-element slice must not overflow).
        StridedView::new(
            base,
            (0..dims.len()).map(|i| {
                let step = if sizes[i] > 1 {
                    steps[i] * in_strides[i]
                } else {
                    0
                };
                (sizes[i] as usize, step)
            }),
        )
    }
}

/// Copies `out.len()` elements of `src` from `off` by steps of `step`
/// (contiguous runs with `clone_from_slice`).
pub fn copy_row<T: Clone>(src: &[T], off: i64, step: i64, out: &mut [T]) {
    let start = off as usize;
    let n = out.len();
    match step {
        1 => out.clone_from_slice(&src[start..start + n]),
        -1 => out
            .iter_mut()
            .zip(src[start + 1 - n..=start].iter().rev())
            .for_each(|(o, v)| o.clone_from(v)),
        _ => {
            let mut p = off;
            for o in out {
                o.clone_from(&src[p as usize]);
                p += step;
            }
        }
    }
}

/// Fills `out` (row-major, as many elements as `view` has) from the view of `src`.
pub fn gather<T: Carrier>(pool: &ThreadPool, src: &[T], view: &StridedView, out: &mut [T]) {
    let r = view.sizes.len();
    let len = view.sizes[r - 1];
    let step = view.strides[r - 1];
    let outer_sizes = &view.sizes[..r - 1];
    let outer_strides = &view.strides[..r - 1];
    for_each_rows(pool, out, len, |first, chunk| {
        let mut idx = vec![0usize; r - 1];
        let mut rem = first;
        for k in (0..r - 1).rev() {
            idx[k] = rem % outer_sizes[k];
            rem /= outer_sizes[k];
        }
        let mut off = view.base
            + idx
                .iter()
                .zip(outer_strides)
                .map(|(&i, &s)| i as i64 * s)
                .sum::<i64>();
        for orow in chunk.chunks_mut(len) {
            copy_row(src, off, step, orow);
            for k in (0..r - 1).rev() {
                idx[k] += 1;
                off += outer_strides[k];
                if idx[k] < outer_sizes[k] {
                    break;
                }
                off -= outer_sizes[k] as i64 * outer_strides[k];
                idx[k] = 0;
            }
        }
    });
}

/// The multi-index of row `row` of a row-major array with outer dims `dims`.
pub fn unravel(mut row: usize, dims: &[usize]) -> Vec<usize> {
    let mut idx = vec![0usize; dims.len()];
    for k in (0..dims.len()).rev() {
        idx[k] = row % dims[k];
        row /= dims[k];
    }
    idx
}

/// Advances a multi-index over `dims` by one (row-major).
pub fn advance(idx: &mut [usize], dims: &[usize]) {
    for k in (0..dims.len()).rev() {
        idx[k] += 1;
        if idx[k] < dims[k] {
            return;
        }
        idx[k] = 0;
    }
}

/// The [`MoveElements`] body of [`gather`]: the output is the view of
/// `srcs[0]`.
pub struct CopyView<'a> {
    /// The view of the source.
    pub view: &'a StridedView,
}

impl MoveElements for CopyView<'_> {
    fn run<T: Carrier>(&self, pool: &ThreadPool, srcs: &[&[T]], dst: &mut [T]) {
        gather(pool, srcs[0], self.view, dst);
    }
}

/// The [`MoveElements`] body of [`concat_rows`]: output row `r` is row `r`
/// of every source in turn, where source `i` has rows of `row_lens[i]`
/// elements.
pub struct ConcatRows<'a> {
    /// The row length of each source.
    pub row_lens: &'a [usize],
}

impl MoveElements for ConcatRows<'_> {
    fn run<T: Carrier>(&self, pool: &ThreadPool, srcs: &[&[T]], dst: &mut [T]) {
        concat_rows(pool, srcs, self.row_lens, dst);
    }
}
