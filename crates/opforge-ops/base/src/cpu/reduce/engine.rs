//! The reduction engine: collapses the input shape into alternating runs
//! of kept and reduced dimensions and reduces the innermost reduced run
//! first, each step one of three cache-friendly patterns (a full
//! reduction, rows, or columns), sharded over the pool.

use super::reducers::Reducer;
use crate::cpu::par::{par_chunks, par_collect};
use opforge_core::device::ThreadPool;
use opforge_core::{ensure, Result, Tensor};

// ---------------------------------------------------------------------------
// The reduction engine
// ---------------------------------------------------------------------------

/// Independent accumulators per sequential fold (LLVM keeps them in vector
/// registers).
pub const LANES: usize = 16;
/// Elements folded by the lanes before pairwise combination takes over.
pub const PAIRWISE_BLOCK: usize = 1024;
/// Rows accumulated sequentially into a column block before pairwise
/// combination of blocks.
pub const ROW_BLOCK: usize = 32;
/// The widest column tile accumulated at once. Wide tiles keep every row
/// segment long enough for the hardware prefetcher (narrow tiles of a wide
/// matrix read one short segment per page and run several times slower).
pub const COL_TILE: usize = 8192;
/// The narrowest column tile handed to a thread.
pub const MIN_COL_TILE: usize = 1024;
/// Work (in elements read) below which a reduction runs on one thread.
pub const PARALLEL_MIN: usize = 1 << 15;
/// The smallest shard of a full reduction.
pub const MIN_SHARD: usize = 1 << 15;

/// A fold: identity, load and combine.
struct Fold<A, L, C> {
    id: A,
    load: L,
    comb: C,
}

/// Folds a short slice with `LANES` independent accumulators.
#[inline(always)]
fn fold_lanes<S, A, L, C>(f: &Fold<A, L, C>, x: &[S]) -> A
where
    S: Copy,
    A: Copy,
    L: Fn(S) -> A,
    C: Fn(A, A) -> A,
{
    let mut acc = [f.id; LANES];
    let chunks = x.chunks_exact(LANES);
    let rem = chunks.remainder();
    for c in chunks {
        for (a, &v) in acc.iter_mut().zip(c) {
            *a = (f.comb)(*a, (f.load)(v));
        }
    }
    let mut tail = f.id;
    for &v in rem {
        tail = (f.comb)(tail, (f.load)(v));
    }
    let mut w = LANES;
    while w > 1 {
        w /= 2;
        for i in 0..w {
            acc[i] = (f.comb)(acc[i], acc[i + w]);
        }
    }
    (f.comb)(acc[0], tail)
}

/// Folds a slice: lanes over blocks, pairwise over blocks.
fn fold_slice<S, A, L, C>(f: &Fold<A, L, C>, x: &[S]) -> A
where
    S: Copy,
    A: Copy,
    L: Fn(S) -> A,
    C: Fn(A, A) -> A,
{
    if x.len() <= PAIRWISE_BLOCK {
        return fold_lanes(f, x);
    }
    let mid = (x.len() / 2) / LANES * LANES;
    let (l, r) = x.split_at(mid);
    (f.comb)(fold_slice(f, l), fold_slice(f, r))
}

/// Combines partial results pairwise.
fn combine_tree<A: Copy>(parts: &[A], id: A, comb: &impl Fn(A, A) -> A) -> A {
    match parts {
        [] => id,
        [one] => *one,
        _ => {
            let (l, r) = parts.split_at(parts.len() / 2);
            comb(combine_tree(l, id, comb), combine_tree(r, id, comb))
        }
    }
}

/// Folds a long slice in parallel: per-shard partials, then combined.
fn par_fold_slice<S, A, L, C>(pool: &ThreadPool, f: &Fold<A, L, C>, x: &[S]) -> A
where
    S: Copy + Sync,
    A: Copy + Send + Sync,
    L: Fn(S) -> A + Sync,
    C: Fn(A, A) -> A + Sync,
{
    let threads = pool.num_threads();
    let shards = (x.len() / MIN_SHARD).min(threads * 4);
    if threads <= 1 || shards <= 1 {
        return fold_slice(f, x);
    }
    let chunk = x.len().div_ceil(shards).next_multiple_of(PAIRWISE_BLOCK);
    let parts = par_collect(pool, x.len().div_ceil(chunk), f.id, &|i| {
        fold_slice(f, &x[i * chunk..((i + 1) * chunk).min(x.len())])
    });
    combine_tree(&parts, f.id, &f.comb)
}

