//! [`Session`]: runs a graph. `run(feeds, fetches, targets)` prunes the
//! graph to what the fetches and targets need, places each node on a
//! device, runs nodes in dependency order (independent nodes in parallel on
//! the session's scheduler pool, which by default is the pool the CPU
//! device's kernels shard over, so a node and the shards of its kernel share
//! one set of threads and no work is handed between pools), copies values
//! between devices where a consumer needs them elsewhere, frees each
//! intermediate after its last consumer (moving it to that consumer, so the
//! kernel may reuse its buffer in place), builds each node's kernel once
//! and reuses it across runs, and allows concurrent `run` calls.
//!
//! Placement: a node runs on the first device of the session's
//! [`DeviceSet`] that matches its requested device (`""` matches every
//! device) and has a kernel for it; with soft placement (the default, as in
//! TensorFlow 2), a node whose requested device is absent or has no kernel
//! for it falls back to the first device that has one. A kernel's
//! host-memory arguments are read from and written to host memory; every
//! other value a kernel reads must be in its device's memory, and the
//! executor copies it there (through [`Device::copy_to_host`] and
//! [`Device::copy_from_host`]) when it was produced or fed elsewhere.
//! Fetched values are copied to the host.

use super::{unloaded_op, Graph, NodeId, Output};
use crate::device::{CpuDevice, Device, DeviceSet, DeviceSpec, InputMemory, ThreadPool};
use crate::eager::EagerContext;
use crate::kernel::{
    call_kernel, call_kernel_with, KernelRegistration, KernelSignature, OpKernel, TensorVec,
};
use crate::registry::Registry;
use crate::resource::ResourceMgr;
use crate::tensor::Location;
use crate::{Result, Status, Tensor};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

mod plan;
mod requests;

use plan::{Plan, RunState, Step};
use requests::Bindings;

struct NodeKernel {
    sig: KernelSignature,
    kernel: Box<dyn OpKernel>,
    /// The registration the kernel was built from.
    registration: Arc<KernelRegistration>,
    /// The device the node was placed on.
    device: Arc<dyn Device>,
    /// Where each flat input must be when the kernel runs.
    input_memory: InputMemory,
}

/// Options of a [`Session`]; the default (both 0) shares one pool of one
/// thread per core between nodes and kernels.
#[derive(Clone, Debug)]
pub struct SessionOptions {
    /// Threads that run independent nodes at once: 0 (the default) runs
    /// them on the pool the session's CPU device shards kernels over (the
    /// process-wide [`ThreadPool::global`] for sessions given their
    /// devices), so nodes and the shards of their kernels share one set of
    /// threads (no hand-off between pools); 1 runs nodes one after another
    /// on the caller's thread; `n > 1` starts a separate inter-op pool of
    /// `n` threads, like TensorFlow.
    pub inter_op_threads: usize,
    /// Threads each kernel may shard its work over, for the CPU device the
    /// session makes when it is not given devices (0 = the process-wide
    /// pool, one thread per core).
    pub intra_op_threads: usize,
    /// Place a node whose requested device is absent, or has no kernel
    /// for it, on a device that has one (TensorFlow's
    /// `allow_soft_placement`; on by default, as in TensorFlow 2).
    pub allow_soft_placement: bool,
    /// Rewrite the graph before running it, as TensorFlow's grappler does,
    /// with the graph rewrites the registry's ops carry
    /// ([`GraphRewrite`](super::GraphRewrite); the standard library's fuse
    /// `v.assign_sub(lr * grad)` into one update kernel): node ids, names
    /// and results stay the same. On by default; the session's
    /// [`graph`](Session::graph) is the rewritten graph.
    pub optimize: bool,
    /// Ask kernels for the output requests they declare (see
    /// [`OutputRequest`](crate::kernel::OutputRequest)): `Null` for an
    /// output nobody reads, `InPlace` where the op's
    /// [`FInplaceOption`](crate::kernel::FInplaceOption) or the kernel's
    /// own declaration pairs an input with an output and the input has no
    /// other reader, and `Add` to sum the parts of an `AddN` (a gradient
    /// with several contributions) into the first part's buffer instead of
    /// keeping every part for the `AddN`. On by default; off, every kernel
    /// is asked to `Write` (the figures with and without:
    /// `benches/output_requests.rs`).
    pub output_requests: bool,
    /// A debug check of in-place writes: before a kernel runs with an
    /// `InPlace` or `Add` request the runtime grants (a buffer no other
    /// tensor holds), check that the memory it lets be written overlaps no
    /// other input of the node and no value of the run still waiting for
    /// its readers, and fail the run (`Internal`, naming the node and the
    /// reader) if it does: memory ranges are compared, so two buffers over
    /// one allocation (a plugin's foreign memory set as two outputs) are
    /// caught. (A request whose buffer another tensor holds is always
    /// turned into `Write`, check or not.) Off by default; the environment
    /// variable `OPFORGE_CHECK_INPLACE` (any value but `0`) turns it on for
    /// every session.
    pub check_inplace: bool,
    /// `InPlace` is asked only for outputs of at least this many elements
    /// (4096 by default): smaller buffers come from the per-thread spare
    /// lists at no cost worth saving, and planning them an in-place write
    /// costs each such node more than the allocation. 0 asks it for any
    /// size (`Null` and `Add` do not depend on it).
    pub inplace_min_elements: usize,
}

