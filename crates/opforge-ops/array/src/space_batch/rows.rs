//! The mover body the padding space/batch ops share: every output row is
//! one row of the source or a row of zeros (padding).

use opforge_core::device::ThreadPool;
use opforge_ops_base::cpu::mover::{for_each_rows, Carrier, MoveElements};

/// A [`MoveElements`] body: output row `r` (of `row` elements) is the `row`
/// elements of `srcs[0]` from `source(r)` on, or the carrier's default
/// (zero, `false`, the empty string) where `source(r)` is `None`.
///
/// `source` must return offsets with `offset + row <= srcs[0].len()` (the
/// callers derive them from the source's own shape).
pub(crate) struct RowGather<F> {
    row: usize,
    source: F,
}

impl<F: Fn(usize) -> Option<usize> + Sync> RowGather<F> {
    /// The body of rows of `row` elements taken from `source(r)`.
    pub(crate) fn new(row: usize, source: F) -> RowGather<F> {
        RowGather { row, source }
    }
}

impl<F: Fn(usize) -> Option<usize> + Sync> MoveElements for RowGather<F> {
    fn run<T: Carrier>(&self, pool: &ThreadPool, srcs: &[&[T]], dst: &mut [T]) {
        let row = self.row;
        let src = srcs[0];
        for_each_rows(pool, dst, row, |first, chunk| {
            for (k, out) in chunk.chunks_mut(row).enumerate() {
                match (self.source)(first + k) {
                    Some(off) => out.clone_from_slice(&src[off..off + row]),
                    None => out.fill(T::default()),
                }
            }
        });
    }
}
