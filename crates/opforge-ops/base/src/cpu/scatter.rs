//! The scatter-add engine: rows of an update tensor summed into the rows of
//! an output by a row index per update (`ScatterNd`, `UnsortedSegmentSum`).
//!
//! The output is written by shards of whole output rows, in parallel: the
//! updates are first ordered by their output row (a stable sort, so
//! duplicates are still added in update order, as TensorFlow's sequential
//! CPU kernels add them, and results are deterministic), then every shard
//! fills its rows with zeros and adds the updates that land in them.

use opforge_core::device::ThreadPool;

use super::mover::for_each_chunk;

/// The row index of an update that is dropped (a negative segment id, an
/// ignored bad index).
pub const SKIP: usize = usize::MAX;

/// Overwrites `out`, viewed as rows of `slice` elements, with the sums of the
/// rows of `updates` (also rows of `slice` elements) that `rows` sends to
/// each output row: update row `i` is added into output row `rows[i]`
/// (dropped if it is [`SKIP`] or not an output row). A row no update reaches
/// becomes `zero`; `add(acc, x)` adds `x` into `acc`, in update order.
pub fn scatter_add_rows<T: Clone + Send + Sync>(
    pool: &ThreadPool,
    out: &mut [T],
    slice: usize,
    updates: &[T],
    rows: &[usize],
    zero: &T,
    add: impl Fn(&mut T, &T) + Sync,
) {
    if out.is_empty() || slice == 0 {
        return;
    }
    let out_rows = out.len() / slice;
    let in_rows = updates.len() / slice;
    let mut order: Vec<usize> = (0..rows.len().min(in_rows))
        .filter(|&i| rows[i] < out_rows)
        .collect();
    order.sort_by_key(|&i| rows[i]);
    let per_row = order.len().div_ceil(out_rows).max(1);
    let cost = slice.saturating_mul(per_row.saturating_add(1));
    for_each_chunk(pool, out, slice, cost, |start, chunk| {
        let first = start / slice;
        let end = first + chunk.len() / slice;
        chunk.fill(zero.clone());
        let lo = order.partition_point(|&i| rows[i] < first);
        for &i in order[lo..].iter().take_while(|&&i| rows[i] < end) {
            let r = rows[i] - first;
            let dst = &mut chunk[r * slice..(r + 1) * slice];
            let src = &updates[i * slice..(i + 1) * slice];
            for (d, s) in dst.iter_mut().zip(src) {
                add(d, s);
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_rows_in_update_order() {
        let pool = ThreadPool::inline();
        let mut out = vec![9i32; 6];
        let updates = [1, 2, 10, 20, 100, 200, 7, 7];
        scatter_add_rows(pool, &mut out, 2, &updates, &[2, 0, 2, SKIP], &0, |a, b| {
            *a += *b
        });
        assert_eq!(out, [10, 20, 0, 0, 101, 202]);
        // Strings concatenate in update order.
        let mut out = vec![Vec::new(); 2];
        let ups = [b"x".to_vec(), b"y".to_vec(), b"z".to_vec()];
        scatter_add_rows(pool, &mut out, 1, &ups, &[1, 0, 1], &Vec::new(), |a, b| {
            a.extend_from_slice(b)
        });
        assert_eq!(out, [b"y".to_vec(), b"xz".to_vec()]);
        // Out-of-range rows and short updates are ignored, never a panic.
        let mut out = vec![1u8; 3];
        scatter_add_rows(pool, &mut out, 1, &[5], &[7, 0], &0, |a, b| *a += *b);
        assert_eq!(out, [0, 0, 0]);
    }
}
