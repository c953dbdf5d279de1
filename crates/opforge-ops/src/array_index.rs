//! Array ops that move elements by index, with TensorFlow 2.21's OpDefs and
//! CPU kernels: `Transpose`, `GatherV2`, `OneHot`, `Reverse` and
//! `ReverseV2`.
//!
//! Every kernel supports all the dtypes TensorFlow's CPU kernel does
//! (numbers, bool, string, ...): the element loops run through
//! [`crate::array_basic`]'s element mover, compiled once per element size.
//! `Transpose` is zero-copy when the permutation only moves dimensions of
//! size 1, tiles the two innermost axes of the (dimension-merged) transpose
//! for cache efficiency, and shards over the thread pool.

use crate::array_basic::{
    all_types, for_each_chunk, int_values, move_elements, strides_of, types, MoveElements,
    POD_TYPES, QUANTIZED,
};
use crate::util::{fmt_shape, index_values};
use opforge_core::device::ThreadPool;
use opforge_core::kernel::{
    CreateKernel, KernelDefBuilder, OpKernel, OpKernelConstruction, OpKernelContext,
};
use opforge_core::{
    ensure, register_kernel, register_op, DataType, OpDefBuilder, Result, Status, Tensor,
    TensorShape,
};

/// The names of the ops this module registers.
pub const OPS: &[&str] = &["Transpose", "GatherV2", "OneHot", "Reverse", "ReverseV2"];

/// Keeps this module's object code, and so its registrations, in the binary
/// (call it from [`crate::link`]).
#[inline(never)]
pub fn link() {
    std::hint::black_box(OPS);
}

const INDEX_TYPES: &[DataType] = &[DataType::Int32, DataType::Int64];

/// An empty output (no element to move) of `dtype` and `shape`.
fn empty(dtype: DataType, shape: TensorShape) -> Result<Tensor> {
    Tensor::zeros_with_shape(dtype, shape)
}

// ---------------------------------------------------------------------------
// Transpose
// ---------------------------------------------------------------------------

/// `Transpose`.
pub fn transpose() -> OpDefBuilder {
    OpDefBuilder::new("Transpose")
        .input("x: T")
        .input("perm: Tperm")
        .output("y: T")
        .attr("T: type")
        .attr("Tperm: {int32, int64} = DT_INT32")
        .doc(
            "Shuffle dimensions of x according to a permutation.\n\n\
             The output `y` has the same rank as `x`. The shapes of `x` and `y` satisfy:\n\
             `y.shape[i] == x.shape[perm[i]] for i in [0, 1, ..., rank(x) - 1]`",
        )
}

/// The same transpose on fewer dimensions: dimensions of size 1 dropped,
/// and runs of input dimensions that stay adjacent and in order in the
/// output merged into one. Returns the merged input dims and permutation.
pub(crate) fn simplify_transpose(dims: &[usize], perm: &[usize]) -> (Vec<usize>, Vec<usize>) {
    let mut new_index = vec![usize::MAX; dims.len()];
    let mut kept = Vec::with_capacity(dims.len());
    for (a, &d) in dims.iter().enumerate() {
        if d != 1 {
            new_index[a] = kept.len();
            kept.push(d);
        }
    }
    // Runs of input axes [start, end), in output order.
    let mut groups: Vec<(usize, usize)> = Vec::new();
    for p in perm
        .iter()
        .filter(|&&p| dims[p] != 1)
        .map(|&p| new_index[p])
    {
        match groups.last_mut() {
            Some(g) if g.1 == p => g.1 = p + 1,
            _ => groups.push((p, p + 1)),
        }
    }
    let mut order: Vec<usize> = (0..groups.len()).collect();
    order.sort_by_key(|&g| groups[g].0);
    let mut input_id = vec![0; groups.len()];
    for (pos, &g) in order.iter().enumerate() {
        input_id[g] = pos;
    }
    let new_dims = order
        .iter()
        .map(|&g| kept[groups[g].0..groups[g].1].iter().product())
        .collect();
    (new_dims, input_id)
}

