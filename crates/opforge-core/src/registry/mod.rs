//! The registry: every op a program knows, with its kernels and its per-op
//! attributes (shape function, gradient, and any kind a crate adds), in one
//! [`Registry`] value.
//!
//! Entries get into a registry in two ways:
//!
//! * **statically**, with [`register_op!`](crate::register_op),
//!   [`register_kernel!`](crate::register_kernel),
//!   [`register_gradient!`](crate::register_gradient) or
//!   [`register_op_attr!`](crate::register_op_attr) next to the code. The
//!   registrations of every linked crate are collected by [`inventory`] and
//!   run into [`Registry::global`] the first time it is used (TensorFlow's
//!   `REGISTER_OP`, `REGISTER_KERNEL_BUILDER`, `REGISTER_OP_GRADIENT`);
//! * **at run time**, with [`Registry::register_op`],
//!   [`Registry::register_kernel`], [`Registry::set_attr`], or through a
//!   [`Registrar`] for a library loaded at run time, into the global
//!   registry or a sandbox made with [`Registry::new`].
//!
//! Every entry records its [`Origin`]: its owner (the code built into this
//! binary, or a run-time library) and where it was registered.
//! [`Registry::unload`] removes everything one owner registered and bumps
//! the registry's [generation](Registry::generation), so runtimes that hold
//! entries (eager kernel caches, sessions) notice and never run removed
//! code. Every table has one duplicate policy: registering an identical
//! entry again is a no-op, a different one under a taken key is
//! `AlreadyExists` naming both origins.
//!
//! A build can be limited to a list of ops (TensorFlow's selective
//! registration, `SHOULD_REGISTER_OP`): build with
//! `OPFORGE_OPS_TO_REGISTER=path/to/ops.txt` (one op name per line) and only
//! the static registrations of those ops (and of their kernels and
//! attributes) run; see [`OPS_TO_REGISTER`].
//!
//! ```
//! use opforge_core::registry::Registry;
//! use opforge_core::{proto, Code};
//!
//! let registry = Registry::new();
//! registry.register_op_def(proto::from_text("name: 'Foo'").unwrap()).unwrap();
//! assert_eq!(registry.lookup("Foo").unwrap().op_def.name, "Foo");
//! let err = registry.lookup("Fooo").unwrap_err();
//! assert_eq!(err.code(), Code::NotFound);
//! assert!(err.message().contains("Did you mean 'Foo'?"), "{err}");
//! ```

mod attr_tables;
mod kernels;
mod messages;
mod statics;
mod verify;

#[cfg(test)]
mod tests;

pub use crate::origin::{EntryState, Origin, OwnerId, BUILTIN_NAME};
pub use kernels::BuiltKernel;
pub use messages::describe_difference;
pub use statics::{StaticKind, StaticRegistration};

use crate::kernel::KernelRegistration;
use crate::op_attr::{ErasedAttr, OpAttr};
use crate::op_def::{validate_op_def, OpDefBuilder};
use crate::proto::{OpDef, OpList};
use crate::{Result, Status};
use attr_tables::AttrTable;
pub use messages::describe_difference_between;
use messages::{did_you_mean, name_op};
use std::any::TypeId;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

mod selective {
    include!(concat!(env!("OUT_DIR"), "/selective_registration.rs"));
}

/// The ops this build registers statically, or `None` for every op.
///
/// Set at build time from the file named by the environment variable
/// `OPFORGE_OPS_TO_REGISTER` (one op name per line, `#` starts a comment).
/// Static registrations of other ops (their OpDefs, kernels and per-op
/// attributes) are skipped; run-time registrations are never filtered.
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

/// A registered op: its OpDef, and who registered it.
///
/// Held in an [`Arc`] by the registry and by every graph node of the op, so
/// lookups are cheap and the data outlives a lock; [`is_live`](Self::is_live)
/// turns false when the op is unloaded.
#[non_exhaustive]
pub struct OpRegistrationData {
    /// The op's interface.
    pub op_def: Arc<OpDef>,
    state: EntryState,
}