impl Default for SessionOptions {
    fn default() -> Self {
        SessionOptions {
            inter_op_threads: 0,
            intra_op_threads: 0,
            allow_soft_placement: true,
            optimize: true,
            output_requests: true,
            check_inplace: std::env::var_os("OPFORGE_CHECK_INPLACE").is_some_and(|v| v != "0"),
            inplace_min_elements: 1 << 12,
        }
    }
}

/// A plan is cached per (feeds, fetches, targets).
type PlanKey = (Vec<Output>, Vec<Output>, Vec<NodeId>);

/// Runs a graph on a set of devices.
pub struct Session {
    graph: Arc<Graph>,
    devices: DeviceSet,
    resource_mgr: Arc<ResourceMgr>,
    registry: Arc<Registry>,
    /// Each node's kernel or the error building it (boxed: one entry
    /// per node of the graph).
    kernels: Vec<OnceLock<std::result::Result<Arc<NodeKernel>, Box<Status>>>>,
    plans: Mutex<HashMap<PlanKey, Arc<Plan>>>,
    /// The pool independent nodes run on (`None`: one after another).
    scheduler: Option<Arc<ThreadPool>>,
    soft_placement: bool,
    /// [`SessionOptions::output_requests`].
    output_requests: bool,
    /// [`SessionOptions::check_inplace`].
    check_inplace: bool,
    /// [`SessionOptions::inplace_min_elements`].
    inplace_min_elements: usize,
    /// The registry generation at which every built kernel was last seen
    /// registered.
    generation: AtomicU64,
}

/// Builds a [`Session`] with the devices, resource manager and scheduler
/// pool it uses (the registry is the graph's): see [`Session::builder`].
pub struct SessionBuilder {
    graph: Arc<Graph>,
    devices: Option<Vec<Arc<dyn Device>>>,
    resource_mgr: Option<Arc<ResourceMgr>>,
    scheduler: Option<Arc<ThreadPool>>,
    registry_check: Option<Arc<Registry>>,
    options: SessionOptions,
}

impl SessionBuilder {
    /// The devices to place nodes on, in order of preference (the first is
    /// the default device). Default: a CPU device.
    pub fn devices(mut self, devices: Vec<Arc<dyn Device>>) -> Self {
        self.devices = Some(devices);
        self
    }

    /// Keeps op state (variables, ...) in `resource_mgr`, shared with
    /// whoever else holds it. Default: a resource manager of its own.
    pub fn resource_mgr(mut self, resource_mgr: Arc<ResourceMgr>) -> Self {
        self.resource_mgr = Some(resource_mgr);
        self
    }

