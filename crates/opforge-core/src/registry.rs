//! The op registry: every op a binary knows, by name.
//!
//! Ops get into a registry in two ways:
//!
//! * **statically**, with [`register_op!`](crate::register_op) next to the
//!   op's code. The registrations of every linked crate are collected by
//!   [`inventory`] and run into [`OpRegistry::global`] the first time it is
//!   used (TensorFlow's `REGISTER_OP`);
//! * **at run time**, with [`OpRegistry::register`] or
//!   [`OpRegistry::register_builder`], e.g. for ops read from a file or in a
//!   test's private [`OpRegistry::new`].
//!
//! A build can be limited to a list of ops (TensorFlow's selective
//! registration, `SHOULD_REGISTER_OP`): build with
//! `OPFORGE_OPS_TO_REGISTER=path/to/ops.txt` (one op name per line) and only
//! the static registrations of those ops run; see [`OPS_TO_REGISTER`].
//!
//! ```
//! use opforge_core::registry::OpRegistry;
//! use opforge_core::{proto, Code};
//!
//! let registry = OpRegistry::new();
//! registry.register(proto::from_text("name: 'Foo'").unwrap()).unwrap();
//! assert_eq!(registry.lookup("Foo").unwrap().op_def.name, "Foo");
//! let err = registry.lookup("Fooo").unwrap_err();
//! assert_eq!(err.code(), Code::NotFound);
//! assert!(err.message().contains("Did you mean 'Foo'?"), "{err}");
//! ```

use crate::op_def::{validate_op_def, OpDefBuilder};
use crate::proto::{self, OpDef, OpList};
use crate::shape_inference::ShapeFn;
use crate::{Result, Status};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError, RwLock};

mod selective {
    include!(concat!(env!("OUT_DIR"), "/selective_registration.rs"));
}

/// The ops this build registers statically, or `None` for every op.
///
/// Set at build time from the file named by the environment variable
/// `OPFORGE_OPS_TO_REGISTER` (one op name per line, `#` starts a comment).
/// Static registrations ([`register_op!`](crate::register_op)) of other ops
/// are skipped; run-time registrations are never filtered.
pub const OPS_TO_REGISTER: Option<&[&str]> = selective::OPS_TO_REGISTER;

/// Whether a static registration of op `name` runs when the build selects
/// `ops_to_register` (`None`: every op), as TensorFlow's `SHOULD_REGISTER_OP`.
///
/// ```
/// use opforge_core::registry::should_register_op;
/// assert!(should_register_op("ZeroOut", None));
/// assert!(should_register_op("ZeroOut", Some(&["ZeroOut"])));
/// assert!(!should_register_op("ZeroOut", Some(&["AddV2"])));
/// ```
pub fn should_register_op(name: &str, ops_to_register: Option<&[&str]>) -> bool {
    ops_to_register.is_none_or(|ops| ops.contains(&name))
}

/// Everything registered for one op.
///
/// Held in an [`Arc`] by the registry, so lookups are cheap and the data
/// outlives a lock. More fields (such as a gradient) will be added; build
/// one with [`OpRegistrationData::new`].
#[derive(Clone)]
#[non_exhaustive]
pub struct OpRegistrationData {
    /// The op's interface.
    pub op_def: OpDef,
    /// The op's shape function, if it has one.
    pub shape_fn: Option<ShapeFn>,
}

impl std::fmt::Debug for OpRegistrationData {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpRegistrationData")
            .field("op_def", &self.op_def)
            .field("shape_fn", &self.shape_fn.as_ref().map(|_| "<fn>"))
            .finish()
    }
}

impl OpRegistrationData {
    /// The registration data of `op_def`, without a shape function.
    pub fn new(op_def: OpDef) -> OpRegistrationData {
        OpRegistrationData {
            op_def,
            shape_fn: None,
        }
    }
}