/// `acc[j]` = the fold over rows `rows` of `src[r * stride + c0 + j]`:
/// blocks of `ROW_BLOCK` rows accumulated sequentially (vectorized across
/// columns), blocks combined pairwise (a binary counter of partials).
fn fold_columns<S, A, L, C>(
    f: &Fold<A, L, C>,
    src: &[S],
    stride: usize,
    c0: usize,
    rows: std::ops::Range<usize>,
    acc: &mut [A],
) where
    S: Copy,
    A: Copy,
    L: Fn(S) -> A,
    C: Fn(A, A) -> A,
{
    let w = acc.len();
    let block = |r0: usize, r1: usize, out: &mut [A]| {
        out.fill(f.id);
        for r in r0..r1 {
            let row = &src[r * stride + c0..r * stride + c0 + w];
            for (o, &v) in out.iter_mut().zip(row) {
                *o = (f.comb)(*o, (f.load)(v));
            }
        }
    };
    if rows.len() <= ROW_BLOCK {
        block(rows.start, rows.end, acc);
        return;
    }
    let mut blk = vec![f.id; w];
    let mut levels: Vec<Option<Vec<A>>> = Vec::new();
    let mut spare: Vec<Vec<A>> = Vec::new();
    let mut r = rows.start;
    while r < rows.end {
        let e = (r + ROW_BLOCK).min(rows.end);
        block(r, e, &mut blk);
        let mut i = 0;
        loop {
            if i == levels.len() {
                levels.push(None);
            }
            match levels[i].take() {
                None => {
                    let fresh = spare.pop().unwrap_or_else(|| vec![f.id; w]);
                    levels[i] = Some(std::mem::replace(&mut blk, fresh));
                    break;
                }
                Some(l) => {
                    for (b, &x) in blk.iter_mut().zip(&l) {
                        *b = (f.comb)(x, *b);
                    }
                    spare.push(l);
                    i += 1;
                }
            }
        }
        r = e;
    }
    acc.fill(f.id);
    for l in levels.iter().rev().flatten() {
        for (a, &x) in acc.iter_mut().zip(l) {
            *a = (f.comb)(*a, x);
        }
    }
}

