//! `Unique`, `UniqueWithCounts` and `EditDistance` (OpDefs and shape
//! functions; no CPU kernels yet).

use opforge_core::shape_inference::common::unknown_shape;
use opforge_core::shape_inference::{DimensionHandle, InferenceContext};
use opforge_core::{register_op, OpDefBuilder, Result, Status};
use opforge_ops_base::args::int_values;
use opforge_ops_base::shape::*;

register_op!(OpDefBuilder::new("EditDistance")
    .input("hypothesis_indices: int64")
    .input("hypothesis_values: T")
    .input("hypothesis_shape: int64")
    .input("truth_indices: int64")
    .input("truth_values: T")
    .input("truth_shape: int64")
    .attr("normalize: bool = true")
    .attr("T: type")
    .output("output: float")
    .set_shape_fn(with_inputs(6, edit_distance_shape))
    .doc(
        "Computes the (possibly normalized) Levenshtein Edit Distance.\n\n\
         The hypothesis and truth sequences are given as SparseTensors.",
    ));

fn edit_distance_shape(c: &mut InferenceContext) -> Result<()> {
    let (hi, hv, hs) = (c.input(0), c.input(1), c.input(2));
    validate_sparse_tensor(c, hi, hv, hs)?;
    let (ti, tv, ts) = (c.input(3), c.input(4), c.input(5));
    validate_sparse_tensor(c, ti, tv, ts)?;
    let (Some(h), Some(t)) = (c.input_tensor(2).cloned(), c.input_tensor(5).cloned()) else {
        return unknown_shape(c);
    };
    if h.num_elements() != t.num_elements() {
        return Err(Status::invalid_argument(format!(
            "Num elements of hypothesis_shape does not match truth_shape: {} vs. {}",
            h.num_elements(),
            t.num_elements()
        )));
    }
    if h.num_elements() == 0 {
        return Err(Status::invalid_argument(
            "hypothesis_shape and truth_shape must have at least one element",
        ));
    }
    let (hv, tv) = (
        int_values(&h, "hypothesis_shape")?,
        int_values(&t, "truth_shape")?,
    );
    let dims: Vec<DimensionHandle> = hv[..hv.len() - 1]
        .iter()
        .zip(&tv)
        .map(|(&a, &b)| c.make_dim(a.max(b)))
        .collect();
    let out = c.make_shape_from_dims(dims);
    c.set_output(0, out);
    Ok(())
}

register_op!(OpDefBuilder::new("Unique")
    .input("x: T")
    .output("y: T")
    .output("idx: out_idx")
    .attr("T: type")
    .attr("out_idx: {int32, int64} = DT_INT32")
    .set_shape_fn(with_inputs(1, unique_shape))
    .doc(
        "Finds unique elements in a 1-D tensor.\n\n\
         `y` holds the unique elements in order of first occurrence; `idx` maps `x` into `y`.",
    ));

fn unique_shape(c: &mut InferenceContext) -> Result<()> {
    let y = c.vector(-1);
    c.set_output(0, y);
    let x = c.input(0);
    c.set_output(1, x);
    c.with_rank(x, 1)?;
    Ok(())
}

register_op!(OpDefBuilder::new("UniqueWithCounts")
    .input("x: T")
    .output("y: T")
    .output("idx: out_idx")
    .output("count: out_idx")
    .attr("T: type")
    .attr("out_idx: {int32, int64} = DT_INT32")
    .set_shape_fn(with_inputs(1, unique_with_counts_shape))
    .doc(
        "Finds unique elements in a 1-D tensor, and counts them.\n\n\
         Like `Unique`, and `count` holds how often each unique element occurs.",
    ));

fn unique_with_counts_shape(c: &mut InferenceContext) -> Result<()> {
    let uniq = c.vector(-1);
    c.set_output(0, uniq);
    let x = c.input(0);
    c.set_output(1, x);
    c.set_output(2, uniq);
    Ok(())
}