/// One static op registration, made by [`register_op!`](crate::register_op)
/// and collected by [`inventory`].
#[derive(Clone, Copy, Debug)]
pub struct StaticOpRegistration {
    build: fn() -> OpDefBuilder,
    file: &'static str,
    line: u32,
}

impl StaticOpRegistration {
    /// A registration that builds its op with `build`; `file` and `line`
    /// say where it was written (for error messages).
    pub const fn new(build: fn() -> OpDefBuilder, file: &'static str, line: u32) -> Self {
        StaticOpRegistration { build, file, line }
    }

    /// A fresh builder of the op.
    pub fn builder(&self) -> OpDefBuilder {
        (self.build)()
    }

    /// The source file of the registration.
    pub fn file(&self) -> &'static str {
        self.file
    }

    /// The line of the registration in [`file`](Self::file).
    pub fn line(&self) -> u32 {
        self.line
    }
}

inventory::collect!(StaticOpRegistration);

/// Registers an op statically, next to its code: the argument is an
/// expression that evaluates to an [`OpDefBuilder`]. The op is added to
/// [`OpRegistry::global`] when that is first used (if the build's
/// [selective registration](crate::registry::OPS_TO_REGISTER) includes it).
///
/// The expression is evaluated inside a closure without captures, so it may
/// only use constants and calls.
///
/// ```
/// use opforge_core::{register_op, OpDefBuilder};
///
/// register_op!(OpDefBuilder::new("MyDocOp")
///     .input("x: float")
///     .output("y: float")
///     .doc("Returns its input."));
/// ```
///
/// A registration that fails (a bad spec, or a different op under a taken
/// name) does not panic: it is reported by
/// [`OpRegistry::check_startup`].
#[macro_export]
macro_rules! register_op {
    ($builder:expr $(,)?) => {
        $crate::inventory::submit! {
            $crate::registry::StaticOpRegistration::new(|| $builder, file!(), line!())
        }
    };
}

/// A set of registered ops, keyed by op name. Thread-safe.
///
/// Most code uses the process-wide [`OpRegistry::global`]; tests and
/// sandboxes may make their own with [`OpRegistry::new`].
#[derive(Debug, Default)]
pub struct OpRegistry {
    ops: RwLock<HashMap<String, Arc<OpRegistrationData>>>,
    /// Errors of static registrations, as `file:line: message`.
    static_errors: Mutex<Vec<String>>,
}

impl OpRegistry {
    /// An empty registry (no static registrations run into it).
    pub fn new() -> OpRegistry {
        OpRegistry::default()
    }

