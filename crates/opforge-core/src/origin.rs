//! Who registered a registry entry, and where: [`OwnerId`], [`Origin`], and
//! the liveness state ([`EntryState`]) shared by an entry and everyone
//! holding it (a kernel registration, a graph node). Below both the kernel
//! table and the registry, so `kernel` need not import `registry`; the
//! registry re-exports these types.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// Who provides a registry entry: the code compiled into this binary
/// ([`OwnerId::BUILTIN`]), or a library loaded at run time (an id from
/// [`Registry::add_owner`](crate::registry::Registry::add_owner)).
/// [`Registry::unload`](crate::registry::Registry::unload) removes everything one
/// owner registered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OwnerId(pub(crate) u64);

impl OwnerId {
    /// The code linked into this binary (static registrations, and run-time
    /// registrations made without a library).
    pub const BUILTIN: OwnerId = OwnerId(0);

    /// The id as a number (0 is [`OwnerId::BUILTIN`]).
    pub fn get(self) -> u64 {
        self.0
    }
}

/// Where a registry entry came from: its owner (by id and name) and the
/// place of the registration (`file.rs:12` for code in this binary, the
/// library's path for a loaded library).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Origin {
    owner: OwnerId,
    owner_name: Arc<str>,
    location: Arc<str>,
}

/// The name of [`OwnerId::BUILTIN`] in messages.
pub const BUILTIN_NAME: &str = "built-in";

impl Origin {
    /// An origin of `owner` (called `owner_name` in messages) at `location`.
    pub fn new(
        owner: OwnerId,
        owner_name: impl Into<Arc<str>>,
        location: impl Into<Arc<str>>,
    ) -> Origin {
        Origin {
            owner,
            owner_name: owner_name.into(),
            location: location.into(),
        }
    }

    /// A registration in this binary's code at `location`.
    pub fn builtin(location: impl Into<Arc<str>>) -> Origin {
        Origin::new(OwnerId::BUILTIN, BUILTIN_NAME, location)
    }

    /// The caller's `file:line`, as a built-in origin.
    #[track_caller]
    pub fn caller() -> Origin {
        let at = std::panic::Location::caller();
        Origin::builtin(format!("{}:{}", at.file(), at.line()))
    }

    /// The owner.
    pub fn owner(&self) -> OwnerId {
        self.owner
    }

    /// The owner's name (`built-in`, or a library's name).
    pub fn owner_name(&self) -> &str {
        &self.owner_name
    }

    /// Where the registration was made (`file.rs:12`, or a library's path).
    pub fn location(&self) -> &str {
        &self.location
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.owner == OwnerId::BUILTIN {
            write!(f, "{} ({})", self.owner_name, self.location)
        } else if *self.owner_name == *self.location {
            write!(f, "library '{}'", self.location)
        } else {
            write!(f, "library '{}' ({})", self.owner_name, self.location)
        }
    }
}

/// The origins of one registry entry and whether it is still registered.
/// Runtimes that hold an entry (a graph's node, a built kernel) check
/// [`is_live`](Self::is_live) after the registry's generation changed.
#[derive(Debug)]
pub struct EntryState {
    origins: Mutex<Vec<Origin>>,
    live: AtomicBool,
}

impl Default for EntryState {
    fn default() -> Self {
        EntryState {
            origins: Mutex::new(Vec::new()),
            live: AtomicBool::new(true),
        }
    }
}

impl EntryState {
    /// Whether the entry is still registered (false once every owner that
    /// registered it was unloaded).
    #[inline]
    pub fn is_live(&self) -> bool {
        self.live.load(Ordering::Acquire)
    }

    /// Who registered the entry (after removal: who had, last).
    pub fn origins(&self) -> Vec<Origin> {
        self.origins
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The owners, for messages: `library 'x'` or `built-in (a.rs:3)`, joined.
    pub fn describe_origins(&self) -> String {
        let origins = self.origins();
        if origins.is_empty() {
            return "an unknown origin".to_string();
        }
        origins
            .iter()
            .map(Origin::to_string)
            .collect::<Vec<_>>()
            .join(" and ")
    }

    /// Adds `origin` unless an origin of the same owner is recorded.
    pub(crate) fn add_origin(&self, origin: Origin) {
        let mut origins = self.origins.lock().unwrap_or_else(PoisonError::into_inner);
        if !origins.iter().any(|o| o.owner == origin.owner) {
            origins.push(origin);
        }
    }

    /// Whether `owner` registered the entry.
    pub(crate) fn has_owner(&self, owner: OwnerId) -> bool {
        self.origins
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .any(|o| o.owner == owner)
    }

    /// Drops `owner`'s origin; marks the entry dead (and returns true) when
    /// no owner is left. The last origin is kept for messages.
    pub(crate) fn remove_owner(&self, owner: OwnerId) -> bool {
        let mut origins = self.origins.lock().unwrap_or_else(PoisonError::into_inner);
        if origins.len() == 1 && origins[0].owner == owner {
            self.live.store(false, Ordering::Release);
            return true;
        }
        origins.retain(|o| o.owner != owner);
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_and_removal() {
        let s = EntryState::default();
        let lib = Origin::new(OwnerId(3), "libz.so", "/tmp/libz.so");
        s.add_origin(Origin::builtin("a.rs:1"));
        s.add_origin(Origin::builtin("b.rs:2")); // same owner: kept once
        s.add_origin(lib.clone());
        assert_eq!(s.origins().len(), 2);
        assert_eq!(
            s.describe_origins(),
            "built-in (a.rs:1) and library 'libz.so' (/tmp/libz.so)"
        );
        assert!(s.has_owner(OwnerId(3)));
        assert!(!s.remove_owner(OwnerId::BUILTIN));
        assert!(s.is_live());
        assert!(s.remove_owner(OwnerId(3)));
        assert!(!s.is_live());
        assert_eq!(s.origins(), vec![lib]);
        assert_eq!(
            Origin::new(OwnerId(4), "/x.so", "/x.so").to_string(),
            "library '/x.so'"
        );
    }
}
