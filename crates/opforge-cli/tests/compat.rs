//! `opforge compat` through the real binary: the committed op histories
//! (the standard library's `ops_history/` and the `zero_out` example
//! library's, checked with `--library`), a history that an edit made
//! incompatible (what CI catches), updates, and the `check-pair` /
//! `check-jsonl` batch commands.

mod common;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The repository root (this crate is `crates/opforge-cli`).
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("crates/opforge-cli is two levels below the root")
        .to_path_buf()
}

fn opforge(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_opforge"))
        .args(args)
        .current_dir(repo())
        .output()
        .expect("run opforge")
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).expect("stdout is UTF-8")
}

fn both(o: &Output) -> String {
    format!("{}{}", stdout(o), String::from_utf8_lossy(&o.stderr))
}

/// The `zero_out` example library's committed op history.
const ZERO_OUT_HISTORY: &str = "examples/zero_out/ops_history";

/// A copy of the committed history `from` (a folder of the repository) in
/// a fresh folder of the target dir.
fn history_copy(from: &str, scenario: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("compat")
        .join(scenario);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for entry in std::fs::read_dir(repo().join(from)).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, dir.join(path.file_name().unwrap())).unwrap();
    }
    dir
}

fn check(dir: &Path) -> Output {
    opforge(&["compat", "check", "--history", dir.to_str().unwrap()])
}

