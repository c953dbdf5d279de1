//! `opforge shape infer`: run shape functions on cases in the format of
//! TensorFlow's shape-inference test corpus, one JSON object per line.
//!
//! Each line uses `op`, `node_def` (proto3 JSON; `{}` is a bare node with no
//! attrs), `ins` (input shapes: `?;[2,?];[]`) and `input_tensors` (constant
//! inputs, `{"1": TENSOR}`); other fields are ignored. Each prints
//! `{"outputs": "<shapes>"}` in the same grammar (with `dI_J` / `inI` where
//! an output dim or shape is the very same handle as an input's, the last
//! such input when several are) or `{"error": "<CODE: message>"}`.
//!
//! ```
//! use opforge_cli::shape::infer_line;
//! opforge::opforge_ops::link();
//! let line = r#"{"op": "Placeholder", "ins": "", "node_def": {"name": "p", "op": "Placeholder",
//!     "attr": {"dtype": {"type": "DT_FLOAT"}, "shape": {"shape": {"dim": [{"size": "2"}, {"size": "-1"}]}}}}}"#;
//! assert_eq!(infer_line(line).unwrap(), r#"{"outputs":"[2,?]"}"#);
//! assert!(infer_line("not json").unwrap().starts_with(r#"{"error":"#));
//! ```

use super::CliError;
use opforge::{Result, Status};
use opforge_testing::shape::{outputs_string, run_shape_fn, ShapeTestOp};
use serde_json::{json, Value};
use std::io::{BufRead, Write};

fn infer_case(v: &Value) -> Result<String> {
    let op = v["op"]
        .as_str()
        .ok_or_else(|| Status::invalid_argument("the line has no \"op\" string"))?;
    let ins = v["ins"].as_str().unwrap_or("");
    let node_def = if v["node_def"].is_null() {
        json!({})
    } else {
        v["node_def"].clone()
    };
    let test_op = ShapeTestOp::from_corpus_json(op, &node_def, &v["input_tensors"])?;
    let ctx = run_shape_fn(&test_op, ins)?;
    Ok(outputs_string(&ctx))
}

/// The output line for one input line (`None` for a blank line).
pub fn infer_line(line: &str) -> Option<String> {
    if line.trim().is_empty() {
        return None;
    }
    let result = serde_json::from_str::<Value>(line)
        .map_err(|e| Status::invalid_argument(format!("the line is not valid JSON: {e}")))
        .and_then(|v| infer_case(&v));
    Some(
        match result {
            Ok(outputs) => json!({ "outputs": outputs }),
            Err(e) => json!({ "error": e.to_string() }),
        }
        .to_string(),
    )
}

/// Runs [`infer_line`] on every line of `input`.
pub fn infer_jsonl(input: impl BufRead, out: &mut dyn Write) -> std::result::Result<(), CliError> {
    super::for_each_line(input, out, |line| match line {
        Ok(line) => infer_line(line),
        Err(e) => Some(json!({ "error": e.to_string() }).to_string()),
    })
}
