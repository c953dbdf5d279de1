//! `UnravelIndex` (OpDef and shape function; no CPU kernel yet).

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