    /// Runs on `ctx`'s device and shares its resource manager, so the graph
    /// sees the variables the eager context made (and the other way round).
    /// The graph must use the context's registry.
    pub fn eager_context(mut self, ctx: &EagerContext) -> Self {
        self.devices = Some(vec![ctx.device().clone()]);
        self.resource_mgr = Some(ctx.resource_mgr().clone());
        self.registry_check = Some(ctx.registry().clone());
        self
    }

    /// Runs independent nodes on `pool` (when `inter_op_threads` is 0).
    pub fn scheduler(mut self, pool: Arc<ThreadPool>) -> Self {
        self.scheduler = Some(pool);
        self
    }

    /// Sets the options.
    pub fn options(mut self, options: SessionOptions) -> Self {
        self.options = options;
        self
    }

    /// The session.
    pub fn build(self) -> Result<Session> {
        let graph = self.graph;
        if let Some(r) = &self.registry_check {
            if !Arc::ptr_eq(r, graph.registry_arc()) {
                return Err(Status::invalid_argument(
                    "the graph and the eager context use different registries: build the graph \
                     with Graph::with_registry(ctx.registry().clone())",
                ));
            }
        }
        let options = self.options;
        let (devices, default_pool) = match self.devices {
            Some(devices) => (
                DeviceSet::new(devices)?,
                self.scheduler
                    .unwrap_or_else(|| ThreadPool::global().clone()),
            ),
            None => {
                let pool = match options.intra_op_threads {
                    0 => ThreadPool::global().clone(),
                    n => Arc::new(ThreadPool::new(n)?),
                };
                let cpu: Arc<dyn Device> = Arc::new(CpuDevice::with_pool(pool.clone()));
                (DeviceSet::single(cpu), self.scheduler.unwrap_or(pool))
            }
        };
        let scheduler = match options.inter_op_threads {
            0 => Some(default_pool),
            1 => None,
            n => Some(Arc::new(ThreadPool::new(n).map_err(|e| {
                Status::resource_exhausted(format!("cannot start the inter-op pool: {e}"))
            })?)),
        }
        .filter(|p| p.rayon_pool().is_some());
        graph.check_live()?;
        let graph = match options.optimize {
            true => {
                let types: Vec<&str> = devices.devices().iter().map(|d| d.device_type()).collect();
                super::rewrite::optimize(&graph, &types)?
                    .map(Arc::new)
                    .unwrap_or(graph)
            }
            false => graph,
        };
        let n = graph.len();
        Ok(Session {
            registry: graph.registry_arc().clone(),
            generation: AtomicU64::new(graph.registry().generation()),
            graph,
            devices,
            resource_mgr: self
                .resource_mgr
                .unwrap_or_else(|| Arc::new(ResourceMgr::new())),
            kernels: (0..n).map(|_| OnceLock::new()).collect(),
            plans: Mutex::new(HashMap::new()),
            scheduler,
            soft_placement: options.allow_soft_placement,
            output_requests: options.output_requests,
            check_inplace: options.check_inplace,
            inplace_min_elements: options.inplace_min_elements,
        })
    }
}

impl Session {
    /// A session on a CPU device with default options.
    pub fn new(graph: Graph) -> Result<Session> {
        Session::with_options(graph, SessionOptions::default())
    }

    /// A session on a CPU device with options.
    pub fn with_options(graph: Graph, options: SessionOptions) -> Result<Session> {
        Session::builder(graph).options(options).build()
    }

    /// A builder, to give the session its devices, resource manager or
    /// scheduler pool.
    pub fn builder(graph: Graph) -> SessionBuilder {
        Session::builder_shared(Arc::new(graph))
    }

    /// A builder for a session over a graph shared with its other holders
    /// (the graph cannot change while the session holds it: a caller that
    /// keeps building a graph gives each session a snapshot, a clone of
    /// it, or waits until the session is dropped, `Arc::make_mut`).
    pub fn builder_shared(graph: Arc<Graph>) -> SessionBuilder {
        SessionBuilder {
            graph,
            devices: None,
            resource_mgr: None,
            scheduler: None,
            registry_check: None,
            options: SessionOptions::default(),
        }
    }

