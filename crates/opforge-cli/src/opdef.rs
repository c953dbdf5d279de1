//! `opforge opdef build|check`: OpDefs from builder calls, and validation
//! of OpLists.
//!
//! A builder record is one JSON object, the format of TensorFlow's
//! `REGISTER_OP` chains transcribed as data:
//!
//! ```json
//! {"op": "Pack",
//!  "calls": [["Input", "values: N * T"], ["Output", "output: T"], ["Attr", "N: int >= 1"]],
//!  "flags": ["SetIsStateful", ["Deprecated", 26, "Use Stack"]]}
//! ```
//!
//! Call kinds are `Input`, `Output` and `Attr` (and, beyond TensorFlow's
//! corpus, `ControlOutput` and `Doc`). Flags are `SetIsStateful`,
//! `SetIsCommutative`, `SetIsAggregate`, `SetAllowsUninitializedInput`,
//! `SetDoNotOptimize` (which, as in TensorFlow, marks the op stateful),
//! `SetIsDistributedCommunication` and `["Deprecated", VERSION,
//! "explanation"]`. Other keys are ignored.
//!
//! ```
//! use opforge_cli::opdef::build_line;
//! let line = r#"{"op": "Neg", "calls": [["Input", "x: float"], ["Output", "y: float"]]}"#;
//! let out: serde_json::Value = serde_json::from_str(&build_line(line).unwrap()).unwrap();
//! assert_eq!(out["op"], "Neg");
//! assert_eq!(out["opdef"]["input_arg"][0]["type"], "DT_FLOAT");
//! assert!(build_line("   ").is_none());
//! ```

use super::CliError;
use opforge::op_def::validate_op_def;
use opforge::proto::{self, OpDef, OpList};
use opforge::{OpDefBuilder, Result, Status};
use serde_json::Value;
use std::io::{BufRead, Write};

/// The builder a record describes (without finalizing it). `InvalidArgument`
/// if the record is not an object with a string `op`, or a call or flag is
/// malformed.
pub fn builder_from_record(record: &Value) -> Result<OpDefBuilder> {
    let object = record
        .as_object()
        .ok_or_else(|| Status::invalid_argument("the line is not a JSON object"))?;
    let name = object
        .get("op")
        .and_then(Value::as_str)
        .ok_or_else(|| Status::invalid_argument("the record has no \"op\" string"))?;
    let mut builder = OpDefBuilder::new(name);
    for (i, call) in array_field(record, "calls")?.iter().enumerate() {
        let pair = call.as_array().map(Vec::as_slice);
        let Some([Value::String(kind), Value::String(spec)]) = pair else {
            return Err(Status::invalid_argument(format!(
                "calls[{i}] is not a [kind, spec] pair of strings: {call}"
            )));
        };
        builder = match kind.as_str() {
            "Input" => builder.input(spec.as_str()),
            "Output" => builder.output(spec.as_str()),
            "Attr" => builder.attr(spec.as_str()),
            "ControlOutput" => builder.control_output(spec.as_str()),
            "Doc" => builder.doc(spec.as_str()),
            other => {
                return Err(Status::invalid_argument(format!(
                    "calls[{i}] has unknown kind '{other}' (expected Input, Output, Attr, \
                     ControlOutput or Doc)"
                )))
            }
        };
    }
    for (i, flag) in array_field(record, "flags")?.iter().enumerate() {
        builder = match flag {
            Value::String(s) => match s.as_str() {
                // SetDoNotOptimize is SetIsStateful in TensorFlow's op.h.
                "SetIsStateful" | "SetDoNotOptimize" => builder.stateful(),
                "SetIsCommutative" => builder.commutative(),
                "SetIsAggregate" => builder.aggregate(),
                "SetAllowsUninitializedInput" => builder.allows_uninitialized_input(),
                "SetIsDistributedCommunication" => builder.distributed_communication(),
                other => {
                    return Err(Status::invalid_argument(format!(
                        "flags[{i}] is an unknown flag '{other}'"
                    )))
                }
            },
            Value::Array(items) => match items.as_slice() {
                [Value::String(tag), version, Value::String(explanation)]
                    if tag == "Deprecated" =>
                {
                    let version = version
                        .as_i64()
                        .and_then(|v| i32::try_from(v).ok())
                        .ok_or_else(|| {
                            Status::invalid_argument(format!(
                                "flags[{i}]: the Deprecated version must be an integer \
                                 (a GraphDef version), got {version}"
                            ))
                        })?;
                    builder.deprecated(version, explanation.as_str())
                }
                _ => {
                    return Err(Status::invalid_argument(format!(
                        "flags[{i}] is not [\"Deprecated\", version, \"explanation\"]: {flag}"
                    )))
                }
            },
            other => {
                return Err(Status::invalid_argument(format!(
                    "flags[{i}] is neither a flag name nor a Deprecated triple: {other}"
                )))
            }
        };
    }
    Ok(builder)
}

