//! `Slice`, `Tile`, `Pad`, `PadV2`, `MirrorPad` and `MirrorPadGrad` kernels.

use super::tile_pad::{to_usize, Pad, Tile};
use super::*;
use opforge_core::DataType;
use opforge_ops_base::args::int_values;
use opforge_ops_base::cpu::elem::Num;
use opforge_ops_base::shape::*;
use opforge_ops_base::types::{types, INDEX_TYPES, NUMERIC_KERNEL_TYPES, POD_TYPES};

// Slice

pub(super) struct SliceOp;

impl CreateKernel for SliceOp {
    fn create(_: &OpKernelConstruction<'_>) -> Result<Self> {
        Ok(SliceOp)
    }
}

impl OpKernel for SliceOp {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let input = ctx.input(0).clone();
        let (begin_t, size_t) = (ctx.input(1), ctx.input(2));
        let rank = input.rank();
        ensure!(
            begin_t.rank() == 1
                && size_t.rank() == 1
                && begin_t.num_elements() == rank
                && size_t.num_elements() == rank,
            InvalidArgument,
            "Expected begin and size arguments to be 1-D tensors of size {}, but got shapes {} and {} instead.",
            rank,
            begin_t.shape(),
            size_t.shape()
        );
        let begin = index_values(begin_t, "begin")?;
        let mut size = index_values(size_t, "size")?;
        let dims = input.dims().to_vec();
        let mut is_identity = true;
        let mut slice_dim0 = true;
        for i in 0..rank {
            let (b, d) = (begin[i], dims[i]);
            if size[i] == -1 {
                size[i] = d.saturating_sub(b);
            }
            let s = size[i];
            if d == 0 {
                ensure!(
                    b == 0 && s == 0,
                    InvalidArgument,
                    "Expected begin[{}] == 0 (got {}) and size[{}] == 0 (got {}) when input.dim_size({}) == 0",
                    i,
                    b,
                    i,
                    s,
                    i
                );
            } else {
                ensure!(
                    0 <= b && b <= d,
                    InvalidArgument,
                    "Expected begin[{}] in [0, {}], but got {}",
                    i,
                    d,
                    b
                );
                ensure!(
                    0 <= s && s <= d - b,
                    InvalidArgument,
                    "Expected size[{}] in [0, {}], but got {}",
                    i,
                    d - b,
                    s
                );
            }
            let take_all = b == 0 && s == d;
            is_identity &= take_all;
            slice_dim0 &= i == 0 || take_all;
        }
        if is_identity {
            return ctx.set_output(0, input);
        }
        if slice_dim0 {
            let (b, s) = (begin[0] as usize, size[0] as usize);
            return ctx.set_output(0, input.slice_outer(b, b + s)?);
        }
        let shape = TensorShape::new(&size)?;
        if shape.num_elements() == 0 {
            ctx.allocate_output(0, shape)?;
            return Ok(());
        }
        let view = StridedView::of_slice(&dims, &begin, &size, &vec![1; rank]);
        move_to_output(ctx, 0, &[&input], shape, &CopyView { view: &view })
    }
}

register_kernel!(
    KernelDefBuilder::new("Slice")
        .type_constraint_list("T", &movable_types())
        .host_memory("begin")
        .host_memory("size"),
    SliceOp
);

// ---------------------------------------------------------------------------
// Tile

pub(super) struct TileOp;

impl CreateKernel for TileOp {
    fn create(_: &OpKernelConstruction<'_>) -> Result<Self> {
        Ok(TileOp)
    }
}

impl OpKernel for TileOp {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let input = ctx.input(0).clone();
        let multiples_t = ctx.input(1);
        let rank = input.rank();
        ensure!(
            multiples_t.rank() == 1 && multiples_t.num_elements() == rank,
            InvalidArgument,
            "Expected multiples argument to be a vector of length {} but got length {}",
            rank,
            multiples_t
                .dims()
                .first()
                .copied()
                .unwrap_or(multiples_t.num_elements() as i64)
        );
        if rank == 0 {
            return ctx.set_output(0, input);
        }
        let multiples = index_values(multiples_t, "multiples")?;
        let mut out_dims = Vec::with_capacity(rank);
        for (&d, &m) in input.dims().iter().zip(&multiples) {
            ensure!(
                m >= 0,
                InvalidArgument,
                "Expected multiples argument to be non-negative, but got {}",
                m
            );
            out_dims.push(d.checked_mul(m).ok_or_else(|| {
                Status::invalid_argument(format!(
                    "Tiling {} by {} gives too many elements",
                    input.shape(),
                    fmt_shape(&multiples)
                ))
            })?);
        }
        let shape = TensorShape::new(&out_dims)?;
        if &shape == input.shape() {
            return ctx.set_output(0, input);
        }
        if shape.num_elements() == 0 {
            ctx.allocate_output(0, shape)?;
            return Ok(());
        }
        let body = Tile {
            dims: to_usize(input.dims()),
            multiples: to_usize(&multiples),
        };
        move_to_output(ctx, 0, &[&input], shape, &body)
    }
}