/// Edge of the square tiles the two innermost axes are copied in.
const TILE: usize = 32;

/// A simplified transpose of rank >= 2 that is not the identity.
struct TransposeMover {
    dims: Vec<usize>,
    perm: Vec<usize>,
}

impl MoveElements for TransposeMover {
    fn run<T: Clone + Send + Sync>(&self, pool: &ThreadPool, srcs: &[&[T]], dst: &mut [T]) {
        let src = srcs[0];
        let r = self.perm.len();
        let last = r - 1;
        let in_strides = strides_of(&self.dims);
        let out_dims: Vec<usize> = self.perm.iter().map(|&p| self.dims[p]).collect();
        let out_strides = strides_of(&out_dims);
        let src_strides: Vec<usize> = self.perm.iter().map(|&p| in_strides[p]).collect();
        // Run mode: the input's innermost axis stays innermost, so output
        // rows are contiguous runs of the input. Tile mode: output axis `q`
        // reads the input contiguously, the innermost output axis writes
        // contiguously; copy square tiles of the two.
        let run_mode = self.perm[last] == last;
        let q = self.perm.iter().position(|&p| p == last).unwrap_or(last);
        let outer: Vec<usize> = (0..last).filter(|&k| run_mode || k != q).collect();
        let unit = out_strides[0];
        for_each_chunk(pool, dst, unit, unit, |start, chunk| {
            let a0 = (start / unit, (start + chunk.len()) / unit);
            let range = |k: usize| if k == 0 { a0 } else { (0, out_dims[k]) };
            let mut idx = vec![0usize; r];
            for &k in &outer {
                idx[k] = range(k).0;
            }
            let n = out_dims[last];
            loop {
                let (mut s_base, mut d_base) = (0, 0);
                for &k in &outer {
                    s_base += idx[k] * src_strides[k];
                    d_base += idx[k] * out_strides[k];
                }
                if run_mode {
                    let d = d_base - start;
                    chunk[d..d + n].clone_from_slice(&src[s_base..s_base + n]);
                } else {
                    let (lo, hi) = range(q);
                    let (oq, sj) = (out_strides[q], src_strides[last]);
                    for i0 in (lo..hi).step_by(TILE) {
                        for j0 in (0..n).step_by(TILE) {
                            let j1 = (j0 + TILE).min(n);
                            for i in i0..(i0 + TILE).min(hi) {
                                let d = d_base + i * oq - start;
                                let s = s_base + i;
                                for (j, o) in chunk[d + j0..d + j1].iter_mut().enumerate() {
                                    o.clone_from(&src[s + (j0 + j) * sj]);
                                }
                            }
                        }
                    }
                }
                // Next index of the outer axes (odometer).
                let mut advanced = false;
                for &k in outer.iter().rev() {
                    idx[k] += 1;
                    if idx[k] < range(k).1 {
                        advanced = true;
                        break;
                    }
                    idx[k] = range(k).0;
                }
                if !advanced {
                    break;
                }
            }
        });
    }
}

struct TransposeOp;

