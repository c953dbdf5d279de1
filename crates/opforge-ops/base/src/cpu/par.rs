//! The parallel-loop engine: every parallel loop of the standard
//! library's kernels runs through [`run_shards`], [`for_ranges`] or
//! [`for_each_index`], which reach the pool through its non-generic
//! [`ThreadPool::shard_dyn`]. The pool's machinery is therefore compiled
//! once; a kernel's own code (per op and dtype) is only its loop body, a
//! `dyn` closure the engine calls once per shard.

use opforge_core::device::ThreadPool;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicUsize, Ordering};

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
