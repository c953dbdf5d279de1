//! `opforge compat check|update|check-pair|check-jsonl`: op backward
//! compatibility (see [`opforge::compat`]) against the committed op
//! history.
//!
//! The op history is a folder (`ops_history/` by default) with one file
//! per op, `<OpName>.pbtxt`: every recorded version of the op, oldest
//! first, without docs (the format is core's, [`opforge::compat::read_history`]).
//! `check` compares each registered op
//! with its latest recorded version:
//!
//! * unchanged: nothing to say (an up-to-date history prints one summary line);
//! * a compatible change, or a new op: reported, with the advice to run
//!   `opforge compat update`, which appends the new version (or creates the
//!   op's file); the check still succeeds unless `--strict`;
//! * an incompatible change (against any recorded version), a changed or
//!   removed default, or a registered op that disappeared: each broken rule
//!   with the guide's advice, and exit code 1. `update` refuses to record it.
//!
//! `check-pair OLD NEW` compares two text-format OpDefs and prints
//! `{"compatible": true}` or `{"compatible": false, "reasons": [...]}` (plus
//! `"default_changes": [...]` when a default was removed or changed); it
//! exits 1 unless the change is compatible with unchanged defaults.
//!
//! `check-jsonl FILE` reads cases in the format of TensorFlow's
//! `op_compatibility_cases.jsonl`, one JSON object per line:
//! `{"name": ..., "op": NAME, "old": [[KIND, SPEC], ...], "new": [...],
//! "node_def": {...}}` (`old_opdef` / `new_opdef`, OpDefs in the proto3 JSON
//! mapping, take precedence over the builder calls `old` / `new`; `node_def`,
//! a NodeDef written for the old op, is optional). It prints one JSON line
//! per case: `{"name", "op", "compatible", "reasons", "attr_defaults_unchanged",
//! "default_changes"}` and, with a `node_def`, `"validation"` (`"ok"` or the
//! error of validating the node, with the new op's defaults added, against the
//! new op), `"types_match"` (whether its input/output dtypes are unchanged; a
//! ref input may become non-ref and a non-ref output ref; `null` if they cannot
//! be computed) and `"summary"` (TensorFlow's `SummarizeNodeDef`). A line that
//! cannot be read gives `{"name", "error"}`; the run always goes on.

use super::{opdef, CliError};
pub use opforge::compat::DEFAULT_HISTORY_DIR;
use opforge::compat::{
    self, history_file, read_history, write_history_file, History, HistoryCheck, Reason,
};
use opforge::op_def::validate_op_def;
use opforge::proto::{self, NodeDef, OpDef, OpList};
use opforge::registry::OPS_TO_REGISTER;
use opforge::{Registry, Result, Status};
use serde_json::{json, Value};
use std::io::{BufRead, Write};
use std::path::Path;

/// Where one op stands against the history.
#[derive(Debug)]
enum OpState {
    Unchanged,
    /// Changed compatibly: `current` becomes version `versions + 1`.
    Changed {
        current: OpDef,
        versions: usize,
    },
    /// Not in the history.
    New {
        current: OpDef,
    },
    /// Breaks a rule against a recorded version.
    Broken {
        check: HistoryCheck,
        latest: Box<OpDef>,
        current: Box<OpDef>,
        versions: usize,
    },
    /// In the history, not registered.
    Removed {
        latest: Box<OpDef>,
    },
}

/// Which registered ops a check covers.
#[derive(Clone, Copy, Debug)]
pub enum Scope<'a> {
    /// Every registered op; ops of the history that are not registered are
    /// reported as removed unless the binary registers a selection of ops
    /// (`OPFORGE_OPS_TO_REGISTER`).
    All,
    /// The ops of the op libraries given with `--library` (every op they
    /// register, so an op of the history missing from them was removed).
    Libraries(&'a [String]),
}

