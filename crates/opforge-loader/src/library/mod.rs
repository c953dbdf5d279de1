//! Loading and unloading: the [`Loader`], a library's host table and
//! registrar, staging of what init registers, and the commit into the
//! registry under the library's owner.

use crate::decl::DeclGradient;
use crate::grad::{run_grad_fn, GRAD_API};
use crate::host::*;
use crate::kernel::{OutputLike, PluginKernelDef, KERNEL_API};
use crate::manifest::{self, describe_kernel, kernel_key, KernelKey, Manifest};
use crate::shape::{run_shape_fn, SHAPE_API};
use opforge_abi::*;
use opforge_core::autodiff::{Gradient, GradientFn};
use opforge_core::kernel::{KernelDefBuilder, KernelRegistration};
use opforge_core::registry::{describe_difference_between, OwnerId};
use opforge_core::{DataType, OpDefBuilder, Registry, Result, Status};
use std::collections::{BTreeMap, HashMap};
use std::ffi::c_void;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};

/// A loaded library as the runtime holds it: everything that can call into
/// the library (kernel factories and instances, shape functions, foreign
/// outputs) holds an `Arc` of it, so the library is finalised (`fini`) and
/// unmapped exactly when the last of them is gone.
pub(crate) struct LibInner {
    name: String,
    version: String,
    path: PathBuf,
    /// The manifest's `abi.min_host_minor`: kernels that need a newer
    /// field than that (a 1.1 `compute_views` without a 1.0 `compute`)
    /// are refused at registration.
    pub(crate) min_host_minor: u32,
    /// The table init received (its address identifies the library in `log`).
    host: Box<OpforgeHostApi>,
    fini: OpforgePluginFiniFn,
    /// Live kernel instances.
    instances: AtomicUsize,
    /// Live outputs backed by the library's memory (set_output_foreign).
    foreign: AtomicUsize,
    /// What `OpforgeRegistrar*` points to: staging during init, inactive
    /// (FAILED_PRECONDITION) afterwards, alive as long as the library.
    registrar: Mutex<Staging>,
    /// Dropped last: unmaps the library.
    _lib: Option<libloading::Library>,
}

impl LibInner {
    /// `NAME VERSION (PATH)`, for messages.
    pub(crate) fn label(&self) -> String {
        format!("{} {} ({})", self.name, self.version, self.path.display())
    }

    pub(crate) fn instance_created(&self) {
        self.instances.fetch_add(1, Ordering::AcqRel);
    }

    pub(crate) fn instance_destroyed(&self) {
        self.instances.fetch_sub(1, Ordering::AcqRel);
    }

    pub(crate) fn foreign_created(&self) {
        self.foreign.fetch_add(1, Ordering::AcqRel);
    }

    pub(crate) fn foreign_released(&self) {
        self.foreign.fetch_sub(1, Ordering::AcqRel);
    }

    /// What holds the library now.
    fn holders(&self) -> Holders {
        Holders {
            kernel_instances: self.instances.load(Ordering::Acquire),
            foreign_outputs: self.foreign.load(Ordering::Acquire),
        }
    }
}

impl Drop for LibInner {
    fn drop(&mut self) {
        hosts()
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&(self.host_ptr() as usize));
        if let Some(fini) = self.fini {
            // SAFETY: the plugin's fini, called once, when nothing can call
            // into the library any more (every holder of this Arc is gone).
            unsafe { fini() };
        }
        // `lib` drops after this: dlclose.
    }
}

impl LibInner {
    fn host_ptr(&self) -> *const OpforgeHostApi {
        &*self.host
    }
}

/// The host tables of loaded libraries, by address, to name the library in `log`.
fn hosts() -> &'static Mutex<HashMap<usize, String>> {
    static HOSTS: OnceLock<Mutex<HashMap<usize, String>>> = OnceLock::new();
    HOSTS.get_or_init(Default::default)
}

mod host_table;
use host_table::*;

// ---- the loader ------------------------------------------------------------------

