//! Op histories: the OpDef versions recorded for an op, and checking the
//! current op against them ([`check_history`]).

use super::rules::{added_defaults_unchanged, attr_defaults_unchanged, check, Reason};
use crate::proto::{self, OpDef};

/// An OpDef without its documentation, as op histories store it
/// (TensorFlow's `RemoveDescriptionsFromOpDef`): the summary and
/// description of the op and the descriptions of its args and attrs are
/// cleared, and so is a deprecation's explanation (its version is kept).
pub fn strip_docs(op: &OpDef) -> OpDef {
    let mut op = op.clone();
    op.summary.clear();
    op.description.clear();
    for arg in op.input_arg.iter_mut().chain(op.output_arg.iter_mut()) {
        arg.description.clear();
    }
    for attr in &mut op.attr {
        attr.description.clear();
    }
    if let Some(deprecation) = &mut op.deprecation {
        deprecation.explanation.clear();
    }
    op
}

/// Whether two OpDefs are the same version: equal serialized bytes, as
/// TensorFlow's history check compares them.
pub fn same_version(a: &OpDef, b: &OpDef) -> bool {
    proto::to_binary(a) == proto::to_binary(b)
}

/// The result of checking an op against its recorded history
/// ([`check_history`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HistoryCheck {
    /// Whether the op differs from the latest recorded version.
    pub changed: bool,
    /// Broken compatibility rules, against any recorded version
    /// (deduplicated; a reason that only an older version gives says which).
    pub reasons: Vec<Reason>,
    /// Removed or changed defaults (against the latest version), and
    /// defaults of attrs added since the first version that changed.
    pub default_changes: Vec<Reason>,
}

impl HistoryCheck {
    /// Whether the op may be recorded as the next version (or is unchanged).
    pub fn is_ok(&self) -> bool {
        self.reasons.is_empty() && self.default_changes.is_empty()
    }
}

/// Checks an op (docs stripped, see [`strip_docs`]) against its recorded
/// versions, oldest first, as TensorFlow's ops-history check does: if it
/// differs from the latest version, it must be compatible ([`check`]) with
/// every recorded version, keep the latest version's defaults
/// ([`attr_defaults_unchanged`]), and keep the defaults of attrs added
/// since the first version ([`added_defaults_unchanged`]). An empty history
/// gives an unchanged, OK result.
///
/// ```
/// use opforge_core::{compat, OpDefBuilder};
/// let v1 = OpDefBuilder::new("Op").input("x: int32").finalize().unwrap();
/// let v2 = OpDefBuilder::new("Op").attr("T: type = DT_INT32").input("x: T").finalize().unwrap();
/// let result = compat::check_history(&[v1.clone()], &v2);
/// assert!(result.changed && result.is_ok());
/// let result = compat::check_history(&[v1, v2.clone()], &v2);
/// assert!(!result.changed);
/// ```
pub fn check_history(history: &[OpDef], current: &OpDef) -> HistoryCheck {
    let mut result = HistoryCheck::default();
    let (Some(first), Some(last)) = (history.first(), history.last()) else {
        return result;
    };
    if same_version(last, current) {
        return result;
    }
    result.changed = true;
    let n = history.len();
    for (i, version) in history.iter().enumerate().rev() {
        if let Err(reasons) = check(version, current) {
            for mut reason in reasons {
                if result.reasons.iter().any(|r| r.message == reason.message) {
                    continue;
                }
                if i + 1 != n {
                    reason
                        .message
                        .push_str(&format!(" (against recorded version {} of {n})", i + 1));
                }
                result.reasons.push(reason);
            }
        }
    }
    if let Err(changes) = attr_defaults_unchanged(last, current) {
        result.default_changes.extend(changes);
    }
    if n > 1 {
        if let Err(changes) = added_defaults_unchanged(first, last, current) {
            result.default_changes.extend(changes);
        }
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compat::test_util::op;
    use crate::compat::Rule;
    use crate::OpDefBuilder;

    #[test]
    fn history_checks_every_version() {
        let v1 = op("A", &["in x: int32", "out y: int32"]);
        let v2 = op(
            "A",
            &["in x: T", "out y: T", "attr T: {int32, float} = DT_INT32"],
        );
        let v3 = op(
            "A",
            &[
                "in x: T",
                "out y: T",
                "attr T: {int32, float, int64} = DT_INT32",
            ],
        );
        assert_eq!(check_history(&[], &v1), HistoryCheck::default());
        let same = check_history(&[v1.clone(), v2.clone()], &v2);
        assert!(!same.changed && same.is_ok());
        let ok = check_history(&[v1.clone(), v2.clone()], &v3);
        assert!(ok.changed && ok.is_ok(), "{ok:?}");
        // The default of T changes from the latest version's.
        let v4 = op(
            "A",
            &[
                "in x: T",
                "out y: T",
                "attr T: {int32, float, int64} = DT_FLOAT",
            ],
        );
        let bad = check_history(&[v1.clone(), v2.clone(), v3.clone()], &v4);
        assert!(bad.changed && !bad.is_ok());
        // Against v1 the new default also changes the signature.
        assert_eq!(
            bad.reasons.iter().map(|r| r.message.as_str()).collect::<Vec<_>>(),
            [
                "Input signature mismatch 'int32' vs. 'float' (against recorded version 1 of 3)",
                "Output signature mismatch 'y:int32' vs. 'y:float' (against recorded version 1 of 3)"
            ]
        );
        assert_eq!(bad.default_changes.len(), 2, "{bad:?}");
        assert_eq!(
            bad.default_changes[0].message,
            "Attr 'T' has changed it's default value; from DT_INT32 to DT_FLOAT"
        );
        assert_eq!(bad.default_changes[1].rule, Rule::AddedAttrDefaultChanged);
    }

    #[test]
    fn strip_docs_keeps_the_interface() {
        let mut o = OpDefBuilder::new("A")
            .input("x: int32")
            .attr("k: int = 0")
            .doc("Summary.\n\nDescription.\n\nx: The input.\nk: A number.")
            .deprecated(7, "Use B")
            .finalize()
            .unwrap();
        assert!(!o.summary.is_empty());
        let s = strip_docs(&o);
        assert!(s.summary.is_empty() && s.description.is_empty());
        assert!(s.input_arg[0].description.is_empty() && s.attr[0].description.is_empty());
        assert_eq!(s.deprecation.as_ref().map(|d| d.version), Some(7));
        assert_eq!(
            s.deprecation.as_ref().map(|d| d.explanation.as_str()),
            Some("")
        );
        o.summary.clear();
        o.description.clear();
        assert!(check(&o, &s).is_ok());
        assert!(same_version(&strip_docs(&s), &s));
    }
}
