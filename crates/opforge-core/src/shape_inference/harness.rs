//! The `INFER_OK` / `INFER_ERROR` grammar of TensorFlow's shape-function
//! tests (`shape_inference_testutil`), and the driver that runs a
//! registered op's shape function on it: input shapes and expected outputs
//! written as strings. The op families' tests use it (through
//! `opforge_testing::shape`, which adds panicking `infer_ok!` /
//! `infer_error!` macros), and so does `opforge shape infer`.
//!
//! Inputs: `;`-separated shapes: `?` (unknown rank), `[]` (scalar),
//! `[1,?,3]` (`?` = unknown dim); an empty string is zero inputs.
//!
//! Expected outputs, `;`-separated, one per output:
//! - `?`: unknown rank, and not the same handle as any input shape;
//! - `in0|in2`: the very same shape handle as one of those inputs;
//! - `[...]`: known rank (and not an input's handle), each dim one of:
//!   an integer (a known size that is *not* an input's dim handle), `?` (unknown,
//!   not an input's handle), or `d0_1|d2_0` (the same dim handle as input 0's
//!   dim 1, or input 2's dim 0).
//!
//! ```
//! use opforge_core::shape_inference::harness::{infer_error, infer_ok, ShapeTestOp};
//! # use opforge_core::{register_op, OpDefBuilder};
//! # register_op!(OpDefBuilder::new("DocSquareMatrix").input("x: float").output("y: float")
//! #     .set_shape_fn(|c| { let m = c.input(0); let m = c.with_rank(m, 2)?;
//! #         let (a, b) = (c.dim(m, 0), c.dim(m, 1)); c.merge_dim(a, b)?; c.set_output(0, m); Ok(()) }));
//! let op = ShapeTestOp::new("DocSquareMatrix");
//! infer_ok(&op, "[2,?]", "in0").unwrap();
//! infer_ok(&op, "?", "[?,?]").unwrap();
//! infer_error(&op, "[2,3]", "Dimensions must be equal, but are 2 and 3").unwrap();
//! infer_error(&op, "[2]", "Shape must be rank 2 but is rank 1").unwrap();
//! ```

use super::{DimensionHandle, InferenceContext, ShapeFn, ShapeHandle};
use crate::attrs::{arg_ranges, AttrMap};
use crate::registry::Registry;
use crate::{Result, Status, Tensor};
use std::sync::Arc;

/// Parses one shape of the grammar: `None` for `?`, else dims with `-1` for `?`.
pub fn parse_shape(s: &str) -> std::result::Result<Option<Vec<i64>>, String> {
    let s = s.trim();
    if s == "?" {
        return Ok(None);
    }
    let inner = s
        .strip_prefix('[')
        .and_then(|r| r.strip_suffix(']'))
        .ok_or_else(|| format!("bad shape '{s}': expected ? or [d,...]"))?;
    if inner.trim().is_empty() {
        return Ok(Some(Vec::new()));
    }
    inner
        .split(',')
        .map(|d| match d.trim() {
            "?" => Ok(-1),
            v => v
                .parse::<i64>()
                .ok()
                .filter(|&x| x >= 0)
                .ok_or_else(|| format!("bad dim '{v}' in shape '{s}'")),
        })
        .collect::<std::result::Result<Vec<_>, _>>()
        .map(Some)
}

/// Parses a `;`-separated list of shapes (empty string = none).
pub fn parse_shapes(s: &str) -> std::result::Result<Vec<Option<Vec<i64>>>, String> {
    if s.is_empty() {
        return Ok(Vec::new());
    }
    s.split(';').map(parse_shape).collect()
}