    /// The graph the session runs: the one it was given, rewritten when
    /// [`SessionOptions::optimize`] applied a rewrite (the same node ids,
    /// names and outputs).
    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// The devices nodes are placed on.
    pub fn devices(&self) -> &DeviceSet {
        &self.devices
    }

    /// The resource manager holding the session's state (variables, ...).
    pub fn resource_mgr(&self) -> &Arc<ResourceMgr> {
        &self.resource_mgr
    }

    /// The device node `id` runs on (placing it, and building its kernel,
    /// if that was not done yet).
    pub fn placement(&self, id: NodeId) -> Result<Arc<dyn Device>> {
        let i = self.graph.check_node(id)?;
        Ok(self.kernel(i)?.device.clone())
    }

    /// Runs the graph by output names (`"x:0"`, `"y"`) and target node names.
    pub fn run_by_name(
        &self,
        feeds: &[(&str, Tensor)],
        fetches: &[&str],
        targets: &[&str],
    ) -> Result<Vec<Tensor>> {
        let feeds: Vec<(Output, Tensor)> = feeds
            .iter()
            .map(|(n, t)| Ok((self.graph.output(n)?, t.clone())))
            .collect::<Result<_>>()?;
        let fetches: Vec<Output> = fetches
            .iter()
            .map(|n| self.graph.output(n))
            .collect::<Result<_>>()?;
        let targets: Vec<NodeId> = targets
            .iter()
            .map(|n| {
                self.graph
                    .find(n)
                    .ok_or_else(|| Status::not_found(format!("No node named '{n}' in the graph")))
            })
            .collect::<Result<_>>()?;
        self.run(feeds, &fetches, &targets)
    }

    /// `FailedPrecondition` if an op or kernel this session built a node
    /// with was unloaded since; checked when the registry's generation moved.
    fn check_live(&self) -> Result<()> {
        let generation = self.registry.generation();
        if self.generation.load(Ordering::Acquire) == generation {
            return Ok(());
        }
        for (i, k) in self.kernels.iter().enumerate() {
            if let Some(Ok(k)) = k.get() {
                let node = self.graph.at(i);
                if !node.registration.is_live() {
                    return Err(unloaded_op(&node.name, &node.op, &node.registration));
                }
                if !k.registration.is_live() {
                    return Err(Status::failed_precondition(format!(
                        "Node '{}': the kernel of op '{}' it runs was unloaded from the registry \
                         (it was registered by {}); load the library again and build a new session",
                        node.name,
                        node.op,
                        k.registration.state().describe_origins()
                    )));
                }
            }
        }
        self.graph.check_live()?;
        self.generation.store(generation, Ordering::Release);
        Ok(())
    }

    /// Feeds tensors for some outputs, runs what `fetches` and `targets`
    /// need, and returns the fetched tensors in order.
    pub fn run(
        &self,
        feeds: Vec<(Output, Tensor)>,
        fetches: &[Output],
        targets: &[NodeId],
    ) -> Result<Vec<Tensor>> {
        self.run_cancellable(feeds, fetches, targets, None)
    }

