//! `opforge exec`: run ops eagerly, one JSON object per line.
//!
//! Each input line is one call:
//!
//! ```json
//! {"op": "ZeroOut", "node_def": {"attr": {"preserve_index": {"i": "1"}}},
//!  "inputs": [{"dtype": "DT_INT32", "shape": [3], "values": [4, 5, 6]}]}
//! ```
//!
//! - `op`: the op's name.
//! - `node_def` (optional): a NodeDef in the proto3 JSON mapping; only its
//!   `attr` map is used (other fields are ignored). Each attr is an
//!   `AttrValue` in proto3 JSON: `{"i": "1"}`, `{"f": 0.5}`, `{"b": true}`,
//!   `{"type": "DT_FLOAT"}`, `{"s": "<base64>"}`, `{"shape": {"dim": [{"size": "2"}]}}`,
//!   `{"list": {"i": ["1", "2"]}}`, `{"tensor": {...}}`. Attrs that the inputs
//!   determine (like `T`) may be left out, as may attrs with defaults.
//! - `inputs` (optional): the input tensors in the tensor JSON form of
//!   [`opforge::tensor::json`], flat: an op with a list input takes its
//!   tensors in a row (the list's length comes from its attr, or from the
//!   count when that is unambiguous). An input may also be a JSON *array*
//!   of tensors, which is one list argument; then every argument must be
//!   given one per entry.
//!
//! Each non-blank input line prints one compact JSON line:
//! `{"outputs": [TENSOR, ...]}` or `{"error": {"code": "INVALID_ARGUMENT",
//! "message": "..."}}`. A malformed line (bad JSON, unknown op, bad attr or
//! tensor, a failing kernel) prints an error line and the next line is read;
//! the command still exits with 0. Blank lines print nothing.
//!
//! **State.** All lines run on one [`EagerContext`], so resources persist
//! from line to line: a variable created by `AssignVariableOp` on one line
//! is read by `ReadVariableOp` on a later line, through the handle printed
//! by `VarHandleOp` (or any handle object naming the same container and
//! variable), until `DestroyResourceOp` deletes it or the command ends.
//! Kernels are cached too: two `VarHandleOp` lines with the same attrs and
//! an empty `shared_name` give the same handle (name variables with
//! `shared_name` instead).
//!
//! ```
//! use opforge_cli::exec::exec_line;
//! use opforge::eager::EagerContext;
//! opforge::opforge_ops::link();
//! let ctx = EagerContext::new(1).unwrap();
//! let line = r#"{"op": "StringToNumber", "inputs": [{"dtype": "DT_STRING", "shape": [2], "values": ["1.5", "-2"]}]}"#;
//! assert_eq!(
//!     exec_line(&ctx, line).unwrap(),
//!     r#"{"outputs":[{"dtype":"DT_FLOAT","shape":[2],"values":[1.5,-2.0]}]}"#
//! );
//! assert!(exec_line(&ctx, "  ").is_none());
//! ```

use super::CliError;
use opforge::attrs::AttrMap;
use opforge::eager::{Arg, EagerContext};
use opforge::proto::{self, AttrValue};
use opforge::tensor::json::{tensor_from_json, tensor_to_json};
use opforge::{Result, Status, Tensor};
use serde_json::{json, Value};
use std::io::{BufRead, Write};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// One parsed line: the op, its attrs and its inputs.
#[derive(Debug)]
pub struct ExecRecord {
    /// The op's name.
    pub op: String,
    /// The attrs given in `node_def.attr`.
    pub attrs: AttrMap,
    /// The inputs, one per entry of `inputs` (a JSON array of tensors is a list).
    pub inputs: Vec<Arg>,
}

