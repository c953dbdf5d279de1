//! `UnravelIndex`.

use super::*;
use opforge_ops_base::shape::*;

register_op!(OpDefBuilder::new("UnravelIndex")
    .input("indices: Tidx")
    .input("dims: Tidx")
    .output("output: Tidx")
    .attr("Tidx: {int32, int64} = DT_INT32")
    .set_shape_fn(with_inputs(2, unravel_index_shape))
    .doc(
        "Converts an array of flat indices into a tuple of coordinate arrays.\n\n\
         Each flat index of `indices` becomes its coordinates in an array of shape `dims`.",
    ));

fn unravel_index_shape(c: &mut InferenceContext) -> Result<()> {
    let indices = c.input(0);
    let d = c.input(1);
    let dims = c.with_rank(d, 1)?;
    let n = c.dim(dims, 0);
    let out = match c.rank(indices) {
        Some(0) => c.vector(n),
        Some(_) => {
            let elems = c.num_elements_dim(indices);
            c.matrix(n, elems)
        }
        None => c.unknown_shape(),
    };
    c.set_output(0, out);
    Ok(())
}

/// Eigen's printing of a vector: `(a b c)`, each value right-aligned to the
/// width of the widest.
fn eigen_vector(values: &[i64]) -> String {
    let texts: Vec<String> = values.iter().map(i64::to_string).collect();
    let width = texts.iter().map(String::len).max().unwrap_or(0);
    let padded: Vec<String> = texts.iter().map(|t| format!("{t:>width$}")).collect();
    format!("({})", padded.join(" "))
}

/// `UnravelIndex`: output `[i, j]` is `indices[j] / prod(dims[i+1:]) %
/// dims[i]`, C++'s truncating division and remainder (a negative index is
/// not an error in TensorFlow and gives negative coordinates).
pub(super) struct UnravelIndexOp;

impl OpKernel for UnravelIndexOp {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let (indices_t, dims_t) = (ctx.input(0), ctx.input(1));
        ensure!(
            indices_t.rank() <= 1,
            InvalidArgument,
            "The indices can only be scalar or vector, got \"{}\"",
            indices_t.shape()
        );
        ensure!(
            indices_t.num_elements() > 0,
            InvalidArgument,
            "received empty tensor indices: Tensor<type: {} shape: {} values: >",
            indices_t.dtype(),
            indices_t.shape()
        );
        ensure!(
            dims_t.rank() == 1,
            InvalidArgument,
            "The indices can only be 1-D, got \"{}\"",
            dims_t.shape()
        );
        let dtype = indices_t.dtype();
        let limit = if dtype == DataType::Int64 {
            i64::MAX
        } else {
            i64::from(i32::MAX)
        };
        let dims = index_values(dims_t, "dims")?;
        let mut prod: i64 = 1;
        for (i, &d) in dims.iter().enumerate() {
            ensure!(
                d != 0,
                InvalidArgument,
                "Input dims cannot contain a dim of zero, but dims contains zero at index {i}"
            );
            ensure!(
                d > 0,
                InvalidArgument,
                "Input dims cannot be negative. Got dim = {d} at index {i}"
            );
            ensure!(
                prod <= limit / d,
                InvalidArgument,
                "Input dims product is causing integer overflow: {}",
                eigen_vector(&dims)
            );
            prod *= d;
        }
        let indices = index_values(indices_t, "indices")?;
        ensure!(
            indices.iter().all(|&i| i < prod),
            InvalidArgument,
            "index is out of bound as with dims"
        );
        let k = indices.len();
        let nd = dims.len();
        let shape = if indices_t.rank() == 0 {
            TensorShape::new(&[nd as i64])?
        } else {
            TensorShape::new(&[nd as i64, k as i64])?
        };
        // strides[i] = prod(dims[i+1:]), at most `prod`, so no overflow.
        let mut strides = vec![1i64; nd];
        for i in (0..nd.saturating_sub(1)).rev() {
            strides[i] = strides[i + 1] * dims[i + 1];
        }
        let coord = |flat: usize| {
            let (i, j) = (flat / k, flat % k);
            indices[j] / strides[i] % dims[i]
        };
        let out = ctx.allocate_output(0, shape)?;
        match dtype {
            DataType::Int32 => {
                for (flat, o) in out.flat_mut::<i32>()?.iter_mut().enumerate() {
                    // |coordinate| <= |index|, which is an int32.
                    *o = coord(flat) as i32;
                }
            }
            _ => {
                for (flat, o) in out.flat_mut::<i64>()?.iter_mut().enumerate() {
                    *o = coord(flat);
                }
            }
        }
        Ok(())
    }
}

register_kernel!(
    KernelDefBuilder::new("UnravelIndex").type_constraint_list("Tidx", INDEX_TYPES),
    fn = |_| Ok(Box::new(UnravelIndexOp))
);