register_kernel!(
    KernelDefBuilder::new("Tile")
        .type_constraint_list("T", &movable_types())
        .host_memory("multiples"),
    TileOp
);

// ---------------------------------------------------------------------------
// Pad and PadV2

pub(super) struct PadOp {
    with_constant: bool,
}

impl OpKernel for PadOp {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let input = ctx.input(0).clone();
        let paddings_t = ctx.input(1);
        let rank = input.rank();
        ensure!(
            paddings_t.rank() == 2 && paddings_t.dims()[1] == 2,
            InvalidArgument,
            "paddings must be a matrix with 2 columns: {}",
            paddings_t.shape()
        );
        ensure!(
            paddings_t.dims()[0] == rank as i64,
            InvalidArgument,
            "The first dimension of paddings must be the rank of inputs{}, {}",
            paddings_t.shape(),
            input.shape()
        );
        let constant = if self.with_constant {
            let c = ctx.input(2);
            ensure!(
                c.rank() == 0,
                InvalidArgument,
                "constant_values must be a scalar. Found: {}",
                c.shape()
            );
            Some(c.clone())
        } else {
            None
        };
        let paddings = index_values(paddings_t, "paddings")?;
        let mut out_dims = Vec::with_capacity(rank);
        let mut plan = Vec::with_capacity(rank);
        for (d, &size) in input.dims().iter().enumerate() {
            let (before, after) = (paddings[2 * d], paddings[2 * d + 1]);
            ensure!(
                before >= 0 && after >= 0,
                InvalidArgument,
                "Paddings must be non-negative: {} {}",
                before,
                after
            );
            let total = before
                .checked_add(size)
                .and_then(|v| v.checked_add(after))
                .ok_or_else(|| {
                    Status::invalid_argument(format!(
                        "Padding dimension {d} of {} by {before} and {after} overflows",
                        input.shape()
                    ))
                })?;
            out_dims.push(total);
            plan.push((size as usize, before as usize, after as usize));
        }
        let shape = TensorShape::new(&out_dims)?;
        if shape.num_elements() == input.num_elements() {
            return ctx.set_output(0, input.reshaped(&out_dims)?);
        }
        let body = Pad { dims: plan };
        match &constant {
            Some(c) => move_to_output(ctx, 0, &[&input, c], shape, &body),
            None => move_to_output(ctx, 0, &[&input], shape, &body),
        }
    }
}

register_kernel!(
    KernelDefBuilder::new("Pad")
        .type_constraint_list("T", &movable_types())
        .host_memory("paddings"),
    fn = |_| Ok(Box::new(PadOp { with_constant: false }) as Box<dyn OpKernel>)
);

register_kernel!(
    KernelDefBuilder::new("PadV2")
        .type_constraint_list("T", &movable_types())
        .host_memory("paddings")
        .host_memory("constant_values"),
    fn = |_| Ok(Box::new(PadOp { with_constant: true }) as Box<dyn OpKernel>)
);

// MirrorPad, MirrorPadGrad
// ---------------------------------------------------------------------------

register_op!(OpDefBuilder::new("MirrorPad")
    .input("input: T")
    .input("paddings: Tpaddings")
    .output("output: T")
    .attr("T: type")
    .attr("Tpaddings: {int32, int64} = DT_INT32")
    .attr("mode: {'REFLECT', 'SYMMETRIC'}")
    .set_shape_fn(with_inputs(2, pad_shape))
    .doc(
        "Pads a tensor with mirrored values.\n\n\
         `REFLECT` mode does not repeat the border values, `SYMMETRIC` mode does.",
    ));

register_op!(OpDefBuilder::new("MirrorPadGrad")
    .input("input: T")
    .input("paddings: Tpaddings")
    .output("output: T")
    .attr("T: type")
    .attr("Tpaddings: {int32, int64} = DT_INT32")
    .attr("mode: {'REFLECT', 'SYMMETRIC'}")
    .set_shape_fn(with_inputs(2, mirror_pad_grad_shape))
    .doc(
        "Gradient op for `MirrorPad` op.\n\n\
         Folds the mirror-padded gradient back into the input's shape.",
    ));