/// A loaded library. Loading the same file again (same path, a symlink to
/// it, or a copy with the same content) gives an equal handle.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LibraryHandle {
    owner: OwnerId,
    name: String,
    version: String,
    path: PathBuf,
}

impl LibraryHandle {
    /// The registry owner its entries are registered under.
    pub fn owner(&self) -> OwnerId {
        self.owner
    }

    /// The library's name (from its manifest).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The library's version.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// The canonical path it was loaded from.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl std::fmt::Display for LibraryHandle {
    /// `NAME VERSION (PATH)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {} ({})",
            self.name,
            self.version,
            self.path.display()
        )
    }
}

/// What holds a loaded library's code or memory besides its registry
/// entries ([`Loader::holders`]): while any of these is alive, an unload
/// removes the library's entries but cannot finalise and unmap it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Holders {
    /// Live kernel instances of the library (in sessions, and in the kernel
    /// caches of eager contexts and prepared calls).
    pub kernel_instances: usize,
    /// Live tensors whose memory the library owns (outputs its kernels
    /// made in their own memory, `set_output_foreign`).
    pub foreign_outputs: usize,
}

impl Holders {
    /// Whether nothing holds the library.
    pub fn is_empty(&self) -> bool {
        self.kernel_instances == 0 && self.foreign_outputs == 0
    }
}

impl std::fmt::Display for Holders {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} kernel instances and {} outputs backed by its memory",
            self.kernel_instances, self.foreign_outputs
        )
    }
}

/// What [`Loader::unload`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnloadReport {
    /// The ops removed from the registry.
    pub ops: Vec<String>,
    /// The number of kernels removed.
    pub kernels: usize,
    /// The number of per-op attributes (shape functions, gradients) removed.
    pub attrs: usize,
    /// Whether the library was finalised and unmapped now. `false` while
    /// kernel instances, shape functions or outputs of the library are still
    /// held (sessions built before, eager caches not yet refreshed, tensors
    /// from foreign outputs): it is finalised and closed when the last of
    /// them is dropped. Also `false` when the platform kept the file mapped
    /// after dlclose (e.g. thread-local storage pins it).
    pub unmapped: bool,
    /// Why it was not unmapped, with what to do.
    pub note: Option<String>,
}

struct Loaded {
    handle: LibraryHandle,
    inner: Weak<LibInner>,
    /// Keeps the library alive while it is loaded.
    strong: Arc<LibInner>,
    /// The file's length when it was loaded (to find copies of it).
    len: usize,
    /// What init registered, as manifest records.
    declaration: Vec<serde_json::Value>,
}

/// Loads op libraries into one registry.
pub struct Loader {
    registry: Arc<Registry>,
    loaded: Mutex<Vec<Loaded>>,
    /// Libraries unloaded while something still held them.
    lingering: Mutex<Vec<(PathBuf, Weak<LibInner>)>>,
    /// The ops of unloaded libraries (not registered again since): op ->
    /// `NAME VERSION (PATH)` of the library that had it.
    unloaded_ops: Mutex<HashMap<String, String>>,
}