/// The array under `key`, or an empty one if it is absent or null.
fn array_field<'a>(record: &'a Value, key: &str) -> Result<&'a [Value]> {
    match record.get(key) {
        None | Some(Value::Null) => Ok(&[]),
        Some(Value::Array(items)) => Ok(items),
        Some(other) => Err(Status::invalid_argument(format!(
            "\"{key}\" must be an array, got {other}"
        ))),
    }
}

/// The OpDef a record describes: [`builder_from_record`], finalized.
pub fn build_record(record: &Value) -> Result<OpDef> {
    builder_from_record(record)?.finalize()
}

/// The output line for one input line of `opforge opdef build`, or `None`
/// for a blank line: `{"op":NAME,"opdef":{...}}` on success,
/// `{"op":NAME,"error":"CODE: message"}` on failure (`"op":null` if the
/// line has no op name, e.g. is not JSON).
pub fn build_line(line: &str) -> Option<String> {
    let line = line.trim();
    if line.is_empty() {
        return None;
    }
    let record: Value = match serde_json::from_str(line) {
        Ok(record) => record,
        Err(e) => {
            let status = Status::invalid_argument(format!("the line is not valid JSON: {e}"));
            return Some(result_line(None, Err(status)));
        }
    };
    let name = record.get("op").and_then(Value::as_str);
    Some(result_line(name, build_record(&record)))
}

/// Formats one output line, with `op` first.
fn result_line(name: Option<&str>, result: Result<OpDef>) -> String {
    let name = name.map_or(Value::Null, |n| Value::String(n.to_string()));
    match result {
        Ok(op) => format!("{{\"op\":{name},\"opdef\":{}}}", proto::to_json(&op)),
        Err(status) => format!(
            "{{\"op\":{name},\"error\":{}}}",
            Value::String(status.to_string())
        ),
    }
}

/// `opforge opdef build`: one output line per non-blank input line; a bad
/// line gives an error line and the next line is read.
pub fn build_jsonl(input: impl BufRead, out: &mut dyn Write) -> Result<(), CliError> {
    super::for_each_line(input, out, |line| match line {
        Ok(line) => build_line(line),
        Err(e) => Some(result_line(None, Err(e))),
    })
}

/// The result of validating every op of an OpList.
#[derive(Debug)]
pub struct CheckReport {
    /// How many ops the list holds.
    pub total: usize,
    /// The invalid ops: (name, or `<op #i>` if unnamed; the error).
    pub failures: Vec<(String, Status)>,
}

/// Parses a text-format OpList and validates each op.
pub fn check_text(text: &str) -> Result<CheckReport> {
    let list: OpList = proto::from_text(text)?;
    let failures = list
        .op
        .iter()
        .enumerate()
        .filter_map(|(i, op)| {
            let name = if op.name.is_empty() {
                format!("<op #{}>", i + 1)
            } else {
                op.name.clone()
            };
            validate_op_def(op).err().map(|e| (name, e))
        })
        .collect();
    Ok(CheckReport {
        total: list.op.len(),
        failures,
    })
}

