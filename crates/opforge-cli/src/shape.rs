//! `opforge shape infer`: run shape functions on cases in the format of
//! TensorFlow's shape-inference test corpus, one JSON object per line.
//!
//! Each line uses `op`, `node_def` (proto3 JSON; `{}` is a bare node with no
//! attrs), `ins` (input shapes: `?;[2,?];[]`) and `input_tensors` (constant
//! inputs, `{"1": TENSOR}`); other fields are ignored. The attrs the node
//! does not set get the op's defaults, as graph construction gives them
//! (unless [`Defaults::AsGiven`]: the node as written, as TensorFlow's
//! shape-function tests run a bare node). Each line prints
//! `{"outputs": "<shapes>"}` in the same grammar (with `dI_J` / `inI` where
//! an output dim or shape is the very same handle as an input's, the last
//! such input when several are) or `{"error": "<CODE: message>"}`. The
//! grammar and the driver are core's
//! ([`opforge::shape_inference::harness`]); [`HELP`] is the `--help` text.
//!
//! ```
//! use opforge_cli::shape::{infer_line, Defaults};
//! use opforge::Registry;
//! opforge::opforge_ops::link();
//! let registry = Registry::global();
//! let line = r#"{"op": "Placeholder", "ins": "", "node_def": {"name": "p", "op": "Placeholder",
//!     "attr": {"dtype": {"type": "DT_FLOAT"}, "shape": {"shape": {"dim": [{"size": "2"}, {"size": "-1"}]}}}}}"#;
//! assert_eq!(infer_line(registry, Defaults::Add, line).unwrap(), r#"{"outputs":"[2,?]"}"#);
//! assert!(infer_line(registry, Defaults::Add, "not json").unwrap().starts_with(r#"{"error":"#));
//! ```

use super::CliError;
use opforge::shape_inference::harness::{outputs_string, run_shape_fn, ShapeTestOp};
use opforge::{Registry, Result, Status};
use serde_json::{json, Value};
use std::io::{BufRead, Write};
use std::sync::Arc;

