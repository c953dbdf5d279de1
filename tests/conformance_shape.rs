//! TensorFlow's shape-inference test corpus (`array_ops_test.cc`, 552 cases):
//! the 532 cases TensorFlow 2.21 verifies must give the test's expectation;
//! the other 20 must give what TensorFlow 2.21 gives (`tf221_result`).

use opforge_testing::shape::{check_outputs, outputs_string, run_shape_fn, ShapeTestOp};
use serde_json::Value;

/// The message without TensorFlow's node summary (` for '{{node ...`),
/// whose attr formatting differs in places (tensor attrs).
fn core_message(m: &str) -> &str {
    m.split(" for '{{node").next().unwrap_or(m)
}

#[test]
fn tensorflow_shape_inference_corpus() {
    opforge::opforge_ops::link();
    let path = format!(
        "{}/tests/corpus/shape_inference_cases.jsonl",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(path).unwrap();
    let (mut verified, mut unverified, mut failures) = (0, 0, Vec::new());
    for line in text.lines() {
        let case: Value = serde_json::from_str(line).unwrap();
        let id = format!(
            "{} #{} ({} on {})",
            case["test"], case["index"], case["op"], case["ins"]
        );
        let op = match ShapeTestOp::from_corpus_json(
            case["op"].as_str().unwrap(),
            &case["node_def"],
            &case["input_tensors"],
        ) {
            Ok(op) => op,
            Err(e) => {
                failures.push(format!("{id}: cannot build the node: {e}"));
                continue;
            }
        };
        let result = run_shape_fn(&op, case["ins"].as_str().unwrap());
        let ok = if case["verified"].as_bool().unwrap() {
            verified += 1;
            match (case["kind"].as_str().unwrap(), &result) {
                ("ok", Ok(ctx)) => check_outputs(ctx, case["expected"].as_str().unwrap()),
                ("ok", Err(e)) => Err(format!("expected {}, got error {e}", case["expected"])),
                (_, Ok(ctx)) => Err(format!(
                    "expected error {}, got {}",
                    case["error_substring"],
                    outputs_string(ctx)
                )),
                (_, Err(e)) => {
                    let want = case["error_substring"].as_str().unwrap();
                    if e.to_string().contains(want) {
                        Ok(())
                    } else {
                        Err(format!("expected an error containing {want:?}, got {e}"))
                    }
                }
            }
        } else {
            unverified += 1;
            let tf = &case["tf221_result"];
            match (tf["status"].as_str().unwrap(), &result) {
                ("ok", Ok(ctx)) => check_outputs(ctx, tf["outputs"].as_str().unwrap()),
                ("ok", Err(e)) => Err(format!(
                    "TF 2.21 gives {}, we give error {e}",
                    tf["outputs"]
                )),
                (_, Ok(ctx)) => Err(format!(
                    "TF 2.21 fails ({}), we give {}",
                    tf["message"],
                    outputs_string(ctx)
                )),
                (_, Err(e)) => {
                    let want = tf["message"].as_str().unwrap();
                    if core_message(&e.to_string()) == core_message(want) {
                        Ok(())
                    } else {
                        Err(format!(
                            "TF 2.21 fails with {want:?}, we with {:?}",
                            e.to_string()
                        ))
                    }
                }
            }
        };
        if let Err(why) = ok {
            failures.push(format!("{id}: {why}"));
        }
    }
    assert_eq!((verified, unverified), (532, 20));
    assert!(
        failures.is_empty(),
        "{} of 552 cases fail:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
