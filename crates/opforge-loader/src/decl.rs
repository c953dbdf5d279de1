//! Declarative gradients (`registration.gradient_function`): a
//! FunctionDef-style list of nodes over registered ops, copied and checked
//! at registration, and evaluated at autodiff time through autodiff's `Ops`
//! (no plugin code runs), so higher-order gradients work whenever the
//! nodes' ops are differentiable.

use crate::host::*;
use opforge_abi::*;
use opforge_core::attrs::AttrMap;
use opforge_core::autodiff::{GradientContext, Ops, OpsExt, Sym, SymArg};
use opforge_core::proto::{AttrValue, OpDef};
use opforge_core::{Result, Status};

/// Where a value comes from (OpforgeGradSource, owned).
#[derive(Clone, Debug)]
struct Source {
    kind: u32,
    node: usize,
    arg: String,
    index: i64,
}

/// One argument (OpforgeGradArg, owned).
#[derive(Clone, Debug)]
struct Arg {
    sources: Vec<Source>,
    is_list: bool,
}

#[derive(Clone, Debug)]
enum Attr {
    Value(Box<AttrValue>),
    Placeholder(String),
}

#[derive(Clone, Debug)]
struct Node {
    name: String,
    op: String,
    inputs: Vec<Arg>,
    attrs: Vec<(String, Attr)>,
}

/// A declarative gradient, checked against the forward op and the node ops.
#[derive(Clone, Debug)]
pub(crate) struct DeclGradient {
    op: String,
    nodes: Vec<Node>,
    input_grads: Vec<Arg>,
}

/// # Safety
/// `a` is a plugin OpforgeGradArg with valid pointers (R5, R7).
unsafe fn read_arg(a: &OpforgeGradArg) -> Result<Arg> {
    let mut sources = Vec::new();
    // SAFETY: `sources` points at `num_sources` structs (header).
    for s in unsafe { read_array(a.sources, a.num_sources)? } {
        sources.push(Source {
            kind: s.kind,
            node: s.node as usize,
            // SAFETY: plugin string (R5).
            arg: unsafe { text(s.arg, "source arg")? }.to_string(),
            index: s.index,
        });
    }
    Ok(Arg {
        sources,
        is_list: a.is_list != 0,
    })
}

impl DeclGradient {
    /// Copies a plugin's OpforgeGradientFunction.
    ///
    /// # Safety
    /// `d` is a plugin struct with valid pointers (R5, R7).
    pub(crate) unsafe fn read(d: &OpforgeGradientFunction) -> Result<DeclGradient> {
        // SAFETY: plugin pointers, each checked by the helpers (NULL,
        // alignment, struct_size); lengths as the header defines them.
        unsafe {
            let op = text(d.op, "op")?.to_string();
            let mut nodes = Vec::new();
            for n in read_array(d.nodes, d.num_nodes)? {
                let mut inputs = Vec::new();
                for a in read_array(n.inputs, n.num_inputs)? {
                    inputs.push(read_arg(&a)?);
                }
                let mut attrs = Vec::new();
                for a in read_array(n.attrs, n.num_attrs)? {
                    let name = text(a.name, "attr name")?.to_string();
                    let v = read_struct(a.value)?;
                    let attr = if v.kind == OPFORGE_ATTR_PLACEHOLDER {
                        Attr::Placeholder(text(v.s, "placeholder")?.to_string())
                    } else {
                        Attr::Value(Box::new(crate::grad::attr_from_c(&v)?))
                    };
                    attrs.push((name, attr));
                }
                nodes.push(Node {
                    name: text(n.name, "node name")?.to_string(),
                    op: text(n.op, "node op")?.to_string(),
                    inputs,
                    attrs,
                });
            }
            let mut input_grads = Vec::new();
            for a in read_array(d.input_grads, d.num_input_grads)? {
                input_grads.push(read_arg(&a)?);
            }
            Ok(DeclGradient {
                op,
                nodes,
                input_grads,
            })
        }
    }

    /// The forward op's name.
    pub(crate) fn op(&self) -> &str {
        &self.op
    }

