//! The OpDef synthesis (the rule is in the crate documentation).

use crate::adapt::{
    fgradient_from_gradient, gradient_from_fgradient, infer_shape_from_shape_fn,
    shape_fn_from_infer_shape,
};
use crate::attrs::{
    Arguments, AttrParser, Describe, FGradient, FInferShape, FInferType, FListInputNames,
    FListOutputNames, FMutateInputs, FNumVisibleOutputs, FResourceRequest, InferTypeFn, NodeAttrs,
    NumInputs, NumOutputs,
};
use crate::compute::{ComputeKernel, ComputeParts};
use crate::op::NnvmOp;
use opforge_core::attrs::AttrMap;
use opforge_core::autodiff::Gradient;
use opforge_core::kernel::{KernelDefBuilder, KernelRegistration, OpKernel};
use opforge_core::shape_inference::ShapeFn;
use opforge_core::{DataType, OpDefBuilder, Result, Status};
use std::sync::Arc;

/// What [`synthesize`] makes: the op (with its attributes) and its kernels.
pub(crate) struct Synth {
    pub(crate) op: OpDefBuilder,
    pub(crate) kernels: Vec<KernelRegistration>,
}

/// The dtypes the synthesis probes an `FInferType` with, one per input.
const PROBES: [DataType; 6] = [
    DataType::Float,
    DataType::Double,
    DataType::Half,
    DataType::BFloat16,
    DataType::Complex64,
    DataType::Complex128,
];

/// How the outputs' dtypes follow from the inputs'.
#[derive(Clone, Debug, PartialEq)]
enum OutType {
    /// The dtype of input k (its type attr).
    Input(usize),
    /// A fixed dtype.
    Fixed(DataType),
}

/// The type attrs and the outputs' types.
struct Typing {
    /// The type attr of each input.
    input_attrs: Vec<String>,
    outputs: Vec<OutType>,
}

fn invalid(op: &str, message: String) -> Status {
    Status::invalid_argument(format!("NNVM op '{op}': {message}"))
}

fn run_infer_type(
    f: &InferTypeFn,
    attrs: &NodeAttrs<'_>,
    ins: &[DataType],
    n_out: usize,
) -> Result<Vec<Option<DataType>>> {
    let mut i: Vec<Option<DataType>> = ins.iter().copied().map(Some).collect();
    let mut o = vec![None; n_out];
    f(attrs, &mut i, &mut o)?;
    Ok(o)
}

/// Decides the type attrs: one shared `T` when `FInferType` ties every
/// input and output to the first input, else one per input (`T` for a
/// single input, `T0`, `T1`, ... otherwise), each output typed like the
/// input `FInferType` makes it follow, or fixed.
fn typing(op: &NnvmOp, attrs: &NodeAttrs<'_>, n_in: usize, n_out: usize) -> Result<Typing> {
    let name = op.name();
    let per_input = |n: usize| -> Vec<String> {
        if n == 1 {
            vec!["T".to_string()]
        } else {
            (0..n).map(|i| format!("T{i}")).collect()
        }
    };
    let Some(f) = op.get::<FInferType>() else {
        if n_in == 0 {
            return Err(invalid(
                name,
                "an op without inputs needs an FInferType giving its outputs' dtypes".into(),
            ));
        }
        return Ok(Typing {
            input_attrs: per_input(n_in),
            outputs: vec![OutType::Input(0); n_out],
        });
    };
    // Tied: only input 0 known, every input and output comes out as it.
    if n_in > 0 {
        let mut ins = vec![None; n_in];
        ins[0] = Some(DataType::Float);
        let mut outs = vec![None; n_out];
        if f(attrs, &mut ins, &mut outs).is_ok()
            && ins.iter().chain(&outs).all(|t| *t == Some(DataType::Float))
        {
            return Ok(Typing {
                input_attrs: vec!["T".to_string(); n_in],
                outputs: vec![OutType::Input(0); n_out],
            });
        }
    }
    if n_in > PROBES.len() {
        return Err(invalid(
            name,
            format!(
                "{n_in} inputs whose dtypes FInferType does not tie: the synthesis tells at most {} apart",
                PROBES.len()
            ),
        ));
    }
    let a: Vec<DataType> = PROBES[..n_in].to_vec();
    let mut b = a.clone();
    b.rotate_left(1.min(n_in));
    let second = if n_in == 1 { vec![DataType::Double] } else { b };
    let out_a = run_infer_type(&*f, attrs, &a, n_out)?;
    let out_b = run_infer_type(&*f, attrs, &second, n_out)?;
    let mut outputs = Vec::with_capacity(n_out);
    for (j, (ta, tb)) in out_a.iter().zip(&out_b).enumerate() {
        let follows = (0..n_in).find(|&k| *ta == Some(a[k]) && *tb == Some(second[k]));
        outputs.push(match (follows, ta, tb) {
            (Some(k), _, _) => OutType::Input(k),
            (None, Some(x), Some(y)) if x == y => OutType::Fixed(*x),
            _ => {
                return Err(invalid(
                    name,
                    format!(
                        "FInferType gives output {j} neither an input's dtype nor a fixed one \
                         (inputs {a:?} gave {ta:?}, inputs {second:?} gave {tb:?})"
                    ),
                ))
            }
        });
    }
    Ok(Typing {
        input_attrs: per_input(n_in),
        outputs,
    })
}