/// Reduces `src`, viewed as `[outer, red, inner]`, over its middle axis into
/// `dst` (`[outer, inner]`), writing `store(fold)`.
#[allow(clippy::too_many_arguments)]
fn reduce3<S, A, O, L, C, F>(
    pool: &ThreadPool,
    f: &Fold<A, L, C>,
    src: &[S],
    outer: usize,
    red: usize,
    inner: usize,
    store: &F,
    dst: &mut [O],
) where
    S: Copy + Sync,
    A: Copy + Send + Sync,
    O: Send,
    L: Fn(S) -> A + Sync,
    C: Fn(A, A) -> A + Sync,
    F: Fn(A) -> O + Sync,
{
    debug_assert_eq!(src.len(), outer * red * inner);
    debug_assert_eq!(dst.len(), outer * inner);
    if dst.is_empty() {
        return;
    }
    let threads = pool.num_threads();
    let parallel = threads > 1 && src.len() >= PARALLEL_MIN;
    if inner == 1 {
        // Contiguous rows.
        if !parallel {
            for (o, d) in dst.iter_mut().enumerate() {
                *d = store(fold_slice(f, &src[o * red..(o + 1) * red]));
            }
        } else if outer < threads {
            for (o, d) in dst.iter_mut().enumerate() {
                *d = store(par_fold_slice(pool, f, &src[o * red..(o + 1) * red]));
            }
        } else {
            let rows_per = outer
                .div_ceil(threads * 4)
                .max(PARALLEL_MIN.div_ceil(red.max(1)));
            par_chunks(pool, dst, rows_per, &|ci, d| {
                for (k, o) in d.iter_mut().enumerate() {
                    let row = ci * rows_per + k;
                    *o = store(fold_slice(f, &src[row * red..(row + 1) * red]));
                }
            });
        }
        return;
    }
    // Accumulate rows into columns, per outer index and column tile.
    let tile_job = |o: usize, c0: usize, d: &mut [O]| {
        let mut acc = vec![f.id; d.len()];
        let plane = &src[o * red * inner..(o + 1) * red * inner];
        fold_columns(f, plane, inner, c0, 0..red, &mut acc);
        for (d, a) in d.iter_mut().zip(acc) {
            *d = store(a);
        }
    };
    if !parallel {
        for (o, d) in dst.chunks_mut(inner).enumerate() {
            for (t, d) in d.chunks_mut(COL_TILE).enumerate() {
                tile_job(o, t * COL_TILE, d);
            }
        }
        return;
    }
    if outer >= threads {
        par_chunks(pool, dst, inner, &|o, d| {
            for (t, d) in d.chunks_mut(COL_TILE).enumerate() {
                tile_job(o, t * COL_TILE, d);
            }
        });
        return;
    }
    if red < threads * 2 * ROW_BLOCK {
        // Few rows: split the columns.
        let tile = COL_TILE.min(MIN_COL_TILE.max(inner.div_ceil(threads.div_ceil(outer))));
        for (o, d) in dst.chunks_mut(inner).enumerate() {
            par_chunks(pool, d, tile, &|t, d| tile_job(o, t * tile, d));
        }
        return;
    }
    // Few outputs over many rows: shard the rows (each shard streams through
    // contiguous memory, full width), then combine the partials.
    let shards = threads;
    let rows_per = red.div_ceil(shards);
    let parts = par_collect(pool, shards, Vec::new(), &|s| {
        let rows = s * rows_per..((s + 1) * rows_per).min(red);
        let mut part = vec![f.id; outer * inner];
        for (o, p) in part.chunks_mut(inner).enumerate() {
            let plane = &src[o * red * inner..(o + 1) * red * inner];
            fold_columns(f, plane, inner, 0, rows.clone(), p);
        }
        part
    });
    for (j, d) in dst.iter_mut().enumerate() {
        let mut a = f.id;
        for p in &parts {
            a = (f.comb)(a, p[j]);
        }
        *d = store(a);
    }
}

/// Collapses `dims` into alternating runs of kept and reduced dimensions
/// (`(size, reduced)`), with size-1 dimensions dropped.
fn collapse(dims: &[usize], reduced: &[bool]) -> Vec<(usize, bool)> {
    let mut runs: Vec<(usize, bool)> = Vec::new();
    for (&d, &r) in dims.iter().zip(reduced) {
        if d == 1 {
            continue;
        }
        match runs.last_mut() {
            Some(last) if last.1 == r => last.0 *= d,
            _ => runs.push((d, r)),
        }
    }
    runs
}

fn split_at_run(runs: &[(usize, bool)], i: usize) -> (usize, usize, usize) {
    let outer = runs[..i].iter().map(|r| r.0).product();
    let inner = runs[i + 1..].iter().map(|r| r.0).product();
    (outer, runs[i].0, inner)
}