impl OpKernel for TransposeOp {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let perm_t = ctx.input(1);
        ensure!(
            perm_t.rank() == 1,
            InvalidArgument,
            "perm must be rank 1, got shape {}",
            fmt_shape(perm_t.dims())
        );
        let input = ctx.input(0);
        let rank = input.rank();
        let values = index_values(perm_t, "perm")?;
        ensure!(
            values.len() == rank,
            InvalidArgument,
            "transpose expects a vector of size {rank}. But input(1) is a vector of size {}",
            values.len()
        );
        let mut perm = Vec::with_capacity(rank);
        let mut seen = vec![false; rank];
        let mut out_dims = Vec::with_capacity(rank);
        for &p in &values {
            let d = if p < 0 { p + rank as i64 } else { p };
            ensure!(
                d >= 0 && d < rank as i64,
                InvalidArgument,
                "{d} is out of range [0 .. {rank})"
            );
            let d = d as usize;
            seen[d] = true;
            perm.push(d);
            out_dims.push(input.dims()[d]);
        }
        if let Some(missing) = seen.iter().position(|&s| !s) {
            let listed: Vec<String> = perm.iter().map(usize::to_string).collect();
            return Err(Status::invalid_argument(format!(
                "{missing} is missing from {{{}}}.",
                listed.join(",")
            )));
        }
        let identity = perm.iter().enumerate().all(|(i, &p)| i == p);
        if identity {
            let t = ctx.take_input(0);
            return ctx.set_output(0, t);
        }
        let dims: Vec<usize> = input.dims().iter().map(|&d| d as usize).collect();
        let (sdims, sperm) = simplify_transpose(&dims, &perm);
        let out = if sperm.iter().enumerate().all(|(i, &p)| i == p) {
            // Only dimensions of size 1 move: the data order is unchanged.
            input.reshaped(&out_dims)?
        } else if input.num_elements() == 0 {
            empty(input.dtype(), TensorShape::new(&out_dims)?)?
        } else {
            move_elements(
                ctx.device(),
                input.dtype(),
                &[input],
                TensorShape::new(&out_dims)?,
                &TransposeMover {
                    dims: sdims,
                    perm: sperm,
                },
            )?
        };
        ctx.set_output(0, out)
    }
}

register_op!(transpose());
register_kernel!(
    KernelDefBuilder::new("Transpose")
        .type_constraint_list(
            "T",
            &types(&[
                &all_types(),
                &[DataType::Float8E5M2, DataType::Float8E4M3FN]
            ])
        )
        .type_constraint_list("Tperm", INDEX_TYPES)
        .host_memory("perm"),
    fn = |_| Ok(Box::new(TransposeOp))
);

// ---------------------------------------------------------------------------
// GatherV2
// ---------------------------------------------------------------------------

/// `GatherV2`.
pub fn gather_v2() -> OpDefBuilder {
    OpDefBuilder::new("GatherV2")
        .input("params: Tparams")
        .input("indices: Tindices")
        .input("axis: Taxis")
        .attr("batch_dims: int = 0")
        .output("output: Tparams")
        .attr("Tparams: type")
        .attr("Tindices: {int16, int32, int64}")
        .attr("Taxis: {int32, int64}")
        .doc(
            "Gather slices from `params` axis `axis` according to `indices`.\n\n\
             The output has shape `params.shape[:axis] + indices.shape[batch_dims:] +\n\
             params.shape[axis + 1:]`. An index outside `[0, params.shape[axis])` is an\n\
             error.",
        )
}

/// TensorFlow's `SliceDebugString`: the multi-index of flat element `flat`
/// of `dims` (`""` for a scalar, `[1]`, `[0,2]`).
fn slice_debug_string(dims: &[i64], flat: usize) -> String {
    match dims.len() {
        0 => String::new(),
        1 => format!("[{flat}]"),
        _ => {
            let mut idx = vec![0i64; dims.len()];
            let mut rem = flat as i64;
            for k in (0..dims.len()).rev() {
                if dims[k] > 0 {
                    idx[k] = rem % dims[k];
                    rem /= dims[k];
                }
            }
            fmt_shape(&idx)
        }
    }
}

/// Gathers rows of `inner` elements: output row `(b, o, i)` is input row
/// `(b, o, idx[b][i])` of a `[batch, outer, gather, inner]` params.
struct GatherMover {
    idx: Vec<usize>,
    outer: usize,
    gather: usize,
    per_batch: usize,
    inner: usize,
}