impl std::fmt::Debug for OpRegistrationData {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpRegistrationData")
            .field("op_def", &self.op_def)
            .field("origins", &self.state.origins())
            .finish()
    }
}

impl OpRegistrationData {
    /// The registration data of `op_def` (not yet in any registry).
    pub fn new(op_def: OpDef) -> OpRegistrationData {
        OpRegistrationData {
            op_def: Arc::new(op_def),
            state: EntryState::default(),
        }
    }

    /// Who registered the op, and whether it still is registered.
    pub fn state(&self) -> &EntryState {
        &self.state
    }

    /// Whether the op is still registered.
    #[inline]
    pub fn is_live(&self) -> bool {
        self.state.is_live()
    }
}

/// What [`Registry::unload`] removed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Unloaded {
    /// The ops removed (sorted).
    pub ops: Vec<String>,
    /// How many kernels were removed.
    pub kernels: usize,
    /// How many per-op attributes were removed.
    pub attrs: usize,
}

impl Unloaded {
    /// Whether nothing was removed.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty() && self.kernels == 0 && self.attrs == 0
    }
}

#[derive(Default)]
struct Tables {
    ops: HashMap<String, Arc<OpRegistrationData>>,
    kernels: HashMap<String, Vec<Arc<KernelRegistration>>>,
    attrs: HashMap<TypeId, AttrTable>,
}

/// Ops, their kernels and their per-op attributes. Thread-safe.
///
/// Most code uses the process-wide [`Registry::global`]; tests and
/// sandboxes may make their own with [`Registry::new`] and hand it to an
/// [`EagerContext`](crate::eager::EagerContext), a
/// [`Graph`](crate::graph::Graph) or a [`Session`](crate::graph::Session).
pub struct Registry {
    tables: RwLock<Tables>,
    generation: AtomicU64,
    owners: Mutex<HashMap<OwnerId, Arc<str>>>,
    next_owner: AtomicU64,
    /// Errors of static registrations, as `file:line: message`.
    static_errors: Mutex<Vec<String>>,
    /// Whether [`verify`](Self::verify) requires kernels (the global registry).
    require_kernels: bool,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("ops", &self.len())
            .field("kernels", &self.kernel_count())
            .field("generation", &self.generation())
            .finish_non_exhaustive()
    }
}

impl Default for Registry {
    fn default() -> Self {
        Registry::new()
    }
}

impl Registry {
    /// An empty registry (no static registrations run into it).
    pub fn new() -> Registry {
        let mut owners = HashMap::new();
        owners.insert(OwnerId::BUILTIN, Arc::from(BUILTIN_NAME));
        Registry {
            tables: RwLock::new(Tables::default()),
            generation: AtomicU64::new(0),
            owners: Mutex::new(owners),
            next_owner: AtomicU64::new(1),
            static_errors: Mutex::new(Vec::new()),
            require_kernels: false,
        }
    }

