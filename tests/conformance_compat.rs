//! Conformance of `opforge::compat` with TensorFlow 2.21 on the vendored
//! corpus (`tests/corpus/`, see its README): every TEST of TensorFlow's
//! `op_compatibility_test.cc` (`op_compatibility_cases.jsonl`) and the op
//! histories of `ops_history_v2` (`op_history.jsonl`).

use opforge::compat::{
    self, attr_defaults_unchanged, check, check_history, check_node_def, op_def_compatible,
    validate_node_def_strict,
};
use opforge::proto::{self, NodeDef, OpDef};
use opforge::OpDefBuilder;
use serde_json::Value;

fn corpus(name: &str) -> Vec<Value> {
    let path = format!("{}/tests/corpus/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{path}: {e}"))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// An OpDef from builder calls: `["Input"|"Output"|"Attr", spec]`, or a
/// one-element `[flag]`.
fn build(name: &str, calls: &Value) -> OpDef {
    let mut b = OpDefBuilder::new(name);
    for call in calls.as_array().unwrap() {
        let call = call.as_array().unwrap();
        b = match (
            call[0].as_str().unwrap(),
            call.get(1).and_then(Value::as_str),
        ) {
            ("Input", Some(spec)) => b.input(spec),
            ("Output", Some(spec)) => b.output(spec),
            ("Attr", Some(spec)) => b.attr(spec),
            ("SetIsStateful", None) => b.stateful(),
            ("SetIsCommutative", None) => b.commutative(),
            ("SetIsAggregate", None) => b.aggregate(),
            other => panic!("unknown call {other:?}"),
        };
    }
    b.finalize()
        .unwrap_or_else(|e| panic!("{name} {calls}: {e}"))
}

fn status_text(r: &opforge::Result<()>) -> String {
    match r {
        Ok(()) => "OK".to_string(),
        Err(e) => e.to_string(),
    }
}

/// TensorFlow joins error contexts with "\n\t"; opforge with a space.
fn normalize(tf: &str) -> String {
    tf.replace("\n\t", "")
}

/// What one case gives with opforge, and whether its harness passes.
struct Outcome {
    compatible: bool,
    compatible_status: String,
    defaults_unchanged: bool,
    defaults_status: String,
    validation: String,
    types_match: Option<bool>,
    summary: String,
    harness_passes: bool,
}

fn evaluate(case: &Value) -> Outcome {
    let name = case["op"].as_str().unwrap();
    let old = build(name, &case["old"]);
    let new = build(name, &case["new"]);
    // The builder gives TensorFlow 2.21's OpDefs.
    assert_eq!(
        old,
        proto::from_json::<OpDef>(&case["old_opdef"]).unwrap(),
        "{name} old"
    );
    assert_eq!(
        new,
        proto::from_json::<OpDef>(&case["new_opdef"]).unwrap(),
        "{name} new"
    );
    let node: NodeDef = proto::from_json(&case["node_def"]).unwrap();

    let compatible = check(&old, &new).is_ok();
    let compatible_status = status_text(&op_def_compatible(&old, &new));
    let defaults = attr_defaults_unchanged(&old, &new);
    let defaults_unchanged = defaults.is_ok();
    let defaults_status = match &defaults {
        Ok(()) => "OK".to_string(),
        Err(r) => format!("INVALID_ARGUMENT: {}", r[0].message),
    };
    let report = check_node_def(&node, &old, &new);
    let validation = status_text(&report.validation);
    let types_match = report.types_match;
    let valid = report.validation.is_ok();
    // The harness of op_compatibility_test.cc: the verdicts, and the
    // expected substrings of the errors.
    let contains =
        |text: &str, key: &str| case[key].as_str().is_none_or(|want| text.contains(want));
    let compat_error_ok = contains(&compatible_status, "expected_error_substring");
    let harness_passes = match case["harness"].as_str().unwrap() {
        "ExpectSuccess" => valid && types_match == Some(true) && compatible,
        "ExpectInvalid" => {
            !valid
                && contains(&validation, "expected_validation_error_substring")
                && !compatible
                && compat_error_ok
        }
        "ExpectTypeMismatch" => {
            valid && types_match == Some(false) && !compatible && compat_error_ok
        }
        "ExpectRenameFailure" => valid && !compatible && compat_error_ok,
        "ExpectDefaultChangeFailure" => {
            valid && !defaults_unchanged && contains(&defaults_status, "expected_error_substring")
        }
        other => panic!("unknown harness {other}"),
    };
    Outcome {
        compatible,
        compatible_status,
        defaults_unchanged,
        defaults_status,
        validation,
        types_match,
        summary: report.summary,
        harness_passes,
    }
}

