//! `ArgMax` and `ArgMin` along one axis. The split of the work (rows or
//! column tiles, serial or sharded) is decided without the element type
//! ([`ArgPattern`]); the per-dtype code is the scans. Indices are written
//! as `u64` (the bits of an `int64` output, converted for the other index
//! types).

use super::*;

opforge_ops_base::dtype_table! {
    /// The dtypes `ArgMax`/`ArgMin` have CPU kernels for: the real numbers and
    /// bool.
    ARG_TYPES, ARG_SPEC, arg_types => [
        Float, Double, Half, BFloat16, Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64, Bool
    ]
}

/// The running best of an arg-reduction: replaces on a strictly better
/// key, so ties keep the smallest index and NaN is never chosen over a
/// number (Eigen's `ArgMaxPairReducer`, starting from `lowest`).
#[inline(always)]
fn better<K: PartialOrd>(is_max: bool, k: K, best: K) -> bool {
    if is_max {
        k > best
    } else {
        k < best
    }
}

/// Where a scan starts: Eigen's `lowest` for `ArgMax`, `highest` for `ArgMin`.
#[inline(always)]
fn start<T: Ordered>(is_max: bool) -> T::Key {
    if is_max {
        T::ARG_LOWEST
    } else {
        T::ARG_HIGHEST
    }
}

/// The best key of `row` and its index (plus `offset`), or `(start, 0)`
/// when no element beats the start.
fn arg_row<T: Ordered>(is_max: bool, row: &[T], offset: usize) -> (T::Key, usize) {
    let mut best = start::<T>(is_max);
    let mut idx = 0;
    for (i, &v) in row.iter().enumerate() {
        let k = v.key();
        if better(is_max, k, best) {
            best = k;
            idx = offset + i;
        }
    }
    (best, idx)
}

/// How an arg-reduction of `[outer, red, inner]` over the middle axis is
/// split.
#[derive(Clone, Copy, Debug, PartialEq)]
enum ArgPattern {
    /// `inner == 1`: rows scanned one after the other.
    Rows,
    /// `inner == 1`: blocks of `rows_per` rows in parallel.
    ParRows { rows_per: usize },
    /// `inner == 1`, few long rows: each row scanned in chunks of `chunk`
    /// in parallel, the chunks' bests compared in order.
    SplitRows { chunk: usize },
    /// Column tiles of [`COL_TILE`], plane after plane.
    Tiles,
    /// As [`ArgPattern::Tiles`], the planes in parallel.
    ParPlanes,
    /// Tiles of `tile` columns in parallel, plane after plane.
    ParTiles { tile: usize },
}

impl ArgPattern {
    fn new(outer: usize, red: usize, inner: usize, threads: usize) -> ArgPattern {
        let parallel = threads > 1 && outer * red * inner >= PARALLEL_MIN;
        if inner == 1 {
            if parallel && outer >= threads {
                ArgPattern::ParRows {
                    rows_per: outer.div_ceil(threads * 4).max(1),
                }
            } else if parallel && red >= 2 * MIN_SHARD {
                ArgPattern::SplitRows {
                    chunk: red.div_ceil(threads * 4).max(MIN_SHARD),
                }
            } else {
                ArgPattern::Rows
            }
        } else if !parallel {
            ArgPattern::Tiles
        } else if outer >= threads {
            ArgPattern::ParPlanes
        } else {
            ArgPattern::ParTiles {
                tile: COL_TILE.min(MIN_COL_TILE.max(inner.div_ceil(threads.div_ceil(outer)))),
            }
        }
    }
}

/// The index of the best element along the middle axis of `src`
/// (`[outer, red, inner]`) into `dst` (`[outer, inner]`).
fn arg_reduce<T: Ordered>(
    pool: &ThreadPool,
    is_max: bool,
    src: &[T],
    [_, red, inner]: [usize; 3],
    pattern: ArgPattern,
    dst: &mut [u64],
) {
    let row_index = |o: usize| -> u64 {
        let row = &src[o * red..(o + 1) * red];
        let ArgPattern::SplitRows { chunk } = pattern else {
            return arg_row(is_max, row, 0).1 as u64;
        };
        let parts = par_collect(pool, red.div_ceil(chunk), (T::ARG_LOWEST, 0), &|c| {
            arg_row(
                is_max,
                &row[c * chunk..((c + 1) * chunk).min(red)],
                c * chunk,
            )
        });
        // Partials are in index order: the first strictly better wins.
        let (mut best, mut idx) = (start::<T>(is_max), 0);
        for (k, i) in parts {
            if better(is_max, k, best) {
                best = k;
                idx = i;
            }
        }
        idx as u64
    };
    let rows = |first: usize, d: &mut [u64]| {
        for (k, o) in d.iter_mut().enumerate() {
            *o = row_index(first + k);
        }
    };
    // Column tile `[c0, c0 + d.len())` of plane `o`.
    let tile = |o: usize, c0: usize, d: &mut [u64]| {
        let w = d.len();
        let mut best = vec![start::<T>(is_max); w];
        d.fill(0);
        for r in 0..red {
            let begin = (o * red + r) * inner + c0;
            let row = &src[begin..begin + w];
            for ((b, i), &v) in best.iter_mut().zip(d.iter_mut()).zip(row) {
                let k = v.key();
                if better(is_max, k, *b) {
                    *b = k;
                    *i = r as u64;
                }
            }
        }
    };
    let plane = |o: usize, d: &mut [u64]| {
        for (t, d) in d.chunks_mut(COL_TILE).enumerate() {
            tile(o, t * COL_TILE, d);
        }
    };
    match pattern {
        ArgPattern::Rows | ArgPattern::SplitRows { .. } => rows(0, dst),
        ArgPattern::ParRows { rows_per } => {
            par_chunks(pool, dst, rows_per, &|c, d| rows(c * rows_per, d))
        }
        ArgPattern::Tiles => {
            for (o, d) in dst.chunks_mut(inner).enumerate() {
                plane(o, d);
            }
        }
        ArgPattern::ParPlanes => par_chunks(pool, dst, inner, &plane),
        ArgPattern::ParTiles { tile: width } => {
            for (o, d) in dst.chunks_mut(inner).enumerate() {
                par_chunks(pool, d, width, &|t, d| tile(o, t * width, d));
            }
        }
    }
}

