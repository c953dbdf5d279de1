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
//! ([`check_history`], TensorFlow's `ops_history` check).

use crate::attrs::{add_defaults, in_out_types, AttrMap};
use crate::dtype::DataType;
use crate::op_def::{summarize_attr_value, validate_attr_value};
use crate::proto::{
    self,
    attr_value::{ListValue, Value},
    op_def::{ArgDef, AttrDef},
    AttrValue, NodeDef, OpDef, TensorProto,
};
use crate::{Result, Status, Tensor};
use std::fmt;

/// A rule of op compatibility, for grouping reasons and giving advice.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Rule {
    /// The two OpDefs have different names.
    NameChanged,
    /// An attr of the old op is missing from the new one (removed or
    /// renamed).
    AttrRemoved,
    /// An attr's type changed (`int` to `list(int)`, `type` to `list(type)`, ...).
    AttrTypeChanged,
    /// An attr allows fewer types or strings than before.
    AttrAllowedValuesNarrowed,
    /// An attr's minimum appeared or went up.
    AttrMinimumRaised,
    /// A new attr has no default, so old NodeDefs have no value for it.
    AttrAddedWithoutDefault,
    /// The inputs, as old graphs see them, changed (types, order, count).
    InputSignatureChanged,
    /// An input became a reference.
    InputBecameRef,
    /// The outputs changed (types, order, count or names).
    OutputSignatureChanged,
    /// An output stopped being a reference.
    OutputLostRef,
    /// `is_stateful` changed (opforge's rule; TensorFlow does not check it).
    StatefulnessChanged,
    /// An attr's default was removed.
    DefaultRemoved,
    /// An attr's default changed.
    DefaultChanged,
    /// An attr added after the op's first version lost or changed its
    /// default (TensorFlow's `OpDefAddedDefaultsUnchanged`).
    AddedAttrDefaultChanged,
}

impl Rule {
    /// Whether breaking this rule changes a default (reported separately
    /// from the incompatibilities of [`check`]).
    pub fn is_default_change(self) -> bool {
        matches!(
            self,
            Rule::DefaultRemoved | Rule::DefaultChanged | Rule::AddedAttrDefaultChanged
        )
    }

    /// What to do instead, after TensorFlow's guide ("Create an op",
    /// backwards compatibility).
    pub fn advice(self) -> &'static str {
        match self {
            Rule::AttrAddedWithoutDefault => {
                "give the new attr a default value with which the op behaves as before \
                 (e.g. `preserve_index: int = 0`), so NodeDefs written without it keep working"
            }
            Rule::AttrAllowedValuesNarrowed => {
                "an attr's allowed values may only grow: keep every value allowed before \
                 (or leave the op as it is and add a new op under a new name, e.g. `ZeroOutV2`)"
            }
            Rule::AttrMinimumRaised => {
                "an attr's minimum may only be lowered or removed: keep the old minimum \
                 (or leave the op as it is and add a new op under a new name, e.g. `ZeroOutV2`)"
            }
            Rule::InputSignatureChanged => {
                "old graphs must see the same inputs: a single input may only become a list whose \
                 default length/types give the old signature, and a new list input must default to \
                 empty (`N: int >= 0 = 0`); otherwise leave the op as it is and add a new op under a \
                 new name (e.g. `ZeroOutV2`)"
            }
            Rule::OutputSignatureChanged => {
                "outputs may not change type, order or name (functions refer to outputs by name); \
                 a single output may only become a list whose default gives the old signature; \
                 otherwise leave the op as it is and add a new op under a new name (e.g. `ZeroOutV2`)"
            }
            Rule::InputBecameRef | Rule::OutputLostRef => {
                "an input may only drop `Ref(...)` and an output may only gain it: leave the op as \
                 it is and add a new op under a new name (e.g. `ZeroOutV2`)"
            }
            Rule::DefaultRemoved | Rule::DefaultChanged | Rule::AddedAttrDefaultChanged => {
                "saved graphs often omit attrs that have their default value, so a new default \
                 silently changes what they compute: keep the old default (add a new attr, or a \
                 new op under a new name such as `ZeroOutV2`, for the new behaviour)"
            }
            Rule::NameChanged
            | Rule::AttrRemoved
            | Rule::AttrTypeChanged
            | Rule::StatefulnessChanged => {
                "this change breaks graphs saved with the old op: leave the op as it is and add a \
                 new op under a new name (e.g. `ZeroOutV2`) with the new behaviour"
            }
        }
    }
}

/// One broken rule: which, and TensorFlow's message for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reason {
    /// The rule.
    pub rule: Rule,
    /// What changed, in TensorFlow's words (`Attr 'a' added without default`).
    pub message: String,
}

impl Reason {
    fn new(rule: Rule, message: impl Into<String>) -> Reason {
        Reason {
            rule,
            message: message.into(),
        }
    }

    /// What to do instead ([`Rule::advice`]).
    pub fn advice(&self) -> &'static str {
        self.rule.advice()
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// Checks that `new` can replace `old`: every graph that uses `old` loads
/// and behaves the same with `new`. Returns every broken rule, in the order
/// TensorFlow's `OpDefCompatible` checks them (so the first reason is the one
/// TensorFlow reports), plus opforge's `is_stateful` rule last. Defaults
/// are checked separately by [`attr_defaults_unchanged`].
///
/// Both OpDefs should be valid ([`validate_op_def`](crate::op_def::validate_op_def));
/// invalid ones give meaningless reasons, never a panic.
pub fn check(old: &OpDef, new: &OpDef) -> std::result::Result<(), Vec<Reason>> {
    let mut reasons = Vec::new();
    if old.name != new.name {
        reasons.push(Reason::new(Rule::NameChanged, "Name mismatch"));
    }
    for old_attr in &old.attr {
        let Some(new_attr) = find_attr(new, &old_attr.name) else {
            reasons.push(Reason::new(
                Rule::AttrRemoved,
                format!("Attr '{}' removed", old_attr.name),
            ));
            continue;
        };
        if old_attr.r#type != new_attr.r#type {
            reasons.push(Reason::new(
                Rule::AttrTypeChanged,
                format!(
                    "Attr '{}' changed type '{}' -> '{}'",
                    old_attr.name, old_attr.r#type, new_attr.r#type
                ),
            ));
            continue;
        }
        if more_restrictive(old_attr, new_attr) {
            reasons.push(Reason::new(
                Rule::AttrAllowedValuesNarrowed,
                format!(
                    "Attr '{}' has a stricter set of allowed values; from {} to {}",
                    old_attr.name,
                    allowed_str(old_attr),
                    allowed_str(new_attr)
                ),
            ));
        }
        if higher_minimum(old_attr, new_attr) {
            reasons.push(Reason::new(
                Rule::AttrMinimumRaised,
                format!(
                    "Attr '{}' has a higher minimum; from {} to {}",
                    old_attr.name,
                    min_str(old_attr),
                    min_str(new_attr)
                ),
            ));
        }
    }
    for new_attr in &new.attr {
        if find_attr(old, &new_attr.name).is_none() && new_attr.default_value.is_none() {
            reasons.push(Reason::new(
                Rule::AttrAddedWithoutDefault,
                format!("Attr '{}' added without default", new_attr.name),
            ));
        }
    }
    compare_signatures(old, new, false, &mut reasons);
    compare_signatures(old, new, true, &mut reasons);
    if old.is_stateful != new.is_stateful {
        reasons.push(Reason::new(
            Rule::StatefulnessChanged,
            format!(
                "is_stateful changed from {} to {}",
                old.is_stateful, new.is_stateful
            ),
        ));
    }
    if reasons.is_empty() {
        Ok(())
    } else {
        Err(reasons)
    }
}

