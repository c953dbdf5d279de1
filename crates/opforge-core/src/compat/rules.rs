//! The compatibility rules: [`check`] (TensorFlow's `OpDefCompatible`),
//! the attr-default checks and what each broken [`Rule`] means.

use super::summary::{dtype_string, summarize_op_def};
use crate::dtype::DataType;
use crate::op_def::summarize_attr_value;
use crate::proto::{
    self,
    attr_value::{ListValue, Value},
    op_def::{ArgDef, AttrDef},
    AttrValue, OpDef, TensorProto,
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

pub(super) fn find_attr<'a>(op: &'a OpDef, name: &str) -> Option<&'a AttrDef> {
    op.attr.iter().find(|a| a.name == name)
}

fn allowed_list(attr: &AttrDef) -> Option<ListValue> {
    attr.allowed_values.as_ref().map(|v| match &v.value {
        Some(Value::List(l)) => (**l).clone(),
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