#[test]
fn every_op_compatibility_case_gives_tensorflow_2_21s_verdict() {
    let cases = corpus("op_compatibility_cases.jsonl");
    assert_eq!(cases.len(), 51);
    let mut failures = Vec::new();
    for case in &cases {
        let name = case["name"].as_str().unwrap();
        let tf = &case["tf221"];
        let got = evaluate(case);
        let mut fail = |what: &str, got: String, want: String| {
            failures.push(format!("{name}: {what}\n    got:  {got}\n    want: {want}"));
        };
        if got.compatible != case["compatible"].as_bool().unwrap() {
            fail(
                "compatible",
                got.compatible.to_string(),
                case["compatible"].to_string(),
            );
        }
        // The whole message, as TensorFlow 2.21 prints it.
        if got.compatible_status != tf["COMPATIBLE"].as_str().unwrap() {
            fail(
                "OpDefCompatible",
                got.compatible_status.clone(),
                tf["COMPATIBLE"].to_string(),
            );
        }
        if got.defaults_unchanged != case["attr_defaults_unchanged"].as_bool().unwrap() {
            fail(
                "attr_defaults_unchanged",
                got.defaults_unchanged.to_string(),
                case["attr_defaults_unchanged"].to_string(),
            );
        }
        if got.defaults_status != tf["DEFAULTS_UNCHANGED"].as_str().unwrap() {
            fail(
                "OpDefAttrDefaultsUnchanged",
                got.defaults_status.clone(),
                tf["DEFAULTS_UNCHANGED"].to_string(),
            );
        }
        if got.validation != normalize(tf["VALIDATE"].as_str().unwrap()) {
            fail(
                "ValidateNodeDef",
                got.validation.clone(),
                tf["VALIDATE"].to_string(),
            );
        }
        // "0" also when the types cannot be computed (an attr of the wrong
        // type), which opforge reports as `None`.
        let tf_types = tf["TYPES_EQUAL_ADJ"].as_str().unwrap() == "1";
        if got.types_match.unwrap_or(false) != tf_types {
            fail(
                "in/out types equal",
                format!("{:?}", got.types_match),
                tf_types.to_string(),
            );
        }
        if got.summary != tf["SUMMARY"].as_str().unwrap() {
            fail(
                "SummarizeNodeDef",
                got.summary.clone(),
                tf["SUMMARY"].to_string(),
            );
        }
        // The test's own expectation holds exactly where it holds on 2.21.
        let verified = case["verified_tf221"].as_bool().unwrap();
        if got.harness_passes != verified {
            fail(
                "harness passes",
                got.harness_passes.to_string(),
                verified.to_string(),
            );
        }
        // The expected substrings, where 2.21 still gives them.
        if verified {
            if let Some(want) = case["expected_error_substring"].as_str() {
                let text = format!("{} {}", got.compatible_status, got.defaults_status);
                if !text.contains(want) {
                    fail("expected_error_substring", text, want.to_string());
                }
            }
            if let Some(want) = case["expected_validation_error_substring"].as_str() {
                if !got.validation.contains(want) {
                    fail(
                        "expected_validation_error_substring",
                        got.validation.clone(),
                        want.to_string(),
                    );
                }
            }
        }
        // The old test's expected summary, with TF 2.21's node prefix.
        if let (Some(summary), Some(node)) = (
            case["expected_summary"].as_str(),
            case["node_def"]["name"].as_str(),
        ) {
            let want =
                summary.replacen(&format!("{node} = "), &format!("{{{{node {node}}}}} = "), 1);
            if got.summary != want {
                fail("expected_summary", got.summary.clone(), want);
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// The three cases where TensorFlow 2.21 differs from the test's text
/// (corpus README, section 4).
#[test]
fn the_three_tensorflow_2_21_drift_cases() {
    let cases = corpus("op_compatibility_cases.jsonl");
    let case = |name: &str| cases.iter().find(|c| c["name"] == name).unwrap();
    let unverified: Vec<&str> = cases
        .iter()
        .filter(|c| c["verified_tf221"] == false)
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        unverified,
        ["RemoveAttrFails", "AddDefault", "RemoveDefault"]
    );

    // RemoveAttrFails: 2.21 ignores the unknown attr; OpDefCompatible
    // still fails. The strict validation gives the old test's message.
    let c = case("RemoveAttrFails");
    let got = evaluate(c);
    assert_eq!(got.validation, "OK");
    assert!(!got.compatible && got.compatible_status.contains("Attr 'a' removed"));
    let new = build("RemoveAttr", &c["new"]);
    let node: NodeDef = proto::from_json(&c["node_def"]).unwrap();
    let strict = validate_node_def_strict(&node, &new).unwrap_err();
    assert!(
        strict
            .message()
            .contains(c["expected_validation_error_substring"].as_str().unwrap()),
        "{strict}"
    );

    // AddDefault: adding a default is accepted.
    let got = evaluate(case("AddDefault"));
    assert!(got.compatible && got.defaults_unchanged);

    // RemoveDefault: 2.21's message.
    let got = evaluate(case("RemoveDefault"));
    assert!(got.compatible && !got.defaults_unchanged);
    assert_eq!(
        got.defaults_status,
        "INVALID_ARGUMENT: Attr 'a' has removed it's default; from 91 to no default"
    );
}

#[test]
fn every_recorded_op_history_is_compatible() {
    let histories = corpus("op_history.jsonl");
    assert_eq!(histories.len(), 20);
    let mut versions_seen = 0;
    for rec in &histories {
        let name = rec["op"].as_str().unwrap();
        let versions: Vec<OpDef> = rec["versions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| proto::from_json(v).unwrap())
            .collect();
        versions_seen += versions.len();
        // The builder makes the same OpDefs from the specs.
        for (i, (spec, want)) in rec["version_specs"]
            .as_array()
            .unwrap()
            .iter()
            .zip(&versions)
            .enumerate()
        {
            assert_eq!(&build(name, spec), want, "{name} version {}", i + 1);
        }
        let checks = rec["tf221_pairwise_checks"].as_array().unwrap();
        assert_eq!(checks.len(), versions.len() - 1, "{name}");
        for (i, pair) in versions.windows(2).enumerate() {
            let (old, new) = (&pair[0], &pair[1]);
            let tf = &checks[i];
            assert_eq!(tf["OpDefCompatible"], "OK");
            if let Err(reasons) = check(old, new) {
                panic!("{name} {} -> {}: {reasons:?}", i + 1, i + 2);
            }
            let defaults = match attr_defaults_unchanged(old, new) {
                Ok(()) => "OK".to_string(),
                Err(r) => format!("INVALID_ARGUMENT: {}", r[0].message),
            };
            assert_eq!(
                defaults,
                tf["OpDefAttrDefaultsUnchanged"],
                "{name} {} -> {}",
                i + 1,
                i + 2
            );
        }
        // Each version is also compatible with every earlier one, as the
        // history check requires; only Placeholder's default change (made
        // before TensorFlow checked defaults) fails that check today.
        for k in 1..versions.len() {
            let result = check_history(&versions[..k], &versions[k]);
            assert!(result.changed, "{name} {k}");
            assert!(result.reasons.is_empty(), "{name} {k}: {result:?}");
            if name == "Placeholder" {
                assert_eq!(
                    result.default_changes[0].message,
                    "Attr 'shape' has changed it's default value; from [] to <unknown>"
                );
            } else {
                assert!(result.default_changes.is_empty(), "{name} {k}: {result:?}");
            }
        }
        // The registered op, where opforge has it, is the latest version.
        opforge::opforge_ops::link();
        if let Ok(registered) = opforge::Registry::global().op_def(name) {
            let latest = if rec["last_version_equals_tf221_registered"] == true {
                versions.last().unwrap().clone()
            } else {
                proto::from_json(&rec["tf221_registered_opdef"]).unwrap()
            };
            assert_eq!(compat::strip_docs(&registered), latest, "{name}");
        }
    }
    assert_eq!(versions_seen, 50);
}
