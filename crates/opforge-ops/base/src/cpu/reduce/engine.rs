//! The reduction engine: runs a [`Schedule`] (computed once, without the
//! element type: see [`super::plan`]) with a [`Reducer`]. The per-dtype
//! code is only the folds, the steps' innermost loops: a contiguous row
//! folded by independent lanes and pairwise blocks ([`fold_slice`]), a
//! block of rows accumulated into columns ([`fold_columns`]), and how each
//! pattern hands them to the pool. Accumulators reach the output through
//! a `dyn` store called once per tile or batch of rows: the reducer's
//! finish on the last step, a copy on the steps before.

use super::plan::{
    reduced_count, usize_dims, Pattern, ReducePlan, Schedule, Step, COL_TILE, LANES,
    PAIRWISE_BLOCK, ROW_BLOCK,
};
use super::reducers::Reducer;
use crate::cpu::par::{par_chunks, par_collect};
use opforge_core::device::ThreadPool;
use opforge_core::{Result, Tensor};

/// A fold: identity, load and combine.
struct Fold<A, L, C> {
    id: A,
    load: L,
    comb: C,
}

/// Writes a slice of accumulators to the outputs.
type Store<'a, A, O> = &'a (dyn Fn(&[A], &mut [O]) + Sync);

/// Outputs of contiguous rows folded before each call of the store.
const ROW_BATCH: usize = 64;

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

/// `acc[j]` = the fold over rows `rows` of `src[r * stride + c0 + j]`:
/// blocks of `ROW_BLOCK` rows accumulated sequentially (vectorized across
/// columns), blocks combined pairwise by a binary counter: level `k` holds
/// the partial of `2^k` blocks; a new block is accumulated into the first
/// free level `i` and combined with the partials of levels `0..i` (older
/// first), which it replaces.
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
    if w == 0 {
        return;
    }
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
    let levels = counter_levels(rows.len());
    let mut slots = vec![f.id; levels * w];
    // Bit `k`: level `k` holds a partial.
    let mut full = 0u64;
    for r in (rows.start..rows.end).step_by(ROW_BLOCK) {
        let i = full.trailing_ones() as usize;
        let (older, rest) = slots.split_at_mut(i * w);
        let blk = &mut rest[..w];
        block(r, (r + ROW_BLOCK).min(rows.end), blk);
        for level in older.chunks_exact(w) {
            for (b, &x) in blk.iter_mut().zip(level) {
                *b = (f.comb)(x, *b);
            }
        }
        full = (full >> i << i) | (1 << i);
    }
    acc.fill(f.id);
    for (k, level) in slots.chunks_exact(w).enumerate().rev() {
        if full >> k & 1 == 1 {
            for (a, &x) in acc.iter_mut().zip(level) {
                *a = (f.comb)(*a, x);
            }
        }
    }
}

/// The levels of the binary counter of [`fold_columns`] over `rows` rows.
fn counter_levels(rows: usize) -> usize {
    let blocks = rows.div_ceil(ROW_BLOCK);
    (usize::BITS - blocks.leading_zeros()) as usize
}

/// Rows `first..` of `src` (rows of `red`) folded into `dst`, one output
/// per row, stored in batches.
fn fold_rows<S, A, O, L, C>(
    f: &Fold<A, L, C>,
    src: &[S],
    red: usize,
    first: usize,
    store: Store<'_, A, O>,
    dst: &mut [O],
) where
    S: Copy,
    A: Copy,
    L: Fn(S) -> A,
    C: Fn(A, A) -> A,
{
    let mut acc = [f.id; ROW_BATCH];
    for (k, d) in dst.chunks_mut(ROW_BATCH).enumerate() {
        let rows = first + k * ROW_BATCH;
        for (j, a) in acc[..d.len()].iter_mut().enumerate() {
            let r = rows + j;
            *a = fold_slice(f, &src[r * red..(r + 1) * red]);
        }
        store(&acc[..d.len()], d);
    }
}