/// [`check`] as a `Status` with TensorFlow's `OpDefCompatible` message: the
/// first broken rule, then both ops, as
/// `Incompatible Op change: <reason>; old: Op<...>; new: Op<...>`
/// (`InvalidArgument`).
///
/// ```
/// use opforge_core::{compat, OpDefBuilder};
/// let old = OpDefBuilder::new("RenameOutput").output("old: int32").finalize().unwrap();
/// let new = OpDefBuilder::new("RenameOutput").output("new: int32").finalize().unwrap();
/// assert_eq!(
///     compat::op_def_compatible(&old, &new).unwrap_err().message(),
///     "Incompatible Op change: Output signature mismatch 'old:int32' vs. 'new:int32'; \
///      old: Op<name=RenameOutput; signature= -> old:int32>; \
///      new: Op<name=RenameOutput; signature= -> new:int32>"
/// );
/// ```
pub fn op_def_compatible(old: &OpDef, new: &OpDef) -> Result<()> {
    match check(old, new) {
        Ok(()) => Ok(()),
        Err(reasons) => Err(Status::invalid_argument(format!(
            "Incompatible Op change: {}; old: {}; new: {}",
            reasons[0].message,
            summarize_op_def(old),
            summarize_op_def(new)
        ))),
    }
}

/// Checks that no attr of `old` lost or changed its default in `new`
/// (TensorFlow 2.21's `OpDefAttrDefaultsUnchanged`): adding a default is
/// fine; removing or changing one is reported, every such attr in order.
///
/// ```
/// use opforge_core::{compat, OpDefBuilder};
/// let old = OpDefBuilder::new("A").attr("a: int = 2").finalize().unwrap();
/// let new = OpDefBuilder::new("A").attr("a: int = 1").finalize().unwrap();
/// assert!(compat::check(&old, &new).is_ok());
/// let changes = compat::attr_defaults_unchanged(&old, &new).unwrap_err();
/// assert_eq!(changes[0].message, "Attr 'a' has changed it's default value; from 2 to 1");
/// ```
pub fn attr_defaults_unchanged(old: &OpDef, new: &OpDef) -> std::result::Result<(), Vec<Reason>> {
    let mut reasons = Vec::new();
    for old_attr in &old.attr {
        let Some(new_attr) = find_attr(new, &old_attr.name) else {
            continue;
        };
        let Some(old_default) = &old_attr.default_value else {
            // No default before: adding one is safe.
            continue;
        };
        match &new_attr.default_value {
            None => reasons.push(Reason::new(
                Rule::DefaultRemoved,
                format!(
                    "Attr '{}' has removed it's default; from {} to no default",
                    old_attr.name,
                    summarize_attr_value(old_default)
                ),
            )),
            Some(new_default) if !attr_values_equal(old_default, new_default) => {
                reasons.push(Reason::new(
                    Rule::DefaultChanged,
                    format!(
                        "Attr '{}' has changed it's default value; from {} to {}",
                        old_attr.name,
                        summarize_attr_value(old_default),
                        summarize_attr_value(new_default)
                    ),
                ))
            }
            Some(_) => {}
        }
    }
    if reasons.is_empty() {
        Ok(())
    } else {
        Err(reasons)
    }
}

/// Checks the attrs that `last` (the latest recorded version) has and
/// `first` (the first version) had not: each must have a default in both
/// `last` and `new`, and keep it (TensorFlow's `OpDefAddedDefaultsUnchanged`,
/// with its messages).
pub fn added_defaults_unchanged(
    first: &OpDef,
    last: &OpDef,
    new: &OpDef,
) -> std::result::Result<(), Vec<Reason>> {
    let mut reasons = Vec::new();
    for last_attr in &last.attr {
        if find_attr(first, &last_attr.name).is_some() {
            continue;
        }
        let Some(new_attr) = find_attr(new, &last_attr.name) else {
            reasons.push(Reason::new(
                Rule::AttrRemoved,
                format!(
                    "Missing attr '{}' in op: {}",
                    last_attr.name,
                    summarize_op_def(new)
                ),
            ));
            continue;
        };
        match (&last_attr.default_value, &new_attr.default_value) {
            (Some(last_default), Some(new_default)) => {
                if !attr_values_equal(last_default, new_default) {
                    reasons.push(Reason::new(
                        Rule::AddedAttrDefaultChanged,
                        format!(
                            "Can't change default value for attr '{}' from {} in op: {}",
                            last_attr.name,
                            summarize_attr_value(last_default),
                            summarize_op_def(new)
                        ),
                    ));
                }
            }
            _ => reasons.push(Reason::new(
                Rule::AddedAttrDefaultChanged,
                format!(
                    "Missing default for attr '{}' in op: {}",
                    last_attr.name,
                    summarize_op_def(new)
                ),
            )),
        }
    }
    if reasons.is_empty() {
        Ok(())
    } else {
        Err(reasons)
    }
}

fn find_attr<'a>(op: &'a OpDef, name: &str) -> Option<&'a AttrDef> {
    op.attr.iter().find(|a| a.name == name)
}

fn allowed_list(attr: &AttrDef) -> Option<ListValue> {
    attr.allowed_values.as_ref().map(|v| match &v.value {
        Some(Value::List(l)) => l.clone(),
        _ => ListValue::default(),
    })
}