/// Compares the ops of `scope` with the history, by op name.
fn compare(registry: &Registry, history: &History, scope: Scope<'_>) -> Vec<(String, OpState)> {
    let mut states = Vec::new();
    let registered = registry.op_list().op;
    let in_scope = |name: &str| match scope {
        Scope::All => true,
        Scope::Libraries(ops) => ops.iter().any(|o| o == name),
    };
    for op in registered.iter().filter(|op| in_scope(&op.name)) {
        let current = compat::strip_docs(op);
        let state = match history.get(&op.name) {
            None => OpState::New { current },
            Some(versions) => {
                let check = compat::check_history(versions, &current);
                if !check.changed {
                    OpState::Unchanged
                } else if check.is_ok() {
                    OpState::Changed {
                        current,
                        versions: versions.len(),
                    }
                } else {
                    OpState::Broken {
                        check,
                        latest: Box::new(versions.last().cloned().unwrap_or_default()),
                        current: Box::new(current),
                        versions: versions.len(),
                    }
                }
            }
        };
        states.push((op.name.clone(), state));
    }
    let complete = match scope {
        Scope::All => OPS_TO_REGISTER.is_none(),
        Scope::Libraries(_) => true,
    };
    if complete {
        for (name, versions) in history {
            let present = match scope {
                Scope::All => registry.lookup(name).is_ok(),
                Scope::Libraries(ops) => ops.iter().any(|o| o == name),
            };
            if !present {
                states.push((
                    name.clone(),
                    OpState::Removed {
                        latest: Box::new(versions.last().cloned().unwrap_or_default()),
                    },
                ));
            }
        }
        states.sort_by(|a, b| a.0.cmp(&b.0));
    }
    states
}

fn print_reasons(out: &mut dyn Write, reasons: &[Reason]) -> std::io::Result<()> {
    for reason in reasons {
        writeln!(out, "  - {}", reason.message)?;
        writeln!(out, "    fix: {}", reason.advice())?;
    }
    Ok(())
}

/// Prints the problems of the ops that fail; returns how many fail.
fn print_failures(
    out: &mut dyn Write,
    dir: &Path,
    states: &[(String, OpState)],
) -> std::io::Result<usize> {
    let mut failing = 0;
    for (name, state) in states {
        match state {
            OpState::Broken {
                check,
                latest,
                current,
                versions,
            } => {
                failing += 1;
                let file = history_file(dir, name);
                if !check.reasons.is_empty() {
                    writeln!(
                        out,
                        "{name}: INCOMPATIBLE change against {} ({versions} recorded version{}):",
                        file.display(),
                        if *versions == 1 { "" } else { "s" }
                    )?;
                    print_reasons(out, &check.reasons)?;
                }
                if !check.default_changes.is_empty() {
                    writeln!(
                        out,
                        "{name}: attr default changed against {}:",
                        file.display()
                    )?;
                    print_reasons(out, &check.default_changes)?;
                }
                writeln!(out, "  recorded: {}", compat::summarize_op_def(latest))?;
                writeln!(out, "  current:  {}", compat::summarize_op_def(current))?;
            }
            OpState::Removed { latest } => {
                failing += 1;
                writeln!(
                    out,
                    "{name}: REMOVED: it is in {} but no longer registered, so graphs that use it \
                     will not load",
                    history_file(dir, name).display()
                )?;
                writeln!(
                    out,
                    "    fix: keep registering the op (mark it deprecated with \
                     `.deprecated(version, \"explanation\")` if it should not be used any more)"
                )?;
                writeln!(out, "  recorded: {}", compat::summarize_op_def(latest))?;
            }
            _ => {}
        }
    }
    Ok(failing)
}

/// Counts of each state.
#[derive(Default)]
struct Counts {
    unchanged: usize,
    changed: usize,
    new: usize,
    failing: usize,
}

fn count(states: &[(String, OpState)]) -> Counts {
    let mut c = Counts::default();
    for (_, state) in states {
        match state {
            OpState::Unchanged => c.unchanged += 1,
            OpState::Changed { .. } => c.changed += 1,
            OpState::New { .. } => c.new += 1,
            OpState::Broken { .. } | OpState::Removed { .. } => c.failing += 1,
        }
    }
    c
}

