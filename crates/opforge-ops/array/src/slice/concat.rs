//! `ConcatV2`, `Concat`, `ConcatOffset`, `Pack` and `_ParallelConcatStart`
//! kernels.

use super::*;
use opforge_core::proto::TensorShapeProto;
use opforge_core::shape_inference::common::*;
use opforge_core::DataType;
use opforge_ops_base::shape::*;
use opforge_ops_base::types::{types, INDEX_TYPES, POD_TYPES};

// ConcatV2

pub(super) struct ConcatV2Op;

impl CreateKernel for ConcatV2Op {
    fn create(_: &OpKernelConstruction<'_>) -> Result<Self> {
        Ok(ConcatV2Op)
    }
}

impl OpKernel for ConcatV2Op {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let n = ctx.num_inputs() - 1;
        concat(ctx, 0..n, n, "axis")
    }
}

/// `Concat`: `ConcatV2` with the dimension first.
pub(super) struct ConcatOp;

impl OpKernel for ConcatOp {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let n = ctx.num_inputs();
        concat(ctx, 1..n, 0, "concat_dim")
    }
}

/// The engine of `ConcatV2` and `Concat`: output 0 is the inputs `values`
/// joined along the dimension that input `axis_input` (named `axis_name`
/// in messages) gives, checked as TensorFlow's `ConcatBaseOp` does.
fn concat(
    ctx: &mut OpKernelContext<'_>,
    values: std::ops::Range<usize>,
    axis_input: usize,
    axis_name: &str,
) -> Result<()> {
    let axis_t = ctx.input(axis_input);
    ensure!(
        axis_t.rank() == 0 || (axis_t.rank() == 1 && axis_t.dims()[0] == 1),
        InvalidArgument,
        "{axis_name} tensor should be a scalar integer, but got shape {}",
        axis_t.shape()
    );
    let concat_dim = index_values(axis_t, axis_name)?[0];
    let values = &ctx.inputs()[values];
    let first = values[0].shape().clone();
    let rank = first.rank() as i64;
    let axis = if concat_dim < 0 {
        concat_dim + rank
    } else {
        concat_dim
    };
    ensure!(
        0 <= axis && axis < rank,
        InvalidArgument,
        "ConcatOp : Expected concatenating dimensions in the range [{}, {}), but got {}",
        -rank,
        rank,
        concat_dim
    );
    let axis = axis as usize;
    let mut out_dim: i64 = 0;
    for (i, v) in values.iter().enumerate() {
        ensure!(
            v.rank() == first.rank(),
            InvalidArgument,
            "ConcatOp : Ranks of all input tensors should match: shape[0] = {} vs. shape[{}] = {}",
            first,
            i,
            v.shape()
        );
        for j in 0..first.rank() {
            ensure!(
                j == axis || v.dims()[j] == first.dims()[j],
                InvalidArgument,
                "ConcatOp : Dimension {} in both shapes must be equal: shape[0] = {} vs. shape[{}] = {}",
                j,
                first,
                i,
                v.shape()
            );
        }
        out_dim = out_dim
            .checked_add(v.dims()[axis])
            .ok_or_else(|| Status::invalid_argument("ConcatOp : the output is too large"))?;
    }
    let mut out_dims = first.dims().to_vec();
    out_dims[axis] = out_dim;
    let shape = TensorShape::new(&out_dims)?;
    let outer: usize = first.dims()[..axis].iter().product::<i64>() as usize;
    let row_lens: Vec<usize> = values
        .iter()
        .map(|v| v.num_elements().checked_div(outer).unwrap_or(0))
        .collect();
    let values = values.to_vec();
    let srcs: Vec<&Tensor> = values.iter().collect();
    let body = ConcatRows {
        row_lens: &row_lens,
    };
    move_to_output(ctx, 0, &srcs, shape, &body)
}

register_kernel!(
    KernelDefBuilder::new("ConcatV2")
        .type_constraint_list("T", &movable_types())
        .host_memory("axis"),
    ConcatV2Op
);

// ---------------------------------------------------------------------------
// Pack

pub(super) struct PackOp {
    axis: i64,
}

impl CreateKernel for PackOp {
    fn create(ctx: &OpKernelConstruction<'_>) -> Result<Self> {
        Ok(PackOp {
            axis: ctx.get_attr("axis")?,
        })
    }
}