    /// [`run`](Self::run), stopped early when `cancel` becomes true: the
    /// executor reads the flag before each node it starts (a node already
    /// running finishes its kernel), and the run then fails with
    /// `Cancelled`. The session stays usable: the next run starts afresh.
    /// For a caller that must interrupt long runs (Ctrl-C from Python).
    pub fn run_cancellable(
        &self,
        feeds: Vec<(Output, Tensor)>,
        fetches: &[Output],
        targets: &[NodeId],
        cancel: Option<&AtomicBool>,
    ) -> Result<Vec<Tensor>> {
        self.check_live()?;
        for (o, t) in &feeds {
            let want = self
                .graph
                .output_type(*o)
                .map_err(|e| e.prepend("feed: "))?
                .base();
            if t.dtype() != want {
                return Err(Status::invalid_argument(format!(
                    "Tensor fed for {} has dtype {}, but the graph expects {want}",
                    self.graph.name_of(*o),
                    t.dtype()
                )));
            }
        }
        for &o in fetches {
            self.graph
                .check_output(o)
                .map_err(|e| e.prepend("fetch: "))?;
        }
        for &n in targets {
            self.graph
                .check_node(n)
                .map_err(|e| e.prepend("target: "))?;
        }
        let key = (
            feeds.iter().map(|(o, _)| *o).collect::<Vec<_>>(),
            fetches.to_vec(),
            targets.to_vec(),
        );
        let plan = {
            let cached = self
                .plans
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get(&key)
                .cloned();
            match cached {
                Some(p) => p,
                None => {
                    let p = Arc::new(self.make_plan(&key.0, fetches, targets)?);
                    self.plans
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .insert(key, p.clone());
                    p
                }
            }
        };
        let mut state = plan.start_run(feeds);
        let pool = self.scheduler.as_deref().and_then(ThreadPool::rayon_pool);
        let result = match pool {
            Some(pool) if !plan.sequential => self.run_parallel(&plan, &state, pool, cancel),
            _ => self.run_sequential(&plan, &mut state, cancel),
        };
        plan.finish_run(state, result.is_err());
        let mut fetched = result?;
        for t in &mut fetched {
            if t.location() != Location::Host {
                *t = self.transfer(t, Location::Host)?;
            }
        }
        Ok(fetched)
    }

    /// The node's kernel, placed and built on first use.
    fn kernel(&self, node: usize) -> Result<Arc<NodeKernel>> {
        self.kernels[node]
            .get_or_init(|| {
                let n = self.graph.at(node);
                if !n.registration.is_live() {
                    return Err(Box::new(unloaded_op(&n.name, &n.op, &n.registration)));
                }
                let device = self.place(node)?;
                let built = self
                    .registry
                    .build_kernel(
                        &n.registration.op_def,
                        &n.name,
                        n.attrs.clone(),
                        device.as_ref(),
                    )
                    .map_err(|e| Box::new(self.annotate(e, node)))?;
                let input_memory = built.input_memory(device.as_ref());
                Ok(Arc::new(NodeKernel {
                    sig: built.sig,
                    kernel: built.kernel,
                    registration: built.registration,
                    device,
                    input_memory,
                }))
            })
            .clone()
            .map_err(|e| *e)
    }

