//! Declarative gradients: a gradient as a list of nodes over registered
//! ops ([`GradientFunction`], the header's `OpforgeGradientFunction`),
//! evaluated by the host at autodiff time with no plugin code (TensorFlow's
//! `REGISTER_OP_GRADIENT` / FunctionDef gradients map onto it). Register one
//! with [`GradientDef::nodes`](crate::GradientDef::nodes).

use opforge_abi::{
    OpforgeGradArg, OpforgeGradNode, OpforgeGradSource, OpforgeGradientFunction, OpforgeNamedAttr,
    OpforgeStr, OPFORGE_GRAD_SRC_INPUT, OPFORGE_GRAD_SRC_NODE, OPFORGE_GRAD_SRC_NONE,
    OPFORGE_GRAD_SRC_OUTPUT, OPFORGE_GRAD_SRC_OUTPUT_GRAD, OPFORGE_GRAD_WHOLE_ARG,
};

use crate::attr::{AbiAttr, AttrValue};

/// An argument of an op, or one element of it: by name (`index` the list
/// element, or the whole argument), or by flat index (`arg` empty).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArgRef {
    /// The argument's name ("" for a flat index).
    pub arg: String,
    /// The element, [`OPFORGE_GRAD_WHOLE_ARG`] for the whole argument, or
    /// the flat index when `arg` is empty.
    pub index: i64,
}

impl ArgRef {
    /// The whole argument `name`.
    pub fn arg(name: &str) -> ArgRef {
        ArgRef {
            arg: name.to_string(),
            index: OPFORGE_GRAD_WHOLE_ARG,
        }
    }
    /// Element `index` of the list argument `name`.
    pub fn element(name: &str, index: usize) -> ArgRef {
        ArgRef {
            arg: name.to_string(),
            index: index as i64,
        }
    }
    /// The flat input or output `index`.
    pub fn flat(index: usize) -> ArgRef {
        ArgRef {
            arg: String::new(),
            index: index as i64,
        }
    }
}

/// Where a value of a declarative gradient comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GradSource {
    /// No value (in input gradients: no gradient).
    None,
    /// An input of the forward op.
    Input(ArgRef),
    /// An output of the forward op.
    Output(ArgRef),
    /// The gradient flowing into an output of the forward op (zeros where
    /// none flows).
    OutputGrad(ArgRef),
    /// An output of an earlier node (its position in the list).
    Node(usize, ArgRef),
}

/// One argument: a single value, or a list of values.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GradArg {
    /// The sources.
    pub sources: Vec<GradSource>,
    /// Whether the argument is a list.
    pub is_list: bool,
}

impl GradArg {
    /// A single-tensor argument.
    pub fn one(source: GradSource) -> GradArg {
        GradArg {
            sources: vec![source],
            is_list: false,
        }
    }
    /// A list argument (a whole-argument source is spliced in).
    pub fn list(sources: Vec<GradSource>) -> GradArg {
        GradArg {
            sources,
            is_list: true,
        }
    }
    /// No gradient (in input gradients).
    pub fn none() -> GradArg {
        GradArg {
            sources: Vec::new(),
            is_list: false,
        }
    }
}

/// The value of a node's attr: a value, or the forward op's attr of that
/// name (TensorFlow's `$T`).
#[derive(Clone, Debug, PartialEq)]
pub enum NodeAttr {
    /// A value.
    Value(AttrValue),
    /// The forward op's attr of this name.
    Placeholder(String),
}

/// One node: a call of a registered op.
#[derive(Clone, Debug, PartialEq)]
pub struct GradNode {
    /// Names the node in graphs and messages ("" for none).
    pub name: String,
    /// The op.
    pub op: String,
    /// One per input argument of the op.
    pub inputs: Vec<GradArg>,
    /// Attrs (others take the op's defaults, type attrs are inferred).
    pub attrs: Vec<(String, NodeAttr)>,
}

/// A gradient as data: nodes, then one gradient per input argument of the
/// forward op.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GradientFunction {
    /// The nodes, in order.
    pub nodes: Vec<GradNode>,
    /// One per input argument of the forward op.
    pub input_grads: Vec<GradArg>,
}

impl GradientFunction {
    /// An empty gradient.
    pub fn new() -> GradientFunction {
        GradientFunction::default()
    }

