//! The kernel table of a [`Registry`]: registration, TensorFlow-style
//! selection ("No OpKernel was registered ..."), and building a node's kernel.

use super::{Origin, Registry};
use crate::attrs::{arg_ranges, in_out_types, summarize_attrs, AttrMap};
use crate::device::{memory_for, Device};
use crate::kernel::{KernelRegistration, KernelSignature, OpKernel, OpKernelConstruction};
use crate::proto::OpDef;
use crate::tensor::Location;
use crate::{Result, Status};
use std::sync::Arc;

/// A node's kernel, built: its signature, the kernel, and the registration
/// it came from (checked for liveness after an unload).
pub struct BuiltKernel {
    /// Dtypes and argument ranges of the node.
    pub sig: KernelSignature,
    /// The kernel.
    pub kernel: Box<dyn OpKernel>,
    /// The registration the kernel was built from.
    pub registration: Arc<KernelRegistration>,
}

impl BuiltKernel {
    /// Where each flat input must be when the kernel runs on `device`: the
    /// host for its host-memory arguments (and types that always stay on
    /// the host), else the device's memory.
    pub fn input_memory<C: FromIterator<Location>>(&self, device: &dyn Device) -> C {
        let host_memory = self.registration.host_memory_inputs(&self.sig);
        self.sig
            .input_types
            .iter()
            .zip(host_memory)
            .map(|(&dt, host)| memory_for(device, dt, host))
            .collect()
    }
}

impl Registry {
    /// Adds a kernel, as code built into this binary (origin: the caller's
    /// `file:line`). Registering the same kernel again does nothing; a
    /// different kernel with the same definition (op, device, constraints,
    /// label, priority, host memory) is `AlreadyExists` naming both origins.
    #[track_caller]
    pub fn register_kernel(&self, kernel: KernelRegistration) -> Result<()> {
        self.insert_kernel(kernel, Origin::caller())
    }

    pub(crate) fn insert_kernel(&self, kernel: KernelRegistration, origin: Origin) -> Result<()> {
        let mut t = self.write();
        let list = t.kernels.entry(kernel.def.op.clone()).or_default();
        if let Some(existing) = list.iter().find(|k| k.def == kernel.def) {
            if Arc::ptr_eq(&existing.factory, &kernel.factory)
                || existing.state().origins().contains(&origin)
            {
                existing.state().add_origin(origin);
                return Ok(());
            }
            return Err(Status::already_exists(format!(
                "A kernel for op '{}' with {} is already registered (by {}); this registration by {origin}",
                kernel.def.op,
                kernel.describe(),
                existing.state().describe_origins()
            )));
        }
        kernel.state().add_origin(origin);
        list.push(Arc::new(kernel));
        Ok(())
    }

    /// The kernels registered for `op`.
    pub fn kernels_for(&self, op: &str) -> Vec<Arc<KernelRegistration>> {
        self.read().kernels.get(op).cloned().unwrap_or_default()
    }

    /// The number of registered kernels.
    pub fn kernel_count(&self) -> usize {
        self.read().kernels.values().map(Vec::len).sum()
    }

    /// The device types that have at least one kernel, sorted.
    pub fn kernel_device_types(&self) -> Vec<String> {
        let mut types: Vec<String> = self
            .read()
            .kernels
            .values()
            .flatten()
            .map(|k| k.def.device_type.clone())
            .collect();
        types.sort();
        types.dedup();
        types
    }

