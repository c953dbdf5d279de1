//! Ops that exist for graphs: `NoOp` (a node to hang control dependencies
//! on), `Placeholder` (a value the caller feeds) and
//! `PlaceholderWithDefault`.

use opforge_core::kernel::{
    CreateKernel, KernelDefBuilder, OpKernel, OpKernelConstruction, OpKernelContext,
};
use opforge_core::op_def::summarize_shape;
use opforge_core::proto::TensorShapeProto;
use opforge_core::shape_inference::InferenceContext;
use opforge_core::{register_kernel, register_op, DataType, OpDefBuilder, Result, Status};

register_op!(OpDefBuilder::new("NoOp")
    .set_shape_fn(|_| Ok(()))
    .doc("Does nothing. Only useful as a placeholder for control edges."));

register_op!(OpDefBuilder::new("Placeholder")
    .output("output: dtype")
    .attr("dtype: type")
    .attr("shape: shape = { unknown_rank: true }")
    .set_shape_fn(placeholder_shape)
    .doc(
        "A placeholder op for a value that will be fed into the computation.\n\n\
         Running it without feeding it is an error.\n\n\
         output: A placeholder tensor that must be replaced using the feed mechanism.\n\
         dtype: The type of elements in the tensor.\n\
         shape: The shape of the tensor. The shape can be any partially-specified shape.",
    ));

register_op!(OpDefBuilder::new("PlaceholderWithDefault")
    .input("input: dtype")
    .output("output: dtype")
    .attr("dtype: type")
    .attr("shape: shape")
    .set_shape_fn(placeholder_with_default_shape)
    .doc("A placeholder op that passes through `input` when its output is not fed."));

fn placeholder_shape(c: &mut InferenceContext) -> Result<()> {
    let shape: TensorShapeProto = c.get_attr("shape")?;
    let out = c.make_shape_from_proto(&shape)?;
    c.set_output(0, out);
    Ok(())
}

fn placeholder_with_default_shape(c: &mut InferenceContext) -> Result<()> {
    let shape: TensorShapeProto = c.get_attr("shape")?;
    let out = c.make_shape_from_proto(&shape)?;
    // Merged only to check compatibility: the declared shape may be less precise.
    let input = c.input(0);
    c.merge(input, out)?;
    c.set_output(0, out);
    Ok(())
}

struct NoOpKernel;

impl OpKernel for NoOpKernel {
    fn compute(&self, _: &mut OpKernelContext<'_>) -> Result<()> {
        Ok(())
    }
}

impl CreateKernel for NoOpKernel {
    fn create(_: &OpKernelConstruction<'_>) -> Result<Self> {
        Ok(NoOpKernel)
    }
}

struct PlaceholderKernel {
    message: String,
}

impl OpKernel for PlaceholderKernel {
    fn compute(&self, _: &mut OpKernelContext<'_>) -> Result<()> {
        Err(Status::invalid_argument(self.message.clone()))
    }
}

impl CreateKernel for PlaceholderKernel {
    fn create(ctx: &OpKernelConstruction<'_>) -> Result<Self> {
        let dtype: DataType = ctx.get_attr("dtype")?;
        let shape: TensorShapeProto = ctx.get_attr("shape")?;
        let mut message = format!(
            "You must feed a value for placeholder tensor '{}' with dtype {dtype}",
            ctx.node_name()
        );
        if !shape.unknown_rank {
            message.push_str(&format!(" and shape {}", summarize_shape(&shape)));
        }
        Ok(PlaceholderKernel { message })
    }
}

struct PassThrough;

impl OpKernel for PassThrough {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let t = ctx.take_input(0);
        ctx.set_output(0, t)
    }
}

impl CreateKernel for PassThrough {
    fn create(_: &OpKernelConstruction<'_>) -> Result<Self> {
        Ok(PassThrough)
    }
}

register_kernel!(KernelDefBuilder::new("NoOp"), NoOpKernel);
register_kernel!(KernelDefBuilder::new("Placeholder"), PlaceholderKernel);
register_kernel!(KernelDefBuilder::new("PlaceholderWithDefault"), PassThrough);

// ---- Gradients ----

/// `PlaceholderWithDefault` passes its gradient through (TensorFlow's
/// `_IdGrad`); `NoOp` and `Placeholder` have no inputs to differentiate.
mod gradients {
    use opforge_core::register_gradient;
    use opforge_ops_base::grad::identity_grad;

    register_gradient!("PlaceholderWithDefault", identity_grad);
}

#[cfg(test)]
mod tests {
    use opforge_core::{Code, DataType, Tensor};
    use opforge_testing::shape::ShapeTestOp;
    use opforge_testing::util::ctx;
    use opforge_testing::{infer_error, infer_ok};

    #[test]
    fn placeholder_must_be_fed() {
        let e = ctx()
            .op("Placeholder")
            .attr("dtype", DataType::Float)
            .run1()
            .unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
        assert!(
            e.message().starts_with(
                "You must feed a value for placeholder tensor 'Placeholder' with dtype float"
            ),
            "{e}"
        );
        let x = Tensor::from_vec(&[2], vec![1i32, 2]).unwrap();
        let y = ctx()
            .op("PlaceholderWithDefault")
            .input(x.clone())
            .attr("dtype", DataType::Int32)
            .attr("shape", opforge_core::TensorShape::vector(2).to_proto())
            .run1()
            .unwrap();
        assert_eq!(y, x);
        assert!(ctx().op("NoOp").run().unwrap().is_empty());
    }

    #[test]
    fn shape_functions() {
        let shape = |dims: &[i64]| opforge_core::TensorShape::new(dims).unwrap().to_proto();
        let op = ShapeTestOp::new("Placeholder")
            .attr("dtype", DataType::Float)
            .attr("shape", shape(&[2, 3]));
        infer_ok!(op, "", "[2,3]");
        let unknown = opforge_core::proto::TensorShapeProto {
            unknown_rank: true,
            ..Default::default()
        };
        let op = ShapeTestOp::new("Placeholder")
            .attr("dtype", DataType::Float)
            .attr("shape", unknown);
        infer_ok!(op, "", "?");
        let op = ShapeTestOp::new("PlaceholderWithDefault")
            .attr("dtype", DataType::Float)
            .attr("shape", shape(&[2]));
        infer_ok!(op, "[?]", "[2]");
        infer_ok!(op, "?", "[2]");
        infer_error!(
            op,
            "[3]",
            "Dimension 0 in both shapes must be equal, but are 3 and 2"
        );
    }

    #[test]
    fn placeholder_with_default_passes_its_gradient_through() {
        use opforge_core::attrs::IntoAttrValue;
        use opforge_core::autodiff::{compute_gradient, compute_gradient_error, Ops, OpsExt, Sym};
        let f = |o: &mut dyn Ops, xs: &[Sym]| {
            let shape = opforge_core::TensorShape::vector(3).to_proto();
            let p = o.op1(
                "PlaceholderWithDefault",
                &[xs[0]],
                &[("shape", shape.into_attr_value())],
            )?;
            o.mul(p, p)
        };
        let x = Tensor::from_vec(&[3], vec![1.5f64, -2.0, 0.5]).unwrap();
        let jac = compute_gradient(ctx(), &f, &[x]).unwrap();
        assert!(compute_gradient_error(&jac) < 1e-6);
        // d(x^2)/dx = 2x on the diagonal.
        assert_eq!(jac[0].theoretical[0], 3.0);
        assert_eq!(jac[0].theoretical[4], -4.0);
    }
}