impl OpKernel for PackOp {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let n = ctx.num_inputs();
        let first = ctx.input(0).clone();
        let expanded = first.rank() as i64 + 1;
        let axis = if self.axis < 0 {
            self.axis + expanded
        } else {
            self.axis
        };
        ensure!(
            0 <= axis && axis < expanded,
            InvalidArgument,
            "axis = {} not in [{}, {})",
            self.axis,
            -expanded,
            expanded
        );
        let axis = axis as usize;
        let mut out_dims = first.dims().to_vec();
        out_dims.insert(axis, n as i64);
        if n == 1 {
            return ctx.set_output(0, first.reshaped(&out_dims)?);
        }
        for (i, v) in ctx.inputs().iter().enumerate() {
            ensure!(
                v.shape() == first.shape(),
                InvalidArgument,
                "Shapes of all inputs must match: values[0].shape = {} != values[{}].shape = {}",
                first.shape(),
                i,
                v.shape()
            );
        }
        let shape = TensorShape::new(&out_dims)?;
        let outer = first.dims()[..axis].iter().product::<i64>() as usize;
        let row = first.num_elements().checked_div(outer).unwrap_or(0);
        let values = ctx.inputs().to_vec();
        let srcs: Vec<&Tensor> = values.iter().collect();
        let row_lens = vec![row; n];
        let body = ConcatRows {
            row_lens: &row_lens,
        };
        move_to_output(ctx, 0, &srcs, shape, &body)
    }
}

register_kernel!(
    KernelDefBuilder::new("Pack").type_constraint_list("T", &movable_types()),
    PackOp
);

// ---------------------------------------------------------------------------

// Concat, ConcatOffset, _ParallelConcatStart
// ---------------------------------------------------------------------------

register_op!(OpDefBuilder::new("Concat")
    .input("concat_dim: int32")
    .input("values: N * T")
    .output("output: T")
    .attr("N: int >= 2")
    .attr("T: type")
    .set_shape_fn(with_inputs(1, concat_shape))
    .doc(
        "Concatenates tensors along one dimension.\n\n\
         The dimension comes first; `ConcatV2` takes it last.",
    ));

register_op!(OpDefBuilder::new("ConcatOffset")
    .input("concat_dim: int32")
    .input("shape: N * shape_type")
    .output("offset: N * shape_type")
    .attr("N: int >= 2")
    .attr("shape_type: {int32, int64} = DT_INT32")
    .set_shape_fn(concat_offset_shape)
    .doc(
        "Computes offsets of concat inputs within its output.\n\n\
         Used by the gradient of `Concat`: offset `i` is where input `i` starts in the output.",
    ));

fn concat_offset_shape(c: &mut InferenceContext) -> Result<()> {
    for i in 1..c.num_inputs().min(c.num_outputs() + 1) {
        let s = c.input(i);
        c.set_output(i - 1, s);
    }
    Ok(())
}

register_op!(OpDefBuilder::new("_ParallelConcatStart")
    .output("output: dtype")
    .attr("shape: shape")
    .attr("dtype: type")
    .stateful()
    .set_shape_fn(explicit_shape)
    .doc(
        "Creates an empty Tensor with shape `shape` and type `dtype`.\n\n\
         Used with in-place updates by `parallel_stack`.",
    ));

register_kernel!(
    KernelDefBuilder::new("Concat")
        .type_constraint_list("T", &movable_types())
        .host_memory("concat_dim"),
    fn = |_| Ok(Box::new(ConcatOp))
);

/// `ConcatOffset`: output `i` is where input `i` of a concat of tensors of
/// the shapes `shape` starts in the output (the running sum of the sizes
/// along `concat_dim`, zero elsewhere). Offsets wrap on overflow, as
/// TensorFlow's do; sizes are not checked for sign (TensorFlow does not).
pub(super) struct ConcatOffsetOp;