    /// The kernel that matches a node: same op and device type, every type
    /// constraint satisfied, same label; the highest priority wins.
    /// `NotFound` lists the registered kernels as TensorFlow does.
    pub fn find_kernel(
        &self,
        op: &OpDef,
        node_name: &str,
        attrs: &AttrMap,
        device_type: &str,
    ) -> Result<Arc<KernelRegistration>> {
        let candidates = self.kernels_for(&op.name);
        let mut best: Vec<&Arc<KernelRegistration>> = Vec::new();
        for k in candidates.iter().filter(|k| k.matches(attrs, device_type)) {
            match best.first() {
                Some(b) if b.def.priority > k.def.priority => {}
                Some(b) if b.def.priority == k.def.priority => best.push(k),
                _ => best = vec![k],
            }
        }
        match best.as_slice() {
            [one] => Ok(Arc::clone(one)),
            [] => {
                let mut msg = format!(
                    "No OpKernel was registered to support Op '{}' used by {{{{node {node_name}}}}} with these attrs: {}\n\
                     Registered devices: [{}]\nRegistered kernels:\n",
                    op.name,
                    summarize_attrs(attrs),
                    self.kernel_device_types().join(", ")
                );
                if candidates.is_empty() {
                    match self.attr::<crate::op_def::WithoutKernel>(&op.name) {
                        Some(why) => msg.push_str(&format!(
                            "  <no registered kernels: {} has none on purpose: {why}>\n",
                            op.name
                        )),
                        None => msg.push_str("  <no registered kernels>\n"),
                    }
                }
                for k in &candidates {
                    msg.push_str(&format!("  {}\n", k.describe()));
                }
                Err(Status::not_found(msg.trim_end().to_string()))
            }
            many => Err(Status::invalid_argument(format!(
                "Multiple OpKernel registrations match NodeDef '{node_name}' (op {}): {}",
                op.name,
                many.iter()
                    .map(|k| format!("'{}'", k.describe()))
                    .collect::<Vec<_>>()
                    .join(" and ")
            ))),
        }
    }

    /// Whether `device_type` has a kernel matching a node of `op` with `attrs`.
    pub fn has_kernel(&self, op: &str, attrs: &AttrMap, device_type: &str) -> bool {
        self.read()
            .kernels
            .get(op)
            .is_some_and(|l| l.iter().any(|k| k.matches(attrs, device_type)))
    }

    /// Builds the kernel of a node whose attrs are complete: computes its
    /// signature (dtypes and argument ranges), finds the matching kernel for
    /// the device and constructs it.
    pub fn build_kernel(
        &self,
        op: &Arc<OpDef>,
        node_name: &str,
        attrs: AttrMap,
        device: &dyn Device,
    ) -> Result<BuiltKernel> {
        let (input_types, output_types) = in_out_types(op, &attrs)?;
        let input_ranges = arg_ranges(op, &op.input_arg, &attrs)?;
        let output_ranges = arg_ranges(op, &op.output_arg, &attrs)?;
        let registration = self.find_kernel(op, node_name, &attrs, device.device_type())?;
        let ctx =
            OpKernelConstruction::new(op, node_name, &attrs, device, &input_types, &output_types);
        let kernel = (registration.factory)(&ctx)?;
        Ok(BuiltKernel {
            sig: KernelSignature {
                op_def: Arc::clone(op),
                node_name: node_name.to_string(),
                attrs,
                input_types: shared_list(&TYPE_LISTS, input_types),
                output_types: shared_list(&TYPE_LISTS, output_types),
                input_ranges: shared_list(&RANGE_LISTS, input_ranges),
                output_ranges: shared_list(&RANGE_LISTS, output_ranges),
            },
            kernel,
            registration,
        })
    }
}

/// The lists kernel signatures share (see [`KernelSignature::input_types`]).
type ListSet<T> = std::sync::Mutex<Option<std::collections::HashSet<Arc<[T]>>>>;
static TYPE_LISTS: ListSet<crate::DataType> = std::sync::Mutex::new(None);
static RANGE_LISTS: ListSet<std::ops::Range<usize>> = std::sync::Mutex::new(None);

/// Distinct lists kept for sharing, at most (past it, and for long lists,
/// a signature gets a list of its own): the set stays small whatever runs.
const SHARED_LISTS: usize = 4096;
const SHARED_LIST_LEN: usize = 16;

/// `list` as a shared list: the one already in `set`, else `list` (added
/// to `set` while it has room).
fn shared_list<T: Eq + std::hash::Hash>(set: &ListSet<T>, list: Vec<T>) -> Arc<[T]> {
    if list.len() > SHARED_LIST_LEN {
        return list.into();
    }
    let mut guard = set
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let set = guard.get_or_insert_with(Default::default);
    if let Some(shared) = set.get(&list[..]) {
        return shared.clone();
    }
    let list: Arc<[T]> = list.into();
    if set.len() < SHARED_LISTS {
        set.insert(list.clone());
    }
    list
}
