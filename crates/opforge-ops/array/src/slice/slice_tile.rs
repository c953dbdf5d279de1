//! `Slice`, `Tile`, `Pad` and `PadV2` kernels.

use super::tile_pad::{to_usize, Pad, Tile};
use super::*;
use opforge_ops_base::args::int_values;
use opforge_ops_base::shape::*;

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

// `MirrorPad`, `MirrorPadGrad`: OpDef and shape function only (no CPU kernel
// yet: running it eagerly fails with TensorFlow's "No OpKernel was registered" error).

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