/// `opforge compat check`: compares the registered ops of `scope` with the
/// history in `dir` (see the module docs). Fails (after printing why) on an
/// incompatible change, a changed default or a removed op, and with
/// `strict` also when the history is out of date.
pub fn check(
    registry: &Registry,
    scope: Scope<'_>,
    dir: &Path,
    strict: bool,
    out: &mut dyn Write,
) -> std::result::Result<(), CliError> {
    let history = read_history(dir)?;
    let states = compare(registry, &history, scope);
    for (name, state) in &states {
        match state {
            OpState::Changed { versions, .. } => writeln!(
                out,
                "{name}: compatible change, not recorded yet: run `opforge compat update` to \
                 record it as version {}",
                versions + 1
            )?,
            OpState::New { .. } => writeln!(
                out,
                "{name}: new op, not in {}: run `opforge compat update` to add it",
                dir.display()
            )?,
            _ => {}
        }
    }
    print_failures(out, dir, &states)?;
    let c = count(&states);
    let total = states.len();
    if c.unchanged == total {
        writeln!(
            out,
            "compat check: {total} ops, all unchanged ({})",
            dir.display()
        )?;
    } else {
        writeln!(
            out,
            "compat check: {total} ops: {} unchanged, {} changed compatibly, {} new, {} failing ({})",
            c.unchanged,
            c.changed,
            c.new,
            c.failing,
            dir.display()
        )?;
    }
    if OPS_TO_REGISTER.is_some() && matches!(scope, Scope::All) {
        writeln!(
            out,
            "note: this binary registers a selection of ops (OPFORGE_OPS_TO_REGISTER): ops \
             missing from it are not reported as removed"
        )?;
    }
    if c.failing > 0 {
        return Err(CliError::Failed);
    }
    if strict && c.changed + c.new > 0 {
        writeln!(
            out,
            "error: the history is out of date (--strict): run `opforge compat update` and commit {}",
            dir.display()
        )?;
        return Err(CliError::Failed);
    }
    Ok(())
}

/// `opforge compat update`: appends the new version of every op that
/// changed compatibly and creates the files of new ops (creating `dir` if
/// needed). Writes nothing, and fails, if any op fails the check.
/// Idempotent: a second run changes nothing.
pub fn update(
    registry: &Registry,
    scope: Scope<'_>,
    dir: &Path,
    out: &mut dyn Write,
) -> std::result::Result<(), CliError> {
    let history = if dir.exists() {
        read_history(dir)?
    } else {
        History::new()
    };
    let states = compare(registry, &history, scope);
    if print_failures(out, dir, &states)? > 0 {
        writeln!(
            out,
            "compat update: nothing written: fix the changes above first ({} is unchanged)",
            dir.display()
        )?;
        return Err(CliError::Failed);
    }
    let c = count(&states);
    if c.changed + c.new == 0 {
        writeln!(
            out,
            "compat update: {} is up to date ({} ops)",
            dir.display(),
            states.len()
        )?;
        return Ok(());
    }
    for (name, state) in &states {
        match state {
            OpState::New { current } => {
                write_history_file(dir, name, std::slice::from_ref(current))?;
                writeln!(out, "{name}: added ({})", history_file(dir, name).display())?;
            }
            OpState::Changed { current, versions } => {
                let mut all = history.get(name).cloned().unwrap_or_default();
                all.push(current.clone());
                write_history_file(dir, name, &all)?;
                writeln!(
                    out,
                    "{name}: recorded version {} ({})",
                    versions + 1,
                    history_file(dir, name).display()
                )?;
            }
            _ => {}
        }
    }
    writeln!(
        out,
        "compat update: {} added, {} updated, {} unchanged ({})",
        c.new,
        c.changed,
        c.unchanged,
        dir.display()
    )?;
    Ok(())
}

/// Reads an op from text format: an `OpDef`, or an `OpList` (its last op,
/// e.g. the latest version in a history file). The op must be valid.
pub fn parse_op(text: &str, what: &str) -> Result<OpDef> {
    let op = match proto::from_text::<OpDef>(text) {
        Ok(op) => op,
        Err(op_err) => match proto::from_text::<OpList>(text) {
            Ok(list) => list.op.last().cloned().ok_or_else(|| {
                Status::invalid_argument(format!("{what}: the OpList holds no op"))
            })?,
            Err(_) => return Err(op_err.prepend(format!("{what}: "))),
        },
    };
    validate_op_def(&op).map_err(|e| e.prepend(format!("{what}: ")))?;
    Ok(op)
}

/// The verdict of [`check-pair`](check_pair) as JSON.
pub fn pair_verdict(old: &OpDef, new: &OpDef) -> Value {
    let mut verdict = serde_json::Map::new();
    match compat::check(old, new) {
        Ok(()) => {
            verdict.insert("compatible".into(), json!(true));
        }
        Err(reasons) => {
            verdict.insert("compatible".into(), json!(false));
            verdict.insert("reasons".into(), messages(&reasons));
        }
    }
    if let Err(changes) = compat::attr_defaults_unchanged(old, new) {
        verdict.insert("default_changes".into(), messages(&changes));
    }
    Value::Object(verdict)
}

