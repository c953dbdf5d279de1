//! [`Registry::verify`]: the startup check.

use super::Registry;
use crate::{Result, Status};
use std::sync::PoisonError;

impl Registry {
    /// Checks that the registry is usable: `Internal`, listing every
    /// problem, if a static registration failed, if no op is registered (or,
    /// for the global registry, no kernel), if a kernel or a per-op
    /// attribute (shape function, gradient, ...) names an op that is not
    /// registered, or if a kernel constrains an attr the op does not have as
    /// `type` or `list(type)`. Binaries call this at startup so a broken
    /// registration is loud, not a "not registered" error later.
    pub fn verify(&self) -> Result<()> {
        let mut problems: Vec<String> = self
            .static_errors
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let t = self.read();
        if t.ops.is_empty() {
            problems.push(
                "no ops are registered: the op library crates are not linked into this \
                 binary (call e.g. `opforge_ops::link()`), or the build's selective \
                 registration (OPFORGE_OPS_TO_REGISTER) selects no registered op"
                    .to_string(),
            );
        }
        if self.require_kernels && t.kernels.is_empty() {
            problems.push(
                "no kernels are registered: link the op library crates (e.g. `opforge_ops::link()`)"
                    .to_string(),
            );
        }
        let mut names: Vec<&String> = t.kernels.keys().collect();
        names.sort();
        for name in names {
            let Some(data) = t.ops.get(name) else {
                problems.push(format!(
                    "kernels are registered for op '{name}', which is not a registered op \
                     (register its OpDef with register_op!)"
                ));
                continue;
            };
            for k in &t.kernels[name] {
                for (attr, _) in &k.def.constraints {
                    let ok = data.op_def.attr.iter().any(|a| {
                        &a.name == attr && (a.r#type == "type" || a.r#type == "list(type)")
                    });
                    if !ok {
                        problems.push(format!(
                            "a kernel of op '{name}' ({}) constrains '{attr}', which is not a type attr of the op",
                            k.describe()
                        ));
                    }
                }
            }
        }
        let mut dangling: Vec<(String, &'static str)> = t
            .attrs
            .values()
            .flat_map(|table| table.ops().into_iter().map(|op| (op, table.name())))
            .filter(|(op, _)| !t.ops.contains_key(op))
            .collect();
        dangling.sort();
        for (op, kind) in dangling {
            problems.push(format!(
                "a {kind} is registered for op '{op}', which is not a registered op \
                 (register its OpDef with register_op!)"
            ));
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

    /// `FailedPrecondition` naming the ops of `ops` that are not registered,
    /// for a feature that needs them (`what`, e.g. "autodiff").
    pub fn require_ops(&self, ops: &[&str], what: &str) -> Result<()> {
        let t = self.read();
        let missing: Vec<&str> = ops
            .iter()
            .copied()
            .filter(|op| !t.ops.contains_key(*op))
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        Err(Status::failed_precondition(format!(
            "{what} needs the ops {}, which this registry does not have{}. Link the standard \
             op library (`opforge_ops::link()`), or add them to the build's selective \
             registration (OPFORGE_OPS_TO_REGISTER)",
            missing
                .iter()
                .map(|m| format!("'{m}'"))
                .collect::<Vec<_>>()
                .join(", "),
            if t.ops.is_empty() {
                " (it has no ops at all)"
            } else {
                ""
            }
        )))
    }
}