    /// The process-wide registry. Created on first use, when every static
    /// registration of the linked crates that the build selects runs into
    /// it; the ones that fail are remembered and reported by
    /// [`verify`](Self::verify).
    pub fn global() -> &'static Arc<Registry> {
        static GLOBAL: OnceLock<Arc<Registry>> = OnceLock::new();
        GLOBAL.get_or_init(|| Arc::new(Registry::with_builtins()))
    }

    /// A new registry holding every static registration of the linked
    /// crates that the build selects, as the global registry does: a
    /// sandbox to add to and unload from without touching the global one.
    pub fn with_builtins() -> Registry {
        let mut registry = Registry::new();
        registry.require_kernels = true;
        registry.register_static(inventory::iter::<StaticRegistration>, OPS_TO_REGISTER);
        registry
    }

    fn read(&self) -> RwLockReadGuard<'_, Tables> {
        self.tables.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> RwLockWriteGuard<'_, Tables> {
        self.tables.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs static registrations into this registry, skipping ops that
    /// `ops_to_register` does not select and remembering every failure.
    pub(crate) fn register_static<'a>(
        &self,
        registrations: impl IntoIterator<Item = &'a StaticRegistration>,
        ops_to_register: Option<&[&str]>,
    ) {
        // Registration order is link order; sort so failures (such as two
        // different ops under one name) are reported deterministically.
        let mut registrations: Vec<&StaticRegistration> = registrations.into_iter().collect();
        registrations.sort_by_key(|r| (r.file, r.line));
        for r in registrations {
            let origin = Origin::builtin(r.location());
            let result = match r.kind {
                StaticKind::Op(build) => {
                    let builder = build();
                    if !should_register_op(builder.name(), ops_to_register) {
                        continue;
                    }
                    self.insert_builder(builder, origin)
                }
                StaticKind::Kernel(build) => {
                    let kernel = build();
                    if !should_register_op(&kernel.def.op, ops_to_register) {
                        continue;
                    }
                    self.insert_kernel(kernel, origin)
                }
                StaticKind::Attr { op, make } => {
                    if !should_register_op(op, ops_to_register) {
                        continue;
                    }
                    self.insert_attr(op, make(), origin)
                }
            };
            if let Err(e) = result {
                self.static_errors
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(format!("{}: {e}", r.location()));
            }
        }
    }

    // ---- owners and generations ------------------------------------------

    /// A new owner for the entries of a run-time library called `name`
    /// (its path, usually); register them through [`registrar`](Self::registrar).
    pub fn add_owner(&self, name: impl Into<Arc<str>>) -> OwnerId {
        let id = OwnerId(self.next_owner.fetch_add(1, Ordering::Relaxed));
        self.owners
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id, name.into());
        id
    }

    /// The name of an owner (`None` for an unknown or unloaded one).
    pub fn owner_name(&self, owner: OwnerId) -> Option<Arc<str>> {
        self.owners
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&owner)
            .cloned()
    }

    /// Registers entries as `owner`, each with origin `location` (a
    /// library's path).
    pub fn registrar(&self, owner: OwnerId, location: &str) -> Registrar<'_> {
        let name = self
            .owner_name(owner)
            .unwrap_or_else(|| Arc::from(format!("owner {}", owner.0)));
        Registrar {
            registry: self,
            origin: Origin::new(owner, name, location),
        }
    }

    /// A number that changes whenever entries are removed (see
    /// [`unload`](Self::unload)): a runtime that holds entries compares it
    /// with the number it saw, and re-checks its entries when it changed.
    #[inline]
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Removes everything `owner` registered (entries other owners also
    /// registered stay, theirs), and bumps the [generation](Self::generation)
    /// if anything was removed. Removed entries are marked dead, so graphs,
    /// sessions and kernel caches that hold them fail cleanly instead of
    /// running them.
    pub fn unload(&self, owner: OwnerId) -> Unloaded {
        let mut t = self.write();
        let mut out = Unloaded::default();
        for (name, op) in &t.ops {
            if op.state.has_owner(owner) && op.state.remove_owner(owner) {
                out.ops.push(name.clone());
            }
        }
        t.ops.retain(|_, op| op.is_live());
        for list in t.kernels.values_mut() {
            for k in list.iter() {
                if k.state().has_owner(owner) && k.state().remove_owner(owner) {
                    out.kernels += 1;
                }
            }
            list.retain(|k| k.is_live());
        }
        t.kernels.retain(|_, list| !list.is_empty());
        for table in t.attrs.values_mut() {
            out.attrs += table.unload(owner);
        }
        drop(t);
        out.ops.sort();
        if !out.is_empty() {
            self.generation.fetch_add(1, Ordering::AcqRel);
        }
        if owner != OwnerId::BUILTIN {
            self.owners
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&owner);
        }
        out
    }

    // ---- ops --------------------------------------------------------------

    /// Finalizes `builder` and registers the op with the per-op attributes
    /// the builder carries (its shape function, ...), as code built into
    /// this binary (origin: the caller's `file:line`).
    ///
    /// The OpDef is validated first (`InvalidArgument` if it is not valid;
    /// errors name the op). Registering an identical OpDef again does
    /// nothing; a different OpDef under a taken name is `AlreadyExists`,
    /// with the first difference and both origins in the message.
    #[track_caller]
    pub fn register_op(&self, builder: OpDefBuilder) -> Result<()> {
        self.insert_builder(builder, Origin::caller())
    }

    /// Registers an OpDef (see [`register_op`](Self::register_op)).
    #[track_caller]
    pub fn register_op_def(&self, op_def: OpDef) -> Result<()> {
        self.insert_op(op_def, &[], Origin::caller())
    }

    pub(crate) fn insert_builder(&self, builder: OpDefBuilder, origin: Origin) -> Result<()> {
        let op_def = builder.finalize().map_err(|e| name_op(e, builder.name()))?;
        self.insert_op(op_def, builder.op_attrs(), origin)
    }

    /// Adds an op and its attributes, all or nothing.
    pub(crate) fn insert_op(
        &self,
        op_def: OpDef,
        attrs: &[ErasedAttr],
        origin: Origin,
    ) -> Result<()> {
        validate_op_def(&op_def).map_err(|e| name_op(e, &op_def.name))?;
        let mut t = self.write();
        let existing = t.ops.get(&op_def.name).cloned();
        if let Some(existing) = &existing {
            if *existing.op_def != op_def {
                return Err(Status::already_exists(format!(
                    "Op with name '{}' is already registered with a different definition: {} \
                     (registered by {}; this registration by {origin})",
                    op_def.name,
                    describe_difference(&existing.op_def, &op_def),
                    existing.state.describe_origins(),
                )));
            }
        }
        for attr in attrs {
            if let Some(table) = t.attrs.get(&attr.kind()) {
                table.check(&op_def.name, attr, &origin)?;
            }
        }
        let name = op_def.name.clone();
        match existing {
            Some(existing) => existing.state.add_origin(origin.clone()),
            None => {
                let data = OpRegistrationData::new(op_def);
                data.state.add_origin(origin.clone());
                t.ops.insert(name.clone(), Arc::new(data));
            }
        }
        for attr in attrs {
            t.attrs
                .entry(attr.kind())
                .or_insert_with(|| AttrTable::new(attr.name()))
                .insert(&name, attr.clone(), origin.clone());
        }
        Ok(())
    }

    /// The registration of op `name`, or `NotFound` with TensorFlow's
    /// wording ("Op type not registered '...'"), the closest registered
    /// names, and a hint about op libraries.
    pub fn lookup(&self, name: &str) -> Result<Arc<OpRegistrationData>> {
        let t = self.read();
        if let Some(data) = t.ops.get(name) {
            return Ok(Arc::clone(data));
        }
        let mut message =
            format!("Op type not registered '{name}' in binary running on this host.");
        let suggestions = did_you_mean(name, t.ops.keys().map(String::as_str));
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
        if t.ops.is_empty() {
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
        Ok(OpDef::clone(&self.lookup(name)?.op_def))
    }

    /// The names of every registered op, sorted.
    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.read().ops.keys().cloned().collect();
        names.sort();
        names
    }

    /// How many ops are registered.
    pub fn len(&self) -> usize {
        self.read().ops.len()
    }

    /// Whether no op is registered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every registered OpDef, sorted by name.
    pub fn op_list(&self) -> OpList {
        let mut op: Vec<OpDef> = self
            .read()
            .ops
            .values()
            .map(|d| OpDef::clone(&d.op_def))
            .collect();
        op.sort_by(|a, b| a.name.cmp(&b.name));
        OpList { op }
    }

    /// The ops `owner` registered, sorted.
    pub fn ops_of(&self, owner: OwnerId) -> Vec<String> {
        let mut names: Vec<String> = self
            .read()
            .ops
            .iter()
            .filter(|(_, d)| d.state.has_owner(owner))
            .map(|(n, _)| n.clone())
            .collect();
        names.sort();
        names
    }

    // ---- per-op attributes ------------------------------------------------

    /// Sets op `op`'s attribute of kind `A`, as code built into this binary.
    /// The op need not be registered yet ([`verify`](Self::verify) reports
    /// attributes of ops that never are). Setting the same value again does
    /// nothing; a different one is `AlreadyExists` naming both origins.
    #[track_caller]
    pub fn set_attr<A: OpAttr>(&self, op: &str, value: Arc<A::Value>) -> Result<()> {
        self.insert_attr(op, ErasedAttr::new::<A>(value), Origin::caller())
    }

    pub(crate) fn insert_attr(&self, op: &str, attr: ErasedAttr, origin: Origin) -> Result<()> {
        let mut t = self.write();
        let table = t
            .attrs
            .entry(attr.kind())
            .or_insert_with(|| AttrTable::new(attr.name()));
        table.check(op, &attr, &origin)?;
        table.insert(op, attr, origin);
        Ok(())
    }

    pub(crate) fn replace_attr(&self, op: &str, attr: ErasedAttr, origin: Origin) -> Result<bool> {
        let replaced = {
            let mut t = self.write();
            let table = t
                .attrs
                .entry(attr.kind())
                .or_insert_with(|| AttrTable::new(attr.name()));
            let replaced = table.remove(op);
            table.insert(op, attr, origin);
            replaced
        };
        if replaced {
            // Caches holding the old value must look again.
            self.generation.fetch_add(1, Ordering::AcqRel);
        }
        Ok(replaced)
    }

    /// Op `op`'s attribute of kind `A`, if set.
    pub fn attr<A: OpAttr>(&self, op: &str) -> Option<Arc<A::Value>> {
        self.read().attrs.get(&TypeId::of::<A>())?.get::<A>(op)
    }

    /// Who set op `op`'s attribute of kind `A`.
    pub fn attr_origins<A: OpAttr>(&self, op: &str) -> Vec<Origin> {
        self.read()
            .attrs
            .get(&TypeId::of::<A>())
            .map(|t| t.origins(op))
            .unwrap_or_default()
    }

    /// The ops that have an attribute of kind `A`, sorted.
    pub fn ops_with_attr<A: OpAttr>(&self) -> Vec<String> {
        self.read()
            .attrs
            .get(&TypeId::of::<A>())
            .map(AttrTable::ops)
            .unwrap_or_default()
    }

    /// The names of the attribute kinds op `op` has, sorted.
    pub fn attr_names(&self, op: &str) -> Vec<&'static str> {
        let mut names: Vec<&'static str> = self
            .read()
            .attrs
            .values()
            .filter(|t| t.has(op))
            .map(AttrTable::name)
            .collect();
        names.sort_unstable();
        names
    }
}