/// A node to run a shape function on: the op, its attrs (as a NodeDef
/// would hold them, defaults not added unless asked for), constant inputs
/// and input names, and the registry holding the op (the global one unless
/// [`in_registry`](Self::in_registry) says otherwise).
#[derive(Clone, Debug, Default)]
pub struct ShapeTestOp {
    /// The op's name.
    pub op: String,
    /// The node's name (for error messages).
    pub node_name: String,
    /// Whether the node records its op (TensorFlow's bare test nodes do not).
    pub node_has_op: bool,
    /// The node's attrs.
    pub attrs: AttrMap,
    /// The node's input names (for error messages).
    pub input_names: Vec<String>,
    /// Constant input values by input index.
    pub input_tensors: Vec<(usize, Tensor)>,
    /// The registry the op is looked up in (`None`: the global one).
    pub registry: Option<Arc<Registry>>,
}

impl ShapeTestOp {
    /// A bare node of op `op`: no name, no attrs (like TensorFlow's `ShapeInferenceTestOp`).
    pub fn new(op: &str) -> ShapeTestOp {
        ShapeTestOp {
            op: op.to_string(),
            ..Default::default()
        }
    }

    /// With an attr.
    pub fn attr(mut self, name: &str, value: impl crate::attrs::IntoAttrValue) -> Self {
        self.attrs.insert(name.to_string(), value.into_attr_value());
        self
    }

    /// The node of a NodeDef made by TensorFlow's `NodeDefBuilder`: it
    /// records its op, and the defaults of the op's attrs that are not set
    /// are added (as `NodeDefBuilder::Finalize` adds them).
    pub fn with_defaults(mut self) -> Result<Self> {
        self.add_defaults()?;
        self.node_has_op = true;
        Ok(self)
    }

    /// Adds the defaults of the op's attrs that the node does not set (as
    /// graph construction does); the attrs it sets stay as they are.
    /// `NotFound` if the op is not registered.
    pub fn add_defaults(&mut self) -> Result<()> {
        let op = self.registry().op_def(&self.op)?;
        crate::attrs::add_defaults(&op, &mut self.attrs);
        Ok(())
    }

    /// The op is looked up in `registry` instead of the global registry.
    pub fn in_registry(mut self, registry: Arc<Registry>) -> Self {
        self.registry = Some(registry);
        self
    }

    /// The registry the op is looked up in.
    pub fn registry(&self) -> &Registry {
        self.registry
            .as_deref()
            .unwrap_or_else(|| Registry::global())
    }

    /// A node as a line of TensorFlow's shape-inference corpus gives it:
    /// `op`, the NodeDef in proto3 JSON (`{}` for a bare test node), and
    /// the constant inputs as `{"1": TENSOR, ...}` (tensor JSON).
    pub fn from_corpus_json(
        op: &str,
        node_def: &serde_json::Value,
        input_tensors: &serde_json::Value,
    ) -> Result<ShapeTestOp> {
        let node: crate::proto::NodeDef = crate::proto::from_json(node_def)?;
        let mut t = ShapeTestOp {
            op: op.to_string(),
            node_name: node.name,
            node_has_op: !node.op.is_empty(),
            attrs: node.attr.into_iter().collect(),
            input_names: node.input,
            input_tensors: Vec::new(),
            registry: None,
        };
        if let Some(map) = input_tensors.as_object() {
            for (k, v) in map {
                let i: usize = k.parse().map_err(|_| {
                    Status::invalid_argument(format!(
                        "input_tensors key '{k}' is not an input index"
                    ))
                })?;
                t.input_tensors
                    .push((i, crate::tensor::json::tensor_from_json(v)?));
            }
        }
        Ok(t)
    }

    /// With a constant value for input `i`.
    pub fn input_tensor(mut self, i: usize, t: Tensor) -> Self {
        self.input_tensors.push((i, t));
        self
    }
}