impl OpKernel for ConcatOffsetOp {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let concat_dim = ctx.input(0);
        ensure!(
            concat_dim.rank() == 0,
            InvalidArgument,
            "Concat dim tensor should be a scalar integer, but got shape {}",
            concat_dim.shape()
        );
        for (i, s) in ctx.inputs().iter().enumerate().skip(1) {
            ensure!(
                s.rank() == 1,
                InvalidArgument,
                "input {i} should be a vector, but got shape {}",
                s.shape()
            );
        }
        let cdim = index_values(concat_dim, "concat_dim")?[0];
        let shapes = ctx.inputs()[1..]
            .iter()
            .map(|s| index_values(s, "shape"))
            .collect::<Result<Vec<_>>>()?;
        let dims = shapes[0].len() as i64;
        let axis = if cdim < 0 { cdim + dims } else { cdim };
        ensure!(
            0 <= axis && axis < dims,
            InvalidArgument,
            "Concat dim is out of range: {cdim} vs. {dims}"
        );
        let axis = axis as usize;
        let dtype = ctx.output_type(0);
        let join = |v: &[i64]| v.iter().map(i64::to_string).collect::<Vec<_>>().join(" ");
        let mut offset: i64 = 0;
        for (i, s) in shapes.iter().enumerate() {
            ensure!(
                s.len() as i64 == dims,
                InvalidArgument,
                "input {i} should contain {dims} elements, but got {}",
                s.len()
            );
            let mut out = vec![0i64; s.len()];
            for (j, &d) in s.iter().enumerate() {
                if j == axis {
                    out[j] = offset;
                    offset = if dtype == DataType::Int32 {
                        i64::from((offset as i32).wrapping_add(d as i32))
                    } else {
                        offset.wrapping_add(d)
                    };
                } else {
                    ensure!(
                        shapes[0][j] == d,
                        InvalidArgument,
                        "All dimensions except {axis} must match. Input {i} has shape [{}] and doesn't match input 0 with shape [{}].",
                        join(s),
                        join(&shapes[0])
                    );
                }
            }
            let t = ctx.allocate_output(i, TensorShape::new(&[dims])?)?;
            match dtype {
                DataType::Int32 => {
                    // Every value is an int32 (a dimension, or a wrapped sum of them).
                    for (o, &v) in t.flat_mut::<i32>()?.iter_mut().zip(&out) {
                        *o = v as i32;
                    }
                }
                _ => t.flat_mut::<i64>()?.copy_from_slice(&out),
            }
        }
        Ok(())
    }
}

register_kernel!(
    KernelDefBuilder::new("ConcatOffset").type_constraint_list("shape_type", INDEX_TYPES),
    fn = |_| Ok(Box::new(ConcatOffsetOp))
);

/// Writes the default value of every element: zeros, `false`, empty strings.
struct Zeros;

impl MoveElements for Zeros {
    fn run<T: Carrier>(&self, pool: &ThreadPool, _: &[&[T]], dst: &mut [T]) {
        for_each_rows(pool, dst, 1, |_, chunk| chunk.fill(T::default()));
    }
}

/// `_ParallelConcatStart`: a tensor of attr `shape` and `dtype`. TensorFlow
/// leaves its contents uninitialised (`parallel_stack` overwrites every
/// element with `_ParallelConcatUpdate`); here it is zeros (empty strings),
/// as tensors have no uninitialised memory. As in TensorFlow, a `shape`
/// of unknown rank is a scalar and one with unknown dimensions an error.
pub(super) struct ParallelConcatStartOp {
    shape: TensorShape,
}

impl CreateKernel for ParallelConcatStartOp {
    fn create(ctx: &OpKernelConstruction<'_>) -> Result<Self> {
        let proto: TensorShapeProto = ctx.get_attr("shape")?;
        let shape = if proto.unknown_rank {
            TensorShape::scalar()
        } else {
            let dims: Vec<i64> = proto.dim.iter().map(|d| d.size).collect();
            ensure!(
                dims.iter().all(|&d| d >= 0),
                InvalidArgument,
                "Shape {} is not fully defined",
                fmt_dims(&dims)
            );
            TensorShape::new(&dims)?
        };
        Ok(ParallelConcatStartOp { shape })
    }
}

/// `[2,?,3]`, TensorFlow's `PartialTensorShape::DebugString`.
fn fmt_dims(dims: &[i64]) -> String {
    let parts: Vec<String> = dims
        .iter()
        .map(|&d| {
            if d < 0 {
                "?".to_string()
            } else {
                d.to_string()
            }
        })
        .collect();
    format!("[{}]", parts.join(","))
}

impl OpKernel for ParallelConcatStartOp {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        move_to_output(ctx, 0, &[], self.shape.clone(), &Zeros)
    }
}

register_kernel!(
    KernelDefBuilder::new("_ParallelConcatStart")
        .type_constraint_list("dtype", &types(&[POD_TYPES, &[DataType::String]])),
    ParallelConcatStartOp
);