/// One step: `src` (`[outer, red, inner]`) reduced over its middle axis
/// into `dst` (`[outer, inner]`) as the step's pattern says.
fn run_step<S, A, O, L, C>(
    pool: &ThreadPool,
    f: &Fold<A, L, C>,
    src: &[S],
    step: &Step,
    store: Store<'_, A, O>,
    dst: &mut [O],
) where
    S: Copy + Sync,
    A: Copy + Send + Sync,
    O: Send,
    L: Fn(S) -> A + Sync,
    C: Fn(A, A) -> A + Sync,
{
    let Step {
        red, inner, outer, ..
    } = *step;
    debug_assert_eq!(src.len(), outer * red * inner);
    debug_assert_eq!(dst.len(), outer * inner);
    // Column tile `[c0, c0 + d.len())` of plane `o`, over all rows.
    let tile = |o: usize, c0: usize, d: &mut [O]| {
        let mut acc = vec![f.id; d.len()];
        let plane = &src[o * red * inner..(o + 1) * red * inner];
        fold_columns(f, plane, inner, c0, 0..red, &mut acc);
        store(&acc, d);
    };
    let plane_tiles = |o: usize, d: &mut [O]| {
        for (t, d) in d.chunks_mut(COL_TILE).enumerate() {
            tile(o, t * COL_TILE, d);
        }
    };
    match step.pattern {
        Pattern::Rows => fold_rows(f, src, red, 0, store, dst),
        Pattern::ParRows { rows_per } => par_chunks(pool, dst, rows_per, &|c, d| {
            fold_rows(f, src, red, c * rows_per, store, d)
        }),
        Pattern::SplitRows { chunk, parts } => {
            for (o, d) in dst.chunks_mut(1).enumerate() {
                let row = &src[o * red..(o + 1) * red];
                let partials = par_collect(pool, parts, f.id, &|i| {
                    fold_slice(f, &row[i * chunk..((i + 1) * chunk).min(red)])
                });
                store(&[combine_tree(&partials, f.id, &f.comb)], d);
            }
        }
        Pattern::Tiles => {
            for (o, d) in dst.chunks_mut(inner).enumerate() {
                plane_tiles(o, d);
            }
        }
        Pattern::ParPlanes => par_chunks(pool, dst, inner, &plane_tiles),
        Pattern::ParTiles { tile: width } => {
            for (o, d) in dst.chunks_mut(inner).enumerate() {
                par_chunks(pool, d, width, &|t, d| tile(o, t * width, d));
            }
        }
        Pattern::RowShards { shards, rows_per } => {
            let parts = par_collect(pool, shards, Vec::new(), &|s| {
                let rows = s * rows_per..((s + 1) * rows_per).min(red);
                let mut part = vec![f.id; outer * inner];
                for (o, p) in part.chunks_mut(inner).enumerate() {
                    let plane = &src[o * red * inner..(o + 1) * red * inner];
                    fold_columns(f, plane, inner, 0, rows.clone(), p);
                }
                part
            });
            let mut acc = vec![f.id; dst.len()];
            for (j, a) in acc.iter_mut().enumerate() {
                for p in &parts {
                    *a = (f.comb)(*a, p[j]);
                }
            }
            store(&acc, dst);
        }
    }
}

/// The store of every step but the last: the accumulators themselves.
fn keep<A: Copy>(acc: &[A], dst: &mut [A]) {
    dst.copy_from_slice(acc);
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
    let schedule = Schedule::new(dims, reduced, pool.num_threads());
    if schedule == Schedule::Nothing {
        // An empty output: the reduced dims (after the input's zero) may
        // multiply past 2^64, so they are not even counted.
        return;
    }
    let count = reduced_count(dims, reduced);
    let finish = move |acc: &[R::Acc], dst: &mut [R::In]| {
        for (d, &a) in dst.iter_mut().zip(acc) {
            *d = r.finish(a, count);
        }
    };
    let steps = match &schedule {
        Schedule::Nothing => return,
        Schedule::Identity => return out.fill(r.finish(r.identity(), count)),
        Schedule::Map => {
            for (o, &x) in out.iter_mut().zip(src) {
                *o = r.finish(r.load(x), 1);
            }
            return;
        }
        Schedule::Steps(steps) => steps,
    };
    let f_in = Fold {
        id: r.identity(),
        load: move |x: R::In| r.load(x),
        comb: move |a, b| r.combine(a, b),
    };
    let Some((first, rest)) = steps.split_first() else {
        return;
    };
    if rest.is_empty() {
        return run_step(pool, &f_in, src, first, &finish, out);
    }
    let mut buf = vec![r.identity(); first.outputs()];
    run_step(pool, &f_in, src, first, &keep, &mut buf);
    let f_acc = Fold {
        id: r.identity(),
        load: |a: R::Acc| a,
        comb: move |a, b| r.combine(a, b),
    };
    for step in rest {
        let mut next = vec![r.identity(); step.outputs()];
        run_step(pool, &f_acc, &buf, step, &keep, &mut next);
        buf = next;
    }
    // The last of several steps keeps its accumulators too, finished in one
    // pass over the (reduced) output: the folds over accumulators compile
    // with one store, not two.
    finish(&buf, out);
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
    // `flat_bits`: a sign-agnostic reducer reads unsigned integers as the
    // signed ones of their size (`sign_agnostic!`).
    let src = input.flat_bits::<R::In>()?;
    let dst = out.flat_bits_mut::<R::In>()?;
    reduce_into(pool, r, src, &usize_dims(input.dims()), &plan.reduced, dst);
    Ok(())
}