fn messages(reasons: &[Reason]) -> Value {
    Value::Array(reasons.iter().map(|r| json!(r.message)).collect())
}

/// `opforge compat check-pair OLD NEW`: prints the verdict on one line;
/// fails unless the change is compatible and keeps every default.
pub fn check_pair(
    old_text: &str,
    new_text: &str,
    out: &mut dyn Write,
) -> std::result::Result<(), CliError> {
    let old = parse_op(old_text, "OLD")?;
    let new = parse_op(new_text, "NEW")?;
    let verdict = pair_verdict(&old, &new);
    writeln!(out, "{verdict}")?;
    if verdict["compatible"] == true && verdict.get("default_changes").is_none() {
        Ok(())
    } else {
        Err(CliError::Failed)
    }
}

/// The old or new OpDef of a case: `<side>_opdef` (JSON OpDef) or the
/// builder calls `<side>` (`[KIND, SPEC]` pairs and `[FLAG]` singletons)
/// for op `op`.
fn case_op(record: &Value, side: &str) -> Result<OpDef> {
    if let Some(json) = record.get(format!("{side}_opdef")).filter(|v| !v.is_null()) {
        let op: OpDef = proto::from_json(json).map_err(|e| e.prepend(format!("{side}_opdef: ")))?;
        validate_op_def(&op).map_err(|e| e.prepend(format!("{side}_opdef: ")))?;
        return Ok(op);
    }
    let Some(calls) = record.get(side).and_then(Value::as_array) else {
        return Err(Status::invalid_argument(format!(
            "the case has neither \"{side}_opdef\" nor \"{side}\" builder calls"
        )));
    };
    let (flags, calls): (Vec<&Value>, Vec<&Value>) = calls
        .iter()
        .partition(|c| c.as_array().is_some_and(|a| a.len() == 1));
    let flags: Vec<Value> = flags.into_iter().map(|f| f[0].clone()).collect();
    let builder_record = json!({"op": record.get("op").cloned().unwrap_or(Value::Null), "calls": calls, "flags": flags});
    let builder =
        opdef::builder_from_record(&builder_record).map_err(|e| e.prepend(format!("{side}: ")))?;
    builder
        .finalize()
        .map_err(|e| e.prepend(format!("{side}: ")))
}

/// The verdicts for one case of `check-jsonl` (see the module docs), or
/// `None` for a blank line.
pub fn check_case_line(line: &str) -> Option<String> {
    if line.trim().is_empty() {
        return None;
    }
    let record: Value = match serde_json::from_str(line) {
        Ok(v) => v,
        Err(e) => {
            return Some(
                json!({"name": null, "error": format!("INVALID_ARGUMENT: not JSON: {e}")})
                    .to_string(),
            )
        }
    };
    let name = record.get("name").cloned().unwrap_or(Value::Null);
    Some(match check_case(&record) {
        Ok(mut verdict) => {
            verdict.insert("name".into(), name);
            Value::Object(verdict).to_string()
        }
        Err(e) => json!({"name": name, "error": e.to_string()}).to_string(),
    })
}

fn check_case(record: &Value) -> Result<serde_json::Map<String, Value>> {
    let old = case_op(record, "old")?;
    let new = case_op(record, "new")?;
    let mut v = serde_json::Map::new();
    v.insert("op".into(), json!(new.name));
    let reasons = compat::check(&old, &new).err().unwrap_or_default();
    v.insert("compatible".into(), json!(reasons.is_empty()));
    v.insert("reasons".into(), messages(&reasons));
    let changes = compat::attr_defaults_unchanged(&old, &new)
        .err()
        .unwrap_or_default();
    v.insert("attr_defaults_unchanged".into(), json!(changes.is_empty()));
    v.insert("default_changes".into(), messages(&changes));
    if let Some(node) = record.get("node_def").filter(|n| !n.is_null()) {
        let node: NodeDef =
            proto::from_json(node).map_err(|e| e.prepend("node_def: ".to_string()))?;
        let report = compat::check_node_def(&node, &old, &new);
        let validation = match &report.validation {
            Ok(()) => "ok".to_string(),
            Err(e) => e.to_string(),
        };
        v.insert("validation".into(), json!(validation));
        v.insert("types_match".into(), json!(report.types_match));
        v.insert("summary".into(), json!(report.summary));
    }
    Ok(v)
}