impl MoveElements for GatherMover {
    fn run<T: Clone + Send + Sync>(&self, pool: &ThreadPool, srcs: &[&[T]], dst: &mut [T]) {
        let src = srcs[0];
        let inner = self.inner;
        for_each_chunk(pool, dst, inner, inner, |start, chunk| {
            let first = start / inner;
            for (r, row) in chunk.chunks_mut(inner).enumerate() {
                let r = first + r;
                let (bo, i) = (r / self.per_batch, r % self.per_batch);
                let b = bo / self.outer;
                let s = (bo * self.gather + self.idx[b * self.per_batch + i]) * inner;
                row.clone_from_slice(&src[s..s + inner]);
            }
        });
    }
}

struct GatherV2Op {
    batch_dims: i64,
}

impl CreateKernel for GatherV2Op {
    fn create(ctx: &OpKernelConstruction<'_>) -> Result<Self> {
        Ok(GatherV2Op {
            batch_dims: ctx.get_attr("batch_dims")?,
        })
    }
}

impl OpKernel for GatherV2Op {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let (params, indices, axis_t) = (ctx.input(0), ctx.input(1), ctx.input(2));
        ensure!(
            params.rank() >= 1,
            InvalidArgument,
            "params must be at least 1 dimensional"
        );
        ensure!(axis_t.rank() == 0, InvalidArgument, "axis must be scalar");
        let mut axis = index_values(axis_t, "axis")?[0];
        let prank = params.rank() as i64;
        let min_rank = if axis < 0 {
            axis.checked_neg().unwrap_or(i64::MAX)
        } else {
            axis + 1
        };
        ensure!(
            prank >= min_rank,
            InvalidArgument,
            "Shape must be at least rank {min_rank} but is rank {prank}"
        );
        if axis < 0 {
            axis += prank;
        }
        let irank = indices.rank() as i64;
        let mut batch_dims = self.batch_dims;
        if batch_dims != 0 {
            ensure!(
                batch_dims >= -irank && batch_dims <= irank,
                InvalidArgument,
                "Expected batch_dims in the range [{}, {irank}], but got {batch_dims}",
                -irank
            );
            if batch_dims < 0 {
                batch_dims += irank;
            }
            ensure!(
                batch_dims < prank,
                InvalidArgument,
                "batch_dims ({batch_dims}) must be less than rank(params) ({prank})."
            );
            ensure!(
                axis >= batch_dims,
                InvalidArgument,
                "batch_dims ({batch_dims}) must be less than or equal to axis ({axis})."
            );
            for i in 0..batch_dims as usize {
                let (p, q) = (params.dims()[i], indices.dims()[i]);
                ensure!(
                    p == q,
                    InvalidArgument,
                    "params.shape[{i}]: {p} should be equal to indices.shape[{i}]: {q}"
                );
            }
        }
        let (axis, batch_dims) = (axis as usize, batch_dims as usize);
        let pdims = params.dims();
        let gather = pdims[axis];
        let index_max = match indices.dtype() {
            DataType::Int16 => i64::from(i16::MAX),
            DataType::Int32 => i64::from(i32::MAX),
            _ => i64::MAX,
        };
        ensure!(
            gather <= index_max,
            InvalidArgument,
            "params.shape[{axis}] too large for {} indexing: {gather} > {index_max}",
            indices.dtype()
        );
        let mut out_dims: Vec<i64> = pdims[..axis].to_vec();
        out_dims.extend_from_slice(&indices.dims()[batch_dims..]);
        out_dims.extend_from_slice(&pdims[axis + 1..]);
        let shape = TensorShape::new(&out_dims)?;
        let batch: usize = pdims[..batch_dims].iter().map(|&d| d as usize).product();
        let outer: usize = pdims[batch_dims..axis]
            .iter()
            .map(|&d| d as usize)
            .product();
        let inner: usize = pdims[axis + 1..].iter().map(|&d| d as usize).product();
        let n = indices.num_elements();
        let dtype = params.dtype();
        if n == 0 || inner == 0 || outer == 0 {
            return ctx.set_output(0, empty(dtype, shape)?);
        }
        let values = int_values(indices, "indices")?;
        let mut idx = Vec::with_capacity(values.len());
        for (i, &v) in values.iter().enumerate() {
            ensure!(
                v >= 0 && v < gather,
                InvalidArgument,
                "indices{} = {v} is not in [0, {gather})",
                slice_debug_string(indices.dims(), i)
            );
            idx.push(v as usize);
        }
        let mover = GatherMover {
            idx,
            outer,
            gather: gather as usize,
            per_batch: n / batch,
            inner,
        };
        let out = move_elements(ctx.device(), dtype, &[params], shape, &mover)?;
        ctx.set_output(0, out)
    }
}