impl std::fmt::Debug for Loader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let loaded = self.loaded.lock().unwrap_or_else(PoisonError::into_inner);
        f.debug_struct("Loader")
            .field(
                "libraries",
                &loaded.iter().map(|l| &l.handle).collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// Every file mapped by any [`Loader`] of this process, while its library is
/// alive. The dynamic linker maps a file once per process (the same path or
/// inode gives the same handle), so a second `Loader` loading it would run
/// its init again over the first one's globals: that is refused instead.
static MAPPED: Mutex<Vec<(PathBuf, Weak<LibInner>)>> = Mutex::new(Vec::new());

/// `Err` if another `Loader` of this process holds `canonical` mapped.
fn check_not_mapped_elsewhere(canonical: &Path) -> Result<()> {
    let mut mapped = MAPPED.lock().unwrap_or_else(PoisonError::into_inner);
    mapped.retain(|(_, w)| w.strong_count() > 0);
    if mapped.iter().any(|(p, _)| p == canonical) {
        return Err(Status::failed_precondition(format!(
            "op library '{}' is already loaded by another Loader (another registry) of this \
             process; a process maps a file once, so both would share the library's globals. \
             Load it through that Loader, or load a copy of the file",
            canonical.display()
        )));
    }
    Ok(())
}

/// The loaded library of the file at `canonical`: loaded from that path,
/// or (when its content `bytes` is given) from a file with the same
/// content.
fn find_loaded<'a>(
    loaded: &'a [Loaded],
    canonical: &Path,
    bytes: Option<&[u8]>,
) -> Option<&'a Loaded> {
    if let Some(l) = loaded.iter().find(|l| l.handle.path == canonical) {
        return Some(l);
    }
    // A copy: the same length, then the same bytes (files of one length
    // are rare enough to read).
    let bytes = bytes?;
    loaded
        .iter()
        .find(|l| l.len == bytes.len() && std::fs::read(&l.handle.path).is_ok_and(|b| b == bytes))
}

impl Loader {
    /// A loader registering into `registry`.
    pub fn new(registry: Arc<Registry>) -> Loader {
        Loader {
            registry,
            loaded: Mutex::new(Vec::new()),
            lingering: Mutex::new(Vec::new()),
            unloaded_ops: Mutex::new(HashMap::new()),
        }
    }