/// The long help of `opforge shape infer`: the input and output format.
pub const HELP: &str = "\
Run shape functions on cases in the format of TensorFlow's shape-inference
test corpus, one JSON object per line (blank lines are skipped):

  {\"op\": \"MatMul\", \"ins\": \"[2,3];[3,?]\",
   \"node_def\": {\"attr\": {\"transpose_a\": {\"b\": false}}},
   \"input_tensors\": {\"1\": {\"dtype\": \"DT_INT32\", \"shape\": [2], \"values\": [3, 4]}}}

  op             the op's name (required)
  ins            the input shapes, separated by ';': ? (unknown rank),
                 [] (a scalar), [2,?,3] (? is an unknown dim); \"\" or
                 missing: no inputs
  node_def       the node as a NodeDef in proto3 JSON (name, op, input,
                 attr: {NAME: AttrValue}, e.g. {\"type\": \"DT_FLOAT\"},
                 {\"i\": \"2\"}, {\"b\": true}, {\"list\": {\"i\": [\"1\"]}});
                 optional. Attrs it leaves out get the op's defaults, as
                 in a graph (--no-defaults: left out, as TensorFlow's
                 shape-function tests run a bare node)
  input_tensors  constant values of inputs, by input index: {\"1\": TENSOR}
                 with TENSOR {\"dtype\": \"DT_INT32\", \"shape\": [2],
                 \"values\": [3, 4]}; optional

Each line prints one line: {\"outputs\": \"SHAPES\"}, the output shapes in the
same grammar separated by ';', where inI means the very same shape handle as
input I and dI_J the very same dim as input I's dim J (as TensorFlow's
INFER_OK writes them), or {\"error\": \"CODE: message\"}. Other fields of a line
(the corpus's expectations) are ignored.";

/// Whether the attrs a line's node leaves out get the op's defaults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Defaults {
    /// Add the op's defaults for the attrs the node does not set (as graph
    /// construction does).
    Add,
    /// Keep the node as written (TensorFlow's bare test nodes).
    AsGiven,
}

fn infer_case(registry: &Arc<Registry>, defaults: Defaults, v: &Value) -> Result<String> {
    let op = v["op"]
        .as_str()
        .ok_or_else(|| Status::invalid_argument("the line has no \"op\" string"))?;
    let ins = match &v["ins"] {
        Value::Null => "",
        Value::String(s) => s,
        other => {
            return Err(Status::invalid_argument(format!(
                "\"ins\" must be a string of ';'-separated shapes such as \"?;[2,?]\", not {other}"
            )))
        }
    };
    let node_def = if v["node_def"].is_null() {
        json!({})
    } else {
        v["node_def"].clone()
    };
    let mut test_op = ShapeTestOp::from_corpus_json(op, &node_def, &v["input_tensors"])?
        .in_registry(Arc::clone(registry));
    if defaults == Defaults::Add {
        test_op.add_defaults()?;
    }
    let ctx = run_shape_fn(&test_op, ins)?;
    Ok(outputs_string(&ctx))
}

/// The output line for one input line (`None` for a blank line).
pub fn infer_line(registry: &Arc<Registry>, defaults: Defaults, line: &str) -> Option<String> {
    if line.trim().is_empty() {
        return None;
    }
    let result = serde_json::from_str::<Value>(line)
        .map_err(|e| Status::invalid_argument(format!("the line is not valid JSON: {e}")))
        .and_then(|v| infer_case(registry, defaults, &v));
    Some(
        match result {
            Ok(outputs) => json!({ "outputs": outputs }),
            Err(e) => json!({ "error": e.to_string() }),
        }
        .to_string(),
    )
}

/// Runs [`infer_line`] on every line of `input`.
pub fn infer_jsonl(
    registry: &Arc<Registry>,
    defaults: Defaults,
    input: impl BufRead,
    out: &mut dyn Write,
) -> std::result::Result<(), CliError> {
    super::for_each_line(input, out, |line| match line {
        Ok(line) => infer_line(registry, defaults, line),
        Err(e) => Some(json!({ "error": e.to_string() }).to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use opforge::OpDefBuilder;

    /// A registry with an op whose shape function reads an attr that has a
    /// default (`scale`), as the plugin author's op did.
    fn registry() -> Arc<Registry> {
        let r = Registry::new();
        r.register_op(
            OpDefBuilder::new("Scaled")
                .attr("T: {float, double} = DT_FLOAT")
                .attr("scale: int = 2")
                .input("x: T")
                .output("y: T")
                .set_shape_fn(|c| {
                    let scale: i64 = c.get_attr("scale")?;
                    let x = c.input(0);
                    let x = c.with_rank(x, 1)?;
                    let d = c.dim(x, 0);
                    let d = c.multiply(d, scale)?;
                    let out = c.make_shape(&[d.into()]);
                    c.set_output(0, out);
                    Ok(())
                }),
        )
        .unwrap();
        Arc::new(r)
    }

    #[test]
    fn missing_attrs_get_their_defaults() {
        let r = registry();
        let line = r#"{"op": "Scaled", "ins": "[3]", "node_def": {}}"#;
        assert_eq!(
            infer_line(&r, Defaults::Add, line).unwrap(),
            r#"{"outputs":"[6]"}"#
        );
        // A node's own value wins over the default.
        let line = r#"{"op": "Scaled", "ins": "[3]", "node_def": {"attr": {"scale": {"i": "5"}}}}"#;
        assert_eq!(
            infer_line(&r, Defaults::Add, line).unwrap(),
            r#"{"outputs":"[15]"}"#
        );
        // As given, the bare node has no `scale`: TensorFlow's error.
        let line = r#"{"op": "Scaled", "ins": "[3]"}"#;
        let out = infer_line(&r, Defaults::AsGiven, line).unwrap();
        assert!(out.contains("scale"), "{out}");
        assert!(out.starts_with(r#"{"error":"#), "{out}");
    }

    #[test]
    fn bad_lines_say_what_is_wrong() {
        let r = registry();
        let out = infer_line(&r, Defaults::Add, r#"{"ins": "[3]"}"#).unwrap();
        assert!(out.contains("no \\\"op\\\" string"), "{out}");
        let out = infer_line(&r, Defaults::Add, r#"{"op": "Scaled", "ins": 3}"#).unwrap();
        assert!(out.contains("\\\"ins\\\" must be a string"), "{out}");
        let out = infer_line(&r, Defaults::Add, r#"{"op": "Nope", "ins": ""}"#).unwrap();
        assert!(out.contains("NOT_FOUND"), "{out}");
        assert!(infer_line(&r, Defaults::Add, "   ").is_none());
    }

    #[test]
    fn the_help_documents_every_field() {
        use clap::CommandFactory;
        let mut cli = crate::Cli::command();
        let infer = cli
            .find_subcommand_mut("shape")
            .and_then(|c| c.find_subcommand_mut("infer"))
            .unwrap();
        let help = infer.render_long_help().to_string();
        for field in [
            "\"op\"",
            "ins ",
            "node_def ",
            "input_tensors ",
            "{\"outputs\": ",
            "{\"error\": ",
            "[2,?,3]",
            "--no-defaults",
            "--jsonl <FILE>",
        ] {
            assert!(help.contains(field), "{field} is not in:\n{help}");
        }
    }
}