fn mirror_pad_grad_shape(c: &mut InferenceContext) -> Result<()> {
    let p = c.input(1);
    let mut paddings = c.with_rank(p, 2)?;
    let pad_0 = c.dim(paddings, 0);
    let Some(input_rank) = c.value(pad_0) else {
        let u = c.unknown_shape();
        c.set_output(0, u);
        return Ok(());
    };
    let i = c.input(0);
    let input = c.with_rank(i, rank_arg(input_rank)?)?;
    let m = c.matrix(input_rank, 2);
    paddings = c.merge(paddings, m)?;
    debug_assert_eq!(c.rank(paddings), Some(2));
    let Some(t) = c.input_tensor(1).cloned() else {
        let out = c.unknown_shape_of_rank(input_rank as usize);
        c.set_output(0, out);
        return Ok(());
    };
    check_pairs(&t, "paddings")?;
    let values = int_values(&t, "paddings")?;
    let rank = input_rank as usize;
    let mut dims = Vec::with_capacity(rank);
    for i in 0..rank {
        let pad0 = at(&values, 2 * i, "paddings", 2 * rank)?;
        let pad1 = at(&values, 2 * i + 1, "paddings", 2 * rank)?;
        if pad0 < 0 || pad1 < 0 {
            return Err(Status::invalid_argument("Paddings must be non-negative"));
        }
        let total = pad0.checked_add(pad1).ok_or_else(|| {
            Status::invalid_argument(format!("Paddings {pad0} + {pad1} overflow"))
        })?;
        let d = c.dim(input, i as i64);
        dims.push(c.subtract(d, total)?);
    }
    let out = c.make_shape_from_dims(dims);
    c.set_output(0, out);
    Ok(())
}

/// The mirror offset of a `mode`: `REFLECT` (1) leaves out the border
/// element, `SYMMETRIC` (0) repeats it.
fn mirror_offset(ctx: &OpKernelConstruction<'_>) -> Result<usize> {
    let mode: String = ctx.get_attr("mode")?;
    match mode.as_str() {
        "REFLECT" => Ok(1),
        "SYMMETRIC" => Ok(0),
        other => Err(Status::invalid_argument(format!(
            "mode must be either REFLECT or SYMMETRIC, not {other}"
        ))),
    }
}

/// The input index that position `o` of a mirror-padded dimension (input
/// size `n`, `before` elements before it) copies.
#[inline]
fn mirror(o: usize, before: usize, n: usize, offset: usize) -> usize {
    if o < before {
        before - o - 1 + offset
    } else if o < before + n {
        o - before
    } else {
        n - 1 - (o - before - n) - offset
    }
}

/// The checks both mirror-pad kernels start with: the rank limit and the
/// shape of `paddings`; returns the paddings as `(before, after)` pairs.
fn mirror_paddings(ctx: &OpKernelContext<'_>, sep: &str) -> Result<Vec<(i64, i64)>> {
    let (input, paddings) = (ctx.input(0), ctx.input(1));
    let rank = input.rank();
    ensure!(rank <= 5, Unimplemented, "inputs rank not in [0,5]: {rank}");
    ensure!(
        paddings.rank() == 2 && paddings.dims()[1] == 2,
        InvalidArgument,
        "paddings must be a matrix with 2 columns: {}",
        paddings.shape()
    );
    ensure!(
        paddings.dims()[0] == rank as i64,
        InvalidArgument,
        "The first dimension of paddings must be the rank of inputs{}{sep}{}",
        paddings.shape(),
        input.shape()
    );
    let values = index_values(paddings, "paddings")?;
    Ok(values.chunks(2).map(|p| (p[0], p[1])).collect())
}

/// Mirror-pads `srcs[0]` (dimensions `(size, before, after)`), a row of
/// the innermost dimension at a time.
struct MirrorPadBody {
    dims: Vec<(usize, usize, usize)>,
    offset: usize,
}