    /// The registry libraries are loaded into.
    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    /// The libraries loaded now.
    pub fn libraries(&self) -> Vec<LibraryHandle> {
        self.loaded
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|l| l.handle.clone())
            .collect()
    }

    /// Loads the library at `path`: reads its manifest and negotiates the
    /// ABI version before any of its code runs, then maps it, runs its init
    /// and commits what init registered under a new owner (all or nothing).
    /// A library that declares its ops (in its manifest, or in a sealed
    /// declaration written by `opforge lib seal`) must register exactly what
    /// it declares.
    pub fn load(&self, path: impl AsRef<Path>) -> Result<LibraryHandle> {
        self.load_impl(path.as_ref(), true)
    }

    /// [`load`](Self::load), but ignoring a sealed declaration the file may
    /// carry (its manifest's own declaration is still checked): what
    /// `opforge lib seal` uses to find out what init registers now.
    pub fn load_ignoring_seal(&self, path: impl AsRef<Path>) -> Result<LibraryHandle> {
        self.load_impl(path.as_ref(), false)
    }

    /// What the init of a loaded library registered, as manifest records
    /// (`{"kind":"op"|"kernel"|"gradient", ...}`, the header's "Record
    /// kinds"), in registration order. `NotFound` if it is not loaded by
    /// this loader.
    pub fn declaration(&self, handle: &LibraryHandle) -> Result<Vec<serde_json::Value>> {
        let loaded = self.loaded.lock().unwrap_or_else(PoisonError::into_inner);
        loaded
            .iter()
            .find(|l| l.handle == *handle)
            .map(|l| l.declaration.clone())
            .ok_or_else(|| not_loaded(handle))
    }

    /// The loaded library of the file at `path` (the path it was loaded
    /// from, a symlink to it, or a copy with the same content). `NotFound`
    /// if this loader has no such library loaded.
    pub fn find(&self, path: impl AsRef<Path>) -> Result<LibraryHandle> {
        let path = path.as_ref();
        let canonical = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        let loaded = self.loaded.lock().unwrap_or_else(PoisonError::into_inner);
        let found = find_loaded(&loaded, &canonical, None).or_else(|| {
            let bytes = std::fs::read(&canonical).ok()?;
            find_loaded(&loaded, &canonical, Some(&bytes))
        });
        if let Some(l) = found {
            return Ok(l.handle.clone());
        }
        let names: Vec<String> = loaded
            .iter()
            .map(|l| format!("{} {}", l.handle.name, l.handle.version))
            .collect();
        Err(Status::not_found(format!(
            "no op library loaded from '{}' (loaded: {}); pass the path it was loaded from, or \
             the module load_op_library returned",
            path.display(),
            if names.is_empty() {
                "none".to_string()
            } else {
                names.join(", ")
            }
        )))
    }

    /// What holds a loaded library besides its registry entries (see
    /// [`Holders`]). `NotFound` if it is not loaded by this loader.
    pub fn holders(&self, handle: &LibraryHandle) -> Result<Holders> {
        let loaded = self.loaded.lock().unwrap_or_else(PoisonError::into_inner);
        loaded
            .iter()
            .find(|l| l.handle == *handle)
            .map(|l| l.strong.holders())
            .ok_or_else(|| not_loaded(handle))
    }

    /// The library (`NAME VERSION (PATH)`) that registered op `op` and was
    /// unloaded by this loader, when no library loaded since registers it:
    /// what a "not registered" error for `op` can add.
    pub fn unloaded_library_of(&self, op: &str) -> Option<String> {
        self.unloaded_ops
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(op)
            .cloned()
    }

    fn load_impl(&self, path: &Path, sealed: bool) -> Result<LibraryHandle> {
        let canonical = std::fs::canonicalize(path)
            .map_err(|e| manifest::io_status("cannot load op library", path, &e))?;
        {
            // Loaded from this path: no need to read the file.
            let loaded = self.loaded.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(l) = find_loaded(&loaded, &canonical, None) {
                return Ok(l.handle.clone());
            }
        }
        let bytes = std::fs::read(&canonical).map_err(|e| {
            Status::failed_precondition(format!(
                "cannot read op library '{}': {e}",
                canonical.display()
            ))
        })?;
        let mut loaded = self.loaded.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(l) = find_loaded(&loaded, &canonical, Some(&bytes)) {
            return Ok(l.handle.clone());
        }
        let manifest = if sealed {
            manifest::parse(&canonical, &bytes)?
        } else {
            manifest::parse_unsealed(&canonical, &bytes)?
        };
        manifest.check_host()?;
        let len = bytes.len();
        drop(bytes);
        {
            let mut lingering = self
                .lingering
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            lingering.retain(|(_, w)| w.strong_count() > 0);
            if let Some((_, w)) = lingering.iter().find(|(p, _)| *p == canonical) {
                let n = w
                    .upgrade()
                    .map_or(0, |l| l.instances.load(Ordering::Acquire));
                return Err(Status::failed_precondition(format!(
                    "op library '{}' was unloaded but is still held ({n} kernel instances, or \
                     shape functions or tensors of it are alive); drop the sessions, eager \
                     contexts and tensors that used it, then load it again",
                    canonical.display()
                )));
            }
        }
        check_not_mapped_elsewhere(&canonical)?;
        let (handle, inner, declaration) = self.load_new(&canonical, &manifest)?;
        MAPPED
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((canonical.clone(), Arc::downgrade(&inner)));
        {
            let mut unloaded = self
                .unloaded_ops
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            for op in self.registry.ops_of(handle.owner) {
                unloaded.remove(&op);
            }
        }
        loaded.push(Loaded {
            handle: handle.clone(),
            inner: Arc::downgrade(&inner),
            strong: inner,
            len,
            declaration,
        });
        Ok(handle)
    }

    fn load_new(
        &self,
        path: &Path,
        manifest: &Manifest,
    ) -> Result<(LibraryHandle, Arc<LibInner>, Vec<serde_json::Value>)> {
        let lib_name = &manifest.library.name;
        let version = &manifest.library.version;
        // SAFETY: loading a library runs its initialisers (C constructors).
        // The manifest was read and the ABI negotiated first; beyond that,
        // loading a library is trusting it, as tf.load_op_library does.
        let lib = unsafe { libloading::Library::new(path) }.map_err(|e| {
            Status::failed_precondition(format!(
                "cannot load op library '{}' ({lib_name} {version}): {e}",
                path.display()
            ))
        })?;
        let init_sym = format!("opforge_plugin_init_v{}", manifest.library.abi.major);
        // SAFETY: the symbol's type is the header's OpforgePluginInitFn; the
        // manifest declared this major, and its name carries the major.
        let init: OpforgePluginInitFn = match unsafe {
            lib.get::<unsafe extern "C" fn(
                *const OpforgeHostApi,
                *mut OpforgeRegistrar,
                *mut OpforgeStatus,
            ) -> OpforgeCode>(init_sym.as_bytes())
        } {
            Ok(f) => Some(*f),
            Err(e) => {
                return Err(Status::failed_precondition(format!(
                    "op library '{}' ({lib_name} {version}) does not export {init_sym} ({e}); \
                     define it (the entry point of the header) and rebuild",
                    path.display()
                )));
            }
        };
        // SAFETY: the symbol, if present, has the header's OpforgePluginFiniFn type.
        let fini: OpforgePluginFiniFn =
            unsafe { lib.get::<unsafe extern "C" fn()>(OPFORGE_PLUGIN_FINI_SYMBOL.as_bytes()) }
                .ok()
                .map(|f| *f);
        let inner = Arc::new_cyclic(|weak| LibInner {
            name: lib_name.clone(),
            version: version.clone(),
            path: path.to_path_buf(),
            min_host_minor: manifest.library.abi.min_host_minor,
            host: Box::new(host_table()),
            fini,
            instances: AtomicUsize::new(0),
            foreign: AtomicUsize::new(0),
            registrar: Mutex::new(Staging {
                lib: weak.clone(),
                registry: Some(self.registry.clone()),
                active: true,
                ..Staging::default()
            }),
            _lib: Some(lib),
        });
        hosts()
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(inner.host_ptr() as usize, lib_name.clone());
        let mut status = HostStatus::default();
        let init = init.ok_or_else(|| Status::internal("init symbol resolved to NULL"))?;
        // SAFETY: the plugin's init with the header's signature: the host
        // table lives as `inner`, the registrar (`inner.registrar`) and the status
        // across the call.
        let code = unsafe {
            init(
                inner.host_ptr(),
                (&inner.registrar as *const Mutex<Staging>)
                    .cast_mut()
                    .cast(),
                status.as_ptr(),
            )
        };
        // The registrar turns inactive; what init staged moves out of it.
        let mut st = std::mem::take(
            &mut *inner
                .registrar
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
        if code != OPFORGE_OK {
            let e = callback_error(
                &inner.label(),
                "its init (opforge_plugin_init_v1)",
                code,
                &status,
            );
            return Err(e.prepend("loading op library failed, nothing was registered: "));
        }
        check_declaration(manifest, &st, &inner)?;
        let declaration = std::mem::take(&mut st.records);
        let owner = self.registry.add_owner(lib_name.as_str());
        let location = path.display().to_string();
        if let Err(e) = commit(&self.registry, owner, &location, st) {
            self.registry.unload(owner);
            return Err(e.prepend(format!(
                "loading op library {} failed, nothing was registered: ",
                inner.label()
            )));
        }
        Ok((
            LibraryHandle {
                owner,
                name: lib_name.clone(),
                version: version.clone(),
                path: path.to_path_buf(),
            },
            inner,
            declaration,
        ))
    }

    /// [`unload`](Self::unload), but only if no kernel instance of the
    /// library and no output backed by its memory is alive at the call:
    /// otherwise nothing changes and the error (`FailedPrecondition`) says
    /// how many there are. Kernel instances live in sessions and eager
    /// contexts; drop those (and the tensors) to release them.
    pub fn unload_if_unused(&self, handle: &LibraryHandle) -> Result<UnloadReport> {
        {
            let loaded = self.loaded.lock().unwrap_or_else(PoisonError::into_inner);
            let l = loaded
                .iter()
                .find(|l| l.handle == *handle)
                .ok_or_else(|| not_loaded(handle))?;
            let holders = l.strong.holders();
            if !holders.is_empty() {
                return Err(Status::failed_precondition(format!(
                    "op library {} {} is in use: {holders} are alive (sessions, eager contexts \
                     and tensors that used it hold them); drop them and retry, or call unload, \
                     which removes the library's ops now and closes it when they are gone",
                    handle.name, handle.version,
                )));
            }
        }
        self.unload(handle)
    }

    /// Unloads a library: removes everything it registered (sessions and
    /// eager caches that used it fail cleanly from now on), then finalises
    /// and unmaps it if nothing holds it any more (see [`UnloadReport`]).
    pub fn unload(&self, handle: &LibraryHandle) -> Result<UnloadReport> {
        let mut loaded = self.loaded.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(i) = loaded.iter().position(|l| l.handle == *handle) else {
            return Err(not_loaded(handle));
        };
        let l = loaded.remove(i);
        drop(loaded);
        let removed = self.registry.unload(l.handle.owner);
        {
            let label = handle.to_string();
            let mut unloaded = self
                .unloaded_ops
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            for op in &removed.ops {
                unloaded.insert(op.clone(), label.clone());
            }
        }
        let weak = l.inner.clone();
        drop(l.strong);
        let (unmapped, note) = match weak.upgrade() {
            Some(inner) => {
                let n = inner.holders();
                drop(inner);
                self.lingering
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push((handle.path.clone(), weak));
                (
                    false,
                    Some(format!(
                        "op library {} {} is still held ({n} are alive, or shape \
                         functions or kernel factories of it are held): its entries are gone, \
                         and it is finalised and unmapped when the sessions, eager contexts and \
                         tensors that used it are dropped",
                        handle.name, handle.version
                    )),
                )
            }
            None => match still_mapped(&handle.path) {
                true => (
                    false,
                    Some(format!(
                        "op library {} {} was finalised and closed, but the platform keeps it \
                         mapped (thread-local storage or another dlopen pins it)",
                        handle.name, handle.version
                    )),
                ),
                false => (true, None),
            },
        };
        Ok(UnloadReport {
            ops: removed.ops,
            kernels: removed.kernels,
            attrs: removed.attrs,
            unmapped,
            note,
        })
    }
}

