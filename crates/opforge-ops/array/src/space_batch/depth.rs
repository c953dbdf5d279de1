//! The CPU kernels of `SpaceToDepth` and `DepthToSpace`: TensorFlow's
//! (`spacetodepth_op.cc`, `depthtospace_op.cc`), NHWC only (TensorFlow's
//! CPU kernels take NHWC only; NCHW and NCHW_VECT_C are GPU layouts), every
//! dtype TensorFlow registers. Both ops are a transpose of a reshaped
//! input, so they are the strided-view copy of the element mover.

use opforge_core::kernel::{
    CreateKernel, KernelDefBuilder, OpKernel, OpKernelConstruction, OpKernelContext,
};
use opforge_core::param::{ParamEnum, Parameter};
use opforge_core::{ensure, register_kernel, DataType, Result, Status, TensorShape};
use opforge_ops_base::cpu::mover::layout::{CopyView, StridedView};
use opforge_ops_base::cpu::mover::move_to_output;
use opforge_ops_base::types::{all_types, types};

/// The layouts of `SpaceToDepth`/`DepthToSpace` (`data_format`).
#[derive(ParamEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum DataFormat {
    /// Batch, height, width, depth.
    #[param(rename = "NHWC")]
    Nhwc,
    /// Batch, depth, height, width.
    #[param(rename = "NCHW")]
    Nchw,
    /// NCHW with the depth split in vectors of 4 (`int8` on GPUs).
    #[param(rename = "NCHW_VECT_C")]
    NchwVectC,
}

/// The attrs of `SpaceToDepth` and `DepthToSpace` (after `T`): their
/// OpDefs' attrs and what the kernels read.
#[derive(Parameter, Clone, Copy, Debug)]
pub(super) struct DepthSpaceParams {
    /// The side of the square spatial blocks moved to (or from) the depth
    /// dimension.
    #[param(minimum = 2)]
    block_size: i32,
    /// The layout of the input and the output.
    #[param(default = "NHWC")]
    data_format: DataFormat,
}

/// `SpaceToDepth` (`to_depth`) or `DepthToSpace` with block `block`.
struct DepthSpaceOp {
    to_depth: bool,
    block: i64,
}

impl CreateKernel for DepthSpaceOp {
    fn create(ctx: &OpKernelConstruction<'_>) -> Result<Self> {
        let to_depth = ctx.op_def().name == "SpaceToDepth";
        // The parameters check the format's name and `block_size >= 2`.
        let p: DepthSpaceParams = ctx.params()?;
        // TensorFlow registers its CPU kernels for NHWC only (a kernel
        // constraint there, so other formats find no CPU kernel).
        ensure!(
            p.data_format == DataFormat::Nhwc,
            InvalidArgument,
            "Only NHWC data_format supported on CPU. Got {}",
            p.data_format.name()
        );
        Ok(DepthSpaceOp {
            to_depth,
            block: i64::from(p.block_size),
        })
    }
}

impl OpKernel for DepthSpaceOp {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let input = ctx.input(0).clone();
        let b = self.block;
        if self.to_depth {
            ensure!(
                input.rank() == 4,
                InvalidArgument,
                "Input rank should be 4 instead of {}",
                input.rank()
            );
        } else {
            ensure!(
                input.rank() == 4,
                InvalidArgument,
                "Input rank should be: 4 instead of: {}",
                input.rank()
            );
        }
        let [n, h, w, d] = [0, 1, 2, 3].map(|i| input.dims()[i]);
        let name = ctx.op_def().name.clone();
        let overflow = || Status::invalid_argument(format!("{name} output size overflows int64"));
        // The strides below are products of the input's dims: they fit
        // when it has elements (and are not needed when it has none).
        let empty = input.num_elements() == 0;
        let (shape, view) = if self.to_depth {
            ensure!(
                w % b == 0 && h % b == 0,
                InvalidArgument,
                "Image width {w} and height {h} should be divisible by block_size: {b}"
            );
            let od = d.checked_mul(b * b).ok_or_else(overflow)?;
            let shape = TensorShape::new(&[n, h / b, w / b, od])?;
            // output[n, y, x, (i * b + j) * d + c] = input[n, y * b + i, x * b + j, c]
            let view = if empty {
                StridedView::empty()
            } else {
                StridedView::new(
                    0,
                    [
                        (n as usize, h * w * d),
                        ((h / b) as usize, b * w * d),
                        ((w / b) as usize, b * d),
                        (b as usize, w * d),
                        (b as usize, d),
                        (d as usize, 1),
                    ],
                )
            };
            (shape, view)
        } else {
            let sq = b * b;
            ensure!(
                d % sq == 0,
                InvalidArgument,
                "Input depth dimension {d} should be divisible by: {sq}"
            );
            let od = d / sq;
            let oh = h.checked_mul(b).ok_or_else(overflow)?;
            let ow = w.checked_mul(b).ok_or_else(overflow)?;
            let shape = TensorShape::new(&[n, oh, ow, od])?;
            // output[n, y * b + i, x * b + j, c] = input[n, y, x, (i * b + j) * od + c]
            let view = if empty {
                StridedView::empty()
            } else {
                StridedView::new(
                    0,
                    [
                        (n as usize, h * w * d),
                        (h as usize, w * d),
                        (b as usize, b * od),
                        (w as usize, d),
                        (b as usize, od),
                        (od as usize, 1),
                    ],
                )
            };
            (shape, view)
        };
        move_to_output(ctx, 0, &[&input], shape, &CopyView { view: &view })
    }
}

register_kernel!(
    KernelDefBuilder::new("SpaceToDepth")
        .type_constraint_list("T", &types(&[&all_types(), &[DataType::QInt8]])),
    DepthSpaceOp
);
register_kernel!(
    KernelDefBuilder::new("DepthToSpace").type_constraint_list("T", &all_types()),
    DepthSpaceOp
);

#[cfg(test)]
mod tests {
    use super::*;
    use opforge_core::op_def::parse_attr_spec;

    /// `SpaceToDepth` and `DepthToSpace` keep TensorFlow's attrs (written
    /// out here as TensorFlow's specs), `T` first, then the parameters.
    #[test]
    fn attrs_come_from_the_parameter_struct() {
        let registry = opforge_core::Registry::global();
        for op in ["SpaceToDepth", "DepthToSpace"] {
            let def = registry.op_def(op).unwrap();
            let specs = [
                "T: type",
                "block_size: int >= 2",
                "data_format: {'NHWC', 'NCHW', 'NCHW_VECT_C'} = 'NHWC'",
            ];
            assert_eq!(def.attr.len(), specs.len(), "{op}");
            for (got, spec) in def.attr.iter().zip(specs) {
                let mut want = parse_attr_spec(spec).unwrap();
                want.description = got.description.clone();
                assert_eq!(*got, want, "{op}: {spec}");
            }
            assert_eq!(
                def.attr[2].description,
                "The layout of the input and the output."
            );
        }
        assert_eq!(DataFormat::NAMES, ["NHWC", "NCHW", "NCHW_VECT_C"]);
        let p =
            DepthSpaceParams::from_kwargs(&[("block_size", "3"), ("data_format", "NCHW")]).unwrap();
        assert_eq!((p.block_size, p.data_format), (3, DataFormat::Nchw));
        let e = DepthSpaceParams::from_kwargs(&[("block_size", "1")]).unwrap_err();
        assert_eq!(
            e.message(),
            "DepthSpaceParams: invalid value 1 for parameter 'block_size': must be >= 2"
        );
    }
}