impl MoveElements for MirrorPadBody {
    fn run<T: Carrier>(&self, pool: &ThreadPool, srcs: &[&[T]], out: &mut [T]) {
        let src = srcs[0];
        let off = self.offset;
        let r = self.dims.len();
        let (n_l, b_l, a_l) = self.dims[r - 1];
        let row_len = b_l + n_l + a_l;
        let outer = &self.dims[..r - 1];
        let out_dims: Vec<usize> = outer.iter().map(|&(n, b, a)| b + n + a).collect();
        let in_dims: Vec<usize> = self.dims.iter().map(|&(n, _, _)| n).collect();
        let in_strides = strides_of(&in_dims);
        for_each_rows(pool, out, row_len, |first, chunk| {
            let mut idx = unravel(first, &out_dims);
            for orow in chunk.chunks_mut(row_len) {
                let base: usize = idx
                    .iter()
                    .zip(outer)
                    .zip(&in_strides)
                    .map(|((&i, &(n, b, _)), &s)| mirror(i, b, n, off) * s)
                    .sum();
                let srow = &src[base..base + n_l];
                orow[b_l..b_l + n_l].clone_from_slice(srow);
                for k in (0..b_l).chain(b_l + n_l..row_len) {
                    orow[k].clone_from(&srow[mirror(k, b_l, n_l, off)]);
                }
                advance(&mut idx, &out_dims);
            }
        });
    }
}

/// `MirrorPad` (`REFLECT` or `SYMMETRIC`), with TensorFlow's limits: each
/// padding less than (`REFLECT`) or at most (`SYMMETRIC`) its dimension,
/// rank at most 5.
pub(super) struct MirrorPadOp {
    offset: usize,
}

impl CreateKernel for MirrorPadOp {
    fn create(ctx: &OpKernelConstruction<'_>) -> Result<Self> {
        Ok(MirrorPadOp {
            offset: mirror_offset(ctx)?,
        })
    }
}

impl OpKernel for MirrorPadOp {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let pads = mirror_paddings(ctx, ", ")?;
        let input = ctx.input(0).clone();
        let mut out_dims = Vec::with_capacity(pads.len());
        let mut plan = Vec::with_capacity(pads.len());
        for (&n, &(before, after)) in input.dims().iter().zip(&pads) {
            ensure!(
                before >= 0 && after >= 0,
                InvalidArgument,
                "paddings must be non-negative: {before} {after}"
            );
            if self.offset == 0 {
                ensure!(
                    before <= n && after <= n,
                    InvalidArgument,
                    "paddings must be no greater than the dimension size: {before}, {after} greater than {n}"
                );
            } else {
                ensure!(
                    before < n && after < n,
                    InvalidArgument,
                    "paddings must be less than the dimension size: {before}, {after} not less than {n}"
                );
            }
            let total = before
                .checked_add(n)
                .and_then(|v| v.checked_add(after))
                .ok_or_else(|| {
                    Status::invalid_argument(format!(
                        "MirrorPad: padding {n} by {before} and {after} overflows"
                    ))
                })?;
            out_dims.push(total);
            plan.push((n as usize, before as usize, after as usize));
        }
        let shape = TensorShape::new(&out_dims)?;
        if &shape == input.shape() {
            return ctx.set_output(0, input);
        }
        if shape.num_elements() == 0 {
            ctx.allocate_output(0, shape)?;
            return Ok(());
        }
        let body = MirrorPadBody {
            dims: plan,
            offset: self.offset,
        };
        move_to_output(ctx, 0, &[&input], shape, &body)
    }
}

/// The padded positions whose gradient flows to position `i` of a
/// dimension of size `n` mirror-padded by `before` and `after`: `i` itself
/// and at most one mirrored position on each side.
fn mirror_sources(i: usize, before: usize, after: usize, n: usize, offset: usize) -> Vec<usize> {
    let mut s = vec![before + i];
    if let Some(p) = (before + offset).checked_sub(i + 1) {
        if p < before {
            s.push(p);
        }
    }
    if let Some(j) = n.checked_sub(1 + offset + i) {
        if j < after {
            s.push(before + n + j);
        }
    }
    s
}