register_op!(gather_v2());
register_kernel!(
    KernelDefBuilder::new("GatherV2")
        .type_constraint_list("Tparams", &types(&[&all_types(), QUANTIZED]))
        .type_constraint_list(
            "Tindices",
            &[DataType::Int16, DataType::Int32, DataType::Int64]
        )
        .host_memory("axis"),
    GatherV2Op
);

// ---------------------------------------------------------------------------
// OneHot
// ---------------------------------------------------------------------------

/// `OneHot`.
pub fn one_hot() -> OpDefBuilder {
    OpDefBuilder::new("OneHot")
        .input("indices: TI")
        .input("depth: int32")
        .input("on_value: T")
        .input("off_value: T")
        .attr("axis: int = -1")
        .output("output: T")
        .attr("T: type")
        .attr("TI: {uint8, int8, int32, int64} = DT_INT64")
        .doc(
            "Returns a one-hot tensor.\n\n\
             The locations represented by indices in `indices` take value `on_value`,\n\
             while all other locations take value `off_value`. A new axis of size\n\
             `depth` is inserted at `axis` (-1: last). Indices outside `[0, depth)`\n\
             give rows of `off_value` only.",
        )
}

/// Writes `[prefix, depth, suffix]` one-hot blocks: `srcs` are `[on, off]`.
struct OneHotMover {
    idx: Vec<i64>,
    depth: usize,
    suffix: usize,
}

impl MoveElements for OneHotMover {
    fn run<T: Clone + Send + Sync>(&self, pool: &ThreadPool, srcs: &[&[T]], dst: &mut [T]) {
        let (on, off) = (&srcs[0][0], &srcs[1][0]);
        let unit = self.depth * self.suffix;
        for_each_chunk(pool, dst, unit, unit, |start, chunk| {
            chunk.fill(off.clone());
            let first = start / unit;
            for (p, block) in chunk.chunks_mut(unit).enumerate() {
                let row = &self.idx[(first + p) * self.suffix..(first + p + 1) * self.suffix];
                for (s, &i) in row.iter().enumerate() {
                    if i >= 0 && (i as usize) < self.depth {
                        block[i as usize * self.suffix + s].clone_from(on);
                    }
                }
            }
        });
    }
}

struct OneHotOp {
    axis: i64,
}

impl CreateKernel for OneHotOp {
    fn create(ctx: &OpKernelConstruction<'_>) -> Result<Self> {
        Ok(OneHotOp {
            axis: ctx.get_attr("axis")?,
        })
    }
}

impl OpKernel for OneHotOp {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let (indices, depth, on, off) = (ctx.input(0), ctx.input(1), ctx.input(2), ctx.input(3));
        let irank = indices.rank();
        let orank = irank as i64 + 1;
        ensure!(
            self.axis == -1 || (self.axis >= 0 && self.axis < orank),
            InvalidArgument,
            "Expected axis to be -1 or between [0, {orank}).  But received: {}",
            self.axis
        );
        for (t, name) in [(depth, "depth"), (on, "on_value"), (off, "off_value")] {
            ensure!(
                t.rank() == 0,
                InvalidArgument,
                "{name} must be a scalar, but got: {}",
                fmt_shape(t.dims())
            );
        }
        let axis = if self.axis == -1 {
            irank
        } else {
            self.axis as usize
        };
        let depth = depth.scalar_value::<i32>()?;
        ensure!(
            depth >= 0,
            InvalidArgument,
            "depth must be non-negative, got: {depth}"
        );
        let n = indices.num_elements();
        ensure!(
            (n as i64).checked_mul(i64::from(depth)).is_some(),
            InvalidArgument,
            "OneHot result would have shape {} + [{depth}], which exceeds 2**63 - 1 elements",
            fmt_shape(indices.dims())
        );
        let mut out_dims = indices.dims().to_vec();
        out_dims.insert(axis, i64::from(depth));
        let shape = TensorShape::new(&out_dims)?;
        let dtype = on.dtype();
        if shape.num_elements() == 0 {
            return ctx.set_output(0, empty(dtype, shape)?);
        }
        let prefix: usize = indices.dims()[..axis].iter().map(|&d| d as usize).product();
        let mover = OneHotMover {
            idx: int_values(indices, "indices")?,
            depth: depth as usize,
            suffix: n / prefix,
        };
        let out = move_elements(ctx.device(), dtype, &[on, off], shape, &mover)?;
        ctx.set_output(0, out)
    }
}