/// `opforge compat check-jsonl FILE`: one verdict line per case line.
pub fn check_jsonl(input: impl BufRead, out: &mut dyn Write) -> std::result::Result<(), CliError> {
    for line in input.lines() {
        let line =
            line.map_err(|e| Status::invalid_argument(format!("cannot read the input: {e}")))?;
        if let Some(result) = check_case_line(&line) {
            writeln!(out, "{result}")?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use opforge::OpDefBuilder;
    use std::path::PathBuf;

    fn temp_dir(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("opforge-compat-unit-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    fn registry(zero_out: OpDefBuilder) -> Registry {
        let r = Registry::new();
        r.register_op(zero_out).unwrap();
        r.register_op(OpDefBuilder::new("Other").input("x: float").doc("Docs."))
            .unwrap();
        r
    }

    fn v1() -> OpDefBuilder {
        OpDefBuilder::new("ZeroOut")
            .input("to_zero: int32")
            .output("zeroed: int32")
            .doc("Zeros out all but the first element.")
    }

    fn v2() -> OpDefBuilder {
        OpDefBuilder::new("ZeroOut")
            .attr("T: {float, int32} = DT_INT32")
            .input("to_zero: T")
            .output("zeroed: T")
    }

    fn run(f: impl FnOnce(&mut Vec<u8>) -> std::result::Result<(), CliError>) -> (bool, String) {
        let mut out = Vec::new();
        let ok = f(&mut out).is_ok();
        (ok, String::from_utf8(out).unwrap())
    }

    #[test]
    fn update_creates_appends_and_is_idempotent() {
        let dir = temp_dir("update");
        // No history yet: check says so.
        let r1 = registry(v1());
        let mut sink = Vec::new();
        match check(&r1, Scope::All, &dir, false, &mut sink) {
            Err(CliError::Status(s)) => assert!(s.message().contains("compat update"), "{s}"),
            other => panic!("{other:?}"),
        }
        let (ok, text) = run(|o| update(&r1, Scope::All, &dir, o));
        assert!(ok, "{text}");
        assert!(text.contains("ZeroOut: added"), "{text}");
        assert!(text.contains("2 added, 0 updated"), "{text}");
        let (ok, text) = run(|o| update(&r1, Scope::All, &dir, o));
        assert!(ok && text.contains("is up to date (2 ops)"), "{text}");
        let (ok, text) = run(|o| check(&r1, Scope::All, &dir, true, o));
        assert!(ok, "{text}");
        assert_eq!(text.lines().count(), 1, "{text}");
        assert!(
            text.starts_with("compat check: 2 ops, all unchanged"),
            "{text}"
        );
        // The file holds the op without docs.
        let history = read_history(&dir).unwrap();
        assert_eq!(history["ZeroOut"].len(), 1);
        assert!(history["ZeroOut"][0].summary.is_empty());

        // A compatible change: reported, then recorded.
        let r2 = registry(v2());
        let (ok, text) = run(|o| check(&r2, Scope::All, &dir, false, o));
        assert!(ok, "{text}");
        assert!(text.contains("ZeroOut: compatible change"), "{text}");
        assert!(text.contains("as version 2"), "{text}");
        let (ok, _) = run(|o| check(&r2, Scope::All, &dir, true, o));
        assert!(!ok, "--strict fails on an out-of-date history");
        let (ok, text) = run(|o| update(&r2, Scope::All, &dir, o));
        assert!(ok && text.contains("ZeroOut: recorded version 2"), "{text}");
        assert_eq!(read_history(&dir).unwrap()["ZeroOut"].len(), 2);
        let (ok, text) = run(|o| update(&r2, Scope::All, &dir, o));
        assert!(ok && text.contains("up to date"), "{text}");

        // Going back to v1 is incompatible with v2: nothing is written.
        let (ok, text) = run(|o| check(&r1, Scope::All, &dir, false, o));
        assert!(!ok);
        assert!(text.contains("ZeroOut: INCOMPATIBLE change"), "{text}");
        assert!(text.contains("  - Attr 'T' removed"), "{text}");
        assert!(text.contains("fix: "), "{text}");
        let (ok, text) = run(|o| update(&r1, Scope::All, &dir, o));
        assert!(!ok && text.contains("nothing written"), "{text}");
        assert_eq!(read_history(&dir).unwrap()["ZeroOut"].len(), 2);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn removed_ops_and_default_changes_fail() {
        let dir = temp_dir("removed");
        std::fs::create_dir_all(&dir).unwrap();
        let r = registry(v2());
        let (ok, _) = run(|o| update(&r, Scope::All, &dir, o));
        assert!(ok);
        std::fs::write(dir.join("Gone.pbtxt"), "op { name: 'Gone' }").unwrap();
        let (ok, text) = run(|o| check(&r, Scope::All, &dir, false, o));
        assert!(!ok);
        assert!(text.contains("Gone: REMOVED"), "{text}");
        std::fs::remove_file(dir.join("Gone.pbtxt")).unwrap();
        let changed = registry(
            OpDefBuilder::new("ZeroOut")
                .attr("T: {float, int32} = DT_FLOAT")
                .input("to_zero: T")
                .output("zeroed: T"),
        );
        let (ok, text) = run(|o| check(&changed, Scope::All, &dir, false, o));
        assert!(!ok);
        assert!(text.contains("ZeroOut: attr default changed"), "{text}");
        assert!(
            text.contains("Attr 'T' has changed it's default value; from DT_INT32 to DT_FLOAT"),
            "{text}"
        );
        assert!(!text.contains("INCOMPATIBLE"), "{text}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn pairs() {
        let old = "name: 'A' attr { name: 'a' type: 'int' default_value { i: 2 } }";
        let new = "name: 'A' attr { name: 'a' type: 'int' default_value { i: 1 } }";
        let (ok, text) = run(|o| check_pair(old, old, o));
        assert!(ok);
        assert_eq!(text, "{\"compatible\":true}\n");
        let (ok, text) = run(|o| check_pair(old, new, o));
        assert!(!ok);
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            v,
            json!({"compatible": true, "default_changes": ["Attr 'a' has changed it's default value; from 2 to 1"]})
        );
        let (ok, text) = run(|o| check_pair(old, "name: 'A'", o));
        assert!(!ok);
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            v,
            json!({"compatible": false, "reasons": ["Attr 'a' removed"]})
        );
        // An OpList gives its last op.
        let list = format!("op {{ {new} }} op {{ {old} }}");
        assert_eq!(
            parse_op(&list, "x").unwrap().attr[0]
                .default_value
                .as_ref()
                .unwrap()
                .value,
            Some(proto::attr_value::Value::I(2))
        );
        let err = parse_op("name: 'bad name'", "OLD").unwrap_err();
        assert!(err.message().starts_with("OLD: "), "{err}");
        let err = parse_op("nonsense {", "NEW").unwrap_err();
        assert!(err.message().starts_with("NEW: "), "{err}");
    }

    #[test]
    fn jsonl_cases() {
        let line = r#"{"name": "MakeList", "op": "MakeList", "old": [["Input", "a: int32"]], "new": [["Input", "a: N * int32"], ["Attr", "N: int = 1"]], "node_def": {"name": "n", "op": "MakeList", "input": ["x"]}}"#;
        let v: Value = serde_json::from_str(&check_case_line(line).unwrap()).unwrap();
        assert_eq!(
            v,
            json!({"name": "MakeList", "op": "MakeList", "compatible": true, "reasons": [],
                   "attr_defaults_unchanged": true, "default_changes": [],
                   "validation": "ok", "types_match": true,
                   "summary": "{{node n}} = MakeList[N=1](x)"})
        );
        let line = r#"{"name": "X", "op": "X", "old_opdef": {"name": "X"}, "new": [["Attr", "a: int"], ["SetIsStateful"]]}"#;
        let v: Value = serde_json::from_str(&check_case_line(line).unwrap()).unwrap();
        assert_eq!(v["compatible"], false);
        assert_eq!(
            v["reasons"],
            json!([
                "Attr 'a' added without default",
                "is_stateful changed from false to true"
            ])
        );
        assert!(v.get("validation").is_none());
        let v: Value = serde_json::from_str(&check_case_line("{oops").unwrap()).unwrap();
        assert!(v["error"].as_str().unwrap().contains("not JSON"));
        let v: Value =
            serde_json::from_str(&check_case_line(r#"{"name": "Y", "op": "Y"}"#).unwrap()).unwrap();
        assert_eq!(v["name"], "Y");
        assert!(v["error"].as_str().unwrap().contains("neither"), "{v}");
        assert!(check_case_line("  ").is_none());
    }
}