    /// Checks ops, arguments, attr references and node order; `op_def`
    /// finds an OpDef by name (staged or registered).
    pub(crate) fn validate(&self, op_def: &dyn Fn(&str) -> Option<OpDef>) -> Result<()> {
        let bad = |what: String| {
            Status::invalid_argument(format!(
                "the declarative gradient of op '{}': {what}",
                self.op
            ))
        };
        let fwd = op_def(&self.op).ok_or_else(|| bad("the op is not registered".into()))?;
        if self.input_grads.len() != fwd.input_arg.len() {
            return Err(bad(format!(
                "{} input_grads for {} input arguments (give one per input argument, zero \
                 sources for no gradient)",
                self.input_grads.len(),
                fwd.input_arg.len()
            )));
        }
        let mut defs = Vec::new();
        let check_src = |s: &Source, here: usize, defs: &[OpDef]| -> Result<()> {
            let in_args = |args: &[opforge_core::proto::op_def::ArgDef], kind: &str| {
                if !s.arg.is_empty() && !args.iter().any(|a| a.name == s.arg) {
                    return Err(bad(format!("no {kind} argument named '{}'", s.arg)));
                }
                if s.index < OPFORGE_GRAD_WHOLE_ARG {
                    return Err(bad(format!("index {} is negative", s.index)));
                }
                Ok(())
            };
            match s.kind {
                OPFORGE_GRAD_SRC_NONE => Ok(()),
                OPFORGE_GRAD_SRC_INPUT => in_args(&fwd.input_arg, "input"),
                OPFORGE_GRAD_SRC_OUTPUT | OPFORGE_GRAD_SRC_OUTPUT_GRAD => {
                    in_args(&fwd.output_arg, "output")
                }
                OPFORGE_GRAD_SRC_NODE => {
                    if s.node >= here {
                        return Err(bad(format!(
                            "node {here} reads node {}, which does not come before it",
                            s.node
                        )));
                    }
                    in_args(&defs[s.node].output_arg, "output")
                }
                other => Err(bad(format!("source kind {other} is unknown"))),
            }
        };
        for (i, n) in self.nodes.iter().enumerate() {
            let d = op_def(&n.op).ok_or_else(|| {
                bad(format!(
                    "node {i} calls op '{}', which is not registered",
                    n.op
                ))
            })?;
            if n.inputs.len() != d.input_arg.len() {
                return Err(bad(format!(
                    "node {i} ({}) has {} input arguments, the op takes {}",
                    n.op,
                    n.inputs.len(),
                    d.input_arg.len()
                )));
            }
            for a in &n.inputs {
                for s in &a.sources {
                    check_src(s, i, &defs)?;
                }
            }
            for (name, a) in &n.attrs {
                if let Attr::Placeholder(p) = a {
                    if !fwd.attr.iter().any(|x| x.name == *p) {
                        return Err(bad(format!(
                            "node {i} attr '{name}' refers to ${p}, which op '{}' does not have",
                            self.op
                        )));
                    }
                }
            }
            defs.push(d);
        }
        for a in &self.input_grads {
            for s in &a.sources {
                check_src(s, self.nodes.len(), &defs)?;
            }
        }
        Ok(())
    }

