//! `AddN`.

use super::*;

// AddN
// ---------------------------------------------------------------------------

/// `AddN`: the sum of `N` tensors of one shape (no broadcasting), computed
/// in place in an input's buffer when one may be reused.
pub(super) struct AddNKernel;

pub(super) fn add_n<T: Num>(ctx: &mut OpKernelContext<'_>) -> Result<()> {
    let n = ctx.num_inputs();
    let shape = ctx.input(0).shape().clone();
    for i in 1..n {
        let s = ctx.input(i).shape();
        ensure!(
            *s == shape,
            InvalidArgument,
            "Inputs to operation {} of type {} must have the same size and shape.  Input 0: {} != input {}: {}",
            ctx.node_name(),
            ctx.op_def().name,
            shape,
            i,
            s
        );
    }
    if n == 1 {
        let t = ctx.take_input(0);
        return ctx.set_output(0, t);
    }
    let candidates: Vec<usize> = (0..n).collect();
    let forwarded = ctx.forward_input_or_allocate_output(&candidates, 0, &shape)?;
    let pool = ctx.thread_pool();
    let (ins, out) = ctx.inputs_and_output(0)?;
    let srcs = ins
        .iter()
        .enumerate()
        .filter(|&(i, _)| Some(i) != forwarded)
        .map(|(_, t)| t.flat_bits::<T>())
        .collect::<Result<Vec<&[T]>>>()?;
    let out = out.flat_bits_mut::<T>()?;
    // The output starts as the forwarded input, or as a copy of the first one.
    let (first, rest) = match (forwarded, srcs.split_first()) {
        (None, Some((first, rest))) => (Some(*first), rest),
        _ => (None, &srcs[..]),
    };
    let run = |start: usize, o: &mut [T]| {
        let range = start..start + o.len();
        if let Some(f) = first {
            o.copy_from_slice(&f[range.clone()]);
        }
        for r in rest {
            for (o, &x) in o.iter_mut().zip(&r[range.clone()]) {
                *o = (*o).add(x);
            }
        }
    };
    let shards = elementwise_shards(pool, out.len(), n);
    chunks_in_shards(pool, out, 1, shards, &run);
    Ok(())
}

impl OpKernel for AddNKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let dt = ctx.input_dtype(0);
        // A wrapping sum: one kernel per integer size.
        opforge_ops_base::sign_agnostic!(numeric_types, dt,
            T => add_n::<T>(ctx), Err(unsupported(ctx, dt)))
    }
}

register_op!(OpDefBuilder::new("AddN")
    .input("inputs: N * T")
    .output("sum: T")
    .attr("N: int >= 1")
    .attr("T: {numbertype, variant}")
    .commutative()
    .aggregate()
    .set_shape_fn(add_n_shape)
    .doc("Add all input tensors element wise.\n\nInputs must be of same size and shape."));
register_kernel!(
    KernelDefBuilder::new("AddN").type_constraint_list("T", NUMERIC_KERNEL_TYPES),
    fn = |_| Ok(Box::new(AddNKernel) as Box<dyn OpKernel>)
);

// ---------------------------------------------------------------------------
