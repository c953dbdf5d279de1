//! The gradient of `StridedSlice`.

use opforge_core::attrs::{AttrMap, IntoAttrValue};
use opforge_core::autodiff::{GradOp, Ops, Sym, SymArg};
use opforge_core::{register_gradient, Result, Status};

type Grads = Result<Vec<Option<Sym>>>;

const MASKS: [&str; 5] = [
    "begin_mask",
    "end_mask",
    "ellipsis_mask",
    "new_axis_mask",
    "shrink_axis_mask",
];

fn masks(op: &GradOp<'_>) -> AttrMap {
    MASKS
        .iter()
        .filter_map(|&k| op.attrs.get(k).map(|v| (k.to_string(), v.clone())))
        .collect()
}

fn call1(o: &mut dyn Ops, name: &str, inputs: &[Sym], attrs: &AttrMap) -> Result<Sym> {
    let args: Vec<SymArg> = inputs.iter().map(|&s| SymArg::One(s)).collect();
    o.call(name, &args, attrs)?
        .pop()
        .ok_or_else(|| Status::internal(format!("{name} has no output")))
}

fn strided_slice_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
    let Some(g) = grads[0] else {
        return Ok(vec![None; 4]);
    };
    let (begin, end, strides) = (op.inputs[1], op.inputs[2], op.inputs[3]);
    let idx = o.dtype(begin).into_attr_value();
    let mut attrs = AttrMap::new();
    attrs.insert("out_type".to_string(), idx);
    let x = call1(o, "Shape", &[op.inputs[0]], &attrs)?;
    let dx = call1(
        o,
        "StridedSliceGrad",
        &[x, begin, end, strides, g],
        &masks(op),
    )?;
    Ok(vec![Some(dx), None, None, None])
}

fn strided_slice_grad_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
    let Some(g) = grads[0] else {
        return Ok(vec![None; 5]);
    };
    let (begin, end, strides) = (op.inputs[1], op.inputs[2], op.inputs[3]);
    let ddy = call1(o, "StridedSlice", &[g, begin, end, strides], &masks(op))?;
    Ok(vec![None, None, None, None, Some(ddy)])
}

register_gradient!("StridedSlice", strided_slice_grad);
register_gradient!("StridedSliceGrad", strided_slice_grad_grad);
