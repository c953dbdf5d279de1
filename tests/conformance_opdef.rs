//! Conformance with TensorFlow 2.21's OpDefBuilder and OpDef registry, on the
//! vendored corpus in `tests/corpus/` (see its README).

use opforge::op_def::validate_op_def;
use opforge::proto::{self, OpDef, OpList};
use opforge::OpDefBuilder;
use serde_json::Value;

fn corpus(name: &str) -> String {
    let path = format!("{}/tests/corpus/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn builder_from_record(rec: &Value) -> OpDefBuilder {
    let mut b = OpDefBuilder::new(rec["op"].as_str().unwrap());
    for call in rec["calls"].as_array().unwrap() {
        let spec = call[1].as_str().unwrap();
        b = match call[0].as_str().unwrap() {
            "Attr" => b.attr(spec),
            "Input" => b.input(spec),
            "Output" => b.output(spec),
            other => panic!("unknown call kind {other}"),
        };
    }
    for flag in rec["flags"].as_array().unwrap() {
        b = match flag {
            Value::String(s) if s == "SetIsStateful" || s == "SetDoNotOptimize" => b.stateful(),
            Value::String(s) if s == "SetIsCommutative" => b.commutative(),
            Value::String(s) if s == "SetIsAggregate" => b.aggregate(),
            Value::String(s) if s == "SetAllowsUninitializedInput" => {
                b.allows_uninitialized_input()
            }
            Value::Array(a) if a[0] == "Deprecated" => {
                b.deprecated(a[1].as_i64().unwrap() as i32, a[2].as_str().unwrap())
            }
            other => panic!("unknown flag {other}"),
        };
    }
    b
}

#[test]
fn every_op_spec_builds_exactly_tensorflows_opdef() {
    let mut failures = Vec::new();
    let mut count = 0;
    for line in corpus("op_specs.jsonl").lines() {
        let rec: Value = serde_json::from_str(line).unwrap();
        let expected_json = if rec["spec_matches_expected_opdef"].as_bool().unwrap() {
            &rec["expected_opdef"]
        } else {
            &rec["opdef_from_spec_tf221"]
        };
        let expected: OpDef = proto::from_json(expected_json).unwrap();
        count += 1;
        match builder_from_record(&rec).finalize() {
            Ok(got) if got == expected => {}
            Ok(got) => failures.push(format!(
                "{}: OpDef differs\n--- got\n{}--- expected\n{}",
                rec["op"],
                proto::to_text(&got),
                proto::to_text(&expected)
            )),
            Err(e) => failures.push(format!("{}: {e}", rec["op"])),
        }
    }
    assert_eq!(count, 272);
    assert!(
        failures.is_empty(),
        "{} of {count} failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn all_tensorflow_opdefs_validate_and_round_trip() {
    let text = corpus("all_opdefs.pbtxt");
    let list: OpList = proto::from_text(&text).unwrap();
    assert_eq!(list.op.len(), 1908);
    let invalid: Vec<String> = list
        .op
        .iter()
        .filter_map(|op| validate_op_def(op).err().map(|e| e.to_string()))
        .collect();
    assert!(
        invalid.is_empty(),
        "{} invalid:\n{}",
        invalid.len(),
        invalid.join("\n")
    );

    // text -> binary -> text is unchanged.
    let printed = proto::to_text(&list);
    let binary = proto::to_binary(&list);
    let back: OpList = proto::from_binary(&binary).unwrap();
    assert_eq!(back, list);
    assert_eq!(proto::to_text(&back), printed);
    // And the printed text is TensorFlow's own file, line for line.
    let differing: Vec<(usize, &str, &str)> = printed
        .lines()
        .zip(text.lines())
        .enumerate()
        .filter(|(_, (a, b))| a.trim_end() != b.replace("op \t{", "op {").trim_end())
        .map(|(i, (a, b))| (i + 1, a, b))
        .take(10)
        .collect();
    assert!(
        differing.is_empty(),
        "first differing lines (ours, TensorFlow's): {differing:#?}"
    );
    assert_eq!(printed.lines().count(), text.lines().count());
}