/// Runs the op's shape function on input shapes `ins`: the context after
/// the run, or the annotated error.
pub fn run_shape_fn(op: &ShapeTestOp, ins: &str) -> Result<InferenceContext> {
    let shapes = parse_shapes(ins).map_err(Status::invalid_argument)?;
    let data = op.registry().lookup(&op.op)?;
    let num_outputs = match arg_ranges(&data.op_def, &data.op_def.output_arg, &op.attrs) {
        Ok(r) => r.last().map_or(0, |l| l.end),
        Err(_) => data.op_def.output_arg.len(),
    };
    let mut ctx =
        InferenceContext::new(&data.op_def, &op.node_name, &op.attrs, &shapes, num_outputs);
    if !op.node_has_op {
        ctx.set_node_op("");
    }
    for (i, t) in &op.input_tensors {
        if *i < ctx.num_inputs() {
            ctx.set_input_tensor(*i, t.clone());
        }
    }
    let Some(shape_fn) = op.registry().attr::<ShapeFn>(&op.op) else {
        return Err(Status::unimplemented(format!(
            "Op '{}' has no shape function",
            op.op
        )));
    };
    // A read of an input the node does not have (too few shapes given)
    // explains whatever the shape function concluded from it.
    let result = shape_fn(&mut ctx);
    match ctx.check_accesses().and(result) {
        Ok(()) => Ok(ctx),
        Err(e) => Err(ctx.annotate_error(e, &op.input_names)),
    }
}

/// The last input dim that is the same handle as `d`, as `d{i}_{j}`.
fn input_dim_name(ctx: &InferenceContext, d: DimensionHandle) -> Option<String> {
    let mut found = None;
    for i in 0..ctx.num_inputs() {
        if let Some(dims) = ctx.dims(ctx.input(i)) {
            for (j, &x) in dims.iter().enumerate() {
                if x == d {
                    found = Some(format!("d{i}_{j}"));
                }
            }
        }
    }
    found
}

fn input_shape_index(ctx: &InferenceContext, s: ShapeHandle) -> Option<usize> {
    (0..ctx.num_inputs()).rev().find(|&i| ctx.input(i) == s)
}

/// The outputs in the test grammar (`in0`, `[d0_0,3,?]`, `?`; the last
/// matching input where several share a handle).
pub fn outputs_string(ctx: &InferenceContext) -> String {
    let outs: Vec<String> = (0..ctx.num_outputs())
        .map(|o| {
            let Some(s) = ctx.output(o) else {
                return "<unset>".to_string();
            };
            if let Some(i) = input_shape_index(ctx, s) {
                return format!("in{i}");
            }
            match ctx.dims(s) {
                None => "?".to_string(),
                Some(dims) => {
                    let parts: Vec<String> = dims
                        .iter()
                        .map(|&d| input_dim_name(ctx, d).unwrap_or_else(|| ctx.dim_string(d)))
                        .collect();
                    format!("[{}]", parts.join(","))
                }
            }
        })
        .collect();
    outs.join(";")
}

fn dim_is_input(ctx: &InferenceContext, d: DimensionHandle, i: usize, j: usize) -> bool {
    i < ctx.num_inputs()
        && ctx
            .dims(ctx.input(i))
            .and_then(|dims| dims.get(j))
            .is_some_and(|&x| x == d)
}