    /// Appends a node calling `op`; returns its position (for
    /// [`GradSource::Node`]).
    pub fn node(&mut self, op: &str, inputs: Vec<GradArg>, attrs: Vec<(&str, NodeAttr)>) -> usize {
        self.nodes.push(GradNode {
            name: String::new(),
            op: op.to_string(),
            inputs,
            attrs: attrs.into_iter().map(|(n, v)| (n.to_string(), v)).collect(),
        });
        self.nodes.len() - 1
    }

    /// Sets the gradients of the forward op's input arguments, in order.
    pub fn input_grads(&mut self, grads: Vec<GradArg>) -> &mut GradientFunction {
        self.input_grads = grads;
        self
    }
}

fn source(s: &GradSource) -> OpforgeGradSource {
    let mut out = OpforgeGradSource::new();
    let (kind, node, r) = match s {
        GradSource::None => (OPFORGE_GRAD_SRC_NONE, 0, None),
        GradSource::Input(r) => (OPFORGE_GRAD_SRC_INPUT, 0, Some(r)),
        GradSource::Output(r) => (OPFORGE_GRAD_SRC_OUTPUT, 0, Some(r)),
        GradSource::OutputGrad(r) => (OPFORGE_GRAD_SRC_OUTPUT_GRAD, 0, Some(r)),
        GradSource::Node(n, r) => (OPFORGE_GRAD_SRC_NODE, *n as u32, Some(r)),
    };
    out.kind = kind;
    out.node = node;
    if let Some(r) = r {
        out.arg = OpforgeStr::from_text(&r.arg);
        out.index = r.index;
    }
    out
}

/// The ABI form of one `GradArg`'s sources (kept alive by the caller).
fn sources(a: &GradArg) -> Vec<OpforgeGradSource> {
    a.sources.iter().map(source).collect()
}

fn arg(a: &GradArg, sources: &[OpforgeGradSource]) -> OpforgeGradArg {
    let mut out = OpforgeGradArg::new();
    out.sources = sources.as_ptr();
    out.num_sources = sources.len();
    out.is_list = u8::from(a.is_list);
    out
}

/// Calls `f` with the ABI form of `g` for `op` (every array lives across
/// the call).
pub(crate) fn with_abi<R>(
    op: &str,
    g: &GradientFunction,
    f: impl FnOnce(&OpforgeGradientFunction) -> R,
) -> R {
    // Storage first, pointers after: nothing below moves once borrowed.
    let node_sources: Vec<Vec<Vec<OpforgeGradSource>>> = g
        .nodes
        .iter()
        .map(|n| n.inputs.iter().map(sources).collect())
        .collect();
    let node_args: Vec<Vec<OpforgeGradArg>> = g
        .nodes
        .iter()
        .zip(&node_sources)
        .map(|(n, ss)| n.inputs.iter().zip(ss).map(|(a, s)| arg(a, s)).collect())
        .collect();
    let attr_values: Vec<Vec<AbiAttr<'_>>> = g
        .nodes
        .iter()
        .map(|n| {
            n.attrs
                .iter()
                .map(|(_, v)| match v {
                    NodeAttr::Value(v) => v.to_abi(),
                    NodeAttr::Placeholder(name) => AbiAttr::placeholder(name),
                })
                .collect()
        })
        .collect();
    let named: Vec<Vec<OpforgeNamedAttr>> = g
        .nodes
        .iter()
        .zip(&attr_values)
        .map(|(n, vs)| {
            n.attrs
                .iter()
                .zip(vs)
                .map(|((name, _), v)| {
                    let mut a = OpforgeNamedAttr::new();
                    a.name = OpforgeStr::from_text(name);
                    a.value = v.get();
                    a
                })
                .collect()
        })
        .collect();
    let nodes: Vec<OpforgeGradNode> = g
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let mut out = OpforgeGradNode::new();
            out.name = OpforgeStr::from_text(&n.name);
            out.op = OpforgeStr::from_text(&n.op);
            out.inputs = node_args[i].as_ptr();
            out.num_inputs = node_args[i].len();
            out.attrs = named[i].as_ptr();
            out.num_attrs = named[i].len();
            out
        })
        .collect();
    let grad_sources: Vec<Vec<OpforgeGradSource>> = g.input_grads.iter().map(sources).collect();
    let grads: Vec<OpforgeGradArg> = g
        .input_grads
        .iter()
        .zip(&grad_sources)
        .map(|(a, s)| arg(a, s))
        .collect();
    let mut def = OpforgeGradientFunction::new();
    def.op = OpforgeStr::from_text(op);
    def.nodes = nodes.as_ptr();
    def.num_nodes = nodes.len();
    def.input_grads = grads.as_ptr();
    def.num_input_grads = grads.len();
    f(&def)
}
