//! Op backward compatibility: which changes to an op keep old graphs
//! loading and computing the same thing, with TensorFlow's rules and
//! messages.
//!
//! Once graphs that use an op have been saved, its OpDef may only change in
//! compatible ways. [`check`] applies TensorFlow's rules (its
//! `OpDefCompatible`) and lists every rule a change breaks:
//!
//! * a new attr needs a default (and with it the op must behave as before);
//! * an attr's constraint may widen but not narrow (allowed types, allowed
//!   strings, `>=` minimums), and its type may not change;
//! * attrs may not be removed (or renamed, which removes one);
//! * the inputs, as an old graph sees them, must stay the same: a single
//!   input may become a list (`N * T`, or a `list(type)` attr) whose default
//!   gives the old signature, a fixed type may become a type attr whose
//!   default is the old type, and a new list input is fine if it defaults to
//!   empty; changing a type or the order is not. Renaming an *input* is
//!   fine (graphs refer to inputs by position);
//! * the same for outputs, and their names too: a renamed output breaks the
//!   FunctionDefs that refer to it by name;
//! * an input may stop being a reference, and an output may become one, but
//!   not the other way round;
//! * opforge's own rule, beyond TensorFlow's check: `is_stateful` may not
//!   change (graph optimizations depend on it).
//!
//! Changing an existing attr's default is reported separately, by
//! [`attr_defaults_unchanged`] (TensorFlow's `OpDefAttrDefaultsUnchanged`):
//! graphs are often saved without the attrs that have their default value,
//! so a new default silently changes what they compute.
//!
//! ```
//! use opforge_core::{compat, OpDefBuilder};
//! let v1 = OpDefBuilder::new("ZeroOut").input("to_zero: int32").output("zeroed: int32")
//!     .finalize().unwrap();
//! let v2 = OpDefBuilder::new("ZeroOut").attr("T: {float, int32} = DT_INT32")
//!     .input("to_zero: T").output("zeroed: T").finalize().unwrap();
//! assert!(compat::check(&v1, &v2).is_ok());
//! // The same change without the default is not compatible:
//! let bad = OpDefBuilder::new("ZeroOut").attr("T: {float, int32}")
//!     .input("to_zero: T").output("zeroed: T").finalize().unwrap();
//! let reasons = compat::check(&v1, &bad).unwrap_err();
//! assert_eq!(reasons[0].message, "Attr 'T' added without default");
//! assert_eq!(reasons[0].rule, compat::Rule::AttrAddedWithoutDefault);
//! ```
//!
//! The module also validates a NodeDef against an OpDef
//! ([`validate_node_def`], TensorFlow's `ValidateNodeDef`), so a NodeDef
//! written for the old op can be checked against the new one
//! ([`check_node_def`]), and checks an op against its recorded history
//! ([`check_history`], TensorFlow's `ops_history` check), and reads and
//! writes the op-history folder (`ops_history/<Op>.pbtxt`, [`read_history`],
//! [`write_history_file`]).

mod history;
mod history_files;
mod node_def;
mod rules;
mod summary;

pub use history::{check_history, same_version, strip_docs, HistoryCheck};
pub use history_files::{
    history_file, history_files, history_text, read_history, read_history_file, write_history_file,
    History, DEFAULT_HISTORY_DIR,
};
pub use node_def::{
    check_node_def, node_in_out_types, types_compatible, validate_node_def,
    validate_node_def_strict, NodeDefCheck,
};
pub use rules::{
    added_defaults_unchanged, attr_defaults_unchanged, attr_values_equal, check, op_def_compatible,
    Reason, Rule,
};
pub use summary::{format_node_name_for_error, summarize_node_def, summarize_op_def};

#[cfg(test)]
mod rules_tests;

/// Helpers shared by the tests of the compat modules.
#[cfg(test)]
mod test_util {
    use crate::proto::{self, NodeDef, OpDef};
    use crate::OpDefBuilder;

    /// An OpDef from `"in SPEC"`, `"out SPEC"` and `"attr SPEC"` lines.
    pub(super) fn op(name: &str, specs: &[&str]) -> OpDef {
        let mut b = OpDefBuilder::new(name);
        for spec in specs {
            let (kind, spec) = spec.split_once(' ').unwrap();
            b = match kind {
                "in" => b.input(spec),
                "out" => b.output(spec),
                "attr" => b.attr(spec),
                other => panic!("{other}"),
            };
        }
        b.finalize().unwrap_or_else(|e| panic!("{specs:?}: {e}"))
    }

    /// A NodeDef in text format.
    pub(super) fn node(text: &str) -> NodeDef {
        proto::from_text(text).unwrap()
    }
}