/// `opforge opdef check`: prints `N of M ops valid`, then `Name: error` for
/// each invalid op; fails (exit code 1) if any op is invalid.
pub fn check(text: &str, out: &mut dyn Write) -> Result<(), CliError> {
    let report = check_text(text)?;
    let valid = report.total - report.failures.len();
    writeln!(out, "{valid} of {} ops valid", report.total)?;
    for (name, error) in &report.failures {
        writeln!(out, "{name}: {}", error.to_string().replace('\n', "\n    "))?;
    }
    if report.failures.is_empty() {
        Ok(())
    } else {
        Err(CliError::Failed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(line: &str) -> Value {
        serde_json::from_str(&build_line(line).expect("not blank")).unwrap()
    }

    #[test]
    fn builds_a_record_with_flags() {
        let out = parse(
            r#"{"op": "Pack", "calls": [["Input", "values: N * T"], ["Output", "output: T"],
                ["Attr", "N: int >= 1"], ["Attr", "T: type"], ["Attr", "axis: int = 0"]],
                "flags": ["SetIsCommutative", "SetDoNotOptimize", ["Deprecated", 26, "Use Stack"]],
                "source": "ignored"}"#,
        );
        assert_eq!(out["op"], "Pack");
        let op: OpDef = proto::from_json(&out["opdef"]).unwrap();
        assert_eq!(op.name, "Pack");
        assert_eq!(op.input_arg[0].number_attr, "N");
        assert!(op.is_commutative && op.is_stateful);
        let dep = op.deprecation.unwrap();
        assert_eq!((dep.version, dep.explanation.as_str()), (26, "Use Stack"));
    }

    #[test]
    fn output_puts_op_first() {
        let line = build_line(r#"{"op": "NoOp"}"#).unwrap();
        assert!(line.starts_with(r#"{"op":"NoOp","opdef":{"#), "{line}");
        let line = build_line(r#"{"op": "NoOp", "calls": [["Input", "x"]]}"#).unwrap();
        assert!(line.starts_with(r#"{"op":"NoOp","error":""#), "{line}");
        assert!(!line.contains('\n'));
    }

    #[test]
    fn bad_lines_give_error_lines() {
        for (line, op) in [
            ("{not json", Value::Null),
            ("[1, 2]", Value::Null),
            (r#"{"calls": []}"#, Value::Null),
            (r#"{"op": 7}"#, Value::Null),
            (r#"{"op": "A", "calls": [["Input"]]}"#, json!("A")),
            (
                r#"{"op": "A", "calls": [["Inptu", "x: float"]]}"#,
                json!("A"),
            ),
            (r#"{"op": "A", "calls": {"Input": "x: float"}}"#, json!("A")),
            (r#"{"op": "A", "flags": ["SetIsFast"]}"#, json!("A")),
            (
                r#"{"op": "A", "flags": [["Deprecated", "v1", "why"]]}"#,
                json!("A"),
            ),
            (
                r#"{"op": "A", "flags": [["Deprecated", 1e99, "why"]]}"#,
                json!("A"),
            ),
            (r#"{"op": "A", "flags": [3]}"#, json!("A")),
            (
                r#"{"op": "A", "calls": [["Input", "x: nosuchtype"]]}"#,
                json!("A"),
            ),
            (r#"{"op": "lower", "calls": []}"#, json!("lower")),
        ] {
            let out = parse(line);
            assert_eq!(out["op"], op, "{line}");
            let error = out["error"]
                .as_str()
                .unwrap_or_else(|| panic!("{line}: {out}"));
            assert!(error.starts_with("INVALID_ARGUMENT: "), "{line}: {error}");
            assert!(out.get("opdef").is_none());
        }
    }

    #[test]
    fn build_jsonl_keeps_going() {
        let input = b"{\"op\": \"A\"}\n\n  \nnot json\n{\"op\": \"B\", \"calls\": [[\"Input\", \"x: bogus\"]]}\n\xff\xfe\n{\"op\": \"C\"}";
        let mut out = Vec::new();
        build_jsonl(&input[..], &mut out).unwrap();
        let lines: Vec<Value> = std::str::from_utf8(&out)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 5);
        assert!(lines[0]["opdef"].is_object());
        assert!(lines[1]["error"].is_string() && lines[1]["op"].is_null());
        assert_eq!(lines[2]["op"], "B");
        assert!(lines[2]["error"].is_string());
        assert!(lines[3]["error"].as_str().unwrap().contains("UTF-8"));
        assert_eq!(lines[4]["op"], "C");
        assert!(lines[4]["opdef"].is_object());
    }

    #[test]
    fn check_reports_each_invalid_op() {
        let text = r#"
            op { name: "Good" input_arg { name: "x" type: DT_FLOAT } }
            op { name: "bad_name" }
            op { name: "AlsoGood" }
        "#;
        let report = check_text(text).unwrap();
        assert_eq!(report.total, 3);
        assert_eq!(report.failures.len(), 1);
        assert_eq!(report.failures[0].0, "bad_name");

        let mut out = Vec::new();
        assert!(matches!(check(text, &mut out), Err(CliError::Failed)));
        let out = String::from_utf8(out).unwrap();
        assert!(out.starts_with("2 of 3 ops valid\nbad_name: "), "{out}");

        let mut out = Vec::new();
        check("op { name: 'Good' }", &mut out).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "1 of 1 ops valid\n");

        let mut out = Vec::new();
        match check("op { nme: 'x' }", &mut out) {
            Err(CliError::Status(s)) => assert!(s.message().contains("line 1"), "{s}"),
            other => panic!("{other:?}"),
        }
    }
}