    /// The device node `node` runs on: the first device that matches its
    /// requested device and has a kernel for it; with soft placement, else
    /// the first device with a kernel; else the first matching device
    /// (whose missing kernel is then reported as TensorFlow reports it).
    fn place(&self, node: usize) -> Result<Arc<dyn Device>> {
        let n = self.graph.at(node);
        let spec = DeviceSpec::parse(&n.device).map_err(|e| self.annotate(e, node))?;
        let matching = self.devices.matching(&spec);
        let has_kernel =
            |d: &Arc<dyn Device>| self.registry.has_kernel(&n.op, &n.attrs, d.device_type());
        if let Some(d) = matching.iter().find(|d| has_kernel(d)) {
            return Ok((*d).clone());
        }
        if self.soft_placement || n.device.is_empty() {
            if let Some(d) = self.devices.devices().iter().find(|d| has_kernel(d)) {
                return Ok(d.clone());
            }
        }
        match matching.first() {
            Some(d) => Ok((*d).clone()),
            None if self.soft_placement => Ok(self.devices.default_device().clone()),
            None => Err(self.annotate(
                Status::invalid_argument(format!(
                    "Cannot assign a device for operation {}: no device matches '{}' (available: {}); \
                     set SessionOptions::allow_soft_placement to place it elsewhere",
                    n.name,
                    n.device,
                    self.devices
                        .devices()
                        .iter()
                        .map(|d| d.name().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                )),
                node,
            )),
        }
    }

    /// `t` copied to `want` (the host, or a device of the session) through
    /// the devices that own the memory.
    fn transfer(&self, t: &Tensor, want: Location) -> Result<Tensor> {
        let device_of = |loc: Location| {
            self.devices
                .devices()
                .iter()
                .find(|d| d.location() == loc)
                .ok_or_else(|| {
                    Status::internal(format!(
                        "a value is on {loc:?}, which is not a device of this session"
                    ))
                })
        };
        let host = match t.location() {
            Location::Host => t.clone(),
            from => device_of(from)?.copy_to_host(t)?,
        };
        match want {
            Location::Host => Ok(host),
            to => device_of(to)?.copy_from_host(&host),
        }
    }

    fn annotate(&self, e: Status, node: usize) -> Status {
        let n = self.graph.at(node);
        e.append(format!(
            "\n\t [[{{{{node {}}}}} = {}{}]]",
            n.name,
            n.op,
            crate::attrs::summarize_attrs(&n.attrs)
        ))
    }

    /// Runs one step on its gathered inputs and hands each output to
    /// `output`; with `bindings`, the step's output requests (`state`: the
    /// run's values, for the in-place check when it is on).
    fn execute(
        &self,
        step: &Step,
        inputs: &mut TensorVec,
        bindings: Option<(&mut Bindings, Option<&RunState>)>,
        mut output: impl FnMut(usize, Tensor),
    ) -> Result<()> {
        let k = &*step.kernel;
        k.input_memory
            .place_hinted(step.host_inputs, inputs, |i, t, want| {
                self.transfer(t, want).map_err(|e| {
                    self.annotate(e.prepend(format!("input {i}: ")), step.node as usize)
                })
            })?;
        match bindings {
            None => call_kernel(
                k.kernel.as_ref(),
                &k.sig,
                inputs,
                step.device.as_ref(),
                &self.resource_mgr,
                |_, i, t| output(i, t),
            ),
            Some((bindings, state)) => {
                if let (true, Some(state)) = (self.check_inplace, state) {
                    self.check_inplace(step, inputs, bindings, state)?;
                }
                call_kernel_with(
                    k.kernel.as_ref(),
                    &k.sig,
                    inputs,
                    step.device.as_ref(),
                    &self.resource_mgr,
                    bindings,
                    |_, i, t| output(i, t),
                )
            }
        }
        .map_err(|e| self.annotate(e, step.node as usize))
    }

    fn run_sequential(
        &self,
        plan: &Plan,
        state: &mut RunState,
        cancel: Option<&AtomicBool>,
    ) -> Result<Vec<Tensor>> {
        for step in &plan.steps {
            if is_cancelled(cancel) {
                return Err(self.annotate(cancelled(), step.node as usize));
            }
            let mut inputs = TensorVec::new();
            for &slot in plan.inputs(step) {
                let v = state.read_alone(slot);
                inputs.push(v.ok_or_else(|| self.annotate(unproduced(), step.node as usize))?);
            }
            let outputs = plan.outputs(step);
            match &step.requests {
                None => self.execute(step, &mut inputs, None, |i, t| {
                    // (An output nothing reads has NO_SLOT: no value slot.)
                    if let Some(v) = state.values.get_mut(outputs[i]) {
                        *v.get_mut().unwrap_or_else(PoisonError::into_inner) = Some(t);
                    }
                })?,
                Some(r) => {
                    let mut b = self.bind(step, r, outputs, |slot| {
                        state.values.get_mut(slot).and_then(|v| {
                            v.get_mut().unwrap_or_else(PoisonError::into_inner).take()
                        })
                    })?;
                    if self.check_inplace {
                        let st: &RunState = state;
                        self.execute(step, &mut inputs, Some((&mut b, Some(st))), |i, t| {
                            if let Some(v) = st.values.get(outputs[i]) {
                                *v.lock().unwrap_or_else(PoisonError::into_inner) = Some(t);
                            }
                        })?
                    } else {
                        self.execute(step, &mut inputs, Some((&mut b, None)), |i, t| {
                            if let Some(v) = state.values.get_mut(outputs[i]) {
                                *v.get_mut().unwrap_or_else(PoisonError::into_inner) = Some(t);
                            }
                        })?
                    }
                }
            }
        }
        collect_fetches(plan, |slot| state.read_alone(slot))
    }

    fn run_parallel(
        &self,
        plan: &Plan,
        state: &RunState,
        pool: &rayon::ThreadPool,
        cancel: Option<&AtomicBool>,
    ) -> Result<Vec<Tensor>> {
        pool.scope(|scope| {
            for &r in &plan.roots {
                scope.spawn(move |s| self.process(plan, state, r, s, cancel));
            }
        });
        if let Some(e) = state
            .error
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            return Err(e);
        }
        collect_fetches(plan, |slot| state.read(slot))
    }