/// Reduces `src` (of shape `dims`) over the dimensions flagged in
/// `reduced` into `out` (the kept dimensions, in order), for any reducer.
/// Parallel over `pool` for large inputs. `out` must have the product of
/// the kept dimensions' sizes as its length.
pub fn reduce_into<R: Reducer>(
    pool: &ThreadPool,
    r: R,
    src: &[R::In],
    dims: &[usize],
    reduced: &[bool],
    out: &mut [R::In],
) {
    let runs = collapse(dims, reduced);
    let count: usize = dims
        .iter()
        .zip(reduced)
        .filter(|(_, &r)| r)
        .map(|(&d, _)| d)
        .product();
    if out.is_empty() {
        return;
    }
    if src.is_empty() {
        out.fill(r.finish(r.identity(), count));
        return;
    }
    let reduced_runs = runs.iter().filter(|x| x.1).count();
    if reduced_runs == 0 {
        for (o, &x) in out.iter_mut().zip(src) {
            *o = r.finish(r.load(x), 1);
        }
        return;
    }
    let f_in = Fold {
        id: r.identity(),
        load: move |x: R::In| r.load(x),
        comb: move |a, b| r.combine(a, b),
    };
    let finish = move |a: R::Acc| r.finish(a, count);
    let last = |runs: &[(usize, bool)]| runs.iter().rposition(|x| x.1).unwrap_or(0);
    if reduced_runs == 1 {
        let (outer, red, inner) = split_at_run(&runs, last(&runs));
        reduce3(pool, &f_in, src, outer, red, inner, &finish, out);
        return;
    }
    // Several reduced runs: reduce the innermost one first, into accumulators.
    let i = last(&runs);
    let (outer, red, inner) = split_at_run(&runs, i);
    let mut buf = vec![r.identity(); outer * inner];
    reduce3(pool, &f_in, src, outer, red, inner, &|a| a, &mut buf);
    let f_acc = Fold {
        id: r.identity(),
        load: |a: R::Acc| a,
        comb: move |a, b| r.combine(a, b),
    };
    let mut runs = runs;
    runs.remove(i);
    let mut runs = collapse(
        &runs.iter().map(|x| x.0).collect::<Vec<_>>(),
        &runs.iter().map(|x| x.1).collect::<Vec<_>>(),
    );
    loop {
        let i = last(&runs);
        let (outer, red, inner) = split_at_run(&runs, i);
        if runs.iter().filter(|x| x.1).count() == 1 {
            reduce3(pool, &f_acc, &buf, outer, red, inner, &finish, out);
            return;
        }
        let mut next = vec![r.identity(); outer * inner];
        reduce3(pool, &f_acc, &buf, outer, red, inner, &|a| a, &mut next);
        buf = next;
        runs.remove(i);
        runs = collapse(
            &runs.iter().map(|x| x.0).collect::<Vec<_>>(),
            &runs.iter().map(|x| x.1).collect::<Vec<_>>(),
        );
    }
}

/// Which dimensions a reduction reduces, and the output shape.
#[derive(Clone, Debug, PartialEq)]
pub struct ReducePlan {
    /// `reduced[i]`: dimension `i` is reduced.
    pub reduced: Vec<bool>,
    /// The output shape (reduced dimensions dropped, or kept as 1).
    pub out_dims: Vec<i64>,
}

impl ReducePlan {
    /// The plan of reducing a tensor of shape `dims` over `axes` (each in
    /// `[-rank, rank)`, no duplicates, as TensorFlow's kernel requires).
    pub fn new(dims: &[i64], axes: &[i64], keep_dims: bool) -> Result<ReducePlan> {
        let rank = dims.len() as i64;
        let mut reduced = vec![false; dims.len()];
        for &a in axes {
            ensure!(
                a >= -rank && a < rank,
                InvalidArgument,
                "Invalid reduction dimension {a} for input with {rank} dimensions."
            );
            let i = if a < 0 { a + rank } else { a } as usize;
            ensure!(
                !reduced[i],
                InvalidArgument,
                "Invalid reduction arguments: Axes contains duplicate dimension: {i}"
            );
            reduced[i] = true;
        }
        let out_dims = dims
            .iter()
            .zip(&reduced)
            .filter_map(|(&d, &r)| match (r, keep_dims) {
                (false, _) => Some(d),
                (true, true) => Some(1),
                (true, false) => None,
            })
            .collect();
        Ok(ReducePlan { reduced, out_dims })
    }

    /// Whether nothing is actually reduced (every reduced dimension has size 1).
    pub fn is_noop(&self, dims: &[i64]) -> bool {
        dims.iter().zip(&self.reduced).all(|(&d, &r)| !r || d == 1)
    }
}

/// Dimensions as `usize`s (the dims of a tensor, never negative).
pub fn usize_dims(dims: &[i64]) -> Vec<usize> {
    dims.iter().map(|&d| d as usize).collect()
}

/// Reduces `input` by `r` as `plan` says into `out` (allocated with the
/// plan's output shape).
pub fn run<R: Reducer>(
    pool: &ThreadPool,
    r: R,
    input: &Tensor,
    plan: &ReducePlan,
    out: &mut Tensor,
) -> Result<()> {
    let src = input.flat::<R::In>()?;
    let dst = out.flat_mut::<R::In>()?;
    reduce_into(pool, r, src, &usize_dims(input.dims()), &plan.reduced, dst);
    Ok(())
}