    /// Builds the gradient of the call `ctx` and sets its input gradients.
    pub(crate) fn eval(&self, ctx: &mut GradientContext<'_>) -> Result<()> {
        let err = |what: String| {
            Status::invalid_argument(format!(
                "the declarative gradient of op '{}': {what}",
                self.op
            ))
        };
        let (fwd_op, fwd_attrs) = (ctx.op_name(), ctx.attrs());
        let (fwd_inputs, fwd_outputs) = (ctx.inputs(), ctx.outputs());
        let out_grads: Vec<Option<Sym>> =
            (0..fwd_outputs.len()).map(|i| ctx.output_grad(i)).collect();
        let fwd_def = ctx.registry().op_def(fwd_op)?;
        let mut node_outs: Vec<(Vec<Sym>, OpDef, AttrMap)> = Vec::new();
        let resolve = |ops: &mut dyn Ops,
                       s: &Source,
                       node_outs: &[(Vec<Sym>, OpDef, AttrMap)]|
         -> Result<Vec<Sym>> {
            let pick =
                |all: &[Sym], def: &OpDef, attrs: &AttrMap, output: bool| -> Result<Vec<Sym>> {
                    let range = if s.arg.is_empty() {
                        0..all.len()
                    } else {
                        let (a, b) = crate::kernel::arg_range_pub(def, attrs, &s.arg, output)?;
                        a..b
                    };
                    let slice = all.get(range.clone()).ok_or_else(|| {
                        err(format!(
                            "argument '{}' is out of range of the values",
                            s.arg
                        ))
                    })?;
                    if s.index == OPFORGE_GRAD_WHOLE_ARG {
                        return Ok(slice.to_vec());
                    }
                    let i =
                        usize::try_from(s.index).map_err(|_| err(format!("index {}", s.index)))?;
                    slice.get(i).map(|&v| vec![v]).ok_or_else(|| {
                        err(format!(
                            "index {i} is out of range ({} values)",
                            slice.len()
                        ))
                    })
                };
            match s.kind {
                OPFORGE_GRAD_SRC_INPUT => pick(fwd_inputs, &fwd_def, fwd_attrs, false),
                OPFORGE_GRAD_SRC_OUTPUT => pick(fwd_outputs, &fwd_def, fwd_attrs, true),
                OPFORGE_GRAD_SRC_OUTPUT_GRAD => {
                    let idx: Vec<usize> = (0..fwd_outputs.len()).collect();
                    let flat: Vec<Sym> = idx.iter().map(|&i| Sym::new(0, i as u32)).collect();
                    let chosen = pick(&flat, &fwd_def, fwd_attrs, true)?;
                    let mut out = Vec::new();
                    for c in chosen {
                        let i = c.index() as usize;
                        out.push(match out_grads.get(i).copied().flatten() {
                            Some(g) => g,
                            None => ops.zeros_like(fwd_outputs[i])?,
                        });
                    }
                    Ok(out)
                }
                OPFORGE_GRAD_SRC_NODE => {
                    let (outs, def, attrs) = &node_outs[s.node];
                    pick(outs, def, attrs, true)
                }
                _ => Ok(Vec::new()),
            }
        };
        let gather = |ops: &mut dyn Ops, a: &Arg, node_outs: &[(Vec<Sym>, OpDef, AttrMap)]| {
            let mut v = Vec::new();
            for s in &a.sources {
                v.extend(resolve(ops, s, node_outs)?);
            }
            Ok::<_, Status>(v)
        };
        for (i, n) in self.nodes.iter().enumerate() {
            let mut inputs = Vec::new();
            for a in &n.inputs {
                let v = gather(ctx, a, &node_outs)?;
                if a.is_list {
                    inputs.push(SymArg::List(v));
                } else if v.len() == 1 {
                    inputs.push(SymArg::One(v[0]));
                } else {
                    return Err(err(format!(
                        "node {i} ({} '{}'): a single-tensor argument got {} values",
                        n.op,
                        n.name,
                        v.len()
                    )));
                }
            }
            let mut attrs = AttrMap::new();
            for (name, a) in &n.attrs {
                let v = match a {
                    Attr::Value(v) => (**v).clone(),
                    Attr::Placeholder(p) => fwd_attrs.get(p).cloned().ok_or_else(|| {
                        err(format!("node {i}: the forward node has no attr '{p}'"))
                    })?,
                };
                attrs.insert(name.clone(), v);
            }
            let outs = ctx.call(&n.op, &inputs, &attrs).map_err(|e| {
                e.prepend(format!(
                    "the declarative gradient of op '{}', node {i} ({}): ",
                    self.op, n.op
                ))
            })?;
            let def = ctx.registry().op_def(&n.op)?;
            node_outs.push((outs, def, attrs));
        }
        for (k, a) in self.input_grads.iter().enumerate() {
            if a.sources.is_empty() {
                continue;
            }
            let arg = &fwd_def.input_arg[k].name;
            let range = ctx.input_range(arg)?;
            let v = gather(ctx, a, &node_outs)?;
            if v.len() != range.len() {
                return Err(err(format!(
                    "the gradient of input '{arg}' has {} values, the argument has {}",
                    v.len(),
                    range.len()
                )));
            }
            for (i, s) in range.zip(v) {
                ctx.set_input_grad(i, s)?;
            }
        }
        Ok(())
    }
}
