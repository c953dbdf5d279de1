//! `OneHot`.

use super::*;
use opforge_ops_base::shape::dim_for_scalar_input;

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
pub(super) struct OneHotMover {
    idx: Vec<i64>,
    depth: usize,
    suffix: usize,
}

impl MoveElements for OneHotMover {
    fn run<T: Carrier>(&self, pool: &ThreadPool, srcs: &[&[T]], dst: &mut [T]) {
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

pub(super) struct OneHotOp {
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

/// `OneHot`: the indices' shape with a dim of `depth` inserted at `axis`.
pub(super) fn one_hot_shape(c: &mut InferenceContext) -> Result<()> {
    let axis: i32 = c.get_attr("axis")?;
    ensure!(axis >= -1, InvalidArgument, "axis must be >= -1");
    let depth = dim_for_scalar_input(c, 1)?;
    let indices = c.input(0);
    let Some(rank) = c.rank(indices) else {
        let out = c.unknown_shape();
        c.set_output(0, out);
        return Ok(());
    };
    let new_rank = rank as i64 + 1;
    let depth_index = (i64::from(axis) + new_rank) % new_rank;
    let front = c.subshape(indices, 0, Some(depth_index))?;
    let back = c.subshape(indices, depth_index, None)?;
    let depth = c.vector(depth);
    let front = c.concatenate(front, depth)?;
    let out = c.concatenate(front, back)?;
    c.set_output(0, out);
    Ok(())
}

register_op!(one_hot().set_shape_fn(one_hot_shape));
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