/// Sums the mirrored parts of `src` (of shape `in_dims`) back into `out`:
/// each output element adds its position and its mirror images.
fn mirror_pad_grad<T: Num>(
    pool: &ThreadPool,
    src: &[T],
    in_dims: &[usize],
    pads: &[(usize, usize)],
    offset: usize,
    out: &mut [T],
) {
    let r = in_dims.len();
    let in_strides = strides_of(in_dims);
    let out_dims: Vec<usize> = in_dims
        .iter()
        .zip(pads)
        .map(|(&d, &(b, a))| d - b - a)
        .collect();
    // sources[d][i]: the flat source offsets along dimension d of output index i.
    let sources: Vec<Vec<Vec<usize>>> = (0..r)
        .map(|d| {
            let (b, a) = pads[d];
            (0..out_dims[d])
                .map(|i| {
                    mirror_sources(i, b, a, out_dims[d], offset)
                        .into_iter()
                        .map(|p| p * in_strides[d])
                        .collect()
                })
                .collect()
        })
        .collect();
    let n_l = out_dims[r - 1];
    let outer_dims = &out_dims[..r - 1];
    for_each_chunk(pool, out, n_l, 4 * n_l, |start, chunk| {
        let mut idx = unravel(start / n_l, outer_dims);
        for orow in chunk.chunks_mut(n_l) {
            let mut bases = vec![0usize];
            for (d, &i) in idx.iter().enumerate() {
                bases = bases
                    .iter()
                    .flat_map(|&b| sources[d][i].iter().map(move |&s| b + s))
                    .collect();
            }
            for (o, last) in orow.iter_mut().zip(&sources[r - 1]) {
                let mut acc = T::ZERO;
                for &b in &bases {
                    for &s in last {
                        acc = acc.add(src[b + s]);
                    }
                }
                *o = acc;
            }
            advance(&mut idx, outer_dims);
        }
    });
}

/// `MirrorPadGrad`: the gradient of `MirrorPad`, the input with its
/// mirrored borders summed back into the positions they copy.
pub(super) struct MirrorPadGradOp {
    offset: usize,
}

impl CreateKernel for MirrorPadGradOp {
    fn create(ctx: &OpKernelConstruction<'_>) -> Result<Self> {
        Ok(MirrorPadGradOp {
            offset: mirror_offset(ctx)?,
        })
    }
}

impl OpKernel for MirrorPadGradOp {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let pads = mirror_paddings(ctx, " ")?;
        let input = ctx.input(0).clone();
        let mut out_dims = Vec::with_capacity(pads.len());
        for (&n, &(before, after)) in input.dims().iter().zip(&pads) {
            ensure!(
                before >= 0 && after >= 0,
                InvalidArgument,
                "Paddings must be non-negative: {before}, {after}"
            );
            let total = i128::from(before) + i128::from(after);
            ensure!(
                total < i128::from(n),
                InvalidArgument,
                "Total paddings must be less than the input dimension size: {total} was not less than {n}"
            );
            let out = n - before - after;
            if self.offset == 0 {
                ensure!(
                    before <= out && after <= out,
                    InvalidArgument,
                    "paddings must be no greater than the output dimension size: {before}, {after} greater than {out}"
                );
            } else {
                ensure!(
                    before < out && after < out,
                    InvalidArgument,
                    "paddings must be less than the output dimension size: {before}, {after} not less than {out}"
                );
            }
            out_dims.push(out);
        }
        let shape = TensorShape::new(&out_dims)?;
        if &shape == input.shape() {
            return ctx.set_output(0, input);
        }
        let in_dims = to_usize(input.dims());
        let pads: Vec<(usize, usize)> = pads
            .iter()
            .map(|&(b, a)| (b as usize, a as usize))
            .collect();
        let pool = ctx.thread_pool();
        let offset = self.offset;
        let out = ctx.allocate_output(0, shape)?;
        let dt = input.dtype();
        opforge_ops_base::numeric_types!(dt, T => {
            mirror_pad_grad::<T>(pool, input.flat::<T>()?, &in_dims, &pads, offset, out.flat_mut::<T>()?);
            Ok(())
        }, Err(Status::internal(format!("MirrorPadGrad has no CPU implementation for dtype {dt}"))))
    }
}

/// TensorFlow's `MirrorPad` dtypes: the POD types, string and the 8- and
/// 32-bit quantized types.
fn mirror_pad_types() -> Vec<DataType> {
    types(&[
        POD_TYPES,
        &[
            DataType::String,
            DataType::QInt8,
            DataType::QUInt8,
            DataType::QInt32,
        ],
    ])
}

register_kernel!(
    KernelDefBuilder::new("MirrorPad")
        .type_constraint_list("T", &mirror_pad_types())
        .type_constraint_list("Tpaddings", INDEX_TYPES)
        .host_memory("paddings"),
    MirrorPadOp
);

register_kernel!(
    KernelDefBuilder::new("MirrorPadGrad")
        .type_constraint_list("T", NUMERIC_KERNEL_TYPES)
        .type_constraint_list("Tpaddings", INDEX_TYPES)
        .host_memory("paddings"),
    MirrorPadGradOp
);