/// Runs `scan` into the indices of `out`, an `int64` output in place (as
/// its `u64` bits), another index type through a buffer (TensorFlow
/// casts the index: `int16` and `uint16` wrap).
fn write_indices(out: &mut Tensor, scan: &mut dyn FnMut(&mut [u64])) -> Result<()> {
    let dt = out.dtype();
    if dt == DataType::Int64 {
        *out = out.bitcast(DataType::UInt64)?;
        scan(out.flat_mut::<u64>()?);
        *out = out.bitcast(DataType::Int64)?;
        return Ok(());
    }
    let mut idx = vec![0u64; out.num_elements()];
    scan(&mut idx);
    match dt {
        DataType::Int32 => cast_indices(&idx, out.flat_mut::<i32>()?),
        DataType::Int16 => cast_indices(&idx, out.flat_mut::<i16>()?),
        DataType::UInt16 => cast_indices(&idx, out.flat_mut::<u16>()?),
        _ => {
            return Err(Status::invalid_argument(format!(
                "output_type {dt} is not an index type"
            )))
        }
    }
    Ok(())
}

fn cast_indices<O: Scalar>(idx: &[u64], out: &mut [O]) {
    for (o, &i) in out.iter_mut().zip(idx) {
        *o = O::narrow(Wide::UInt(i));
    }
}

struct ArgKernel {
    is_max: bool,
}

impl CreateKernel for ArgKernel {
    fn create(ctx: &OpKernelConstruction<'_>) -> Result<Self> {
        Ok(ArgKernel {
            is_max: ctx.op_def().name == "ArgMax",
        })
    }
}

fn run_arg<T: Ordered>(
    pool: &ThreadPool,
    is_max: bool,
    input: &Tensor,
    axis: usize,
    out: &mut Tensor,
) -> Result<()> {
    let dims = usize_dims(input.dims());
    let outer = dims[..axis].iter().product();
    let red = dims[axis];
    let inner = dims[axis + 1..].iter().product();
    let pattern = ArgPattern::new(outer, red, inner, pool.num_threads());
    let src = input.flat::<T>()?;
    write_indices(out, &mut |dst| {
        if !dst.is_empty() {
            arg_reduce(pool, is_max, src, [outer, red, inner], pattern, dst)
        }
    })
}

impl OpKernel for ArgKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let input = ctx.input(0).clone();
        let dimension = ctx.input(1);
        ensure!(
            dimension.rank() == 0,
            InvalidArgument,
            "dim must be a scalar, but received tensor of shape: {}",
            dimension.shape()
        );
        let dim: i64 = match dimension.dtype() {
            DataType::Int16 => dimension.scalar_value::<i16>()? as i64,
            _ => index_values(dimension, "dimension")?[0],
        };
        let rank = input.rank() as i64;
        let axis = if dim < 0 { dim + rank } else { dim };
        ensure!(
            (0..rank).contains(&axis),
            InvalidArgument,
            "Expected dimension in the range [{}, {rank}), but got {dim}",
            -rank
        );
        let axis = axis as usize;
        ensure!(
            input.dims()[axis] > 0,
            InvalidArgument,
            "Reduction axis {dim} is empty in shape {}",
            fmt_shape(input.dims())
        );
        let mut out_dims = input.dims().to_vec();
        out_dims.remove(axis);
        let pool = ctx.thread_pool();
        let out = ctx.allocate_output(0, TensorShape::new(&out_dims)?)?;
        if input.num_elements() == 0 {
            // The output is empty too (the axis is not); the dims around
            // the axis may multiply past 2^64 (tests/hostile_kernel.rs).
            return Ok(());
        }
        let dt = input.dtype();
        let is_max = self.is_max;
        arg_types!(dt, T => run_arg::<T>(pool, is_max, &input, axis, out),
            Err(unsupported(if is_max { "ArgMax" } else { "ArgMin" }, dt)))
    }
}

register_kernel!(
    KernelDefBuilder::new("ArgMax")
        .type_constraint_list("T", ARG_TYPES)
        .type_constraint_list("Tidx", &[DataType::Int16, DataType::Int32, DataType::Int64])
        .type_constraint_list(
            "output_type",
            &[
                DataType::Int16,
                DataType::UInt16,
                DataType::Int32,
                DataType::Int64
            ]
        )
        .host_memory("dimension"),
    ArgKernel
);
register_kernel!(
    KernelDefBuilder::new("ArgMin")
        .type_constraint_list("T", ARG_TYPES)
        .type_constraint_list("Tidx", &[DataType::Int32, DataType::Int64])
        .type_constraint_list("output_type", &[DataType::Int32, DataType::Int64])
        .host_memory("dimension"),
    ArgKernel
);
