//! The element-type-independent half of a reduction: which dimensions are
//! reduced ([`ReducePlan`]), how the shape collapses into runs and steps,
//! and how each step is split over the pool ([`Schedule`]). Compiled once;
//! the engine's per-dtype code only runs the steps' innermost loops.

use opforge_core::{ensure, Result};

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

/// How one step runs: its source, viewed as `[outer, red, inner]`, is
/// reduced over the middle axis into `[outer, inner]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pattern {
    /// `inner == 1`: each output folds its contiguous row, on the calling
    /// thread.
    Rows,
    /// `inner == 1`: blocks of `rows_per` outputs, in parallel.
    ParRows {
        /// Outputs per block.
        rows_per: usize,
    },
    /// `inner == 1`, fewer rows than threads: each row folds in `parts`
    /// chunks of `chunk` elements in parallel, the partials combined
    /// pairwise.
    SplitRows {
        /// Elements per chunk (a multiple of [`PAIRWISE_BLOCK`]).
        chunk: usize,
        /// Chunks per row.
        parts: usize,
    },
    /// Column tiles of [`COL_TILE`] accumulate all rows of their plane, on
    /// the calling thread.
    Tiles,
    /// As [`Pattern::Tiles`], the planes in parallel.
    ParPlanes,
    /// Tiles of `tile` columns in parallel, plane after plane (few planes,
    /// few rows).
    ParTiles {
        /// Columns per tile.
        tile: usize,
    },
    /// Few planes over many rows: `shards` shards of `rows_per` rows each
    /// accumulate every plane at full width (streaming through contiguous
    /// memory), then the partials are combined in shard order.
    RowShards {
        /// The number of shards.
        shards: usize,
        /// Rows per shard.
        rows_per: usize,
    },
}

/// One step of a reduction: its source, viewed as `[outer, red, inner]`,
/// reduced over the middle axis into `[outer, inner]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Step {
    /// The product of the dimensions before the reduced run.
    pub outer: usize,
    /// The size of the reduced run.
    pub red: usize,
    /// The product of the dimensions after it.
    pub inner: usize,
    /// How the step is split.
    pub pattern: Pattern,
}

impl Step {
    /// The step of reducing `[outer, red, inner]` over the middle axis with
    /// `threads` threads.
    pub fn new(outer: usize, red: usize, inner: usize, threads: usize) -> Step {
        let parallel = threads > 1 && outer * red * inner >= PARALLEL_MIN;
        let pattern = if inner == 1 {
            if !parallel {
                Pattern::Rows
            } else if outer < threads {
                let shards = (red / MIN_SHARD).min(threads * 4);
                if shards <= 1 {
                    Pattern::Rows
                } else {
                    let chunk = red.div_ceil(shards).next_multiple_of(PAIRWISE_BLOCK);
                    Pattern::SplitRows {
                        chunk,
                        parts: red.div_ceil(chunk),
                    }
                }
            } else {
                let rows_per = outer
                    .div_ceil(threads * 4)
                    .max(PARALLEL_MIN.div_ceil(red.max(1)));
                Pattern::ParRows { rows_per }
            }
        } else if !parallel {
            Pattern::Tiles
        } else if outer >= threads {
            Pattern::ParPlanes
        } else if red < threads * 2 * ROW_BLOCK {
            let tile = COL_TILE.min(MIN_COL_TILE.max(inner.div_ceil(threads.div_ceil(outer))));
            Pattern::ParTiles { tile }
        } else {
            Pattern::RowShards {
                shards: threads,
                rows_per: red.div_ceil(threads),
            }
        };
        Step {
            outer,
            red,
            inner,
            pattern,
        }
    }

    /// The number of outputs (`outer * inner`).
    pub fn outputs(&self) -> usize {
        self.outer * self.inner
    }
}

/// What a reduction does, before any element is read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Schedule {
    /// The output is empty: nothing to do.
    Nothing,
    /// The input is empty: every output is the finished identity.
    Identity,
    /// No dimension of size > 1 is reduced: each output is its finished
    /// input element.
    Map,
    /// Reduce the innermost reduced run first, then the next: the first
    /// step reads the input, every later one the accumulators of the step
    /// before; the last writes the output.
    Steps(Vec<Step>),
}

