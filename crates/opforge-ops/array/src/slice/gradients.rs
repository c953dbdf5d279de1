//! Gradients of the joining, splitting, slicing and padding ops.

use opforge_core::attrs::{AttrMap, IntoAttrValue};
use opforge_core::autodiff::{GradOp, Ops, OpsExt, Sym, SymArg};
use opforge_core::{
    register_gradient, register_not_differentiable, DataType, Result, Status, Tensor,
};

type Grads = Result<Vec<Option<Sym>>>;

/// An index vector constant of `dtype` (int32 or int64).
fn index_vector(o: &mut dyn Ops, dtype: DataType, v: &[i64]) -> Result<Sym> {
    let t = if dtype == DataType::Int64 {
        Tensor::from_slice(&[v.len() as i64], v)?
    } else {
        let v32: Vec<i32> = v.iter().map(|&x| x as i32).collect();
        Tensor::from_slice(&[v.len() as i64], &v32)?
    };
    o.constant(t)
}

fn one_output(mut r: Vec<Sym>, op: &str) -> Result<Sym> {
    r.pop()
        .ok_or_else(|| Status::internal(format!("{op} has no output")))
}

fn concat_list(o: &mut dyn Ops, xs: &[Sym], axis: Sym) -> Result<Sym> {
    if let [one] = xs {
        return Ok(*one);
    }
    let r = o.call(
        "ConcatV2",
        &[SymArg::List(xs.to_vec()), SymArg::One(axis)],
        &AttrMap::new(),
    )?;
    one_output(r, "ConcatV2")
}

fn pack_list(o: &mut dyn Ops, xs: &[Sym], axis: i64) -> Result<Sym> {
    let mut attrs = AttrMap::new();
    attrs.insert("axis".to_string(), axis.into_attr_value());
    let r = o.call("Pack", &[SymArg::List(xs.to_vec())], &attrs)?;
    one_output(r, "Pack")
}

fn concat_v2_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
    let n = op.inputs.len() - 1;
    let mut out = vec![None; n + 1];
    let Some(g) = grads[0] else {
        return Ok(out);
    };
    let values = &op.inputs[..n];
    let i32t = DataType::Int32.into_attr_value();
    let rank = o.op1("Rank", &[values[0]], &[])?;
    let ax = o.op1("Cast", &[op.inputs[n]], &[("DstT", i32t)])?;
    let ax = o.op1("FloorMod", &[ax, rank], &[])?;
    let one_i = o.constant(Tensor::scalar(1i32))?;
    let zero_i = o.constant(Tensor::scalar(0i32))?;
    let mask = o.op1("OneHot", &[ax, rank, one_i, zero_i], &[])?;
    let ax_v = o.int_vector(&[1])?;
    let ax_v = o.reshape(ax, ax_v)?;
    let one_v = o.int_vector(&[1])?;
    let mut offset: Option<Sym> = None;
    for (i, &x) in values.iter().enumerate() {
        let s = o.shape_of(x)?;
        let begin = match offset {
            None => o.zeros_like(s)?,
            Some(off) => o.mul(mask, off)?,
        };
        out[i] = Some(o.op1("Slice", &[g, begin, s], &[])?);
        let size = o.op1("Slice", &[s, ax_v, one_v], &[])?;
        offset = Some(match offset {
            None => size,
            Some(off) => o.add(off, size)?,
        });
    }
    Ok(out)
}

/// `Concat`'s gradient, as TensorFlow's `_ConcatGradHelper`: the slices of
/// the incoming gradient at the `ConcatOffset`s of the inputs (the
/// dimension taken modulo the rank), of the inputs' shapes.
fn concat_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
    let n = op.inputs.len() - 1;
    let mut out = vec![None; n + 1];
    let Some(g) = grads[0] else {
        return Ok(out);
    };
    let values = &op.inputs[1..];
    let rank = o.op1("Rank", &[values[0]], &[])?;
    let dim = o.op1("FloorMod", &[op.inputs[0], rank], &[])?;
    let shapes = values
        .iter()
        .map(|&x| o.shape_of(x))
        .collect::<Result<Vec<_>>>()?;
    let offsets = o.call(
        "ConcatOffset",
        &[SymArg::One(dim), SymArg::List(shapes.clone())],
        &AttrMap::new(),
    )?;
    for (i, (&begin, &size)) in offsets.iter().zip(&shapes).enumerate() {
        out[i + 1] = Some(o.op1("Slice", &[g, begin, size], &[])?);
    }
    Ok(out)
}

fn pack_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
    let n = op.inputs.len();
    let Some(g) = grads[0] else {
        return Ok(vec![None; n]);
    };
    let axis: i64 = op.attr("axis")?;
    let mut attrs = AttrMap::new();
    attrs.insert("num".to_string(), (n as i64).into_attr_value());
    attrs.insert("axis".to_string(), axis.into_attr_value());
    let r = o.call("Unpack", &[SymArg::One(g)], &attrs)?;
    Ok(r.into_iter().map(Some).collect())
}