/// Reads a line's JSON object. `InvalidArgument` naming the problem: not an
/// object, no `op` string, an unknown key, a bad attr or tensor.
pub fn parse_record(record: &Value) -> Result<ExecRecord> {
    let obj = record.as_object().ok_or_else(|| {
        Status::invalid_argument("the line is not a JSON object {\"op\", \"node_def\", \"inputs\"}")
    })?;
    if let Some(k) = obj
        .keys()
        .find(|k| !matches!(k.as_str(), "op" | "node_def" | "inputs"))
    {
        return Err(Status::invalid_argument(format!(
            "unknown key \"{k}\" (expected \"op\", \"node_def\" and \"inputs\")"
        )));
    }
    let op = obj
        .get("op")
        .and_then(Value::as_str)
        .ok_or_else(|| Status::invalid_argument("the line has no \"op\" string"))?
        .to_string();
    let mut attrs = AttrMap::new();
    match obj.get("node_def") {
        None | Some(Value::Null) => {}
        Some(Value::Object(node_def)) => match node_def.get("attr") {
            None | Some(Value::Null) => {}
            Some(Value::Object(map)) => {
                for (name, value) in map {
                    let attr = proto::from_json::<AttrValue>(value)
                        .map_err(|e| e.prepend(format!("attr '{name}': ")))?;
                    attrs.insert(name.clone(), attr);
                }
            }
            Some(other) => {
                return Err(Status::invalid_argument(format!(
                    "\"node_def\".\"attr\" must be an object of AttrValues, got {other}"
                )))
            }
        },
        Some(other) => {
            return Err(Status::invalid_argument(format!(
                "\"node_def\" must be an object, got {other}"
            )))
        }
    }
    let inputs = match obj.get("inputs") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, item)| match item {
                Value::Array(list) => list
                    .iter()
                    .enumerate()
                    .map(|(j, t)| {
                        tensor_from_json(t).map_err(|e| e.prepend(format!("inputs[{i}][{j}]: ")))
                    })
                    .collect::<Result<Vec<Tensor>>>()
                    .map(Arg::List),
                t => tensor_from_json(t)
                    .map(Arg::One)
                    .map_err(|e| e.prepend(format!("inputs[{i}]: "))),
            })
            .collect::<Result<_>>()?,
        Some(other) => {
            return Err(Status::invalid_argument(format!(
                "\"inputs\" must be an array of tensors, got {other}"
            )))
        }
    };
    Ok(ExecRecord { op, attrs, inputs })
}

/// Runs a parsed line on `ctx`: flat inputs through
/// [`EagerContext::execute`], or, when some input is a list, grouped
/// through [`EagerContext::execute_args`].
pub fn run_record(ctx: &EagerContext, record: ExecRecord) -> Result<Vec<Tensor>> {
    let ExecRecord { op, attrs, inputs } = record;
    if inputs.iter().any(|a| matches!(a, Arg::List(_))) {
        ctx.execute_args(&op, inputs, &attrs)
    } else {
        let flat = inputs
            .into_iter()
            .filter_map(|a| match a {
                Arg::One(t) => Some(t),
                Arg::List(_) => None,
            })
            .collect();
        ctx.execute(&op, flat, &attrs)
    }
}

/// The output JSON of a line's outcome.
pub fn result_json(result: Result<Vec<Tensor>>) -> Value {
    let outputs =
        result.and_then(|outs| outs.iter().map(tensor_to_json).collect::<Result<Vec<_>>>());
    match outputs {
        Ok(outs) => json!({ "outputs": outs }),
        Err(status) => error_json(&status),
    }
}

pub(crate) fn error_json(status: &Status) -> Value {
    json!({"error": {"code": status.code().as_str(), "message": status.message()}})
}

/// The output line for one input line, or `None` for a blank line. Never
/// panics: a panic while handling the line becomes an `INTERNAL` error line.
pub fn exec_line(ctx: &EagerContext, line: &str) -> Option<String> {
    let line = line.trim();
    if line.is_empty() {
        return None;
    }
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        let record: Value = serde_json::from_str(line)
            .map_err(|e| Status::invalid_argument(format!("the line is not valid JSON: {e}")))?;
        run_record(ctx, parse_record(&record)?)
    }));
    let value = match outcome {
        Ok(result) => result_json(result),
        Err(_) => error_json(&Status::internal(
            "opforge exec panicked on this line (a bug in opforge); the next line still runs",
        )),
    };
    Some(value.to_string())
}