    /// Runs `step` and then, inline, one successor it made ready; spawns the others.
    fn process<'s>(
        &'s self,
        plan: &'s Plan,
        state: &'s RunState,
        mut step: usize,
        scope: &rayon::Scope<'s>,
        cancel: Option<&'s AtomicBool>,
    ) {
        loop {
            if state
                .error
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .is_some()
            {
                return;
            }
            let s = &plan.steps[step];
            if is_cancelled(cancel) {
                state
                    .error
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .get_or_insert(self.annotate(cancelled(), s.node as usize));
                return;
            }
            let gathered: Result<TensorVec> = plan
                .inputs(s)
                .iter()
                .map(|&slot| {
                    state
                        .read(slot)
                        .ok_or_else(|| self.annotate(unproduced(), s.node as usize))
                })
                .collect();
            let result = gathered.and_then(|mut inputs| {
                let outputs = plan.outputs(s);
                let mut bindings = match &s.requests {
                    Some(r) => Some(self.bind(s, r, outputs, |slot| state.take_value(slot))?),
                    None => None,
                };
                self.execute(
                    s,
                    &mut inputs,
                    bindings.as_mut().map(|b| (b, Some(state))),
                    |i, t| {
                        // (An output nothing reads has NO_SLOT: no value slot.)
                        if let Some(v) = state.values.get(outputs[i]) {
                            *v.lock().unwrap_or_else(PoisonError::into_inner) = Some(t);
                        }
                    },
                )
            });
            if let Err(e) = result {
                state
                    .error
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .get_or_insert(e);
                return;
            }
            let mut ready = plan
                .successors(step)
                .iter()
                .map(|&n| n as usize)
                .filter(|&n| state.pending[n].fetch_sub(1, Ordering::AcqRel) == 1);
            let Some(next) = ready.next() else { return };
            for other in ready {
                scope.spawn(move |sc| self.process(plan, state, other, sc, cancel));
            }
            step = next;
        }
    }
}

/// Whether a run's cancellation flag is set.
#[inline]
fn is_cancelled(cancel: Option<&AtomicBool>) -> bool {
    cancel.is_some_and(|c| c.load(Ordering::Relaxed))
}

fn cancelled() -> Status {
    Status::cancelled("the run was cancelled before this node started")
}

fn unproduced() -> Status {
    Status::internal("executor: a value was read before it was produced")
}

/// The fetched values, each read (and counted) with `read`.
fn collect_fetches(
    plan: &Plan,
    mut read: impl FnMut(usize) -> Option<Tensor>,
) -> Result<Vec<Tensor>> {
    plan.fetch_slots
        .iter()
        .map(|&slot| {
            read(slot).ok_or_else(|| Status::internal("executor: a fetched value was not produced"))
        })
        .collect()
}

impl RunState {
    /// One read of `slot` by a sequential run, which has the state to
    /// itself (no locking, no atomic operations): the last reader takes
    /// the value, so a kernel may reuse its buffer; the others clone it.
    #[inline(always)]
    fn read_alone(&mut self, slot: usize) -> Option<Tensor> {
        let uses = self.uses[slot].get_mut();
        *uses -= 1;
        let v = self.values[slot]
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner);
        if *uses == 0 {
            v.take()
        } else {
            v.clone()
        }
    }

    /// One read of `slot` by a parallel run: the last reader takes the
    /// value, the others clone it.
    fn read(&self, slot: usize) -> Option<Tensor> {
        // Count this read under the slot's lock: otherwise the last reader
        // could take the value between another reader's count and its clone.
        let mut v = self.values[slot]
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if self.uses[slot].fetch_sub(1, Ordering::AcqRel) == 1 {
            v.take()
        } else {
            v.clone()
        }
    }
}