/// `opforge compat ARGS --library <zero_out> --history DIR`.
fn compat_lib(args: &[&str], dir: &Path) -> Output {
    let lib = common::zero_out_lib();
    let mut all = vec!["compat"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--library", &lib, "--history", dir.to_str().unwrap()]);
    opforge(&all)
}

/// Replaces the latest recorded version of op `name` in `dir` by `version`
/// (text format of one OpDef).
fn replace_latest(dir: &Path, name: &str, version: &str) {
    let path = opforge::compat::history_file(dir, name);
    let (_, mut versions) = opforge::compat::read_history_file(&path).unwrap();
    *versions.last_mut().unwrap() = opforge::proto::from_text(version).unwrap();
    opforge::compat::write_history_file(dir, name, &versions).unwrap();
}

const ZERO_OUT_V4: &str = r#"
  name: "ZeroOut"
  input_arg { name: "to_zero" type_attr: "T" }
  output_arg { name: "zeroed" type_attr: "T" }
  attr {
    name: "T" type: "type" default_value { type: DT_INT32 }
    allowed_values { list { type: [DT_FLOAT, DT_DOUBLE, DT_INT32, DT_UINT8, DT_INT16, DT_INT8, DT_INT64, DT_BFLOAT16, DT_UINT16, DT_HALF, DT_UINT32, DT_UINT64] } }
  }
  attr { name: "preserve_index" type: "int" default_value { i: 0 } }
"#;

#[test]
fn the_committed_histories_pass() {
    let o = opforge(&["compat", "check"]);
    assert!(o.status.success(), "{}", both(&o));
    let out = stdout(&o);
    assert!(
        out.lines().last().unwrap().starts_with("compat check: "),
        "{out}"
    );
    assert!(
        !out.contains("INCOMPATIBLE") && !out.contains("REMOVED"),
        "{out}"
    );
    // The example library's ops against its own history, and only those.
    let o = compat_lib(&["check", "--strict"], &repo().join(ZERO_OUT_HISTORY));
    assert!(o.status.success(), "{}", both(&o));
    assert_eq!(
        stdout(&o),
        format!(
            "compat check: 8 ops, all unchanged ({})\n",
            repo().join(ZERO_OUT_HISTORY).display()
        )
    );
}

#[test]
fn a_library_check_covers_the_librarys_ops_only() {
    // A standard op's history in the library's folder: the library does not
    // register it, so for the library it was removed.
    let dir = history_copy(ZERO_OUT_HISTORY, "library_scope");
    std::fs::copy(
        repo().join("ops_history/StringToNumber.pbtxt"),
        dir.join("StringToNumber.pbtxt"),
    )
    .unwrap();
    let o = compat_lib(&["check"], &dir);
    assert_eq!(o.status.code(), Some(1), "{}", both(&o));
    let out = stdout(&o);
    assert!(out.contains("StringToNumber: REMOVED"), "{out}");
    assert!(out.contains("compat check: 9 ops"), "{out}");
    // Without --library the standard library is checked against the
    // library's folder: its ops are new, the library's are removed.
    let o = check(&dir);
    assert_eq!(o.status.code(), Some(1), "{}", both(&o));
    assert!(stdout(&o).contains("ZeroOut: REMOVED"), "{}", both(&o));
}

#[test]
fn the_committed_history_is_canonical() {
    // Every file (including ZeroOut's hand-written versions) is valid and
    // reads back as `opforge compat update` writes it.
    for dir in ["ops_history", ZERO_OUT_HISTORY] {
        for path in opforge::compat::history_files(&repo().join(dir)).unwrap() {
            let (_, versions) = opforge::compat::read_history_file(&path).unwrap();
            let text = std::fs::read_to_string(&path).unwrap();
            assert_eq!(
                opforge::compat::history_text(&versions),
                text,
                "{}",
                path.display()
            );
        }
    }
}

#[test]
fn an_incompatible_edit_fails_the_check() {
    // The recorded ZeroOut has an attr that the registered one lost.
    let dir = history_copy(ZERO_OUT_HISTORY, "removed_attr");
    let extra = format!(
        "{}  attr {{ name: \"extra\" type: \"int\" }}\n",
        ZERO_OUT_V4
    );
    replace_latest(&dir, "ZeroOut", &extra);
    let before = std::fs::read_to_string(dir.join("ZeroOut.pbtxt")).unwrap();
    let o = compat_lib(&["check"], &dir);
    assert_eq!(o.status.code(), Some(1), "{}", both(&o));
    let out = stdout(&o);
    assert!(
        out.contains("ZeroOut: INCOMPATIBLE change against"),
        "{out}"
    );
    assert!(out.contains("  - Attr 'extra' removed"), "{out}");
    assert!(
        out.contains("add a new op under a new name (e.g. `ZeroOutV2`)"),
        "{out}"
    );
    assert!(out.contains("recorded: Op<name=ZeroOut;"), "{out}");
    assert!(out.contains("1 failing"), "{out}");
    // update refuses and writes nothing.
    let o = compat_lib(&["update"], &dir);
    assert_eq!(o.status.code(), Some(1), "{}", both(&o));
    assert!(stdout(&o).contains("nothing written"), "{}", both(&o));
    assert_eq!(
        std::fs::read_to_string(dir.join("ZeroOut.pbtxt")).unwrap(),
        before
    );
}

#[test]
fn a_new_attr_without_default_fails_with_the_guides_advice() {
    // As if SameListInputExample had been `in: N * int32` and gained `T: type`.
    let dir = history_copy(ZERO_OUT_HISTORY, "no_default");
    replace_latest(
        &dir,
        "SameListInputExample",
        r#"name: "SameListInputExample"
           input_arg { name: "in" type: DT_INT32 number_attr: "N" }
           output_arg { name: "out" type: DT_INT32 }
           attr { name: "N" type: "int" has_minimum: true minimum: 1 }"#,
    );
    let o = compat_lib(&["check"], &dir);
    assert_eq!(o.status.code(), Some(1), "{}", both(&o));
    let out = stdout(&o);
    assert!(out.contains("SameListInputExample: INCOMPATIBLE"), "{out}");
    assert!(out.contains("  - Attr 'T' added without default"), "{out}");
    assert!(out.contains("give the new attr a default value"), "{out}");
}

#[test]
fn narrowing_a_constraint_fails() {
    // The recorded version allowed string too; the registered ZeroOut does not.
    let dir = history_copy(ZERO_OUT_HISTORY, "narrowed");
    replace_latest(
        &dir,
        "ZeroOut",
        &ZERO_OUT_V4.replace("DT_UINT64]", "DT_UINT64, DT_STRING]"),
    );
    let o = compat_lib(&["check"], &dir);
    assert_eq!(o.status.code(), Some(1), "{}", both(&o));
    let out = stdout(&o);
    assert!(
        out.contains("Attr 'T' has a stricter set of allowed values; from [DT_FLOAT,"),
        "{out}"
    );
}

#[test]
fn a_changed_default_fails_and_is_reported_separately() {
    let dir = history_copy(ZERO_OUT_HISTORY, "default");
    replace_latest(
        &dir,
        "ZeroOut",
        &ZERO_OUT_V4.replace("default_value { i: 0 }", "default_value { i: 1 }"),
    );
    let o = compat_lib(&["check"], &dir);
    assert_eq!(o.status.code(), Some(1), "{}", both(&o));
    let out = stdout(&o);
    assert!(
        out.contains("ZeroOut: attr default changed against"),
        "{out}"
    );
    assert!(
        out.contains("Attr 'preserve_index' has changed it's default value; from 1 to 0"),
        "{out}"
    );
    assert!(!out.contains("INCOMPATIBLE"), "{out}");
}

#[test]
fn a_removed_op_fails() {
    let dir = history_copy("ops_history", "removed_op");
    std::fs::write(dir.join("GoneOp.pbtxt"), "op {\n  name: \"GoneOp\"\n}\n").unwrap();
    let o = check(&dir);
    assert_eq!(o.status.code(), Some(1), "{}", both(&o));
    assert!(stdout(&o).contains("GoneOp: REMOVED"), "{}", both(&o));
}

#[test]
fn compatible_changes_and_new_ops_are_recorded_by_update() {
    let dir = history_copy(ZERO_OUT_HISTORY, "update");
    // ZeroOut's history stops at version 3; MultipleInsAndOuts is not
    // recorded.
    let path = opforge::compat::history_file(&dir, "ZeroOut");
    let text = std::fs::read_to_string(&path).unwrap();
    let (_, mut versions) = opforge::compat::read_history_file(&path).unwrap();
    versions.pop();
    opforge::compat::write_history_file(&dir, "ZeroOut", &versions).unwrap();
    std::fs::remove_file(dir.join("MultipleInsAndOuts.pbtxt")).unwrap();
    let o = compat_lib(&["check"], &dir);
    assert!(o.status.success(), "{}", both(&o));
    let out = stdout(&o);
    assert!(
        out.contains("ZeroOut: compatible change, not recorded yet: run `opforge compat update` to record it as version 4"),
        "{out}"
    );
    assert!(out.contains("MultipleInsAndOuts: new op, not in"), "{out}");
    let strict = compat_lib(&["check", "--strict"], &dir);
    assert_eq!(strict.status.code(), Some(1), "{}", both(&strict));
    let o = compat_lib(&["update"], &dir);
    assert!(o.status.success(), "{}", both(&o));
    assert!(
        stdout(&o).contains("ZeroOut: recorded version 4"),
        "{}",
        both(&o)
    );
    assert!(
        stdout(&o).contains("MultipleInsAndOuts: added"),
        "{}",
        both(&o)
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
    // Only the library's ops were written.
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 8);
    // Now up to date: quiet, and update is a no-op.
    let o = compat_lib(&["check", "--strict"], &dir);
    assert!(o.status.success(), "{}", both(&o));
    assert_eq!(stdout(&o).lines().count(), 1, "{}", both(&o));
    assert!(stdout(&o).contains("all unchanged"), "{}", both(&o));
    let o = compat_lib(&["update"], &dir);
    assert!(stdout(&o).contains("is up to date"), "{}", both(&o));
    // The standard library's history: a new op is recorded too.
    let dir = history_copy("ops_history", "update_std");
    std::fs::remove_file(dir.join("StringToNumber.pbtxt")).unwrap();
    let d = dir.to_str().unwrap();
    let o = check(&dir);
    assert!(o.status.success(), "{}", both(&o));
    assert!(
        stdout(&o).contains("StringToNumber: new op, not in"),
        "{}",
        both(&o)
    );
    let o = opforge(&["compat", "update", "--history", d]);
    assert!(stdout(&o).contains("StringToNumber: added"), "{}", both(&o));
}

#[test]
fn check_pair_prints_the_verdict() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("compat_pair");
    std::fs::create_dir_all(&dir).unwrap();
    let write = |name: &str, text: &str| {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p.to_str().unwrap().to_string()
    };
    let v1 = write(
        "v1.pbtxt",
        "name: 'ZeroOut' input_arg { name: 'to_zero' type: DT_INT32 } output_arg { name: 'zeroed' type: DT_INT32 }",
    );
    let v2 = write(
        "v2.pbtxt",
        "name: 'ZeroOut' input_arg { name: 'to_zero' type_attr: 'T' } output_arg { name: 'zeroed' type_attr: 'T' } \
         attr { name: 'T' type: 'type' default_value { type: DT_INT32 } allowed_values { list { type: [DT_FLOAT, DT_INT32] } } }",
    );
    let o = opforge(&["compat", "check-pair", &v1, &v2]);
    assert!(o.status.success(), "{}", both(&o));
    assert_eq!(stdout(&o), "{\"compatible\":true}\n");
    let o = opforge(&["compat", "check-pair", &v2, &v1]);
    assert_eq!(o.status.code(), Some(1));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(
        v,
        serde_json::json!({"compatible": false, "reasons": [
            "Attr 'T' removed",
            "Input signature mismatch 'T' vs. 'int32'",
            "Output signature mismatch 'zeroed:T' vs. 'zeroed:int32'"
        ]})
    );
    // A history file gives its latest version.
    let history = repo().join(ZERO_OUT_HISTORY).join("ZeroOut.pbtxt");
    let o = opforge(&["compat", "check-pair", &v2, history.to_str().unwrap()]);
    assert!(o.status.success(), "{}", both(&o));
    let o = opforge(&["compat", "check-pair", &v1, "/nonexistent/op.pbtxt"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(both(&o).contains("NOT_FOUND"), "{}", both(&o));
}

#[test]
fn check_jsonl_on_tensorflows_cases() {
    let file = repo().join("tests/corpus/op_compatibility_cases.jsonl");
    let o = opforge(&["compat", "check-jsonl", file.to_str().unwrap()]);
    assert!(o.status.success(), "{}", both(&o));
    let cases: Vec<Value> = std::fs::read_to_string(&file)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let verdicts: Vec<Value> = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(verdicts.len(), cases.len());
    for (case, got) in cases.iter().zip(&verdicts) {
        let name = &case["name"];
        assert_eq!(&got["name"], name);
        assert_eq!(got["compatible"], case["compatible"], "{name}: {got}");
        assert_eq!(
            got["attr_defaults_unchanged"], case["attr_defaults_unchanged"],
            "{name}: {got}"
        );
        assert_eq!(
            got["reasons"].as_array().unwrap().is_empty(),
            case["compatible"] == true,
            "{name}: {got}"
        );
        let tf_valid = case["tf221"]["VALIDATE"] == "OK";
        assert_eq!(got["validation"] == "ok", tf_valid, "{name}: {got}");
        assert_eq!(got["summary"], case["tf221"]["SUMMARY"], "{name}: {got}");
    }
}
