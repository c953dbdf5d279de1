//! One table per kind of per-op attribute (see [`crate::op_attr`]).

use crate::op_attr::{ErasedAttr, OpAttr};
use crate::origin::{EntryState, Origin, OwnerId};
use crate::{Result, Status};
use std::collections::HashMap;
use std::sync::Arc;

struct AttrEntry {
    value: ErasedAttr,
    state: EntryState,
}

/// The values of one attribute kind, by op name.
pub(super) struct AttrTable {
    name: &'static str,
    entries: HashMap<String, AttrEntry>,
}

impl AttrTable {
    pub(super) fn new(name: &'static str) -> AttrTable {
        AttrTable {
            name,
            entries: HashMap::new(),
        }
    }

    pub(super) fn name(&self) -> &'static str {
        self.name
    }

    /// `AlreadyExists` if `op` has a different value than `value`.
    pub(super) fn check(&self, op: &str, value: &ErasedAttr, origin: &Origin) -> Result<()> {
        match self.entries.get(op) {
            Some(e) if !e.value.same_as(value) && !e.state.origins().contains(origin) => {
                Err(Status::already_exists(format!(
                    "Op '{op}' already has a {} (registered by {}); a different one from {origin} \
                     cannot replace it",
                    self.name,
                    e.state.describe_origins()
                )))
            }
            _ => Ok(()),
        }
    }

    /// Inserts `value` for `op` (after [`check`](Self::check)): an existing
    /// entry only gains the origin.
    pub(super) fn insert(&mut self, op: &str, value: ErasedAttr, origin: Origin) {
        let entry = self
            .entries
            .entry(op.to_string())
            .or_insert_with(|| AttrEntry {
                value,
                state: EntryState::default(),
            });
        entry.state.add_origin(origin);
    }

    pub(super) fn get<A: OpAttr>(&self, op: &str) -> Option<Arc<A::Value>> {
        self.entries.get(op)?.value.get::<A>()
    }

    pub(super) fn has(&self, op: &str) -> bool {
        self.entries.contains_key(op)
    }

    pub(super) fn origins(&self, op: &str) -> Vec<Origin> {
        self.entries
            .get(op)
            .map(|e| e.state.origins())
            .unwrap_or_default()
    }

    /// The ops with a value, sorted.
    pub(super) fn ops(&self) -> Vec<String> {
        let mut ops: Vec<String> = self.entries.keys().cloned().collect();
        ops.sort();
        ops
    }

    /// Removes `op`'s value, whoever set it; whether there was one.
    pub(super) fn remove(&mut self, op: &str) -> bool {
        self.entries.remove(op).is_some()
    }

    /// Removes `owner`'s values; how many were removed.
    pub(super) fn unload(&mut self, owner: OwnerId) -> usize {
        let mut removed = 0;
        self.entries.retain(|_, e| {
            let gone = e.state.has_owner(owner) && e.state.remove_owner(owner);
            removed += usize::from(gone);
            !gone
        });
        removed
    }
}