/// Checks the context's outputs against an expectation in the test grammar.
pub fn check_outputs(ctx: &InferenceContext, expected: &str) -> std::result::Result<(), String> {
    let want: Vec<&str> = if expected.is_empty() {
        Vec::new()
    } else {
        expected.split(';').collect()
    };
    let got = outputs_string(ctx);
    let fail = |why: String| Err(format!("expected '{expected}', got '{got}': {why}"));
    if want.len() != ctx.num_outputs() {
        return fail(format!(
            "{} outputs expected, the op has {}",
            want.len(),
            ctx.num_outputs()
        ));
    }
    for (o, w) in want.iter().enumerate() {
        let w = w.trim();
        let Some(s) = ctx.output(o) else {
            return fail(format!("output {o} was not set"));
        };
        let input_idx = input_shape_index(ctx, s);
        if w.starts_with("in") {
            let ok = w.split('|').any(|alt| {
                alt.strip_prefix("in")
                    .and_then(|n| n.parse::<usize>().ok())
                    .is_some_and(|i| i < ctx.num_inputs() && ctx.input(i) == s)
            });
            if !ok {
                return fail(format!("output {o} should be the same shape handle as {w}"));
            }
            continue;
        }
        if input_idx.is_some() {
            return fail(format!(
                "output {o} is an input's shape handle, but '{w}' does not say in*"
            ));
        }
        if w == "?" {
            if ctx.rank_known(s) {
                return fail(format!("output {o} should have unknown rank"));
            }
            continue;
        }
        let inner = w
            .strip_prefix('[')
            .and_then(|r| r.strip_suffix(']'))
            .ok_or_else(|| format!("bad expectation '{w}'"))?;
        let want_dims: Vec<&str> = if inner.is_empty() {
            Vec::new()
        } else {
            inner.split(',').collect()
        };
        let Some(dims) = ctx.dims(s).map(<[DimensionHandle]>::to_vec) else {
            return fail(format!("output {o} should have rank {}", want_dims.len()));
        };
        if dims.len() != want_dims.len() {
            return fail(format!(
                "output {o} has rank {}, expected {}",
                dims.len(),
                want_dims.len()
            ));
        }
        for (j, (&d, wd)) in dims.iter().zip(&want_dims).enumerate() {
            let wd = wd.trim();
            if wd.starts_with('d') {
                let ok = wd.split('|').any(|alt| {
                    let mut it = alt.trim_start_matches('d').split('_').map(|n| n.parse::<usize>());
                    matches!((it.next(), it.next()), (Some(Ok(i)), Some(Ok(k))) if dim_is_input(ctx, d, i, k))
                });
                if !ok {
                    return fail(format!(
                        "output {o} dim {j} should be the same dim handle as {wd}"
                    ));
                }
                continue;
            }
            if let Some(name) = input_dim_name(ctx, d) {
                return fail(format!(
                    "output {o} dim {j} is input dim {name}, but '{wd}' does not say so"
                ));
            }
            if wd == "?" {
                if ctx.value(d).is_some() {
                    return fail(format!("output {o} dim {j} should be unknown"));
                }
            } else if ctx.value(d) != wd.parse::<i64>().ok() {
                return fail(format!("output {o} dim {j} should be {wd}"));
            }
        }
    }
    Ok(())
}

/// `INFER_OK`: the shape function succeeds and its outputs match `expected`.
pub fn infer_ok(op: &ShapeTestOp, ins: &str, expected: &str) -> std::result::Result<(), String> {
    let ctx = run_shape_fn(op, ins).map_err(|e| {
        format!(
            "{} on inputs {ins}: expected '{expected}', got error {e}",
            op.op
        )
    })?;
    check_outputs(&ctx, expected).map_err(|e| format!("{} on inputs {ins}: {e}", op.op))
}

/// `INFER_ERROR`: the shape function fails with a message containing `substring`.
pub fn infer_error(
    op: &ShapeTestOp,
    ins: &str,
    substring: &str,
) -> std::result::Result<(), String> {
    match run_shape_fn(op, ins) {
        Ok(ctx) => Err(format!(
            "{} on inputs {ins}: expected an error containing '{substring}', got outputs {}",
            op.op,
            outputs_string(&ctx)
        )),
        Err(e) if e.to_string().contains(substring) => Ok(()),
        Err(e) => Err(format!(
            "{} on inputs {ins}: expected an error containing '{substring}', got {e}",
            op.op
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shape_grammar() {
        assert_eq!(parse_shapes("").unwrap(), Vec::<Option<Vec<i64>>>::new());
        assert_eq!(
            parse_shapes("?;[];[1,?]").unwrap(),
            vec![None, Some(vec![]), Some(vec![1, -1])]
        );
        assert!(parse_shape("[1,x]").is_err());
        assert!(parse_shape("1,2").is_err());
    }
}