impl Schedule {
    /// The schedule of reducing a tensor of shape `dims` over the
    /// dimensions flagged in `reduced` with `threads` threads.
    pub fn new(dims: &[usize], reduced: &[bool], threads: usize) -> Schedule {
        // Saturating: an input's dims after its zero may multiply past
        // 2^64; the kept ones do so only for an output too large to exist.
        let kept: usize = dims
            .iter()
            .zip(reduced)
            .filter(|(_, &r)| !r)
            .fold(1, |p, (&d, _)| p.saturating_mul(d));
        if kept == 0 {
            return Schedule::Nothing;
        }
        if dims.contains(&0) {
            return Schedule::Identity;
        }
        let mut runs = collapse(dims, reduced);
        let mut steps = Vec::new();
        while let Some(i) = runs.iter().rposition(|x| x.1) {
            let (outer, red, inner) = split_at_run(&runs, i);
            steps.push(Step::new(outer, red, inner, threads));
            runs.remove(i);
            runs = recollapse(&runs);
        }
        if steps.is_empty() {
            Schedule::Map
        } else {
            Schedule::Steps(steps)
        }
    }
}

/// The number of input elements reduced into each output (the product of
/// the reduced dimensions).
pub fn reduced_count(dims: &[usize], reduced: &[bool]) -> usize {
    dims.iter()
        .zip(reduced)
        .filter(|(_, &r)| r)
        .map(|(&d, _)| d)
        .product()
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

/// [`collapse`] of runs (neighbours of a removed run may merge).
fn recollapse(runs: &[(usize, bool)]) -> Vec<(usize, bool)> {
    let dims: Vec<usize> = runs.iter().map(|x| x.0).collect();
    let reduced: Vec<bool> = runs.iter().map(|x| x.1).collect();
    collapse(&dims, &reduced)
}

/// `(outer, red, inner)` around run `i`.
fn split_at_run(runs: &[(usize, bool)], i: usize) -> (usize, usize, usize) {
    let outer = runs[..i].iter().map(|r| r.0).product();
    let inner = runs[i + 1..].iter().map(|r| r.0).product();
    (outer, runs[i].0, inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn steps(dims: &[usize], reduced: &[bool], threads: usize) -> Vec<Step> {
        match Schedule::new(dims, reduced, threads) {
            Schedule::Steps(s) => s,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn runs_collapse_and_reduce_innermost_first() {
        let s = steps(&[3, 5, 4, 7], &[false, true, false, true], 1);
        let shapes: Vec<_> = s.iter().map(|s| (s.outer, s.red, s.inner)).collect();
        assert_eq!(shapes, vec![(60, 7, 1), (3, 5, 4)]);
        let s = steps(&[2, 1, 3, 1, 5], &[false, true, true, false, true], 1);
        let shapes: Vec<_> = s.iter().map(|s| (s.outer, s.red, s.inner)).collect();
        assert_eq!(shapes, vec![(2, 15, 1)]);
        assert_eq!(
            Schedule::new(&[2, 1, 3], &[false, true, false], 4),
            Schedule::Map
        );
        assert_eq!(
            Schedule::new(&[0, 3], &[true, false], 4),
            Schedule::Identity
        );
        assert_eq!(Schedule::new(&[3, 0], &[true, false], 4), Schedule::Nothing);
        assert_eq!(reduced_count(&[3, 5, 4], &[true, false, true]), 12);
        // An empty output whose input's dims after the zero pass 2^64
        // (found by scripts/hostile-cli: Any over [1, 2, 1, 4, 0, 5, 4,
        // 2^63 - 1] on axes 7 and 5).
        let huge = [1, 2, 0, 5, usize::MAX / 2, 3, usize::MAX / 2];
        let red = [false, false, false, true, false, false, true];
        assert_eq!(Schedule::new(&huge, &red, 4), Schedule::Nothing);
    }

    #[test]
    fn patterns_follow_the_shape_and_threads() {
        let p = |dims: &[usize], red: &[bool], threads| steps(dims, red, threads)[0].pattern;
        assert_eq!(p(&[100_001], &[true], 1), Pattern::Rows);
        assert_eq!(
            p(&[100_001], &[true], 2),
            Pattern::SplitRows {
                chunk: 33_792,
                parts: 3
            }
        );
        assert_eq!(
            p(&[3, 40_000], &[false, true], 2),
            Pattern::ParRows { rows_per: 1 }
        );
        assert_eq!(
            p(&[300, 257], &[true, false], 2),
            Pattern::RowShards {
                shards: 2,
                rows_per: 150
            }
        );
        assert_eq!(
            p(&[3, 20_000], &[true, false], 2),
            Pattern::ParTiles { tile: 8192 }
        );
        assert_eq!(
            p(&[4, 10_000], &[true, false], 2),
            Pattern::ParTiles { tile: 5000 }
        );
        assert_eq!(
            p(&[5, 3, 9000], &[false, true, false], 2),
            Pattern::ParPlanes
        );
        assert_eq!(p(&[5, 7], &[true, false], 2), Pattern::Tiles);
    }
}
