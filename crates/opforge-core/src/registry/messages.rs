//! Message helpers of the registry: naming the op in an error, describing
//! how two OpDefs differ, and did-you-mean suggestions.

use crate::proto::{self, OpDef};
use crate::Status;

/// Puts "Op 'name': " in front of an error that does not already name the
/// op (the builder's and validator's errors start with "name: ").
pub(crate) fn name_op(e: Status, name: &str) -> Status {
    if e.message().starts_with(&format!("{name}: ")) || e.message().contains(&format!("'{name}'")) {
        e
    } else {
        e.prepend(format!("Op '{name}': "))
    }
}

/// A short description of how two OpDefs differ: the path of the first
/// differing field (in the JSON mapping) and both values.
pub fn describe_difference(registered: &OpDef, new: &OpDef) -> String {
    describe_difference_between((registered, "the registered op"), (new, "the new one"))
}

/// [`describe_difference`] of two OpDefs each named by where it comes
/// from (`(op_def, "the manifest")`): "`input_arg[0].type` is \"DT_INT32\" in
/// the manifest, \"DT_FLOAT\" in what init registers".
pub fn describe_difference_between(a: (&OpDef, &str), b: (&OpDef, &str)) -> String {
    let ja = proto::to_json(a.0);
    let jb = proto::to_json(b.0);
    match first_difference(&ja, &jb, String::new(), (a.1, b.1)) {
        Some(diff) => diff,
        // The JSON mappings agree, but the messages differ (e.g. unknown
        // fields): fall back to both definitions on one line each.
        None => format!(
            "{} is {{{}}}, {} is {{{}}}",
            a.1,
            proto::to_short_text(a.0),
            b.1,
            proto::to_short_text(b.0)
        ),
    }
}

fn first_difference(
    a: &serde_json::Value,
    b: &serde_json::Value,
    path: String,
    names: (&str, &str),
) -> Option<String> {
    use serde_json::Value;
    if a == b {
        return None;
    }
    let at = |p: &str| {
        if p.is_empty() {
            "the OpDef".to_string()
        } else {
            p.to_string()
        }
    };
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
            keys.sort();
            keys.dedup();
            for key in keys {
                let child = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                match (x.get(key), y.get(key)) {
                    (Some(u), Some(v)) => {
                        if let Some(d) = first_difference(u, v, child, names) {
                            return Some(d);
                        }
                    }
                    (Some(u), None) => {
                        return Some(format!(
                            "{child} is {} in {}, unset in {}",
                            short(u),
                            names.0,
                            names.1
                        ))
                    }
                    (None, Some(v)) => {
                        return Some(format!(
                            "{child} is unset in {}, {} in {}",
                            names.0,
                            short(v),
                            names.1
                        ))
                    }
                    (None, None) => {}
                }
            }
            None
        }
        (Value::Array(x), Value::Array(y)) => {
            for (i, (u, v)) in x.iter().zip(y).enumerate() {
                if let Some(d) = first_difference(u, v, format!("{path}[{i}]"), names) {
                    return Some(d);
                }
            }
            Some(format!(
                "{} has {} entr{} in {}, {} in {}",
                at(&path),
                x.len(),
                if x.len() == 1 { "y" } else { "ies" },
                names.0,
                y.len(),
                names.1
            ))
        }
        _ => Some(format!(
            "{} is {} in {}, {} in {}",
            at(&path),
            short(a),
            names.0,
            short(b),
            names.1
        )),
    }
}

/// A JSON value on one line, cut to a readable length.
fn short(v: &serde_json::Value) -> String {
    let text = v.to_string();
    if text.chars().count() > 80 {
        let cut: String = text.chars().take(77).collect();
        format!("{cut}...")
    } else {
        text
    }
}

/// Up to three registered names close to `name`: the same ignoring case, or
/// within edit distance 2 (ignoring case), closest first.
pub(crate) fn did_you_mean<'a>(
    name: &str,
    candidates: impl Iterator<Item = &'a str>,
) -> Vec<&'a str> {
    const MAX_DISTANCE: usize = 2;
    const MAX_SUGGESTIONS: usize = 3;
    let lower: Vec<char> = name.to_lowercase().chars().collect();
    let mut scored: Vec<(usize, usize, &str)> = candidates
        .filter_map(|candidate| {
            let cand: Vec<char> = candidate.to_lowercase().chars().collect();
            if cand.len().abs_diff(lower.len()) > MAX_DISTANCE {
                return None;
            }
            let folded = edit_distance(&lower, &cand);
            // A name differing only in case is a good guess however long;
            // otherwise keep the distance small relative to the name.
            let allowed = if lower.len().max(cand.len()) >= 4 {
                MAX_DISTANCE
            } else {
                1
            };
            if folded > allowed && folded != 0 {
                return None;
            }
            let exact = edit_distance(
                &name.chars().collect::<Vec<_>>(),
                &candidate.chars().collect::<Vec<_>>(),
            );
            Some((folded, exact, candidate))
        })
        .collect();
    scored.sort();
    scored
        .into_iter()
        .take(MAX_SUGGESTIONS)
        .map(|(_, _, c)| c)
        .collect()
}

/// The Levenshtein distance between two strings.
fn edit_distance(a: &[char], b: &[char]) -> usize {
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, ca) in a.iter().enumerate() {
        cur[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitute = prev[j] + usize::from(ca != cb);
            cur[j + 1] = substitute.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}
