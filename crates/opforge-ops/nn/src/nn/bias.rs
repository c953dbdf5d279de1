//! `BiasAdd` and `BiasAddGrad` kernels.

use super::softmax_family::for_row_blocks;
use super::*;
use opforge_ops_base::args::dims_product;
use opforge_ops_base::numeric_types;

// BiasAdd, BiasAddGrad
// ---------------------------------------------------------------------------

pub(super) fn is_nchw(ctx: &OpKernelConstruction<'_>) -> Result<bool> {
    let format: String = ctx.get_attr("data_format")?;
    match format.as_str() {
        "NHWC" => Ok(false),
        "NCHW" => Ok(true),
        _ => Err(Status::invalid_argument(format!(
            "Invalid data format: '{format}' (expected 'NHWC' or 'NCHW')"
        ))),
    }
}

/// `[outer, channels, inner]` of a tensor whose channel dimension is `axis`.
/// `inner` saturates for an empty tensor whose dims after its zero pass
/// 2^63 (`outer` is then 0: found by scripts/hostile-cli, BiasAddGrad NCHW
/// of `[0, 4, 2^62, 3, ...]`); exact otherwise.
pub(super) fn around(dims: &[i64], axis: usize) -> [usize; 3] {
    let p = |d: &[i64]| dims_product(d) as usize;
    [p(&dims[..axis]), dims[axis] as usize, p(&dims[axis + 1..])]
}

pub(super) struct BiasAddKernel {
    nchw: bool,
}

impl CreateKernel for BiasAddKernel {
    fn create(ctx: &OpKernelConstruction<'_>) -> Result<Self> {
        Ok(BiasAddKernel {
            nchw: is_nchw(ctx)?,
        })
    }
}

pub(super) fn bias_add_compute<T: Num>(ctx: &mut OpKernelContext<'_>, inner: usize) -> Result<()> {
    let shape = ctx.input(0).shape().clone();
    let bias: Vec<T> = ctx.input(1).flat::<T>()?.to_vec();
    let c = bias.len();
    let pool = ctx.thread_pool();
    // Units: rows of `c` (NHWC) or runs of `inner` sharing one bias (NCHW).
    let unit = if inner == 1 { c } else { inner };
    if unit == 0 {
        ctx.allocate_output(0, shape)?;
        return Ok(());
    }
    let bias = &bias;
    if ctx
        .forward_input_or_allocate_output(&[0], 0, &shape)?
        .is_some()
    {
        let out = ctx.output_mut(0)?.flat_mut::<T>()?;
        let mut units = vec![(); out.len() / unit];
        for_row_blocks(pool, out, unit, &mut units, |u0, o, _| {
            for (k, row) in o.chunks_mut(unit).enumerate() {
                if inner == 1 {
                    row.iter_mut()
                        .zip(bias)
                        .for_each(|(v, &b)| *v = (*v).add(b));
                } else {
                    let b = bias[(u0 + k) % c];
                    row.iter_mut().for_each(|v| *v = (*v).add(b));
                }
            }
        });
    } else {
        let (ins, out) = ctx.inputs_and_output(0)?;
        let x = ins[0].flat::<T>()?;
        let out = out.flat_mut::<T>()?;
        let mut units = vec![(); out.len() / unit];
        for_row_blocks(pool, out, unit, &mut units, |u0, o, _| {
            for (k, row) in o.chunks_mut(unit).enumerate() {
                let src = &x[(u0 + k) * unit..(u0 + k + 1) * unit];
                if inner == 1 {
                    for ((v, &s), &b) in row.iter_mut().zip(src).zip(bias) {
                        *v = s.add(b);
                    }
                } else {
                    let b = bias[(u0 + k) % c];
                    row.iter_mut().zip(src).for_each(|(v, &s)| *v = s.add(b));
                }
            }
        });
    }
    Ok(())
}

impl OpKernel for BiasAddKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let (value, bias) = (ctx.input(0), ctx.input(1));
        ensure!(
            value.rank() >= 2,
            InvalidArgument,
            "Input tensor must be at least 2D: {}",
            fmt_shape(value.dims())
        );
        ensure!(
            bias.rank() == 1,
            InvalidArgument,
            "Biases must be 1D: {}",
            fmt_shape(bias.dims())
        );
        let axis = if self.nchw { 1 } else { value.rank() - 1 };
        ensure!(
            bias.dims()[0] == value.dims()[axis],
            InvalidArgument,
            "Must provide as many biases as the last dimension of the input tensor: {} vs. {}",
            fmt_shape(bias.dims()),
            fmt_shape(value.dims())
        );
        let [_, _, inner] = around(value.dims(), axis);
        let dt = value.dtype();
        numeric_types!(dt, T => bias_add_compute::<T>(ctx, inner),
            Err(Status::unimplemented(format!("no BiasAdd for {dt}"))))
    }
}

pub(super) struct BiasAddGradKernel {
    nchw: bool,
}

impl CreateKernel for BiasAddGradKernel {
    fn create(ctx: &OpKernelConstruction<'_>) -> Result<Self> {
        Ok(BiasAddGradKernel {
            nchw: is_nchw(ctx)?,
        })
    }
}

pub(super) fn bias_add_grad_compute<T: Num>(
    pool: &ThreadPool,
    x: &Tensor,
    dims: [usize; 3],
    out: &mut Tensor,
) -> Result<()> {
    reduce_into(
        pool,
        SumR::<T>::new(),
        x.flat::<T>()?,
        &dims,
        &[true, false, true],
        out.flat_mut::<T>()?,
    );
    Ok(())
}

impl OpKernel for BiasAddGradKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let x = ctx.input(0).clone();
        ensure!(
            x.rank() >= 2,
            InvalidArgument,
            "Input tensor must be at least 2D: {}",
            fmt_shape(x.dims())
        );
        ensure!(
            x.num_elements() <= i32::MAX as usize,
            InvalidArgument,
            "BiasGrad requires tensor size <= int32 max"
        );
        let axis = if self.nchw { 1 } else { x.rank() - 1 };
        let dims = around(x.dims(), axis);
        let pool = ctx.thread_pool();
        let out = ctx.allocate_output(0, TensorShape::new(&[dims[1] as i64])?)?;
        let dt = x.dtype();
        numeric_types!(dt, T => bias_add_grad_compute::<T>(pool, &x, dims, out),
            Err(Status::unimplemented(format!("no BiasAddGrad for {dt}"))))
    }
}

register_kernel!(
    KernelDefBuilder::new("BiasAdd").type_constraint_list("T", NUMERIC_KERNEL_TYPES),
    BiasAddKernel
);
register_kernel!(
    KernelDefBuilder::new("BiasAddGrad").type_constraint_list("T", NUMERIC_KERNEL_TYPES),
    BiasAddGradKernel
);
