//! Smoke tests of the `opforge` binary: each command once, through a real
//! process, with the standard op library linked in and the `zero_out`
//! example library loaded with `--library` where a test needs its ops.

mod common;
use common::*;

use std::path::PathBuf;
use std::process::Output;

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).expect("stdout is UTF-8")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A file under the target directory, unique to this test.
fn temp_file(name: &str, contents: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cli_smoke");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, contents).unwrap();
    path
}

#[test]
fn ops_list_is_sorted_and_has_the_examples() {
    let o = opforge(&["ops", "list"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let names: Vec<&str> = out.lines().collect();
    assert!(names.contains(&"StringToNumber"), "{names:?}");
    // The guide's demo ops are the example library's, not the standard
    // library's.
    assert!(!names.contains(&"ZeroOut"), "{names:?}");
    let lib = zero_out_lib();
    let o = opforge(&["ops", "list", "--library", &lib]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    // An op without a kernel is marked after its name.
    assert!(out.contains("\nMultipleInsAndOuts  # no kernel\n"), "{out}");
    assert!(
        out.contains("\nRefIdentity  # no kernel: it takes and returns ref tensors"),
        "{out}"
    );
    let names: Vec<&str> = out
        .lines()
        .map(|l| l.split_whitespace().next().unwrap_or(""))
        .collect();
    for name in ["ZeroOut", "StringToNumber", "MultipleInsAndOuts"] {
        assert!(names.contains(&name), "{name} not in {names:?}");
    }
    assert!(names.windows(2).all(|w| w[0] < w[1]), "{names:?}");
}

#[test]
fn ops_show_zero_out() {
    let lib = zero_out_lib();
    let o = opforge(&["ops", "show", "ZeroOut", "--library", &lib]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.contains("zero_out(to_zero, preserve_index=0, name=None)"),
        "{out}"
    );
    assert!(
        out.contains("Zeros out every element of the input except one."),
        "{out}"
    );

    let o = opforge(&[
        "--library",
        &lib,
        "ops",
        "show",
        "ZeroOut",
        "--format",
        "pbtxt",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).starts_with("name: \"ZeroOut\"\n"),
        "{}",
        stdout(&o)
    );

    let o = opforge(&["ops", "show", "StringToNumber", "--format", "json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let json: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(json["input_arg"][0]["type"], "DT_STRING");
}

#[test]
fn ops_show_unknown_op_suggests_a_name() {
    let lib = zero_out_lib();
    let o = opforge(&["ops", "show", "ZeroOutt", "--library", &lib]);
    assert_eq!(o.status.code(), Some(1));
    assert!(o.stdout.is_empty());
    let err = stderr(&o);
    assert!(err.contains("Op type not registered 'ZeroOutt'"), "{err}");
    assert!(err.contains("Did you mean 'ZeroOut'?"), "{err}");
}

#[test]
fn usage_errors_exit_1() {
    let o = opforge(&["ops", "frobnicate"]);
    assert_eq!(o.status.code(), Some(1));
    let o = opforge(&["ops", "show", "StringToNumber", "--format", "yaml"]);
    assert_eq!(o.status.code(), Some(1));
    let o = opforge(&["--help"]);
    assert_eq!(o.status.code(), Some(0));
}

#[test]
fn ops_export_binary_is_an_op_list() {
    let lib = zero_out_lib();
    let o = opforge(&["ops", "export", "--format", "binary", "--library", &lib]);
    assert!(o.status.success(), "{}", stderr(&o));
    let list: opforge::proto::OpList = opforge::proto::from_binary(&o.stdout).unwrap();
    assert!(list.op.iter().any(|op| op.name == "ZeroOut"));
    assert!(list.op.iter().any(|op| op.name == "StringToNumber"));
}

#[test]
fn opdef_build_prints_one_line_per_input_line() {
    let input = concat!(
        r#"{"op": "Good", "calls": [["Input", "x: float"], ["Output", "y: float"]], "flags": ["SetIsStateful"]}"#,
        "\n",
        "this is not json\n",
        "\n",
        r#"{"op": "BadSpec", "calls": [["Input", "x: floot"]]}"#,
        "\n",
        r#"{"op": "Old", "flags": [["Deprecated", 12, "Use New"]]}"#,
        "\n",
    );
    let path = temp_file("build.jsonl", input);
    let from_file = opforge(&["opdef", "build", "--jsonl", path.to_str().unwrap()]);
    let from_stdin = opforge_stdin(&["opdef", "build", "--jsonl", "-"], input.as_bytes());
    for o in [from_file, from_stdin] {
        assert!(o.status.success(), "{}", stderr(&o));
        let out = stdout(&o);
        let lines: Vec<serde_json::Value> = out
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 4, "{out}");
        assert_eq!(lines[0]["op"], "Good");
        assert_eq!(lines[0]["opdef"]["is_stateful"], true);
        assert!(lines[1]["op"].is_null());
        assert!(lines[1]["error"].is_string());
        assert_eq!(lines[2]["op"], "BadSpec");
        assert!(
            lines[2]["error"].as_str().unwrap().contains("floot"),
            "{}",
            lines[2]
        );
        assert_eq!(lines[3]["opdef"]["deprecation"]["version"], 12);
    }
}

#[test]
fn opdef_build_missing_file_is_an_error() {
    let o = opforge(&["opdef", "build", "--jsonl", "/nonexistent/ops.jsonl"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("/nonexistent/ops.jsonl"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn opdef_check_valid_and_invalid_lists() {
    let valid = temp_file(
        "valid.pbtxt",
        r#"op { name: "A" input_arg { name: "x" type: DT_FLOAT } }
           op { name: "B" attr { name: "T" type: "type" } input_arg { name: "x" type_attr: "T" } }"#,
    );
    let o = opforge(&["opdef", "check", valid.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "2 of 2 ops valid\n");

    let invalid = temp_file(
        "invalid.pbtxt",
        r#"op { name: "A" }
           op { name: "lower_case" }
           op { name: "C" input_arg { name: "x" type_attr: "Missing" } }"#,
    );
    let o = opforge(&["opdef", "check", invalid.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let out = stdout(&o);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "1 of 3 ops valid", "{out}");
    assert!(lines[1].starts_with("lower_case: "), "{out}");
    assert!(out.contains("\nC: "), "{out}");

    let garbage = temp_file("garbage.pbtxt", "op { name: ");
    let o = opforge(&["opdef", "check", garbage.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("error: INVALID_ARGUMENT"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn opdef_build_reproduces_the_corpus() {
    // TensorFlow's own REGISTER_OP chains (see tests/corpus/README.md): each
    // builds to the OpDef TensorFlow 2.21's builder makes from it.
    let corpus = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/corpus/op_specs.jsonl"
    );
    let o = opforge(&["opdef", "build", "--jsonl", corpus]);
    assert!(o.status.success(), "{}", stderr(&o));
    let records: Vec<serde_json::Value> = std::fs::read_to_string(corpus)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let out = stdout(&o);
    let lines: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), records.len());
    for (record, line) in records.iter().zip(&lines) {
        assert_eq!(line["op"], record["op"]);
        let expected = if record["spec_matches_expected_opdef"] == true {
            &record["expected_opdef"]
        } else {
            &record["opdef_from_spec_tf221"]
        };
        let expected: opforge::proto::OpDef = opforge::proto::from_json(expected).unwrap();
        let built: opforge::proto::OpDef = opforge::proto::from_json(&line["opdef"])
            .unwrap_or_else(|e| panic!("{}: {e}: {line}", record["op"]));
        assert_eq!(built, expected, "{}", record["op"]);
    }
}