fn not_loaded(handle: &LibraryHandle) -> Status {
    Status::not_found(format!(
        "op library {} {} ({}) is not loaded by this loader (already unloaded?)",
        handle.name,
        handle.version,
        handle.path.display()
    ))
}

/// Whether the file at `path` is still mapped into the process.
#[cfg(unix)]
fn still_mapped(path: &Path) -> bool {
    use libloading::os::unix::{Library, RTLD_LAZY};
    const RTLD_NOLOAD: i32 = if cfg!(target_os = "macos") { 0x10 } else { 0x4 };
    // SAFETY: RTLD_NOLOAD never loads (so runs no initialiser): it only
    // returns a handle if the file is already mapped; that handle is closed
    // at once, which only drops the reference it added.
    match unsafe { Library::open(Some(path), RTLD_LAZY | RTLD_NOLOAD) } {
        Ok(lib) => {
            drop(lib);
            true
        }
        Err(_) => false,
    }
}

#[cfg(not(unix))]
fn still_mapped(_path: &Path) -> bool {
    false
}

/// A library with a declaration must register exactly what it declares:
/// the first difference is named (the op and the field with both values,
/// the kernel, the gradient).
fn check_declaration(m: &Manifest, st: &Staging, lib: &LibInner) -> Result<()> {
    let (Some(ops), Some(kernels), Some(grads)) = (&m.ops, &m.kernels, &m.gradients) else {
        return Ok(());
    };
    let mismatch = |what: String| {
        Status::failed_precondition(format!(
            "op library {}: what its init registers differs from what its manifest declares: \
             {what}; rebuild it so that its manifest records match its init (nothing was \
             registered)",
            lib.label()
        ))
    };
    let declared: BTreeMap<&str, _> = ops.iter().map(|o| (o.name.as_str(), o)).collect();
    let staged: BTreeMap<&str, _> = st
        .ops
        .iter()
        .map(|(n, b, s)| (n.as_str(), (b, *s)))
        .collect();
    for (name, (b, has_shape_fn)) in &staged {
        let Some(rec) = declared.get(name) else {
            return Err(mismatch(format!(
                "init registers op '{name}', the manifest does not declare it"
            )));
        };
        let a = b.finalize()?;
        let d = rec.op_def().map_err(|e| {
            mismatch(format!(
                "the manifest's op '{name}' is invalid: {}",
                e.message()
            ))
        })?;
        if a != d {
            return Err(mismatch(format!(
                "op '{name}': {}",
                describe_difference_between((&d, "the manifest"), (&a, "what init registers"))
            )));
        }
        if rec.shape_fn != *has_shape_fn {
            return Err(mismatch(format!(
                "op '{name}': init {} a shape function, the manifest says \"shape_fn\":{}",
                if *has_shape_fn {
                    "registers"
                } else {
                    "does not register"
                },
                rec.shape_fn
            )));
        }
    }
    if let Some(name) = declared.keys().find(|n| !staged.contains_key(*n)) {
        return Err(mismatch(format!(
            "the manifest declares op '{name}', init does not register it"
        )));
    }
    // Kernels: how often init registers and the manifest declares each.
    let mut count: BTreeMap<KernelKey, (usize, usize, String)> = BTreeMap::new();
    for (kb, _) in &st.kernels {
        let d = kb.clone().build();
        let key = kernel_key(&d.op, &d.device_type, &d.constraints);
        let describe = || describe_kernel(&d.op, &d.device_type, &d.constraints);
        count.entry(key).or_insert_with(|| (0, 0, describe())).0 += 1;
    }
    for k in kernels {
        let key = kernel_key(&k.op, &k.device, &k.constraints);
        count.entry(key).or_insert_with(|| (0, 0, k.describe())).1 += 1;
    }
    if let Some((init, declared, k)) = count.values().find(|(i, d, _)| i != d) {
        return Err(mismatch(match (init, declared) {
            (_, 0) => format!("init registers the kernel {k}, the manifest does not declare it"),
            (0, _) => format!("the manifest declares the kernel {k}, init does not register it"),
            (i, d) => format!(
                "init registers the kernel {k} {i} times, the manifest declares it {d} times"
            ),
        }));
    }
    let staged: BTreeMap<&str, &str> = st
        .gradients
        .iter()
        .map(|(o, f, _)| (o.as_str(), *f))
        .collect();
    let declared: BTreeMap<&str, &str> = grads
        .iter()
        .map(|g| (g.op.as_str(), g.form.as_str()))
        .collect();
    for (op, form) in &staged {
        match declared.get(op) {
            None => {
                return Err(mismatch(format!(
                    "init registers a gradient of op '{op}' (form \"{form}\"), the manifest \
                     declares none"
                )));
            }
            Some(d) if d != form => {
                return Err(mismatch(format!(
                    "the gradient of op '{op}' has the form \"{d}\" in the manifest, \"{form}\" \
                     in what init registers"
                )));
            }
            Some(_) => {}
        }
    }
    if let Some((op, form)) = declared.iter().find(|(op, _)| !staged.contains_key(*op)) {
        return Err(mismatch(format!(
            "the manifest declares a gradient of op '{op}' (form \"{form}\"), init registers none"
        )));
    }
    Ok(())
}

fn commit(registry: &Registry, owner: OwnerId, location: &str, st: Staging) -> Result<()> {
    let r = registry.registrar(owner, location);
    for (_, b, _) in st.ops {
        r.op(b)?;
    }
    for (kb, pk) in st.kernels {
        let reg = KernelRegistration::with_factory(kb, move |c| pk.instantiate(c));
        r.kernel(reg)?;
    }
    for (op, _, g) in st.gradients {
        r.set_attr::<Gradient>(&op, Arc::new(g))?;
    }
    Ok(())
}