fn names(
    op: &str,
    listed: Option<Vec<String>>,
    n: usize,
    what: &str,
    default: impl Fn(usize) -> String,
) -> Result<Vec<String>> {
    match listed {
        Some(names) if names.len() >= n => Ok(names.into_iter().take(n).collect()),
        Some(names) => Err(invalid(
            op,
            format!(
                "FList{what}Names gives {} names for {n} {what}s",
                names.len()
            ),
        )),
        None => Ok((0..n).map(default).collect()),
    }
}

/// Synthesises the op: OpDef, attributes (the NNVM ones, core's `ShapeFn`
/// and `Gradient` and the NNVM forms of each, adapted from the other where
/// only one was given) and kernels.
pub(crate) fn synthesize(op: &NnvmOp) -> Result<Synth> {
    let name = op.name();
    let empty = AttrMap::new();
    let attrs = NodeAttrs::new(name, name, &empty, None);
    let n_in = op.get::<NumInputs>().map_or(1, |n| *n as usize);
    let n_out = op.get::<NumOutputs>().map_or(1, |n| *n as usize);
    let visible = match op.get::<FNumVisibleOutputs>() {
        Some(f) => f(&attrs) as usize,
        None => n_out,
    };
    if visible > n_out {
        return Err(invalid(
            name,
            format!("FNumVisibleOutputs gives {visible} visible outputs of {n_out}"),
        ));
    }
    let input_names = names(
        name,
        op.get::<FListInputNames>().map(|f| f(&attrs)),
        n_in,
        "Input",
        |i| {
            if n_in == 1 {
                "data".into()
            } else {
                format!("arg{i}")
            }
        },
    )?;
    let output_names = names(
        name,
        op.get::<FListOutputNames>().map(|f| f(&attrs)),
        visible,
        "Output",
        |i| {
            if i == 0 {
                "output".into()
            } else {
                format!("output{i}")
            }
        },
    )?;
    let typing = typing(op, &attrs, n_in, n_out)?;

    let mut b = OpDefBuilder::new(name);
    let mut declared: Vec<&str> = Vec::new();
    for (input, t) in input_names.iter().zip(&typing.input_attrs) {
        if !declared.contains(&t.as_str()) {
            b = b.attr(format!("{t}: type"));
            declared.push(t);
        }
        b = b.input(format!("{input}: {t}"));
    }
    for (output, t) in output_names.iter().zip(&typing.outputs) {
        b = match t {
            OutType::Input(k) => b.output(format!("{output}: {}", typing.input_attrs[*k])),
            OutType::Fixed(d) => b.output(format!("{output}: {}", d.name())),
        };
    }
    let parser = op.get::<AttrParser>();
    if let Some(p) = &parser {
        b = (p.add_attrs)(b);
    }
    if let Some(text) = op.get::<Describe>() {
        let mut doc = text.to_string();
        for arg in op.arguments() {
            if input_names.contains(&arg.name) && !arg.description.is_empty() {
                doc.push_str(&format!("\n\n{}: {}", arg.name, arg.description));
            }
        }
        b = b.doc(doc);
    }
    if op
        .get::<FMutateInputs>()
        .is_some_and(|f| !f(&attrs).is_empty())
    {
        b = b.stateful();
    }
    for (attr, attach) in op.erased() {
        b = attach(b, attr);
    }
    if !op.arguments().is_empty() {
        b = b.set_attr::<Arguments>(op.arguments().into());
    }

    // Shapes: the NNVM form and core's, each from the other if missing.
    let op_def = Arc::new(b.finalize()?);
    let infer_shape = match (op.get::<FInferShape>(), op.get::<ShapeFn>()) {
        (Some(f), None) => {
            b = b.shape_fn_arc(shape_fn_from_infer_shape(f.clone(), n_out, visible));
            Some(f)
        }
        (None, Some(s)) => {
            let f = infer_shape_from_shape_fn(op_def.clone(), s);
            b = b.set_attr::<FInferShape>(f.clone());
            Some(f)
        }
        (f, _) => f,
    };
    // Gradients, likewise.
    match (op.get::<FGradient>(), op.get::<Gradient>()) {
        (Some(f), None) => b = b.set_attr::<Gradient>(Arc::new(gradient_from_fgradient(f))),
        (None, Some(g)) => {
            if let Some(f) = fgradient_from_gradient(&g) {
                b = b.set_attr::<FGradient>(f);
            }
        }
        _ => {}
    }

    let mut kernels = Vec::new();
    if !op.computes().is_empty() {
        let Some(infer_shape) = infer_shape else {
            return Err(invalid(
                name,
                "an op with an FCompute needs an FInferShape (or a ShapeFn) to size its outputs"
                    .into(),
            ));
        };
        let outputs = typing.outputs.clone();
        let infer_type = op.get::<FInferType>();
        let output_types = Arc::new(
            move |attrs: &NodeAttrs<'_>, ins: &[DataType]| -> Result<Vec<DataType>> {
                let n = outputs.len();
                let inferred = match &infer_type {
                    Some(f) => run_infer_type(&**f, attrs, ins, n)?,
                    None => vec![None; n],
                };
                outputs
                    .iter()
                    .zip(inferred)
                    .map(|(rule, got)| {
                        Ok(got.unwrap_or(match rule {
                            OutType::Input(k) => ins.get(*k).copied().unwrap_or(DataType::Invalid),
                            OutType::Fixed(d) => *d,
                        }))
                    })
                    .collect()
            },
        );
        for (device, compute) in op.computes() {
            let parts = Arc::new(ComputeParts {
                op: name.to_string(),
                compute: compute.clone(),
                infer_shape: infer_shape.clone(),
                parser: parser.as_ref().map(|p| p.parse),
                resources: op.get::<FResourceRequest>(),
                output_types: output_types.clone(),
                num_outputs: n_out,
            });
            kernels.push(KernelRegistration::with_factory(
                KernelDefBuilder::new(name).device(device),
                move |ctx| {
                    Ok(Box::new(ComputeKernel::new(parts.clone(), ctx)?) as Box<dyn OpKernel>)
                },
            ));
        }
    }
    Ok(Synth { op: b, kernels })
}