/// Gradients of a multi-output op, with zeros for the outputs without one.
fn filled(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Result<Vec<Sym>> {
    grads
        .iter()
        .zip(op.outputs)
        .map(|(g, &y)| match g {
            Some(g) => Ok(*g),
            None => o.zeros_like(y),
        })
        .collect()
}

fn unpack_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
    if grads.iter().all(Option::is_none) {
        return Ok(vec![None]);
    }
    let axis: i64 = op.attr("axis")?;
    let gs = filled(o, op, grads)?;
    Ok(vec![Some(pack_list(o, &gs, axis)?)])
}

fn split_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
    if grads.iter().all(Option::is_none) {
        return Ok(vec![None, None]);
    }
    let gs = filled(o, op, grads)?;
    Ok(vec![None, Some(concat_list(o, &gs, op.inputs[0])?)])
}

fn slice_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
    let Some(g) = grads[0] else {
        return Ok(vec![None, None, None]);
    };
    let (x, begin) = (op.inputs[0], op.inputs[1]);
    let idx = o.dtype(begin).into_attr_value();
    let out_size = o.op1("Shape", &[op.outputs[0]], &[("out_type", idx.clone())])?;
    let in_size = o.op1("Shape", &[x], &[("out_type", idx)])?;
    let col = o.int_vector(&[-1, 1])?;
    let before = o.reshape(begin, col)?;
    let rest = o.sub(in_size, out_size)?;
    let rest = o.sub(rest, begin)?;
    let after = o.reshape(rest, col)?;
    let one = o.constant(Tensor::scalar(1i32))?;
    let paddings = concat_list(o, &[before, after], one)?;
    Ok(vec![Some(o.op1("Pad", &[g, paddings], &[])?), None, None])
}

fn tile_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
    let Some(g) = grads[0] else {
        return Ok(vec![None, None]);
    };
    let (x, multiples) = (op.inputs[0], op.inputs[1]);
    let idx = o.dtype(multiples).into_attr_value();
    let in_shape = o.op1("Shape", &[x], &[("out_type", idx)])?;
    // [m0, d0, m1, d1, ...]
    let pairs = pack_list(o, &[multiples, in_shape], 1)?;
    let mdt = o.dtype(multiples);
    let flat = index_vector(o, mdt, &[-1])?;
    let split_shape = o.reshape(pairs, flat)?;
    let n = o.op1("Size", &[split_shape], &[])?;
    let zero = o.constant(Tensor::scalar(0i32))?;
    let two = o.constant(Tensor::scalar(2i32))?;
    let axes = o.op1("Range", &[zero, n, two], &[])?;
    let g = o.reshape(g, split_shape)?;
    let summed = o.op1("Sum", &[g, axes], &[("keep_dims", false.into_attr_value())])?;
    Ok(vec![Some(summed), None])
}

fn pad_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
    let mut out = vec![None; op.inputs.len()];
    let Some(g) = grads[0] else {
        return Ok(out);
    };
    let (x, paddings) = (op.inputs[0], op.inputs[1]);
    let dt = o.dtype(paddings);
    let b = index_vector(o, dt, &[0, 0])?;
    let s = index_vector(o, dt, &[-1, 1])?;
    let before = o.op1("Slice", &[paddings, b, s], &[])?;
    let flat = index_vector(o, dt, &[-1])?;
    let begin = o.reshape(before, flat)?;
    let sizes = o.op1("Shape", &[x], &[("out_type", dt.into_attr_value())])?;
    out[0] = Some(o.op1("Slice", &[g, begin, sizes], &[])?);
    Ok(out)
}

/// `MirrorPad`'s gradient is `MirrorPadGrad` of the incoming gradient, and
/// `MirrorPadGrad`'s is `MirrorPad` (both linear, adjoint to each other).
fn mirror_pad_grad(o: &mut dyn Ops, op: &GradOp<'_>, grads: &[Option<Sym>]) -> Grads {
    let Some(g) = grads[0] else {
        return Ok(vec![None, None]);
    };
    let adjoint = if op.op == "MirrorPad" {
        "MirrorPadGrad"
    } else {
        "MirrorPad"
    };
    let mode: String = op.attr("mode")?;
    let r = o.op1(
        adjoint,
        &[g, op.inputs[1]],
        &[("mode", mode.into_attr_value())],
    )?;
    Ok(vec![Some(r), None])
}

register_gradient!("ConcatV2", concat_v2_grad);
register_gradient!("Concat", concat_grad);
register_gradient!("MirrorPad", mirror_pad_grad);
register_gradient!("MirrorPadGrad", mirror_pad_grad);
register_not_differentiable!("ConcatOffset");
// No input to differentiate (TensorFlow registers no gradient for it).
register_not_differentiable!("_ParallelConcatStart");
register_gradient!("Pack", pack_grad);
register_gradient!("Unpack", unpack_grad);
register_gradient!("Split", split_grad);
register_gradient!("Slice", slice_grad);
register_gradient!("Tile", tile_grad);
register_gradient!("Pad", pad_grad);
register_gradient!("PadV2", pad_grad);
