//! `Shape`, `ShapeN`, `Size` and `Rank`.

use super::*;

// Shape, ShapeN, Size, Rank
// ---------------------------------------------------------------------------

/// `Shape`.
///
/// TensorFlow 2.21's OpDef also gives the output an
/// `experimental_full_type` (`TFT_SHAPE_TENSOR`), which the spec language
/// cannot express yet.
pub fn shape() -> OpDefBuilder {
    OpDefBuilder::new("Shape")
        .input("input: T")
        .output("output: out_type")
        .output_full_type(
            "output",
            FullTypeDef::unary_var(FullTypeId::TftShapeTensor, "out_type"),
        )
        .attr("T: type")
        .attr("out_type: {int32, int64} = DT_INT32")
        .doc(
            "Returns the shape of a tensor.\n\n\
             This operation returns a 1-D integer tensor representing the shape of `input`.",
        )
}

/// `ShapeN`.
pub fn shape_n() -> OpDefBuilder {
    OpDefBuilder::new("ShapeN")
        .input("input: N * T")
        .output("output: N * out_type")
        .attr("N: int")
        .attr("T: type")
        .attr("out_type: {int32, int64} = DT_INT32")
        .doc(
            "Returns shape of tensors.\n\n\
             This operation returns N 1-D integer tensors representing shape of `input[i]s`.",
        )
}

/// `Size`.
pub fn size() -> OpDefBuilder {
    OpDefBuilder::new("Size")
        .input("input: T")
        .output("output: out_type")
        .attr("T: type")
        .attr("out_type: {int32, int64} = DT_INT32")
        .doc(
            "Returns the size of a tensor.\n\n\
             This operation returns an integer representing the number of elements in\n\
             `input`.",
        )
}

/// `Rank`.
pub fn rank() -> OpDefBuilder {
    OpDefBuilder::new("Rank")
        .input("input: T")
        .output("output: int32")
        .attr("T: type")
        .doc(
            "Returns the rank of a tensor.\n\n\
             This operation returns an integer representing the rank of `input`.",
        )
}

/// `Shape` and `ShapeN`: output `i` is the shape of input `i`.
pub(super) struct ShapeOp {
    name: &'static str,
}

impl OpKernel for ShapeOp {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        for i in 0..ctx.num_inputs() {
            let dims = ctx.input(i).dims().to_vec();
            let out_type = ctx.output_type(i);
            if out_type == DataType::Int32 {
                for (j, &d) in dims.iter().enumerate() {
                    if d > i32::MAX as i64 {
                        return Err(Status::invalid_argument(if self.name == "ShapeN" {
                            format!("ShapeN output type is 32-bit but shape {i} dim {j} is {d}")
                        } else {
                            format!("Shape output type is 32-bit  but dim {j} is {d}")
                        }));
                    }
                }
            }
            let out = index_tensor(out_type, &[dims.len() as i64], &dims)?;
            ctx.set_output(i, out)?;
        }
        Ok(())
    }
}

/// `Size`.
pub(super) struct SizeOp;

impl OpKernel for SizeOp {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let n = ctx.input(0).num_elements() as i64;
        let out_type = ctx.output_type(0);
        ensure!(
            out_type != DataType::Int32 || n <= i32::MAX as i64,
            InvalidArgument,
            "Number of elements was larger than representable by 32-bit output type"
        );
        ctx.set_output(0, index_tensor(out_type, &[], &[n])?)
    }
}

/// `Rank`.
pub(super) struct RankOp;

impl OpKernel for RankOp {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let r = ctx.input(0).rank() as i32;
        ctx.set_output(0, Tensor::scalar(r))
    }
}

/// `Shape` and `ShapeN`: output `i` is a vector of input `i`'s rank.
pub(super) fn shape_shape(c: &mut InferenceContext) -> Result<()> {
    for i in 0..c.num_inputs().min(c.num_outputs()) {
        let d = match c.rank(c.input(i)) {
            Some(r) => c.make_dim(r as i64),
            None => c.unknown_dim(),
        };
        let out = c.vector(d);
        c.set_output(i, out);
    }
    Ok(())
}

register_op!(shape().set_shape_fn(shape_shape));
register_op!(shape_n().set_shape_fn(shape_shape));
register_op!(size().set_shape_fn(scalar_shape));
register_op!(rank().set_shape_fn(scalar_shape));
register_kernel!(
    KernelDefBuilder::new("Shape")
        .type_constraint_list("out_type", INDEX_TYPES)
        .host_memory("output"),
    fn = |_| Ok(Box::new(ShapeOp { name: "Shape" }))
);
register_kernel!(
    KernelDefBuilder::new("ShapeN")
        .type_constraint_list("out_type", INDEX_TYPES)
        .host_memory("output"),
    fn = |_| Ok(Box::new(ShapeOp { name: "ShapeN" }))
);
register_kernel!(
    KernelDefBuilder::new("Size")
        .type_constraint_list("out_type", INDEX_TYPES)
        .host_memory("output"),
    fn = |_| Ok(Box::new(SizeOp))
);
register_kernel!(
    KernelDefBuilder::new("Rank").host_memory("output"),
    fn = |_| Ok(Box::new(RankOp))
);

// ---------------------------------------------------------------------------