fn more_restrictive(old: &AttrDef, new: &AttrDef) -> bool {
    let Some(new_allowed) = allowed_list(new) else {
        // Anything -> no restriction.
        return false;
    };
    let Some(old_allowed) = allowed_list(old) else {
        // No restriction -> a restriction.
        return true;
    };
    !old_allowed
        .r#type
        .iter()
        .all(|t| new_allowed.r#type.contains(t))
        || !old_allowed.s.iter().all(|s| new_allowed.s.contains(s))
}

fn allowed_str(attr: &AttrDef) -> String {
    attr.allowed_values
        .as_ref()
        .map_or_else(|| "no restriction".to_string(), summarize_attr_value)
}

fn higher_minimum(old: &AttrDef, new: &AttrDef) -> bool {
    if !new.has_minimum {
        return false;
    }
    if !old.has_minimum {
        return true;
    }
    new.minimum > old.minimum
}

fn min_str(attr: &AttrDef) -> String {
    if attr.has_minimum {
        attr.minimum.to_string()
    } else {
        "no minimum".to_string()
    }
}

/// A default list longer than this is not expanded in a signature (no old
/// op has that many single arguments, so it mismatches either way).
const MAX_EXPANDED_DEFAULT: i64 = 4096;

/// The signature of an op's inputs or outputs as an old graph sees them
/// (TensorFlow's `ComputeArgSignature`).
struct ArgSignature {
    text: String,
    refs: Vec<bool>,
    /// False if an arg depends on a new attr without a default (already
    /// reported as such; the signature would be meaningless).
    resolved: bool,
}

/// Computes the signature of `args` in terms of the old op: a type attr or
/// number attr the old op has is written by name (`T`, `N * T`), one it has
/// not is replaced by the new op's default for it (`int32`, or the type
/// repeated `N` times). Output signatures include the names (`y:T`).
fn arg_signature(args: &[ArgDef], old: &OpDef, new: &OpDef, names: bool) -> ArgSignature {
    let mut items: Vec<String> = Vec::new();
    let mut refs = Vec::new();
    let mut resolved = true;
    let new_default = |name: &str| find_attr(new, name).and_then(|a| a.default_value.as_ref());
    for arg in args {
        let prefix = if names {
            format!("{}:", arg.name)
        } else {
            String::new()
        };
        if !arg.type_list_attr.is_empty() {
            if find_attr(old, &arg.type_list_attr).is_some() {
                items.push(format!("{prefix}{}", arg.type_list_attr));
                refs.push(arg.is_ref);
            } else {
                let types = match new_default(&arg.type_list_attr) {
                    Some(AttrValue {
                        value: Some(Value::List(l)),
                    }) => l.r#type.clone(),
                    Some(_) => Vec::new(),
                    None => {
                        resolved = false;
                        Vec::new()
                    }
                };
                for t in types {
                    items.push(format!("{prefix}{}", dtype_string(t)));
                    refs.push(arg.is_ref);
                }
            }
            continue;
        }
        let mut count: i64 = 1;
        let mut ty = prefix;
        if !arg.number_attr.is_empty() {
            if find_attr(old, &arg.number_attr).is_some() {
                ty.push_str(&format!("{} * ", arg.number_attr));
            } else {
                match new_default(&arg.number_attr).map(|v| &v.value) {
                    Some(Some(Value::I(n))) => count = (*n).max(0),
                    _ => {
                        resolved = false;
                        count = 0;
                    }
                }
            }
        }
        if arg.r#type != DataType::Invalid as i32 {
            ty.push_str(&dtype_string(arg.r#type));
        } else if find_attr(old, &arg.type_attr).is_some() {
            ty.push_str(&arg.type_attr);
        } else {
            match new_default(&arg.type_attr).map(|v| &v.value) {
                Some(Some(Value::Type(t))) => ty.push_str(&dtype_string(*t)),
                _ => {
                    resolved = false;
                    ty.push_str(&arg.type_attr);
                }
            }
        }
        if count > MAX_EXPANDED_DEFAULT {
            items.push(format!("{count} x {ty}"));
            refs.push(arg.is_ref);
            continue;
        }
        for _ in 0..count {
            items.push(ty.clone());
            refs.push(arg.is_ref);
        }
    }
    ArgSignature {
        text: items.join(", "),
        refs,
        resolved,
    }
}

fn compare_signatures(old: &OpDef, new: &OpDef, outputs: bool, reasons: &mut Vec<Reason>) {
    let (old_args, new_args) = if outputs {
        (&old.output_arg, &new.output_arg)
    } else {
        (&old.input_arg, &new.input_arg)
    };
    let old_sig = arg_signature(old_args, old, new, outputs);
    let new_sig = arg_signature(new_args, old, new, outputs);
    if !(old_sig.resolved && new_sig.resolved) {
        // Depends on an attr added without a default: reported already.
        return;
    }
    let (what, rule) = if outputs {
        ("Output", Rule::OutputSignatureChanged)
    } else {
        ("Input", Rule::InputSignatureChanged)
    };
    if old_sig.text != new_sig.text {
        reasons.push(Reason::new(
            rule,
            format!(
                "{what} signature mismatch '{}' vs. '{}'",
                old_sig.text, new_sig.text
            ),
        ));
        return;
    }
    if old_sig.refs.len() != new_sig.refs.len() {
        // TensorFlow's messages differ in the final period.
        let message = if outputs {
            "Unexpected change in output ref lists"
        } else {
            "Unexpected change in input ref lists."
        };
        reasons.push(Reason::new(rule, message));
        return;
    }
    for (i, (&was_ref, &is_ref)) in old_sig.refs.iter().zip(&new_sig.refs).enumerate() {
        if outputs && was_ref && !is_ref {
            reasons.push(Reason::new(
                Rule::OutputLostRef,
                format!("Output {i} changed from ref to non-ref"),
            ));
        } else if !outputs && !was_ref && is_ref {
            reasons.push(Reason::new(
                Rule::InputBecameRef,
                format!("Input {i} changed from non-ref to ref"),
            ));
        }
    }
}

/// TensorFlow's `DataTypeString` of a type code (`int32`, `float`).
fn dtype_string(code: i32) -> String {
    match DataType::from_i32(code) {
        Some(DataType::Invalid) => "INVALID".to_string(),
        Some(dt) => dt.name().to_string(),
        None => format!("unknown dtype enum ({code})"),
    }
}

/// Whether two attr values are equal as TensorFlow's `AreAttrValuesEqual`
/// sees them: tensors by their contents (however encoded), anything else by
/// its serialized bytes (so a NaN default equals itself).
pub fn attr_values_equal(a: &AttrValue, b: &AttrValue) -> bool {
    match (&a.value, &b.value) {
        (Some(Value::Tensor(x)), Some(Value::Tensor(y))) => tensors_equal(x, y),
        (Some(Value::List(x)), Some(Value::List(y)))
            if !x.tensor.is_empty() || !y.tensor.is_empty() =>
        {
            let strip = |l: &ListValue| ListValue {
                tensor: Vec::new(),
                ..l.clone()
            };
            x.tensor.len() == y.tensor.len()
                && x.tensor
                    .iter()
                    .zip(&y.tensor)
                    .all(|(p, q)| tensors_equal(p, q))
                && proto::to_binary(&strip(x)) == proto::to_binary(&strip(y))
        }
        _ => proto::to_binary(a) == proto::to_binary(b),
    }
}

fn tensors_equal(x: &TensorProto, y: &TensorProto) -> bool {
    let canonical = |t: &TensorProto| Tensor::from_proto(t).and_then(|t| t.to_proto()).ok();
    match (canonical(x), canonical(y)) {
        (Some(p), Some(q)) => proto::to_binary(&p) == proto::to_binary(&q),
        _ => proto::to_binary(x) == proto::to_binary(y),
    }
}

/// A short description of an op, as TensorFlow's `SummarizeOpDef`:
/// `Op<name=ZeroOut; signature=to_zero:T -> zeroed:T; attr=T:type,default=DT_INT32,allowed=[DT_FLOAT, DT_INT32]>`.
///
/// ```
/// use opforge_core::{compat, OpDefBuilder};
/// let op = OpDefBuilder::new("AddN").attr("N: int >= 1").attr("T: {float, int32}")
///     .input("inputs: N * T").output("sum: T").finalize().unwrap();
/// assert_eq!(
///     compat::summarize_op_def(&op),
///     "Op<name=AddN; signature=inputs:N*T -> sum:T; attr=N:int,min=1; \
///      attr=T:type,allowed=[DT_FLOAT, DT_INT32]>"
/// );
/// ```
pub fn summarize_op_def(op: &OpDef) -> String {
    let mut s = format!(
        "Op<name={}; signature={} -> {}",
        op.name,
        summarize_args(&op.input_arg),
        summarize_args(&op.output_arg)
    );
    for attr in &op.attr {
        s.push_str(&format!("; attr={}:{}", attr.name, attr.r#type));
        if let Some(default) = &attr.default_value {
            s.push_str(&format!(",default={}", summarize_attr_value(default)));
        }
        if attr.has_minimum {
            s.push_str(&format!(",min={}", attr.minimum));
        }
        if let Some(allowed) = &attr.allowed_values {
            s.push_str(&format!(",allowed={}", summarize_attr_value(allowed)));
        }
    }
    for (flag, name) in [
        (op.is_commutative, "is_commutative"),
        (op.is_aggregate, "is_aggregate"),
        (op.is_stateful, "is_stateful"),
        (op.allows_uninitialized_input, "allows_uninitialized_input"),
        (
            op.is_distributed_communication,
            "is_distributed_communication",
        ),
    ] {
        if flag {
            s.push_str(&format!("; {name}=true"));
        }
    }
    s.push('>');
    s
}

fn summarize_args(args: &[ArgDef]) -> String {
    args.iter()
        .map(|arg| {
            let mut s = format!("{}:", arg.name);
            if arg.is_ref {
                s.push_str("Ref(");
            }
            if !arg.number_attr.is_empty() {
                s.push_str(&format!("{}*", arg.number_attr));
            }
            if arg.r#type != DataType::Invalid as i32 {
                s.push_str(&dtype_string(arg.r#type));
            } else {
                s.push_str(&arg.type_attr);
            }
            if arg.is_ref {
                s.push(')');
            }
            s
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// How TensorFlow names a node in error messages: `{{node NAME}}`.
pub fn format_node_name_for_error(name: &str) -> String {
    format!("{{{{node {name}}}}}")
}

/// A one-line description of a node, as TensorFlow 2.x's
/// `SummarizeNodeDef`: `{{node NAME}} = Op[attr=value, ...](inputs)`, attrs
/// sorted by name (internal `_` attrs included), the device last as
/// `_device="..."`.
///
/// ```
/// use opforge_core::{compat, proto::{self, NodeDef}};
/// let node: NodeDef = proto::from_text(
///     "name: 'z' op: 'ZeroOut' input: 'x' attr { key: 'T' value { type: DT_INT32 } }",
/// ).unwrap();
/// assert_eq!(compat::summarize_node_def(&node), "{{node z}} = ZeroOut[T=DT_INT32](x)");
/// ```
pub fn summarize_node_def(node: &NodeDef) -> String {
    let mut attrs: Vec<String> = node
        .attr
        .iter()
        .map(|(k, v)| format!("{k}={}", summarize_attr_value(v)))
        .collect();
    if !node.device.is_empty() {
        attrs.push(format!("_device=\"{}\"", node.device));
    }
    format!(
        "{} = {}[{}]({})",
        format_node_name_for_error(&node.name),
        node.op,
        attrs.join(", "),
        node.input.join(", ")
    )
}

/// Validates a NodeDef against an OpDef with TensorFlow 2.21's
/// `ValidateNodeDef` rules and messages: the op name matches; control
/// inputs (`^x`) come last and have no `:`; every attr the node sets is
/// valid for the op's attr of that name; every attr of the op is set
/// (`NodeDef missing attr 'a' from Op<...>`); and the number of data inputs
/// is what the op's input args take given the attrs
/// (`NodeDef expected inputs 'int32' do not match 0 inputs specified`).
///
/// As in TensorFlow 2.21, attrs the op does not have are ignored (a graph
/// written by a newer binary may carry them), and so are internal attrs
/// starting with `_`. [`validate_node_def_strict`] rejects unknown attrs.
/// Defaults are not added here: call
/// [`add_defaults`](crate::attrs::add_defaults) on the attrs first, as a
/// graph import does.
///
/// ```
/// use opforge_core::{compat, proto::{self, NodeDef}, OpDefBuilder};
/// let op = OpDefBuilder::new("AddSingleInput").input("a: int32").finalize().unwrap();
/// let node: NodeDef = proto::from_text("name: 'fails' op: 'AddSingleInput'").unwrap();
/// assert_eq!(
///     compat::validate_node_def(&node, &op).unwrap_err().message(),
///     "NodeDef expected inputs 'int32' do not match 0 inputs specified; \
///      Op<name=AddSingleInput; signature=a:int32 -> >; NodeDef: {{node fails}}"
/// );
/// ```
pub fn validate_node_def(node: &NodeDef, op: &OpDef) -> Result<()> {
    validate_node_def_impl(node, op, false)
}

/// [`validate_node_def`], but an attr the op does not have is an error, as
/// in TensorFlow before 2.x ignored them:
/// `NodeDef mentions attr 'a' not in Op<...>; NodeDef: {{node n}}`.
pub fn validate_node_def_strict(node: &NodeDef, op: &OpDef) -> Result<()> {
    validate_node_def_impl(node, op, true)
}

/// More flat inputs or outputs than this are refused before their types are
/// listed (a huge `N` in a NodeDef must not exhaust memory).
const MAX_FLAT_ARGS: i64 = 1 << 20;

fn validate_node_def_impl(node: &NodeDef, op: &OpDef, strict: bool) -> Result<()> {
    let node_ref = format_node_name_for_error(&node.name);
    if node.op != op.name {
        return Err(Status::invalid_argument(format!(
            "NodeDef op '{}' does not match {}; NodeDef: {node_ref}",
            node.op,
            summarize_op_def(op)
        )));
    }
    let mut seen_control = false;
    let mut num_inputs: i64 = 0;
    for input in &node.input {
        if input.starts_with('^') {
            seen_control = true;
            if input.contains(':') {
                return Err(Status::invalid_argument(format!(
                    "Control input '{input}' must not have ':' in NodeDef: {node_ref}"
                )));
            }
        } else if seen_control {
            return Err(Status::invalid_argument(format!(
                "Non-control input '{input}' after control input in NodeDef: {node_ref}"
            )));
        } else {
            num_inputs += 1;
        }
    }
    for (i, attr) in op.attr.iter().enumerate() {
        if op.attr[..i].iter().any(|a| a.name == attr.name) {
            return Err(Status::invalid_argument(format!(
                "OpDef has duplicate attr name '{}': {}",
                attr.name,
                summarize_op_def(op)
            )));
        }
    }
    for (name, value) in &node.attr {
        if name.starts_with('_') {
            continue;
        }
        let Some(attr) = find_attr(op, name) else {
            if strict {
                return Err(Status::invalid_argument(format!(
                    "NodeDef mentions attr '{name}' not in {}; NodeDef: {node_ref}",
                    summarize_op_def(op)
                )));
            }
            continue;
        };
        if matches!(value.value, Some(Value::Placeholder(_))) {
            continue;
        }
        validate_attr_value(value, attr).map_err(|e| {
            Status::new(
                e.code(),
                format!(
                    "{}; NodeDef: {node_ref}; {}",
                    e.message(),
                    summarize_op_def(op)
                ),
            )
        })?;
    }
    let missing: Vec<&str> = op
        .attr
        .iter()
        .filter(|a| !node.attr.contains_key(&a.name))
        .map(|a| a.name.as_str())
        .collect();
    if !missing.is_empty() {
        return Err(Status::invalid_argument(format!(
            "NodeDef missing attr{} '{}' from {}; NodeDef: {node_ref}",
            if missing.len() == 1 { "" } else { "s" },
            missing.join("', '"),
            summarize_op_def(op)
        )));
    }
    let (inputs, _) = node_in_out_types(node, op)?;
    if num_inputs != inputs.len() as i64 {
        return Err(Status::invalid_argument(format!(
            "NodeDef expected inputs '{}' do not match {num_inputs} inputs specified; {}; NodeDef: {node_ref}",
            data_type_vector_string(&inputs),
            summarize_op_def(op)
        )));
    }
    Ok(())
}

/// `int32, float_ref`: a list of dtypes as TensorFlow's `DataTypeVectorString`.
fn data_type_vector_string(types: &[DataType]) -> String {
    types
        .iter()
        .map(|t| t.name())
        .collect::<Vec<_>>()
        .join(", ")
}

/// How many flat tensors `args` take given `attrs`, or `None` if a number
/// attr is missing or not an int.
fn flat_count(args: &[ArgDef], attrs: &AttrMap) -> Option<i64> {
    let mut total: i64 = 0;
    for arg in args {
        let n = if !arg.number_attr.is_empty() {
            match attrs.get(&arg.number_attr)?.value {
                Some(Value::I(n)) => n.max(0),
                _ => return None,
            }
        } else if !arg.type_list_attr.is_empty() {
            match &attrs.get(&arg.type_list_attr)?.value {
                Some(Value::List(l)) => l.r#type.len() as i64,
                _ => 0,
            }
        } else {
            1
        };
        total = total.saturating_add(n);
    }
    Some(total)
}

/// The flat input and output dtypes of a node, from its attrs (as they
/// are: defaults are not added), as TensorFlow's `InOutTypesForNode`.
/// Ref arguments give ref dtypes (`int32_ref`).
pub fn node_in_out_types(node: &NodeDef, op: &OpDef) -> Result<(Vec<DataType>, Vec<DataType>)> {
    for (what, args) in [("inputs", &op.input_arg), ("outputs", &op.output_arg)] {
        if let Some(n) = flat_count(args, &node.attr) {
            if n > MAX_FLAT_ARGS {
                return Err(Status::invalid_argument(format!(
                    "NodeDef {} has {n} flat {what}: more than the {MAX_FLAT_ARGS} supported; {}",
                    format_node_name_for_error(&node.name),
                    summarize_op_def(op)
                )));
            }
        }
    }
    in_out_types(op, &node.attr)
}

/// Whether a node keeps its meaning for old graphs: the same flat input
/// and output dtypes, except that a ref input may become non-ref and a
/// non-ref output may become ref (what TensorFlow's compatibility test
/// accepts).
pub fn types_compatible(
    old: &(Vec<DataType>, Vec<DataType>),
    new: &(Vec<DataType>, Vec<DataType>),
) -> bool {
    let (old_in, old_out) = old;
    let (new_in, new_out) = new;
    old_in.len() == new_in.len()
        && old_out.len() == new_out.len()
        && old_in
            .iter()
            .zip(new_in)
            .all(|(&o, &n)| o == n || (o.is_ref() && o.base() == n))
        && old_out
            .iter()
            .zip(new_out)
            .all(|(&o, &n)| o == n || (!o.is_ref() && o.to_ref() == n))
}

/// What happens to a NodeDef written for an old version of an op when it
/// is loaded with the new one ([`check_node_def`]).
#[derive(Clone, Debug)]
pub struct NodeDefCheck {
    /// The NodeDef with the new op's defaults added (what a graph import
    /// makes of it).
    pub node_def: NodeDef,
    /// [`validate_node_def`] of `node_def` against the new op.
    pub validation: Result<()>,
    /// Whether the node's flat input and output dtypes are the same under
    /// both ops (see [`types_compatible`]); `None` if they cannot be
    /// computed for one of them.
    pub types_match: Option<bool>,
    /// [`summarize_node_def`] of `node_def`.
    pub summary: String,
}

impl NodeDefCheck {
    /// Whether the node loads with the new op and has the same signature.
    pub fn is_ok(&self) -> bool {
        self.validation.is_ok() && self.types_match == Some(true)
    }
}

/// Loads a NodeDef written for `old` with `new`, as TensorFlow's
/// compatibility test does: the old op's defaults fill the old node's
/// missing attrs to compute its dtypes; the new op's defaults are added to
/// the node as written, which must then validate against `new` and have
/// the same dtypes (a ref input may become non-ref, a non-ref output ref).
///
/// ```
/// use opforge_core::{compat, proto::{self, NodeDef}, OpDefBuilder};
/// let v1 = OpDefBuilder::new("ZeroOut").input("to_zero: int32").output("zeroed: int32")
///     .finalize().unwrap();
/// let v3 = OpDefBuilder::new("ZeroOut").attr("T: {float, int32} = DT_INT32")
///     .attr("preserve_index: int = 0").input("to_zero: T").output("zeroed: T")
///     .finalize().unwrap();
/// let node: NodeDef = proto::from_text("name: 'z' op: 'ZeroOut' input: 'x'").unwrap();
/// let report = compat::check_node_def(&node, &v1, &v3);
/// assert!(report.is_ok());
/// assert_eq!(report.summary, "{{node z}} = ZeroOut[T=DT_INT32, preserve_index=0](x)");
/// ```
pub fn check_node_def(node: &NodeDef, old: &OpDef, new: &OpDef) -> NodeDefCheck {
    let mut old_node = node.clone();
    add_defaults(old, &mut old_node.attr);
    let old_types = node_in_out_types(&old_node, old);
    let mut new_node = node.clone();
    add_defaults(new, &mut new_node.attr);
    let validation = validate_node_def(&new_node, new);
    let new_types = node_in_out_types(&new_node, new);
    let types_match = match (&old_types, &new_types) {
        (Ok(o), Ok(n)) => Some(types_compatible(o, n)),
        _ => None,
    };
    let summary = summarize_node_def(&new_node);
    NodeDefCheck {
        node_def: new_node,
        validation,
        types_match,
        summary,
    }
}

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
    use crate::OpDefBuilder;

    fn op(name: &str, specs: &[&str]) -> OpDef {
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

    fn reasons(old: &OpDef, new: &OpDef) -> Vec<String> {
        match check(old, new) {
            Ok(()) => Vec::new(),
            Err(r) => r.into_iter().map(|r| r.message).collect(),
        }
    }

    /// Asserts `a -> b` is compatible and `b -> a` is not, with `reverse`
    /// in the first reason of the reverse direction.
    fn one_way(a: &OpDef, b: &OpDef, reverse: &str) {
        assert_eq!(reasons(a, b), Vec::<String>::new(), "forward");
        let back = reasons(b, a);
        assert!(
            back.first().is_some_and(|r| r.contains(reverse)),
            "reverse: {back:?}, want {reverse}"
        );
    }

    #[test]
    fn identical_ops_are_compatible() {
        let a = op(
            "Same",
            &[
                "in a: int32",
                "in b: T",
                "in c: N * int32",
                "in d: N * T",
                "in e: TList",
                "out ndef: string",
                "attr T: type",
                "attr N: int",
                "attr TList: list(type)",
            ],
        );
        assert!(check(&a, &a).is_ok());
        assert!(attr_defaults_unchanged(&a, &a).is_ok());
        op_def_compatible(&a, &a).unwrap();
    }

    #[test]
    fn attr_with_default_may_be_added_but_not_removed() {
        let a = op("A", &["out y: string"]);
        let b = op("A", &["out y: string", "attr a: int = 42"]);
        one_way(&a, &b, "Attr 'a' removed");
        assert_eq!(check(&b, &a).unwrap_err()[0].rule, Rule::AttrRemoved);
    }

    #[test]
    fn attr_without_default_may_not_be_added() {
        let a = op("A", &[]);
        let b = op("A", &["attr a: int"]);
        assert_eq!(reasons(&a, &b), ["Attr 'a' added without default"]);
        // The reverse removes it.
        assert_eq!(reasons(&b, &a), ["Attr 'a' removed"]);
        assert_eq!(
            check(&a, &b).unwrap_err()[0].advice(),
            Rule::AttrAddedWithoutDefault.advice()
        );
        assert!(Rule::AttrAddedWithoutDefault.advice().contains("default"));
    }

    #[test]
    fn renaming_an_attr_removes_one_and_adds_one() {
        let a = op("A", &["attr a: int"]);
        let b = op("A", &["attr b: int"]);
        assert_eq!(
            reasons(&a, &b),
            ["Attr 'a' removed", "Attr 'b' added without default"]
        );
    }

    #[test]
    fn allowed_types_and_strings_may_widen_not_narrow() {
        let a = op("A", &["attr t: {int32, int64}"]);
        let b = op("A", &["attr t: {int32, int64, bool}"]);
        one_way(
            &a,
            &b,
            "Attr 't' has a stricter set of allowed values; from [DT_INT32, DT_INT64, DT_BOOL] to [DT_INT32, DT_INT64]",
        );
        let c = op("A", &["attr t: type"]);
        one_way(
            &a,
            &c,
            "Attr 't' has a stricter set of allowed values; from no restriction to [DT_INT32, DT_INT64]",
        );
        // Reordering the allowed types is fine both ways.
        let d = op("A", &["attr t: {int64, int32}"]);
        assert!(check(&a, &d).is_ok() && check(&d, &a).is_ok());

        let s = op("A", &["attr a: {'A', 'B'}"]);
        let t = op("A", &["attr a: {'A', 'B', 'C'}"]);
        one_way(&s, &t, "from [\"A\", \"B\", \"C\"] to [\"A\", \"B\"]");
        assert_eq!(
            check(&t, &s).unwrap_err()[0].rule,
            Rule::AttrAllowedValuesNarrowed
        );
    }

    #[test]
    fn minimums_may_be_lowered_not_raised() {
        let a = op("A", &["attr n: int >= 3"]);
        let b = op("A", &["attr n: int >= 1"]);
        one_way(&a, &b, "Attr 'n' has a higher minimum; from 1 to 3");
        let c = op("A", &["attr n: int"]);
        one_way(
            &a,
            &c,
            "Attr 'n' has a higher minimum; from no minimum to 3",
        );
        // List lengths too.
        let l2 = op("A", &["in a: T", "attr T: list(type) >= 2"]);
        let l1 = op("A", &["in a: T", "attr T: list(type) >= 1"]);
        one_way(&l2, &l1, "has a higher minimum; from 1 to 2");
        assert_eq!(
            check(&l1, &l2).unwrap_err()[0].rule,
            Rule::AttrMinimumRaised
        );
    }

    #[test]
    fn attr_types_may_not_change() {
        for (x, y) in [("bool", "int"), ("list(int)", "int"), ("int", "list(int)")] {
            let a = op("A", &[&format!("attr a: {x}")]);
            let b = op("A", &[&format!("attr a: {y}")]);
            assert_eq!(
                reasons(&a, &b),
                [format!("Attr 'a' changed type '{x}' -> '{y}'")]
            );
        }
        let a = op("A", &["in a: T", "attr T: type"]);
        let b = op("A", &["in a: T", "attr T: list(type)"]);
        assert_eq!(
            reasons(&a, &b),
            ["Attr 'T' changed type 'type' -> 'list(type)'"]
        );
        assert_eq!(
            reasons(&b, &a),
            ["Attr 'T' changed type 'list(type)' -> 'type'"]
        );
    }

    #[test]
    fn a_fixed_type_may_become_a_type_attr_with_that_default() {
        let a = op("A", &["in a: int32", "out y: int32"]);
        let b = op("A", &["in a: T", "out y: T", "attr T: type = DT_INT32"]);
        one_way(&a, &b, "Attr 'T' removed");
        // With another default, old graphs would change type.
        let c = op("A", &["in a: T", "out y: T", "attr T: type = DT_FLOAT"]);
        assert_eq!(
            reasons(&a, &c),
            [
                "Input signature mismatch 'int32' vs. 'float'",
                "Output signature mismatch 'y:int32' vs. 'y:float'"
            ]
        );
    }

    #[test]
    fn a_single_input_may_become_a_list_with_a_matching_default() {
        let single = op("A", &["in a: int32"]);
        let same = op("A", &["in a: N * int32", "attr N: int = 1"]);
        one_way(&single, &same, "Attr 'N' removed");
        let poly = op(
            "A",
            &["in a: N * T", "attr N: int = 1", "attr T: type = DT_INT32"],
        );
        one_way(&single, &poly, "Attr 'N' removed");
        let any = op("A", &["in a: T", "attr T: list(type) = [DT_INT32]"]);
        one_way(&single, &any, "Attr 'T' removed");
        // Two inputs may become one list of two.
        let two = op("A", &["in a: int32", "in b: float"]);
        let two_any = op(
            "A",
            &["in a: T", "attr T: list(type) = [DT_INT32, DT_FLOAT]"],
        );
        assert!(check(&two, &two_any).is_ok());
        let two_same = op("A", &["in a: int32", "in b: int32"]);
        let n2 = op("A", &["in a: N * int32", "attr N: int = 2"]);
        assert!(check(&two_same, &n2).is_ok());
        // A wrong default length is a signature change.
        let n3 = op("A", &["in a: N * int32", "attr N: int = 3"]);
        assert_eq!(
            reasons(&two_same, &n3),
            ["Input signature mismatch 'int32, int32' vs. 'int32, int32, int32'"]
        );
        // A polymorphic input may become N * T with N = 1.
        let t = op("A", &["in a: T", "attr T: type"]);
        let nt = op("A", &["in a: N * T", "attr N: int = 1", "attr T: type"]);
        assert!(check(&t, &nt).is_ok());
    }

    #[test]
    fn a_new_list_input_must_default_to_empty() {
        let none = op("A", &["out y: string"]);
        let empty = op(
            "A",
            &["in a: N * int32", "out y: string", "attr N: int >= 0 = 0"],
        );
        one_way(&none, &empty, "Attr 'N' removed");
        assert_eq!(
            reasons(&empty, &none)[1],
            "Input signature mismatch 'N * int32' vs. ''"
        );
        let empty_any = op(
            "A",
            &["in a: T", "out y: string", "attr T: list(type) >= 0 = []"],
        );
        assert!(check(&none, &empty_any).is_ok());
        let big = op(
            "A",
            &["in a: N * int32", "out y: string", "attr N: int = 1"],
        );
        assert_eq!(
            reasons(&none, &big),
            ["Input signature mismatch '' vs. 'int32'"]
        );
        let big_any = op(
            "A",
            &[
                "in a: T",
                "out y: string",
                "attr T: list(type) = [DT_INT32]",
            ],
        );
        assert_eq!(
            reasons(&none, &big_any),
            ["Input signature mismatch '' vs. 'int32'"]
        );
        // A new list beside an existing polymorphic input, same T.
        let a = op("A", &["in a: T", "attr T: type"]);
        let b = op(
            "A",
            &[
                "in a: T",
                "in b: N * T",
                "attr N: int >= 0 = 0",
                "attr T: type",
            ],
        );
        one_way(&a, &b, "Attr 'N' removed");
    }

    #[test]
    fn inputs_may_be_renamed_but_not_retyped_reordered_added_or_removed() {
        let x = op("A", &["in x: int32"]);
        let y = op("A", &["in y: int32"]);
        assert!(check(&x, &y).is_ok() && check(&y, &x).is_ok());
        let f = op("A", &["in x: float"]);
        assert_eq!(
            reasons(&x, &f),
            ["Input signature mismatch 'int32' vs. 'float'"]
        );
        let ba = op("A", &["in b: int32", "in a: float"]);
        let ab = op("A", &["in a: float", "in b: int32"]);
        assert_eq!(
            reasons(&ba, &ab),
            ["Input signature mismatch 'int32, float' vs. 'float, int32'"]
        );
        let none = op("A", &[]);
        assert_eq!(
            reasons(&f, &none),
            ["Input signature mismatch 'float' vs. ''"]
        );
        assert_eq!(
            reasons(&none, &f),
            ["Input signature mismatch '' vs. 'float'"]
        );
    }

    #[test]
    fn outputs_may_not_be_renamed() {
        let old = op("A", &["out old: int32"]);
        let new = op("A", &["out new: int32"]);
        assert_eq!(
            reasons(&old, &new),
            ["Output signature mismatch 'old:int32' vs. 'new:int32'"]
        );
        let old = op("A", &["out old: N * int32", "attr N: int"]);
        let new = op("A", &["out new: N * int32", "attr N: int"]);
        assert_eq!(
            reasons(&old, &new),
            ["Output signature mismatch 'old:N * int32' vs. 'new:N * int32'"]
        );
        let old = op("A", &["out old: T", "attr T: list(type)"]);
        let new = op("A", &["out new: T", "attr T: list(type)"]);
        assert_eq!(
            reasons(&old, &new),
            ["Output signature mismatch 'old:T' vs. 'new:T'"]
        );
        assert_eq!(
            check(&old, &new).unwrap_err()[0].rule,
            Rule::OutputSignatureChanged
        );
    }

    #[test]
    fn ref_inputs_may_become_plain_and_plain_outputs_ref() {
        let r = op("A", &["in i: Ref(int32)"]);
        let p = op("A", &["in i: int32"]);
        one_way(&r, &p, "Input 0 changed from non-ref to ref");
        assert_eq!(check(&p, &r).unwrap_err()[0].rule, Rule::InputBecameRef);
        let p = op("A", &["out o: int32", "out ndef: string"]);
        let r = op("A", &["out o: Ref(int32)", "out ndef: string"]);
        one_way(&p, &r, "Output 0 changed from ref to non-ref");
        assert_eq!(check(&r, &p).unwrap_err()[0].rule, Rule::OutputLostRef);
    }

    #[test]
    fn statefulness_may_not_change() {
        let a = op("A", &["out y: int32"]);
        let mut b = a.clone();
        b.is_stateful = true;
        assert_eq!(reasons(&a, &b), ["is_stateful changed from false to true"]);
        assert_eq!(reasons(&b, &a), ["is_stateful changed from true to false"]);
        assert_eq!(
            check(&a, &b).unwrap_err()[0].rule,
            Rule::StatefulnessChanged
        );
        // Other flags may change.
        let mut c = a.clone();
        c.is_commutative = true;
        c.is_aggregate = true;
        assert!(check(&a, &c).is_ok() && check(&c, &a).is_ok());
    }

    #[test]
    fn name_changes_are_reported() {
        let a = op("A", &[]);
        let b = op("B", &[]);
        assert_eq!(reasons(&a, &b), ["Name mismatch"]);
    }

    #[test]
    fn every_reason_is_listed_and_the_first_is_tensorflows() {
        let old = op(
            "A",
            &[
                "in x: int32",
                "out y: int32",
                "attr a: int",
                "attr t: {int32, int64}",
                "attr n: int >= 1",
            ],
        );
        let new = op(
            "A",
            &[
                "in x: float",
                "out z: int32",
                "attr t: {int32}",
                "attr n: int >= 2",
                "attr b: bool",
            ],
        );
        assert_eq!(
            reasons(&old, &new),
            [
                "Attr 'a' removed",
                "Attr 't' has a stricter set of allowed values; from [DT_INT32, DT_INT64] to [DT_INT32]",
                "Attr 'n' has a higher minimum; from 1 to 2",
                "Attr 'b' added without default",
                "Input signature mismatch 'int32' vs. 'float'",
                "Output signature mismatch 'y:int32' vs. 'z:int32'",
            ]
        );
        let err = op_def_compatible(&old, &new).unwrap_err();
        assert_eq!(err.code(), crate::Code::InvalidArgument);
        assert!(
            err.message()
                .starts_with("Incompatible Op change: Attr 'a' removed; old: Op<name=A; "),
            "{err}"
        );
    }

    #[test]
    fn signatures_on_a_new_attr_without_default_are_not_reported_twice() {
        let old = op("A", &["in x: int32"]);
        let new = op("A", &["in x: T", "attr T: type"]);
        assert_eq!(reasons(&old, &new), ["Attr 'T' added without default"]);
        let new = op("A", &["in x: N * int32", "attr N: int"]);
        assert_eq!(reasons(&old, &new), ["Attr 'N' added without default"]);
        let new = op("A", &["in x: T", "attr T: list(type)"]);
        assert_eq!(reasons(&old, &new), ["Attr 'T' added without default"]);
    }

    #[test]
    fn huge_default_lengths_do_not_expand() {
        let old = op("A", &[]);
        let new = op("A", &["in x: N * int32", "attr N: int >= 0 = 1000000000"]);
        assert_eq!(
            reasons(&old, &new),
            ["Input signature mismatch '' vs. '1000000000 x int32'"]
        );
    }

    #[test]
    fn defaults_may_be_added_but_not_removed_or_changed() {
        let none = op("A", &["attr a: int"]);
        let d2 = op("A", &["attr a: int = 2"]);
        let d1 = op("A", &["attr a: int = 1"]);
        // TensorFlow 2.21: adding a default is fine.
        assert!(attr_defaults_unchanged(&none, &d2).is_ok());
        let removed = attr_defaults_unchanged(&d2, &none).unwrap_err();
        assert_eq!(
            removed[0].message,
            "Attr 'a' has removed it's default; from 2 to no default"
        );
        assert_eq!(removed[0].rule, Rule::DefaultRemoved);
        assert!(removed[0].rule.is_default_change());
        let changed = attr_defaults_unchanged(&d2, &d1).unwrap_err();
        assert_eq!(
            changed[0].message,
            "Attr 'a' has changed it's default value; from 2 to 1"
        );
        assert_eq!(changed[0].rule, Rule::DefaultChanged);
        // None of this is an incompatibility.
        for (x, y) in [(&none, &d2), (&d2, &none), (&d2, &d1)] {
            assert!(check(x, y).is_ok());
        }
        // Shapes and strings.
        let s1 = op("A", &["attr shape: shape = {}"]);
        let s2 = op("A", &["attr shape: shape = { unknown_rank: true }"]);
        assert_eq!(
            attr_defaults_unchanged(&s1, &s2).unwrap_err()[0].message,
            "Attr 'shape' has changed it's default value; from [] to <unknown>"
        );
        let f = op("A", &["attr f: float = nan"]);
        assert!(attr_defaults_unchanged(&f, &f).is_ok());
    }

    #[test]
    fn tensor_defaults_compare_by_content() {
        let a = op("A", &["attr v: tensor = { dtype: DT_INT32 tensor_shape { dim { size: 2 } } int_val: [1, 2] }"]);
        let mut b = a.clone();
        let t = Tensor::from_proto(&TensorProto {
            dtype: DataType::Int32 as i32,
            tensor_shape: Some(crate::TensorShape::new(&[2]).unwrap().to_proto()),
            int_val: vec![1, 2],
            ..Default::default()
        })
        .unwrap();
        b.attr[0].default_value = Some(AttrValue {
            value: Some(Value::Tensor(t.to_proto().unwrap())),
        });
        assert_ne!(a, b);
        assert!(attr_defaults_unchanged(&a, &b).is_ok());
        let c = op("A", &["attr v: tensor = { dtype: DT_INT32 tensor_shape { dim { size: 2 } } int_val: [1, 3] }"]);
        assert!(attr_defaults_unchanged(&a, &c).is_err());
    }

    #[test]
    fn added_defaults_must_stay() {
        let v1 = op("A", &["in x: int32"]);
        let v2 = op("A", &["in x: int32", "attr k: int = 0"]);
        let v3 = op("A", &["in x: int32", "attr k: int = 1"]);
        assert!(added_defaults_unchanged(&v1, &v2, &v2).is_ok());
        let r = added_defaults_unchanged(&v1, &v2, &v3).unwrap_err();
        assert_eq!(
            r[0].message,
            format!(
                "Can't change default value for attr 'k' from 0 in op: {}",
                summarize_op_def(&v3)
            )
        );
        let no_default = op("A", &["in x: int32", "attr k: int"]);
        let r = added_defaults_unchanged(&v1, &v2, &no_default).unwrap_err();
        assert!(r[0]
            .message
            .starts_with("Missing default for attr 'k' in op: "));
        let r = added_defaults_unchanged(&v1, &v2, &v1).unwrap_err();
        assert!(r[0].message.starts_with("Missing attr 'k' in op: "));
    }

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

    fn node(text: &str) -> NodeDef {
        proto::from_text(text).unwrap()
    }

    #[test]
    fn node_validation_messages_match_tensorflow() {
        let o = op("AddAttrNoDefault", &["attr a: int"]);
        let n = node("name: 'fails' op: 'AddAttrNoDefault'");
        assert_eq!(
            validate_node_def(&n, &o).unwrap_err().message(),
            "NodeDef missing attr 'a' from Op<name=AddAttrNoDefault; signature= -> ; attr=a:int>; NodeDef: {{node fails}}"
        );
        let o2 = op("Two", &["attr a: int", "attr b: int"]);
        let n2 = node("name: 'n' op: 'Two'");
        assert!(validate_node_def(&n2, &o2)
            .unwrap_err()
            .message()
            .starts_with("NodeDef missing attrs 'a', 'b' from Op<name=Two;"));

        let o = op("ChangeAttrType", &["attr a: int"]);
        let n = node("name: 'fails' op: 'ChangeAttrType' attr { key: 'a' value { b: true } }");
        assert_eq!(
            validate_node_def(&n, &o).unwrap_err().message(),
            "AttrValue had value with type 'bool' when 'int' expected for attr 'a'; NodeDef: {{node fails}}; Op<name=ChangeAttrType; signature= -> ; attr=a:int>"
        );

        let o = op("RemoveInput", &[]);
        let n = node("name: 'fails' op: 'RemoveInput' input: 'a'");
        assert_eq!(
            validate_node_def(&n, &o).unwrap_err().message(),
            "NodeDef expected inputs '' do not match 1 inputs specified; Op<name=RemoveInput; signature= -> >; NodeDef: {{node fails}}"
        );

        let n = node("name: 'x' op: 'Other'");
        assert_eq!(
            validate_node_def(&n, &o).unwrap_err().message(),
            "NodeDef op 'Other' does not match Op<name=RemoveInput; signature= -> >; NodeDef: {{node x}}"
        );
        let o = op("In", &["in a: int32"]);
        let n = node("name: 'x' op: 'In' input: '^c' input: 'a'");
        assert!(validate_node_def(&n, &o)
            .unwrap_err()
            .message()
            .starts_with("Non-control input 'a' after control input in NodeDef: {{node x}}"));
        let n = node("name: 'x' op: 'In' input: 'a' input: '^c:1'");
        assert!(validate_node_def(&n, &o)
            .unwrap_err()
            .message()
            .starts_with("Control input '^c:1' must not have ':'"));
        let n = node("name: 'x' op: 'In' input: 'a' input: '^c'");
        validate_node_def(&n, &o).unwrap();
    }

    #[test]
    fn unknown_attrs_are_ignored_unless_strict() {
        let o = op("RemoveAttr", &[]);
        let n = node("name: 'fails' op: 'RemoveAttr' attr { key: 'a' value { i: 3 } } attr { key: '_class' value { s: 'x' } }");
        validate_node_def(&n, &o).unwrap();
        assert_eq!(
            validate_node_def_strict(&n, &o).unwrap_err().message(),
            "NodeDef mentions attr 'a' not in Op<name=RemoveAttr; signature= -> >; NodeDef: {{node fails}}"
        );
        let n = node("name: 'ok' op: 'RemoveAttr' attr { key: '_class' value { s: 'x' } }");
        validate_node_def_strict(&n, &o).unwrap();
    }

    #[test]
    fn huge_list_lengths_in_a_node_are_refused() {
        let o = op("L", &["in a: N * int32", "attr N: int"]);
        let n = node("name: 'n' op: 'L' input: 'x' attr { key: 'N' value { i: 1000000000000 } }");
        let err = validate_node_def(&n, &o).unwrap_err();
        assert!(err.message().contains("1000000000000 flat inputs"), "{err}");
    }

    #[test]
    fn node_summaries() {
        let n = node(
            "name: 'n' op: 'Op' input: 'a' input: 'b:1' input: '^c' device: '/cpu:0' \
             attr { key: 'T' value { type: DT_FLOAT } } attr { key: '_x' value { i: 1 } } \
             attr { key: 'N' value { i: 3 } }",
        );
        assert_eq!(
            summarize_node_def(&n),
            "{{node n}} = Op[N=3, T=DT_FLOAT, _x=1, _device=\"/cpu:0\"](a, b:1, ^c)"
        );
        assert_eq!(
            summarize_node_def(&node("name: 'e' op: 'E'")),
            "{{node e}} = E[]()"
        );
    }

    #[test]
    fn op_summaries() {
        let o = op(
            "S",
            &[
                "in a: Ref(int32)",
                "in b: N * T",
                "in c: L",
                "out d: string",
                "attr N: int >= 2 = 2",
                "attr T: {float, int32} = DT_INT32",
                "attr L: list(type) >= 0",
            ],
        );
        let mut o = o;
        o.is_stateful = true;
        o.is_commutative = true;
        assert_eq!(
            summarize_op_def(&o),
            "Op<name=S; signature=a:Ref(int32), b:N*T, c: -> d:string; attr=N:int,default=2,min=2; \
             attr=T:type,default=DT_INT32,allowed=[DT_FLOAT, DT_INT32]; attr=L:list(type),min=0; \
             is_commutative=true; is_stateful=true>"
        );
    }

    #[test]
    fn node_checks_compare_types_with_ref_rules() {
        let old = op("R", &["in i: Ref(int32)", "out ndef: string"]);
        let new = op("R", &["in i: int32", "out ndef: string"]);
        let n = node("name: 'n' op: 'R' input: 'a'");
        assert!(check_node_def(&n, &old, &new).is_ok());
        // The reverse is a type mismatch, though the node validates.
        let back = check_node_def(&n, &new, &old);
        assert!(back.validation.is_ok());
        assert_eq!(back.types_match, Some(false));
        let old = op("O", &["out o: int32"]);
        let new = op("O", &["out o: Ref(int32)"]);
        let n = node("name: 'n' op: 'O'");
        assert_eq!(check_node_def(&n, &old, &new).types_match, Some(true));
        assert_eq!(check_node_def(&n, &new, &old).types_match, Some(false));
        // A node whose types cannot be computed.
        let old = op("P", &["in a: T", "attr T: type"]);
        let n = node("name: 'n' op: 'P' input: 'x'");
        let r = check_node_def(&n, &old, &old);
        assert_eq!(r.types_match, None);
        assert!(!r.is_ok());
    }

    #[test]
    fn old_node_defs_load_with_new_defaults() {
        let v1 = op("ZeroOut", &["in to_zero: int32", "out zeroed: int32"]);
        let v4 = op(
            "ZeroOut",
            &[
                "attr T: realnumbertype = DT_INT32",
                "attr preserve_index: int = 0",
                "in to_zero: T",
                "out zeroed: T",
            ],
        );
        let n = node("name: 'z' op: 'ZeroOut' input: 'c'");
        let r = check_node_def(&n, &v1, &v4);
        assert!(r.is_ok(), "{r:?}");
        assert_eq!(
            r.summary,
            "{{node z}} = ZeroOut[T=DT_INT32, preserve_index=0](c)"
        );
        assert_eq!(r.node_def.attr.len(), 2);
    }
}