register_op!(one_hot());
register_kernel!(
    KernelDefBuilder::new("OneHot")
        .type_constraint_list("T", &all_types())
        .type_constraint_list(
            "TI",
            &[
                DataType::UInt8,
                DataType::Int8,
                DataType::Int32,
                DataType::Int64
            ]
        )
        .host_memory("depth"),
    OneHotOp
);

// ---------------------------------------------------------------------------
// Reverse, ReverseV2
// ---------------------------------------------------------------------------

/// `Reverse`.
pub fn reverse() -> OpDefBuilder {
    OpDefBuilder::new("Reverse")
        .input("tensor: T")
        .input("dims: bool")
        .output("output: T")
        .attr(
            "T: {uint8, int8, uint16, int16, uint32, int32, uint64, int64, bool, bfloat16, \
             half, float, double, complex64, complex128, string}",
        )
        .doc(
            "Reverses specific dimensions of a tensor.\n\n\
             `dims` has one bool per dimension of `tensor`; the dimensions where it is\n\
             true are reversed.",
        )
}

/// `ReverseV2`.
pub fn reverse_v2() -> OpDefBuilder {
    OpDefBuilder::new("ReverseV2")
        .input("tensor: T")
        .input("axis: Tidx")
        .output("output: T")
        .attr("Tidx: {int32, int64} = DT_INT32")
        .attr(
            "T: {uint8, int8, uint16, int16, int32, uint32, int64, uint64, bool, bfloat16, \
             half, float, double, complex64, complex128, string}",
        )
        .doc(
            "Reverses specific dimensions of a tensor.\n\n\
             `axis` lists the dimensions to reverse (negative values count from the\n\
             end); a dimension may be listed at most once.",
        )
}

/// Reverses the flagged axes of a (merged) shape, one innermost row at a time.
struct ReverseMover {
    dims: Vec<usize>,
    flags: Vec<bool>,
}

impl MoveElements for ReverseMover {
    fn run<T: Clone + Send + Sync>(&self, pool: &ThreadPool, srcs: &[&[T]], dst: &mut [T]) {
        let src = srcs[0];
        let strides = strides_of(&self.dims);
        let last = self.dims.len() - 1;
        let n = self.dims[last];
        for_each_chunk(pool, dst, n, n, |start, chunk| {
            let first = start / n;
            for (r, row) in chunk.chunks_mut(n).enumerate() {
                let mut rem = first + r;
                let mut off = 0;
                for k in (0..last).rev() {
                    let d = self.dims[k];
                    let i = rem % d;
                    rem /= d;
                    off += if self.flags[k] { d - 1 - i } else { i } * strides[k];
                }
                if self.flags[last] {
                    for (o, s) in row.iter_mut().zip(src[off..off + n].iter().rev()) {
                        o.clone_from(s);
                    }
                } else {
                    row.clone_from_slice(&src[off..off + n]);
                }
            }
        });
    }
}

