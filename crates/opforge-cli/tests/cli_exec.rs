//! `opforge exec` through a real process: a file mixing good and bad lines,
//! variables living across lines, stdin input; the session's `ZeroOut`
//! lines run the `zero_out` example library's kernel (`--library`).

mod common;
use common::*;

use serde_json::{json, Value};
use std::path::PathBuf;
use std::process::Output;

fn temp_file(name: &str, contents: &[u8]) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cli_exec");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, contents).unwrap();
    path
}

fn lines(o: &Output) -> Vec<Value> {
    assert!(
        o.status.success(),
        "exit {:?}: {}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout.clone())
        .expect("stdout is UTF-8")
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect()
}

fn message(v: &Value) -> &str {
    v["error"]["message"]
        .as_str()
        .unwrap_or_else(|| panic!("not an error line: {v}"))
}

const HANDLE: &str = r#"{"dtype": "DT_RESOURCE", "shape": [], "values": [{"container": "localhost", "name": "counter"}]}"#;

/// What an output line must satisfy.
type Check = Box<dyn Fn(&Value)>;

/// The session: its input lines, and a check of each output line.
fn session() -> (String, Vec<Check>) {
    let mut input = String::new();
    let mut checks: Vec<Check> = Vec::new();
    let mut add = |line: String, check: Check| {
        input.push_str(&line);
        input.push('\n');
        checks.push(check);
    };
    // 1. ZeroOut with an attr.
    add(
        r#"{"op": "ZeroOut", "node_def": {"attr": {"preserve_index": {"i": "1"}}}, "inputs": [{"dtype": "DT_INT32", "shape": [2, 2], "values": [1, 2, 3, 4]}]}"#.into(),
        Box::new(|v| {
            assert_eq!(
                *v,
                json!({"outputs": [{"dtype": "DT_INT32", "shape": [2, 2], "values": [0, 2, 0, 0]}]})
            )
        }),
    );
    // 2. Not JSON.
    add(
        "this is not json".into(),
        Box::new(|v| {
            assert_eq!(v["error"]["code"], "INVALID_ARGUMENT");
            assert!(message(v).contains("not valid JSON"), "{v}");
        }),
    );
    // 3. StringToNumber, default out_type, special floats in the output.
    add(
        r#"{"op": "StringToNumber", "inputs": [{"dtype": "DT_STRING", "shape": [3], "values": ["0.1", "-inf", "nan"]}]}"#.into(),
        Box::new(|v| {
            assert_eq!(
                *v,
                json!({"outputs": [{"dtype": "DT_FLOAT", "shape": [3], "values": [0.1, "-inf", "nan"]}]})
            )
        }),
    );
    // 4. StringToNumber failing as TensorFlow does.
    add(
        r#"{"op": "StringToNumber", "node_def": {"attr": {"out_type": {"type": "DT_INT64"}}}, "inputs": [{"dtype": "DT_STRING", "shape": [2], "values": ["12", "abc"]}]}"#.into(),
        Box::new(|v| {
            assert_eq!(v["error"]["code"], "INVALID_ARGUMENT");
            assert!(
                message(v).starts_with("StringToNumberOp could not correctly convert string: abc"),
                "{v}"
            );
        }),
    );
    // 5. A variable handle.
    add(
        r#"{"op": "VarHandleOp", "node_def": {"attr": {"shared_name": {"s": "Y291bnRlcg=="}, "dtype": {"type": "DT_INT64"}, "shape": {"shape": {"dim": [{"size": "2"}]}}}}}"#.into(),
        Box::new(|v| {
            let h = &v["outputs"][0];
            assert_eq!(h["dtype"], "DT_RESOURCE");
            assert_eq!(h["shape"], json!([]));
            assert_eq!(h["values"][0]["name"], "counter");
            assert_eq!(h["values"][0]["container"], "localhost");
            assert_eq!(
                h["values"][0]["dtypes_and_shapes"],
                json!([{"dtype": "DT_INT64", "shape": [2]}])
            );
        }),
    );
    // 6. Reading it before any assignment.
    let read = format!(
        r#"{{"op": "ReadVariableOp", "node_def": {{"attr": {{"dtype": {{"type": "DT_INT64"}}}}}}, "inputs": [{HANDLE}]}}"#
    );
    add(
        read.clone(),
        Box::new(|v| {
            assert_eq!(v["error"]["code"], "FAILED_PRECONDITION");
            assert!(
                message(v).contains("Could not find variable counter"),
                "{v}"
            );
        }),
    );
    // 7. Assign, 8. add, 9. subtract, 10. read.
    let value = |vals: &str| format!(r#"{{"dtype": "DT_INT64", "shape": [2], "values": {vals}}}"#);
    add(
        format!(
            r#"{{"op": "AssignVariableOp", "inputs": [{HANDLE}, {}]}}"#,
            value("[10, 20]")
        ),
        Box::new(|v| assert_eq!(*v, json!({"outputs": []}))),
    );
    add(
        format!(
            r#"{{"op": "AssignAddVariableOp", "inputs": [{HANDLE}, {}]}}"#,
            value("[5, 5]")
        ),
        Box::new(|v| assert_eq!(*v, json!({"outputs": []}))),
    );
    add(
        format!(
            r#"{{"op": "AssignSubVariableOp", "inputs": [{HANDLE}, {}]}}"#,
            value(r#"[1, "2"]"#)
        ),
        Box::new(|v| assert_eq!(*v, json!({"outputs": []}))),
    );
    add(
        read.clone(),
        Box::new(|v| {
            assert_eq!(
                *v,
                json!({"outputs": [{"dtype": "DT_INT64", "shape": [2], "values": [14, 23]}]})
            )
        }),
    );
    // 11. A shape mismatch, 12. a dtype mismatch.
    add(
        format!(
            r#"{{"op": "AssignAddVariableOp", "inputs": [{HANDLE}, {}]}}"#,
            r#"{"dtype": "DT_INT64", "shape": [3], "values": [1, 1, 1]}"#
        ),
        Box::new(|v| {
            assert!(
                message(v).contains("Cannot update variable with shape [2] using a Tensor with shape [3], shapes must be equal."),
                "{v}"
            );
        }),
    );
    add(
        format!(
            r#"{{"op": "ReadVariableOp", "node_def": {{"attr": {{"dtype": {{"type": "DT_FLOAT"}}}}}}, "inputs": [{HANDLE}]}}"#
        ),
        Box::new(|v| {
            assert!(
                message(v)
                    .contains("Trying to read variable with wrong dtype. Expected float got int64"),
                "{v}"
            );
        }),
    );
    // 13. A bad tensor: out of range for the dtype.
    add(
        r#"{"op": "ZeroOut", "inputs": [{"dtype": "DT_UINT8", "shape": [1], "values": [300]}]}"#
            .into(),
        Box::new(|v| {
            assert_eq!(
                message(v),
                "inputs[0]: values[0]: 300 is out of range for DT_UINT8 [0, 255]"
            )
        }),
    );
    // 14. An unknown op.
    add(
        r#"{"op": "NoSuchOp", "inputs": []}"#.into(),
        Box::new(|v| assert_eq!(v["error"]["code"], "NOT_FOUND")),
    );
    // 15. Destroy, 16. read again.
    add(
        format!(r#"{{"op": "DestroyResourceOp", "inputs": [{HANDLE}]}}"#),
        Box::new(|v| assert_eq!(*v, json!({"outputs": []}))),
    );
    add(
        read,
        Box::new(|v| assert_eq!(v["error"]["code"], "FAILED_PRECONDITION")),
    );
    // 17. ZeroOut's construction-time check.
    add(
        r#"{"op": "ZeroOut", "node_def": {"attr": {"preserve_index": {"i": "-1"}}}, "inputs": [{"dtype": "DT_FLOAT", "shape": [1], "values": [1]}]}"#.into(),
        Box::new(|v| assert!(message(v).contains("Need preserve_index >= 0, got -1"), "{v}")),
    );
    (input, checks)
}

#[test]
fn a_file_of_good_and_bad_lines() {
    let (input, checks) = session();
    // Blank lines and a non-UTF-8 line in the middle.
    let mut bytes = b"\n   \n".to_vec();
    let mut it = input.lines();
    bytes.extend_from_slice(it.next().unwrap().as_bytes());
    bytes.extend_from_slice(b"\n\xff\xfe not utf-8\n\n");
    for l in it {
        bytes.extend_from_slice(l.as_bytes());
        bytes.push(b'\n');
    }
    let path = temp_file("session.jsonl", &bytes);
    let lib = zero_out_lib();
    let out = lines(&opforge(&[
        "exec",
        "--jsonl",
        path.to_str().unwrap(),
        "--library",
        &lib,
    ]));
    assert_eq!(out.len(), checks.len() + 1, "{out:#?}");
    checks[0](&out[0]);
    assert!(
        message(&out[1]).contains("line 4 is not valid UTF-8"),
        "{}",
        out[1]
    );
    for (check, v) in checks[1..].iter().zip(&out[2..]) {
        check(v);
    }
}

#[test]
fn stdin_input() {
    let (input, checks) = session();
    let lib = zero_out_lib();
    let out = lines(&opforge_stdin(
        &["--library", &lib, "exec", "--jsonl", "-"],
        input.as_bytes(),
    ));
    assert_eq!(out.len(), checks.len());
    for (check, v) in checks.iter().zip(&out) {
        check(v);
    }
}

#[test]
fn output_lines_are_compact_json() {
    let line = br#"{"op": "StringToNumber", "node_def": {"attr": {"out_type": {"type": "DT_DOUBLE"}}}, "inputs": [{"dtype": "DT_STRING", "shape": [2, 1], "values": ["1e300", " 2.5 "]}]}"#;
    let o = opforge_stdin(&["exec", "--jsonl", "-"], line);
    assert_eq!(
        String::from_utf8(o.stdout).unwrap(),
        "{\"outputs\":[{\"dtype\":\"DT_DOUBLE\",\"shape\":[2,1],\"values\":[1e+300,2.5]}]}\n"
    );
}

#[test]
fn missing_file_is_an_error() {
    let o = opforge(&["exec", "--jsonl", "/nonexistent/calls.jsonl"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("NOT_FOUND") && err.contains("/nonexistent/calls.jsonl"),
        "{err}"
    );
    assert!(o.stdout.is_empty());
}

#[test]
fn int64_literals_past_the_bounds_are_refused_not_clamped() {
    for (dtype, literal) in [
        ("DT_INT64", "-9223372036854775809"),
        ("DT_INT64", "-9223372036854775810"),
        ("DT_INT64", "9223372036854775808"),
        ("DT_UINT64", "18446744073709551616"),
    ] {
        let line = format!(
            r#"{{"op": "Identity", "inputs": [{{"dtype": "{dtype}", "shape": [1], "values": [{literal}]}}]}}"#
        );
        let out = lines(&opforge_stdin(&["exec", "--jsonl", "-"], line.as_bytes()));
        assert!(
            message(&out[0]).contains("is out of range for"),
            "{dtype} {literal}: {}",
            out[0]
        );
    }
    // The bounds themselves are fine.
    let line = br#"{"op": "Identity", "inputs": [{"dtype": "DT_INT64", "shape": [2], "values": [-9223372036854775808, 9223372036854775807]}]}"#;
    let out = lines(&opforge_stdin(&["exec", "--jsonl", "-"], line));
    assert_eq!(
        out[0]["outputs"][0]["values"],
        serde_json::json!([i64::MIN, i64::MAX]),
        "{}",
        out[0]
    );
}

#[test]
fn complex_tanh_of_large_arguments_is_finite() {
    // The textbook formula overflows to NaN; TensorFlow issue class found by
    // a hostile-input run: Tanh(1e30+1e30i) must be 1+0i (as numpy gives).
    for dtype in ["DT_COMPLEX64", "DT_COMPLEX128"] {
        let line = format!(
            r#"{{"op": "Tanh", "inputs": [{{"dtype": "{dtype}", "shape": [2], "values": [[1e30, 1e30], [-1e30, 5]]}}]}}"#
        );
        let out = lines(&opforge_stdin(&["exec", "--jsonl", "-"], line.as_bytes()));
        let v = &out[0]["outputs"][0]["values"];
        assert_eq!(v[0][0], 1.0, "{dtype}: {}", out[0]);
        assert_eq!(v[0][1].as_f64(), Some(0.0), "{dtype}: {}", out[0]);
        assert_eq!(v[1][0], -1.0, "{dtype}: {}", out[0]);
    }
}