/// Registers entries for one owner (a run-time library) with one origin:
/// what a library's init function gets. See [`Registry::registrar`].
pub struct Registrar<'r> {
    registry: &'r Registry,
    origin: Origin,
}

impl Registrar<'_> {
    /// The origin given to every entry.
    pub fn origin(&self) -> &Origin {
        &self.origin
    }

    /// Registers an op with the attributes its builder carries.
    pub fn op(&self, builder: OpDefBuilder) -> Result<()> {
        self.registry.insert_builder(builder, self.origin.clone())
    }

    /// Registers an OpDef.
    pub fn op_def(&self, op_def: OpDef) -> Result<()> {
        self.registry.insert_op(op_def, &[], self.origin.clone())
    }

    /// Registers a kernel.
    pub fn kernel(&self, kernel: KernelRegistration) -> Result<()> {
        self.registry.insert_kernel(kernel, self.origin.clone())
    }

    /// Sets a per-op attribute.
    pub fn set_attr<A: OpAttr>(&self, op: &str, value: Arc<A::Value>) -> Result<()> {
        self.registry
            .insert_attr(op, ErasedAttr::new::<A>(value), self.origin.clone())
    }

    /// Sets a per-op attribute whose kind was erased.
    pub fn set_erased_attr(&self, op: &str, attr: ErasedAttr) -> Result<()> {
        self.registry.insert_attr(op, attr, self.origin.clone())
    }

    /// Sets a per-op attribute, replacing the one set before (by anyone):
    /// an explicit override, as Python's `RegisterGradient(...,
    /// override=True)`. Whether there was one.
    pub fn replace_attr<A: OpAttr>(&self, op: &str, value: Arc<A::Value>) -> Result<bool> {
        self.registry
            .replace_attr(op, ErasedAttr::new::<A>(value), self.origin.clone())
    }
}