#[cfg(test)]
mod tests {
    use super::*;
    use opforge_core::Code;

    /// Fills only the outputs, from input 0 (does not tie the inputs).
    fn outputs_from_first(
        _: &NodeAttrs<'_>,
        ins: &mut [Option<DataType>],
        outs: &mut [Option<DataType>],
    ) -> Result<bool> {
        for o in outs.iter_mut() {
            *o = ins[0];
        }
        Ok(ins[0].is_some())
    }

    fn never(
        _: &NodeAttrs<'_>,
        _: &mut [Option<DataType>],
        _: &mut [Option<DataType>],
    ) -> Result<bool> {
        Ok(false)
    }

    fn typing_of(op: NnvmOp, n_in: usize, n_out: usize) -> Result<Typing> {
        let empty = AttrMap::new();
        let attrs = NodeAttrs::new(op.name(), op.name(), &empty, None);
        typing(&op, &attrs, n_in, n_out)
    }

    #[test]
    fn an_finfer_type_that_fills_only_outputs_does_not_tie_inputs() {
        let op = NnvmOp::new("X").set_attr::<FInferType>(Arc::new(outputs_from_first));
        let t = typing_of(op, 2, 2).unwrap();
        assert_eq!(t.input_attrs, ["T0", "T1"]);
        assert_eq!(t.outputs, [OutType::Input(0), OutType::Input(0)]);
        // With one input it does tie: every input and output is input 0's.
        let op = NnvmOp::new("X").set_attr::<FInferType>(Arc::new(outputs_from_first));
        let t = typing_of(op, 1, 1).unwrap();
        assert_eq!(t.input_attrs, ["T"]);
    }

    #[test]
    fn untyped_outputs_and_too_many_untied_inputs_are_refused() {
        let op = NnvmOp::new("X").set_attr::<FInferType>(Arc::new(never));
        let e = typing_of(op, 1, 1).err().unwrap();
        assert_eq!(e.code(), Code::InvalidArgument);
        assert!(
            e.message().starts_with(
                "NNVM op 'X': FInferType gives output 0 neither an input's dtype nor a fixed one"
            ),
            "{e}"
        );
        let op = NnvmOp::new("X").set_attr::<FInferType>(Arc::new(never));
        let e = typing_of(op, 7, 1).err().unwrap();
        assert_eq!(
            e.message(),
            "NNVM op 'X': 7 inputs whose dtypes FInferType does not tie: the synthesis tells at \
             most 6 apart"
        );
        let e = typing_of(NnvmOp::new("X"), 0, 1).err().unwrap();
        assert!(
            e.message()
                .contains("an op without inputs needs an FInferType"),
            "{e}"
        );
    }

    #[test]
    fn visible_outputs_cannot_exceed_the_outputs() {
        let op = NnvmOp::new("X")
            .set_num_outputs(1)
            .set_attr::<crate::FNumVisibleOutputs>(Arc::new(|_: &NodeAttrs<'_>| 2));
        let e = synthesize(&op).err().unwrap();
        assert_eq!(
            e.message(),
            "NNVM op 'X': FNumVisibleOutputs gives 2 visible outputs of 1"
        );
    }
}