/// Output 0 = input 0 with the axes flagged in `flags` reversed.
fn reverse_axes(ctx: &mut OpKernelContext<'_>, flags: &[bool]) -> Result<()> {
    let input = ctx.input(0);
    ensure!(
        input.rank() <= 8,
        Unimplemented,
        "reverse is not implemented for tensors of rank > 8."
    );
    // Drop dimensions of size 1; merge neighbours reversed alike.
    let mut dims: Vec<usize> = Vec::new();
    let mut merged: Vec<bool> = Vec::new();
    for (&d, &f) in input.dims().iter().zip(flags) {
        if d == 1 {
            continue;
        }
        match (dims.last_mut(), merged.last()) {
            (Some(prev), Some(&pf)) if pf == f => *prev *= d as usize,
            _ => {
                dims.push(d as usize);
                merged.push(f);
            }
        }
    }
    let out = if !merged.contains(&true) {
        // Nothing (of size > 1) is reversed: the data order is unchanged.
        let t = ctx.take_input(0);
        return ctx.set_output(0, t);
    } else if input.num_elements() == 0 {
        empty(input.dtype(), input.shape().clone())?
    } else {
        let mover = ReverseMover {
            dims,
            flags: merged,
        };
        move_elements(
            ctx.device(),
            input.dtype(),
            &[input],
            input.shape().clone(),
            &mover,
        )?
    };
    ctx.set_output(0, out)
}

struct ReverseOp;

impl OpKernel for ReverseOp {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let (input, dims) = (ctx.input(0), ctx.input(1));
        if input.rank() > 0 {
            ensure!(
                input.dims()[0] != 0,
                InvalidArgument,
                "Invalid input first dimension. Found 0."
            );
        }
        if input.rank() == 0 {
            let t = ctx.take_input(0);
            return ctx.set_output(0, t);
        }
        ensure!(
            dims.rank() == 1,
            InvalidArgument,
            "'dims' must be 1-dimension, not {}",
            dims.rank()
        );
        let rank = input.rank();
        ensure!(
            dims.dims()[0] == rank as i64,
            InvalidArgument,
            "'dims' must have the same number of values as 'input' has dimensions. 'input' has {rank}'dims' has {} values",
            dims.dims()[0]
        );
        let flags = dims.flat::<bool>()?.to_vec();
        reverse_axes(ctx, &flags)
    }
}

struct ReverseV2Op;

impl OpKernel for ReverseV2Op {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let (input, axes) = (ctx.input(0), ctx.input(1));
        if input.rank() == 0 || input.num_elements() == 0 {
            let t = ctx.take_input(0);
            return ctx.set_output(0, t);
        }
        ensure!(
            axes.rank() == 1,
            InvalidArgument,
            "'dims' must be 1-dimension, not {}",
            axes.rank()
        );
        let rank = input.rank() as i64;
        let mut flags = vec![false; rank as usize];
        for (k, &axis) in index_values(axes, "axis")?.iter().enumerate() {
            let c = if axis < 0 { axis + rank } else { axis };
            ensure!(
                c >= 0 && c < rank,
                InvalidArgument,
                "'axis'[{k}] = {axis} is out of valid range [0, {}",
                rank - 1
            );
            ensure!(
                !flags[c as usize],
                InvalidArgument,
                "axis {c} specified more than once."
            );
            flags[c as usize] = true;
        }
        reverse_axes(ctx, &flags)
    }
}

register_op!(reverse());
register_op!(reverse_v2());
register_kernel!(
    KernelDefBuilder::new("Reverse")
        .type_constraint_list("T", &types(&[POD_TYPES, &[DataType::String]]))
        .host_memory("dims"),
    fn = |_| Ok(Box::new(ReverseOp))
);
register_kernel!(
    KernelDefBuilder::new("ReverseV2")
        .type_constraint_list("T", &types(&[POD_TYPES, &[DataType::String]]))
        .type_constraint_list("Tidx", INDEX_TYPES)
        .host_memory("axis"),
    fn = |_| Ok(Box::new(ReverseV2Op))
);