    /// The process-wide registry. Created on first use, when every static
    /// registration ([`register_op!`](crate::register_op)) of the linked
    /// crates that the build selects runs into it; the ones that fail are
    /// remembered and reported by [`check_startup`](Self::check_startup).
    pub fn global() -> &'static OpRegistry {
        static GLOBAL: OnceLock<OpRegistry> = OnceLock::new();
        GLOBAL.get_or_init(|| {
            let registry = OpRegistry::new();
            registry.register_static(inventory::iter::<StaticOpRegistration>, OPS_TO_REGISTER);
            registry
        })
    }

    /// Runs static registrations into this registry, skipping ops that
    /// `ops_to_register` does not select and remembering every failure.
    fn register_static<'a>(
        &self,
        registrations: impl IntoIterator<Item = &'a StaticOpRegistration>,
        ops_to_register: Option<&[&str]>,
    ) {
        // Registration order is link order; sort so failures (such as two
        // different ops under one name) are reported deterministically.
        let mut registrations: Vec<&StaticOpRegistration> = registrations.into_iter().collect();
        registrations.sort_by_key(|r| (r.file, r.line));
        for registration in registrations {
            let builder = registration.builder();
            if !should_register_op(builder.name(), ops_to_register) {
                continue;
            }
            if let Err(e) = self.register_builder(builder) {
                self.static_errors
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(format!(
                        "{}:{}: {}",
                        registration.file, registration.line, e
                    ));
            }
        }
    }

    /// Adds an op.
    ///
    /// The OpDef is validated first (`InvalidArgument` if it is not valid).
    /// Registering an op that is already registered with an identical OpDef
    /// does nothing; a different OpDef under a taken name is
    /// `AlreadyExists`, with the first difference in the message.
    pub fn register(&self, op_def: OpDef) -> Result<()> {
        self.register_data(OpRegistrationData::new(op_def))
    }

    /// Adds an op with its shape function (see [`register`](Self::register)).
    /// Re-registering an identical OpDef keeps the first registration.
    pub fn register_data(&self, data: OpRegistrationData) -> Result<()> {
        let op_def = &data.op_def;
        validate_op_def(op_def).map_err(|e| name_op(e, &op_def.name))?;
        let mut ops = self.ops.write().unwrap_or_else(PoisonError::into_inner);
        if let Some(existing) = ops.get(&op_def.name) {
            if existing.op_def == *op_def {
                return Ok(());
            }
            return Err(Status::already_exists(format!(
                "Op with name '{}' is already registered with a different definition: {}",
                op_def.name,
                describe_difference(&existing.op_def, op_def)
            )));
        }
        ops.insert(op_def.name.clone(), Arc::new(data));
        Ok(())
    }

    /// Finalizes `builder` and registers the OpDef (see
    /// [`register`](Self::register)); errors name the op.
    pub fn register_builder(&self, builder: OpDefBuilder) -> Result<()> {
        let op_def = builder.finalize().map_err(|e| name_op(e, builder.name()))?;
        self.register_data(OpRegistrationData {
            op_def,
            shape_fn: builder.shape_fn().cloned(),
        })
    }

    /// The registration of op `name`, or `NotFound` with TensorFlow's
    /// wording ("Op type not registered '...'"), the closest registered
    /// names, and a hint about op libraries.
    pub fn lookup(&self, name: &str) -> Result<Arc<OpRegistrationData>> {
        let ops = self.ops.read().unwrap_or_else(PoisonError::into_inner);
        if let Some(data) = ops.get(name) {
            return Ok(Arc::clone(data));
        }
        let mut message =
            format!("Op type not registered '{name}' in binary running on this host.");
        let suggestions = did_you_mean(name, ops.keys().map(String::as_str));
        match suggestions.as_slice() {
            [] => {}
            [one] => message.push_str(&format!(" Did you mean '{one}'?")),
            many => message.push_str(&format!(
                " Did you mean one of {}?",
                many.iter()
                    .map(|s| format!("'{s}'"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        }
        if ops.is_empty() {
            message.push_str(" No ops are registered at all.");
        }
        message.push_str(
            " Make sure the op is registered in this binary: if it is defined in an op \
             library, that library must be linked or loaded before the op is used.",
        );
        Err(Status::not_found(message))
    }

    /// The OpDef of op `name` (a copy); `NotFound` as [`lookup`](Self::lookup).
    pub fn op_def(&self, name: &str) -> Result<OpDef> {
        Ok(self.lookup(name)?.op_def.clone())
    }

    /// The names of every registered op, sorted.
    pub fn names(&self) -> Vec<String> {
        let ops = self.ops.read().unwrap_or_else(PoisonError::into_inner);
        let mut names: Vec<String> = ops.keys().cloned().collect();
        names.sort();
        names
    }

    /// How many ops are registered.
    pub fn len(&self) -> usize {
        self.ops
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// Whether no op is registered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every registered OpDef, sorted by name.
    pub fn op_list(&self) -> OpList {
        let ops = self.ops.read().unwrap_or_else(PoisonError::into_inner);
        let mut op: Vec<OpDef> = ops.values().map(|d| d.op_def.clone()).collect();
        op.sort_by(|a, b| a.name.cmp(&b.name));
        OpList { op }
    }

    /// Checks that the registry is usable: `Internal`, listing every
    /// problem, if no op is registered or if any static registration
    /// failed. Binaries call this at startup so a broken op definition is
    /// loud, not a "not registered" error later.
    pub fn check_startup(&self) -> Result<()> {
        let mut problems: Vec<String> = self
            .static_errors
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if self.is_empty() {
            problems.push(
                "no ops are registered: the op library crates are not linked into this \
                 binary (call e.g. `opforge_ops::link()`), or the build's selective \
                 registration (OPFORGE_OPS_TO_REGISTER) selects no registered op"
                    .to_string(),
            );
        }
        if problems.is_empty() {
            return Ok(());
        }
        let mut message = format!(
            "the op registry is broken ({} problem{}):",
            problems.len(),
            if problems.len() == 1 { "" } else { "s" }
        );
        for problem in &problems {
            message.push_str("\n  - ");
            message.push_str(&problem.replace('\n', "\n    "));
        }
        Err(Status::internal(message))
    }
}

/// Puts "Op 'name': " in front of an error that does not already name the
/// op (the builder's and validator's errors start with "name: ").
fn name_op(e: Status, name: &str) -> Status {
    if e.message().starts_with(&format!("{name}: ")) || e.message().contains(&format!("'{name}'")) {
        e
    } else {
        e.prepend(format!("Op '{name}': "))
    }
}

/// A short description of how two OpDefs differ: the path of the first
/// differing field (in the JSON mapping) and both values.
fn describe_difference(registered: &OpDef, new: &OpDef) -> String {
    let a = proto::to_json(registered);
    let b = proto::to_json(new);
    match first_difference(&a, &b, String::new()) {
        Some(diff) => diff,
        // The JSON mappings agree, but the messages differ (e.g. unknown
        // fields): fall back to both definitions on one line each.
        None => format!(
            "registered {{{}}}, new {{{}}}",
            proto::to_short_text(registered),
            proto::to_short_text(new)
        ),
    }
}

fn first_difference(a: &serde_json::Value, b: &serde_json::Value, path: String) -> Option<String> {
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
                        if let Some(d) = first_difference(u, v, child) {
                            return Some(d);
                        }
                    }
                    (Some(u), None) => {
                        return Some(format!(
                            "{child} is {} in the registered op, unset in the new one",
                            short(u)
                        ))
                    }
                    (None, Some(v)) => {
                        return Some(format!(
                            "{child} is unset in the registered op, {} in the new one",
                            short(v)
                        ))
                    }
                    (None, None) => {}
                }
            }
            None
        }
        (Value::Array(x), Value::Array(y)) => {
            for (i, (u, v)) in x.iter().zip(y).enumerate() {
                if let Some(d) = first_difference(u, v, format!("{path}[{i}]")) {
                    return Some(d);
                }
            }
            Some(format!(
                "{} has {} entr{} in the registered op, {} in the new one",
                at(&path),
                x.len(),
                if x.len() == 1 { "y" } else { "ies" },
                y.len()
            ))
        }
        _ => Some(format!(
            "{} is {} in the registered op, {} in the new one",
            at(&path),
            short(a),
            short(b)
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
fn did_you_mean<'a>(name: &str, candidates: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Code;

    fn op(text: &str) -> OpDef {
        proto::from_text(text).unwrap()
    }

    fn zero_out() -> OpDefBuilder {
        OpDefBuilder::new("RegistryTestZeroOut")
            .attr("T: {float, int32} = DT_INT32")
            .input("to_zero: T")
            .output("zeroed: T")
    }

    register_op!(OpDefBuilder::new("RegistryTestStaticOp")
        .input("x: float")
        .output("y: float"));

    #[test]
    fn register_and_lookup() {
        let r = OpRegistry::new();
        assert!(r.is_empty());
        r.register(op("name: 'Foo' input_arg { name: 'x' type: DT_FLOAT }"))
            .unwrap();
        r.register_builder(zero_out()).unwrap();
        assert_eq!(r.len(), 2);
        assert!(!r.is_empty());
        let data = r.lookup("Foo").unwrap();
        assert_eq!(data.op_def.input_arg[0].name, "x");
        assert_eq!(
            r.op_def("RegistryTestZeroOut").unwrap().output_arg[0].name,
            "zeroed"
        );
        assert_eq!(r.names(), vec!["Foo", "RegistryTestZeroOut"]);
        let list = r.op_list();
        assert_eq!(
            list.op.iter().map(|o| o.name.as_str()).collect::<Vec<_>>(),
            ["Foo", "RegistryTestZeroOut"]
        );
        r.check_startup().unwrap();
    }

    #[test]
    fn identical_re_registration_is_ok() {
        let r = OpRegistry::new();
        r.register_builder(zero_out()).unwrap();
        r.register_builder(zero_out()).unwrap();
        r.register(r.op_def("RegistryTestZeroOut").unwrap())
            .unwrap();
        assert_eq!(r.len(), 1);
    }

    #[test]
    fn conflicting_re_registration_is_already_exists() {
        let r = OpRegistry::new();
        r.register(op("name: 'Foo' input_arg { name: 'x' type: DT_FLOAT }"))
            .unwrap();
        let err = r
            .register(op("name: 'Foo' input_arg { name: 'x' type: DT_INT32 }"))
            .unwrap_err();
        assert_eq!(err.code(), Code::AlreadyExists);
        let msg = err.message();
        assert!(msg.contains("'Foo'"), "{msg}");
        assert!(msg.contains("input_arg[0].type"), "{msg}");
        assert!(
            msg.contains("DT_FLOAT") && msg.contains("DT_INT32"),
            "{msg}"
        );

        let err = r
            .register(op(
                "name: 'Foo' input_arg { name: 'x' type: DT_FLOAT } is_stateful: true",
            ))
            .unwrap_err();
        assert!(err.message().contains("is_stateful"), "{err}");
        let err = r
            .register(op(
                "name: 'Foo' input_arg { name: 'x' type: DT_FLOAT } input_arg { name: 'y' type: DT_FLOAT }",
            ))
            .unwrap_err();
        assert!(err.message().contains("input_arg has 1 entry"), "{err}");
        // The first registration is kept.
        assert_eq!(r.op_def("Foo").unwrap().input_arg.len(), 1);
    }

    #[test]
    fn invalid_op_defs_are_rejected() {
        let r = OpRegistry::new();
        let err = r.register(op("name: 'lower_case'")).unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument);
        let err = r
            .register_builder(OpDefBuilder::new("BadSpec").input("x: not a type"))
            .unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument);
        assert!(err.message().contains("BadSpec"), "{err}");
        assert!(r.is_empty());
    }

    #[test]
    fn not_found_suggests_close_names() {
        let r = OpRegistry::new();
        for name in ["Foo", "ZeroOut", "AddV2", "Add", "MatMul", "BatchMatMulV2"] {
            r.register(op(&format!("name: '{name}'"))).unwrap();
        }
        let err = r.lookup("Fooo").unwrap_err();
        assert_eq!(err.code(), Code::NotFound);
        let msg = err.message();
        assert!(
            msg.starts_with("Op type not registered 'Fooo' in binary running on"),
            "{msg}"
        );
        assert!(msg.contains("Did you mean 'Foo'?"), "{msg}");
        assert!(msg.contains("op library"), "{msg}");

        let msg = r.lookup("zeroout").unwrap_err().message().to_string();
        assert!(msg.contains("Did you mean 'ZeroOut'?"), "{msg}");
        let msg = r.lookup("AddV3").unwrap_err().message().to_string();
        assert!(msg.contains("Did you mean one of 'AddV2', 'Add'?"), "{msg}");
        let msg = r.lookup("Conv2D").unwrap_err().message().to_string();
        assert!(!msg.contains("Did you mean"), "{msg}");
        let msg = r.lookup("batchmatmulv2").unwrap_err().message().to_string();
        assert!(msg.contains("'BatchMatMulV2'"), "{msg}");
    }

    #[test]
    fn startup_check_fails_loudly_on_an_empty_registry() {
        let err = OpRegistry::new().check_startup().unwrap_err();
        assert_eq!(err.code(), Code::Internal);
        assert!(err.message().contains("no ops are registered"), "{err}");
    }

    #[test]
    fn static_registrations_and_their_failures() {
        let regs = [
            StaticOpRegistration::new(zero_out, "a.rs", 1),
            StaticOpRegistration::new(|| OpDefBuilder::new("Broken").input("x: nope"), "b.rs", 2),
            StaticOpRegistration::new(
                || OpDefBuilder::new("RegistryTestZeroOut").input("x: float"),
                "c.rs",
                3,
            ),
            StaticOpRegistration::new(|| OpDefBuilder::new("Fine"), "d.rs", 4),
        ];
        let r = OpRegistry::new();
        r.register_static(&regs, None);
        assert_eq!(r.names(), ["Fine", "RegistryTestZeroOut"]);
        let err = r.check_startup().unwrap_err();
        assert_eq!(err.code(), Code::Internal);
        let msg = err.message();
        assert!(msg.contains("2 problems"), "{msg}");
        assert!(msg.contains("b.rs:2: ") && msg.contains("Broken"), "{msg}");
        assert!(msg.contains("c.rs:3: ALREADY_EXISTS"), "{msg}");
        assert_eq!(regs[0].file(), "a.rs");
        assert_eq!(regs[0].line(), 1);
        assert_eq!(regs[0].builder().name(), "RegistryTestZeroOut");
    }

    #[test]
    fn selective_registration_filters_static_registrations() {
        assert!(should_register_op("A", None));
        assert!(should_register_op("A", Some(&["B", "A"])));
        assert!(!should_register_op("A", Some(&["B"])));
        assert!(!should_register_op("A", Some(&[])));

        let regs = [
            StaticOpRegistration::new(|| OpDefBuilder::new("Kept"), "a.rs", 1),
            StaticOpRegistration::new(|| OpDefBuilder::new("Skipped"), "a.rs", 2),
            // A broken op that is not selected is not even finalized.
            StaticOpRegistration::new(|| OpDefBuilder::new("Bad").input("x"), "a.rs", 3),
        ];
        let r = OpRegistry::new();
        r.register_static(&regs, Some(&["Kept"]));
        assert_eq!(r.names(), ["Kept"]);
        r.check_startup().unwrap();
        // Run-time registrations are not filtered.
        r.register(op("name: 'Skipped'")).unwrap();
        assert_eq!(r.len(), 2);

        let r = OpRegistry::new();
        r.register_static(&regs, Some(&["Elsewhere"]));
        assert!(r.check_startup().is_err());
    }

    #[test]
    fn global_registry_holds_static_registrations() {
        let global = OpRegistry::global();
        assert!(std::ptr::eq(global, OpRegistry::global()));
        if should_register_op("RegistryTestStaticOp", OPS_TO_REGISTER) {
            let def = global.op_def("RegistryTestStaticOp").unwrap();
            assert_eq!(def.input_arg[0].r#type, crate::DataType::Float as i32);
            global.check_startup().unwrap();
        }
    }

    #[test]
    fn concurrent_registration() {
        let r = Arc::new(OpRegistry::new());
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let r = Arc::clone(&r);
                std::thread::spawn(move || {
                    for i in 0..50 {
                        r.register(op(&format!("name: 'Op{t}x{i}'"))).unwrap();
                        // Every thread also registers the same shared ops.
                        r.register(op(&format!("name: 'Shared{i}'"))).unwrap();
                        assert!(r.lookup(&format!("Shared{i}")).is_ok());
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(r.len(), 8 * 50 + 50);
        let names = r.names();
        assert!(names.windows(2).all(|w| w[0] < w[1]));
    }
}