/// `opforge exec`: one output line per non-blank input line, flushed as it
/// is written (so a program can drive the command line by line).
pub fn exec_jsonl(
    input: impl BufRead,
    ctx: &EagerContext,
    out: &mut dyn Write,
) -> std::result::Result<(), CliError> {
    super::for_each_line(input, out, |line| match line {
        Ok(line) => exec_line(ctx, line),
        Err(e) => Some(error_json(&e).to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use opforge::DataType;

    fn ctx() -> EagerContext {
        opforge::opforge_ops::link();
        EagerContext::new(1).unwrap()
    }

    fn run(ctx: &EagerContext, line: &str) -> Value {
        serde_json::from_str(&exec_line(ctx, line).unwrap()).unwrap()
    }

    fn error_code(v: &Value) -> &str {
        v["error"]["code"]
            .as_str()
            .unwrap_or_else(|| panic!("not an error: {v}"))
    }

    fn error_message(v: &Value) -> &str {
        v["error"]["message"].as_str().unwrap()
    }

    #[test]
    fn zero_out_with_attr() {
        let c = ctx();
        let v = run(
            &c,
            r#"{"op": "ExecTestZeroOut", "node_def": {"attr": {"preserve_index": {"i": "2"}}},
               "inputs": [{"dtype": "DT_FLOAT", "shape": [2, 2], "values": [1, 2, 3, "inf"]}]}"#,
        );
        assert_eq!(
            v,
            json!({"outputs": [{"dtype": "DT_FLOAT", "shape": [2, 2], "values": [0.0, 0.0, 3.0, 0.0]}]})
        );
        // node_def may carry a name, op and inputs (ignored); attrs may be explicit.
        let v = run(
            &c,
            r#"{"op": "ExecTestZeroOut", "node_def": {"name": "z", "op": "ExecTestZeroOut", "input": ["x"],
               "attr": {"T": {"type": "DT_INT64"}}},
               "inputs": [{"dtype": "DT_INT64", "shape": [2], "values": [5, 6]}]}"#,
        );
        assert_eq!(v["outputs"][0]["values"], json!([5, 0]));
    }

    #[test]
    fn errors_are_lines() {
        let c = ctx();
        let v = run(&c, "{not json");
        assert_eq!(error_code(&v), "INVALID_ARGUMENT");
        assert!(error_message(&v).contains("not valid JSON"), "{v}");
        let v = run(&c, "[1, 2]");
        assert!(error_message(&v).contains("not a JSON object"), "{v}");
        let v = run(&c, r#"{"inputs": []}"#);
        assert!(error_message(&v).contains("no \"op\""), "{v}");
        let v = run(&c, r#"{"op": "ExecTestZeroOut", "input": []}"#);
        assert!(error_message(&v).contains("unknown key \"input\""), "{v}");
        let v = run(&c, r#"{"op": "ExecTestZeroOutt"}"#);
        assert_eq!(error_code(&v), "NOT_FOUND");
        assert!(error_message(&v).contains("ExecTestZeroOut"), "{v}");
        let v = run(
            &c,
            r#"{"op": "ExecTestZeroOut", "node_def": {"attr": {"preserve_index": {"i": "-1"}}},
               "inputs": [{"dtype": "DT_INT32", "shape": [1], "values": [1]}]}"#,
        );
        assert!(
            error_message(&v).contains("Need preserve_index >= 0, got -1"),
            "{v}"
        );
        let v = run(
            &c,
            r#"{"op": "ExecTestZeroOut", "node_def": {"attr": {"preserve_index": {"q": 1}}}}"#,
        );
        assert!(
            error_message(&v).starts_with("attr 'preserve_index': "),
            "{v}"
        );
        let v = run(&c, r#"{"op": "ExecTestZeroOut", "node_def": {"attr": 5}}"#);
        assert!(error_message(&v).contains("must be an object"), "{v}");
        let v = run(&c, r#"{"op": "ExecTestZeroOut", "node_def": 5}"#);
        assert!(error_message(&v).contains("must be an object"), "{v}");
        let v = run(&c, r#"{"op": "ExecTestZeroOut", "inputs": {}}"#);
        assert!(error_message(&v).contains("must be an array"), "{v}");
        let v = run(
            &c,
            r#"{"op": "ExecTestZeroOut", "inputs": [{"dtype": "DT_UINT8", "shape": [1], "values": [300]}]}"#,
        );
        assert_eq!(
            error_message(&v),
            "inputs[0]: values[0]: 300 is out of range for DT_UINT8 [0, 255]"
        );
        let v = run(
            &c,
            r#"{"op": "ExecTestZeroOut", "inputs": [[{"dtype": "DT_INT32", "shape": [], "values": []}]]}"#,
        );
        assert!(error_message(&v).starts_with("inputs[0][0]: "), "{v}");
        // Wrong number of inputs.
        let v = run(&c, r#"{"op": "ExecTestZeroOut"}"#);
        assert_eq!(error_code(&v), "INVALID_ARGUMENT");
        let v = run(
            &c,
            r#"{"op": "StringToNumber", "inputs": [{"dtype": "DT_STRING", "shape": [1], "values": ["abc"]}]}"#,
        );
        assert_eq!(
            v,
            json!({"error": {"code": "INVALID_ARGUMENT",
                "message": "StringToNumberOp could not correctly convert string: abc [Op:StringToNumber]"}})
        );
    }

    #[test]
    fn variables_persist_across_lines() {
        let c = ctx();
        let h = run(
            &c,
            r#"{"op": "VarHandleOp", "node_def": {"attr": {"shared_name": {"s": "dg=="},
               "dtype": {"type": "DT_FLOAT"}, "shape": {"shape": {"dim": [{"size": "2"}]}}}}}"#,
        );
        let handle = &h["outputs"][0];
        assert_eq!(handle["dtype"], "DT_RESOURCE");
        assert_eq!(handle["values"][0]["name"], "v");
        assert_eq!(handle["values"][0]["container"], "localhost");
        let line =
            |op: &str, extra: &str| format!(r#"{{"op": "{op}", "inputs": [{handle}{extra}]}}"#);
        let value = r#", {"dtype": "DT_FLOAT", "shape": [2], "values": [1.5, -2]}"#;
        assert_eq!(
            run(&c, &line("AssignVariableOp", value)),
            json!({"outputs": []})
        );
        assert_eq!(
            run(&c, &line("AssignAddVariableOp", value)),
            json!({"outputs": []})
        );
        let read = format!(
            r#"{{"op": "ReadVariableOp", "node_def": {{"attr": {{"dtype": {{"type": "DT_FLOAT"}}}}}}, "inputs": [{handle}]}}"#
        );
        assert_eq!(
            run(&c, &read),
            json!({"outputs": [{"dtype": "DT_FLOAT", "shape": [2], "values": [3.0, -4.0]}]})
        );
        // A hand-written handle naming the same variable works too.
        let by_name = r#"{"op": "ReadVariableOp", "node_def": {"attr": {"dtype": {"type": "DT_INT32"}}},
            "inputs": [{"dtype": "DT_RESOURCE", "shape": [], "values": [{"name": "v"}]}]}"#;
        let v = run(&c, by_name);
        assert!(
            error_message(&v)
                .contains("Trying to read variable with wrong dtype. Expected int32 got float"),
            "{v}"
        );
        let v = run(
            &c,
            &line(
                "AssignSubVariableOp",
                r#", {"dtype": "DT_FLOAT", "shape": [3], "values": [1, 2, 3]}"#,
            ),
        );
        assert!(
            error_message(&v).contains("Cannot update variable with shape [2] using a Tensor with shape [3], shapes must be equal."),
            "{v}"
        );
        assert_eq!(
            run(&c, &line("DestroyResourceOp", "")),
            json!({"outputs": []})
        );
        let v = run(&c, &read);
        assert_eq!(error_code(&v), "FAILED_PRECONDITION");
    }

    /// A test op as the guide's `ZeroOut`: every element but
    /// `preserve_index` (checked at construction) zeroed.
    struct ZeroOutKernel(usize);
    impl opforge::kernel::OpKernel for ZeroOutKernel {
        fn compute(&self, ctx: &mut opforge::kernel::OpKernelContext<'_>) -> Result<()> {
            let x = ctx.input(0).clone();
            if self.0 >= x.num_elements() {
                return Err(opforge::Status::invalid_argument(
                    "preserve_index out of range",
                ));
            }
            let mut y = Tensor::zeros(x.dtype(), x.dims())?;
            match x.dtype() {
                DataType::Int32 => y.flat_mut::<i32>()?[self.0] = x.flat::<i32>()?[self.0],
                DataType::Int64 => y.flat_mut::<i64>()?[self.0] = x.flat::<i64>()?[self.0],
                _ => y.flat_mut::<f32>()?[self.0] = x.flat::<f32>()?[self.0],
            }
            ctx.set_output(0, y)
        }
    }
    impl opforge::kernel::CreateKernel for ZeroOutKernel {
        fn create(c: &opforge::kernel::OpKernelConstruction<'_>) -> Result<Self> {
            let i: i64 = c.get_attr("preserve_index")?;
            usize::try_from(i).map(ZeroOutKernel).map_err(|_| {
                opforge::Status::invalid_argument(format!("Need preserve_index >= 0, got {i}"))
            })
        }
    }
    opforge::register_op!(opforge::OpDefBuilder::new("ExecTestZeroOut")
        .attr("T: {int32, int64, float} = DT_INT32")
        .attr("preserve_index: int = 0")
        .input("to_zero: T")
        .output("zeroed: T"));
    opforge::register_kernel!(
        opforge::kernel::KernelDefBuilder::new("ExecTestZeroOut"),
        ZeroOutKernel
    );

    /// A test op with a list input: `out = sum(xs) + 100 * y`.
    struct SumList;
    impl opforge::kernel::OpKernel for SumList {
        fn compute(&self, ctx: &mut opforge::kernel::OpKernelContext<'_>) -> Result<()> {
            let mut total = 0i32;
            for x in ctx.input_list("xs")? {
                total += x.flat::<i32>()?.iter().sum::<i32>();
            }
            total += 100 * ctx.input_list("y")?[0].scalar_value::<i32>()?;
            ctx.set_output(0, Tensor::scalar(total))
        }
    }
    impl opforge::kernel::CreateKernel for SumList {
        fn create(_: &opforge::kernel::OpKernelConstruction<'_>) -> Result<Self> {
            Ok(SumList)
        }
    }
    opforge::register_op!(opforge::OpDefBuilder::new("ExecTestSumList")
        .attr("N: int >= 1")
        .input("xs: N * int32")
        .input("y: int32")
        .output("out: int32"));
    opforge::register_kernel!(
        opforge::kernel::KernelDefBuilder::new("ExecTestSumList"),
        SumList
    );

    #[test]
    fn list_inputs_flat_or_grouped() {
        let c = ctx();
        let t = |v: i32| format!(r#"{{"dtype": "DT_INT32", "shape": [], "values": [{v}]}}"#);
        // Flat: the list takes what the other argument leaves.
        let v = run(
            &c,
            &format!(
                r#"{{"op": "ExecTestSumList", "inputs": [{}, {}, {}]}}"#,
                t(1),
                t(2),
                t(3)
            ),
        );
        assert_eq!(v["outputs"][0]["values"], json!([303]), "{v}");
        // Grouped: a JSON array is one list argument.
        let v = run(
            &c,
            &format!(
                r#"{{"op": "ExecTestSumList", "inputs": [[{}, {}, {}], {}]}}"#,
                t(1),
                t(2),
                t(3),
                t(4)
            ),
        );
        assert_eq!(v["outputs"][0]["values"], json!([406]), "{v}");
        // Flat with N given.
        let v = run(
            &c,
            &format!(
                r#"{{"op": "ExecTestSumList", "node_def": {{"attr": {{"N": {{"i": "1"}}}}}}, "inputs": [{}, {}]}}"#,
                t(5),
                t(6)
            ),
        );
        assert_eq!(v["outputs"][0]["values"], json!([605]), "{v}");
        // A list given for a single-tensor argument is an error.
        let v = run(
            &c,
            &format!(r#"{{"op": "ExecTestZeroOut", "inputs": [[{}]]}}"#, t(7)),
        );
        assert_eq!(error_code(&v), "INVALID_ARGUMENT", "{v}");
        let rec = parse_record(
            &serde_json::from_str(&format!(
                r#"{{"op": "X", "inputs": [{}, [{}, {}], []]}}"#,
                t(1),
                t(2),
                t(3)
            ))
            .unwrap(),
        )
        .unwrap();
        assert!(matches!(&rec.inputs[0], Arg::One(x) if x.dtype() == DataType::Int32));
        assert!(matches!(&rec.inputs[1], Arg::List(l) if l.len() == 2));
        assert!(matches!(&rec.inputs[2], Arg::List(l) if l.is_empty()));
    }

    #[test]
    fn jsonl_skips_blank_lines_and_survives_bad_bytes() {
        let c = ctx();
        let input: &[u8] = b"\n{\"op\": \"StringToNumber\", \"inputs\": [{\"dtype\": \"DT_STRING\", \"shape\": [], \"values\": [\"7\"]}], \"node_def\": {\"attr\": {\"out_type\": {\"type\": \"DT_INT32\"}}}}\n   \n\xff\xfe\n{\"op\": 1}";
        let mut out = Vec::new();
        exec_jsonl(input, &c, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert_eq!(
            lines[0],
            json!({"outputs": [{"dtype": "DT_INT32", "shape": [], "values": [7]}]})
        );
        assert!(
            error_message(&lines[1]).contains("line 4 is not valid UTF-8"),
            "{text}"
        );
        assert!(error_message(&lines[2]).contains("no \"op\""), "{text}");
    }
}
