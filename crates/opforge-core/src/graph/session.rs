//! [`Session`]: runs a graph. `run(feeds, fetches, targets)` prunes the
//! graph to what the fetches and targets need, runs nodes in dependency
//! order (independent nodes in parallel; by default on the device's own
//! thread pool, so a node and the shards of its kernel share one set of
//! threads and no work is handed between pools), frees each
//! intermediate after its last consumer (moving it to that consumer, so the
//! kernel may reuse its buffer in place), builds each node's kernel once
//! and reuses it across runs, and allows concurrent `run` calls.

use super::{Graph, NodeId, Output};
use crate::device::{CpuDevice, Device};
use crate::kernel::{
    build_kernel, call_kernel, KernelRegistry, KernelSignature, OpKernel, TensorVec,
};
use crate::resource::ResourceMgr;
use crate::{Result, Status, Tensor};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

struct NodeKernel {
    sig: KernelSignature,
    kernel: Box<dyn OpKernel>,
}

struct Step {
    node: NodeId,
    /// The node's kernel, built when the plan was made.
    kernel: Arc<NodeKernel>,
    /// Value slot of each flat input.
    inputs: Vec<usize>,
    /// Value slot of each flat output (`None` if nothing reads it).
    outputs: Vec<Option<usize>>,
    /// Steps that wait for this one (deduplicated).
    successors: Vec<usize>,
}

struct Plan {
    steps: Vec<Step>,
    num_slots: usize,
    feed_slots: Vec<usize>,
    fetch_slots: Vec<usize>,
    /// Readers of each slot (consumers plus fetches).
    slot_uses: Vec<usize>,
    pending: Vec<usize>,
    roots: Vec<usize>,
    /// Run on the caller's thread, in order: no inter-op parallelism pays off.
    sequential: bool,
}

/// Options of a [`Session`]; the default (both 0) shares one pool of one
/// thread per core between nodes and kernels.
#[derive(Clone, Debug, Default)]
pub struct SessionOptions {
    /// Threads that run independent nodes at once: 0 (the default) runs
    /// them on the device's intra-op pool, so nodes and the shards of
    /// their kernels share one set of threads (no hand-off between pools);
    /// 1 runs nodes one after another on the caller's thread; `n > 1`
    /// starts a separate inter-op pool of `n` threads, like TensorFlow.
    pub inter_op_threads: usize,
    /// Threads each kernel may shard its work over (0 = one per core).
    pub intra_op_threads: usize,
}

/// A plan is cached per (feeds, fetches, targets).
type PlanKey = (Vec<Output>, Vec<Output>, Vec<NodeId>);

/// Runs a graph on a device.
pub struct Session {
    graph: Arc<Graph>,
    device: Arc<dyn Device>,
    resource_mgr: Arc<ResourceMgr>,
    kernels: Vec<OnceLock<Result<Arc<NodeKernel>>>>,
    kernel_registry: &'static KernelRegistry,
    plans: Mutex<HashMap<PlanKey, Arc<Plan>>>,
    /// A separate inter-op pool (`inter_op_threads > 1`).
    inter_op: Option<rayon::ThreadPool>,
    /// Run independent nodes in parallel (on `inter_op`, else on the
    /// device's pool).
    parallel: bool,
}

/// Outputs whose every known shape is at most this many elements count as
/// small: a plan of only small nodes runs sequentially.
const SMALL_ELEMENTS: i64 = 1 << 12;

impl Session {
    /// A session on a CPU device with default options.
    pub fn new(graph: Graph) -> Result<Session> {
        Session::with_options(graph, SessionOptions::default())
    }

    /// A session with options.
    pub fn with_options(graph: Graph, options: SessionOptions) -> Result<Session> {
        let device: Arc<dyn Device> = Arc::new(CpuDevice::new(options.intra_op_threads)?);
        let inter_op = if options.inter_op_threads > 1 {
            Some(
                rayon::ThreadPoolBuilder::new()
                    .num_threads(options.inter_op_threads)
                    .thread_name(|i| format!("opforge-inter-op-{i}"))
                    .build()
                    .map_err(|e| {
                        Status::resource_exhausted(format!("cannot start the inter-op pool: {e}"))
                    })?,
            )
        } else {
            None
        };
        let n = graph.len();
        let parallel = match options.inter_op_threads {
            0 => device.thread_pool().rayon_pool().is_some(),
            1 => false,
            _ => true,
        };
        Ok(Session {
            graph: Arc::new(graph),
            device,
            resource_mgr: Arc::new(ResourceMgr::new()),
            kernels: (0..n).map(|_| OnceLock::new()).collect(),
            kernel_registry: KernelRegistry::global(),
            plans: Mutex::new(HashMap::new()),
            inter_op,
            parallel,
        })
    }

    /// The graph.
    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// The resource manager holding the session's state (variables, ...).
    pub fn resource_mgr(&self) -> &Arc<ResourceMgr> {
        &self.resource_mgr
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

    /// Feeds tensors for some outputs, runs what `fetches` and `targets`
    /// need, and returns the fetched tensors in order.
    pub fn run(
        &self,
        feeds: Vec<(Output, Tensor)>,
        fetches: &[Output],
        targets: &[NodeId],
    ) -> Result<Vec<Tensor>> {
        for (o, t) in &feeds {
            let want = self.graph.output_type(*o).base();
            if t.dtype() != want {
                return Err(Status::invalid_argument(format!(
                    "Tensor fed for {} has dtype {}, but the graph expects {want}",
                    self.graph.output_name(*o),
                    t.dtype()
                )));
            }
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
        let mut values: Vec<Option<Tensor>> = vec![None; plan.num_slots];
        for (slot, (_, t)) in plan.feed_slots.iter().zip(feeds) {
            values[*slot] = Some(t);
        }
        let pool = match &self.inter_op {
            Some(pool) => Some(pool),
            None => self.device.thread_pool().rayon_pool(),
        };
        match pool {
            Some(pool) if self.parallel && !plan.sequential => {
                self.run_parallel(&plan, values, pool)
            }
            _ => self.run_sequential(&plan, values),
        }
    }

    /// The node's kernel, built on first use.
    fn kernel(&self, node: NodeId) -> Result<Arc<NodeKernel>> {
        self.kernels[node]
            .get_or_init(|| {
                let n = self.graph.node(node);
                build_kernel(
                    self.kernel_registry,
                    &n.registration.op_def,
                    &n.name,
                    n.attrs.clone(),
                    self.device.as_ref(),
                )
                .map(|(sig, kernel)| Arc::new(NodeKernel { sig, kernel }))
                .map_err(|e| self.annotate(e, node))
            })
            .clone()
    }

    fn annotate(&self, e: Status, node: NodeId) -> Status {
        let n = self.graph.node(node);
        e.append(format!(
            "\n\t [[{{{{node {}}}}} = {}{}]]",
            n.name,
            n.op,
            crate::attrs::summarize_attrs(&n.attrs)
        ))
    }

    fn make_plan(&self, feeds: &[Output], fetches: &[Output], targets: &[NodeId]) -> Result<Plan> {
        let g = &self.graph;
        let fed: std::collections::HashSet<Output> = feeds.iter().copied().collect();
        // Which nodes must run.
        let mut needed = vec![false; g.len()];
        let mut stack: Vec<NodeId> = fetches
            .iter()
            .filter(|o| !fed.contains(o))
            .map(|o| o.node)
            .collect();
        stack.extend_from_slice(targets);
        while let Some(n) = stack.pop() {
            if std::mem::replace(&mut needed[n], true) {
                continue;
            }
            let node = g.node(n);
            stack.extend(
                node.inputs
                    .iter()
                    .filter(|o| !fed.contains(o))
                    .map(|o| o.node),
            );
            stack.extend_from_slice(&node.control_inputs);
        }
        // Value slots: feeds first, then used outputs of needed nodes.
        let mut slot_of: HashMap<Output, usize> = HashMap::new();
        let mut feed_slots = Vec::with_capacity(feeds.len());
        for &o in feeds {
            let next = slot_of.len();
            feed_slots.push(*slot_of.entry(o).or_insert(next));
        }
        let order: Vec<NodeId> = (0..g.len()).filter(|&n| needed[n]).collect();
        let step_of: HashMap<NodeId, usize> =
            order.iter().enumerate().map(|(i, &n)| (n, i)).collect();
        let mut steps: Vec<Step> = Vec::with_capacity(order.len());
        let mut slot_uses: Vec<usize> = vec![0; slot_of.len()];
        let mut pending = vec![0usize; order.len()];
        let mut all_small = true;
        for (si, &n) in order.iter().enumerate() {
            let node = g.node(n);
            let mut inputs = Vec::with_capacity(node.inputs.len());
            let mut preds: Vec<usize> = Vec::new();
            for &o in &node.inputs {
                let next = slot_of.len();
                let slot = *slot_of.entry(o).or_insert(next);
                if slot == slot_uses.len() {
                    slot_uses.push(0);
                }
                slot_uses[slot] += 1;
                inputs.push(slot);
                if !fed.contains(&o) {
                    preds.push(step_of[&o.node]);
                }
            }
            preds.extend(node.control_inputs.iter().map(|c| step_of[c]));
            preds.sort_unstable();
            preds.dedup();
            pending[si] = preds.len();
            for p in preds {
                steps[p].successors.push(si);
            }
            all_small &= node.output_shapes.iter().all(|s| {
                s.as_ref().is_some_and(|d| {
                    d.iter().all(|&x| x >= 0) && d.iter().product::<i64>() <= SMALL_ELEMENTS
                })
            });
            steps.push(Step {
                node: n,
                kernel: self.kernel(n)?,
                inputs,
                outputs: vec![None; node.output_types.len()],
                successors: Vec::new(),
            });
        }
        let mut fetch_slots = Vec::with_capacity(fetches.len());
        for &o in fetches {
            let next = slot_of.len();
            let slot = *slot_of.entry(o).or_insert(next);
            if slot == slot_uses.len() {
                slot_uses.push(0);
            }
            slot_uses[slot] += 1;
            fetch_slots.push(slot);
        }
        for (&o, &slot) in &slot_of {
            if let Some(&si) = step_of.get(&o.node) {
                if !fed.contains(&o) {
                    steps[si].outputs[o.index] = Some(slot);
                }
            }
        }
        let roots = (0..steps.len()).filter(|&i| pending[i] == 0).collect();
        Ok(Plan {
            num_slots: slot_of.len(),
            steps,
            feed_slots,
            fetch_slots,
            slot_uses,
            pending,
            roots,
            sequential: all_small,
        })
    }

    /// Runs one step on its gathered inputs and hands each output to `output`.
    fn execute(
        &self,
        step: &Step,
        inputs: &mut TensorVec,
        mut output: impl FnMut(usize, Tensor),
    ) -> Result<()> {
        call_kernel(
            step.kernel.kernel.as_ref(),
            &step.kernel.sig,
            inputs,
            self.device.as_ref(),
            &self.resource_mgr,
            |_, i, t| output(i, t),
        )
        .map_err(|e| self.annotate(e, step.node))
    }

    fn run_sequential(&self, plan: &Plan, mut values: Vec<Option<Tensor>>) -> Result<Vec<Tensor>> {
        let mut uses = plan.slot_uses.clone();
        for step in &plan.steps {
            // Each value moves to its last reader, so the kernel may reuse its buffer.
            let mut inputs = TensorVec::new();
            for &slot in &step.inputs {
                uses[slot] -= 1;
                let v = if uses[slot] == 0 {
                    values[slot].take()
                } else {
                    values[slot].clone()
                };
                inputs.push(v.ok_or_else(|| self.annotate(unproduced(), step.node))?);
            }
            self.execute(step, &mut inputs, |i, t| {
                if let Some(slot) = step.outputs[i] {
                    values[slot] = Some(t);
                }
            })?;
        }
        collect_fetches(plan, &mut uses, |slot, last| {
            if last {
                values[slot].take()
            } else {
                values[slot].clone()
            }
        })
    }

    fn run_parallel(
        &self,
        plan: &Plan,
        values: Vec<Option<Tensor>>,
        pool: &rayon::ThreadPool,
    ) -> Result<Vec<Tensor>> {
        let state = ParallelState {
            values: values.into_iter().map(Mutex::new).collect(),
            uses: plan
                .slot_uses
                .iter()
                .map(|&u| AtomicUsize::new(u))
                .collect(),
            pending: plan.pending.iter().map(|&p| AtomicUsize::new(p)).collect(),
            error: Mutex::new(None),
        };
        pool.scope(|scope| {
            for &r in &plan.roots {
                let state = &state;
                scope.spawn(move |s| self.process(plan, state, r, s));
            }
        });
        if let Some(e) = state
            .error
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner)
        {
            return Err(e);
        }
        let mut uses: Vec<usize> = state
            .uses
            .iter()
            .map(|u| u.load(Ordering::Acquire))
            .collect();
        collect_fetches(plan, &mut uses, |slot, last| {
            let mut v = state.values[slot]
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if last {
                v.take()
            } else {
                v.clone()
            }
        })
    }

    /// Runs `step` and then, inline, one successor it made ready; spawns the others.
    fn process<'s>(
        &'s self,
        plan: &'s Plan,
        state: &'s ParallelState,
        mut step: usize,
        scope: &rayon::Scope<'s>,
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
            let gathered: Result<TensorVec> = s
                .inputs
                .iter()
                .map(|&slot| {
                    // Count this read under the slot's lock: otherwise the last
                    // reader could take the value between another reader's
                    // count and its clone.
                    let mut v = state.values[slot]
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner);
                    let last = state.uses[slot].fetch_sub(1, Ordering::AcqRel) == 1;
                    let t = if last { v.take() } else { v.clone() };
                    t.ok_or_else(|| self.annotate(unproduced(), s.node))
                })
                .collect();
            let result = gathered.and_then(|mut inputs| {
                self.execute(s, &mut inputs, |i, t| {
                    if let Some(slot) = s.outputs[i] {
                        *state.values[slot]
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner) = Some(t);
                    }
                })
            });
            if let Err(e) = result {
                state
                    .error
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .get_or_insert(e);
                return;
            }
            let mut ready = s
                .successors
                .iter()
                .copied()
                .filter(|&n| state.pending[n].fetch_sub(1, Ordering::AcqRel) == 1);
            let Some(next) = ready.next() else { return };
            for other in ready {
                scope.spawn(move |sc| self.process(plan, state, other, sc));
            }
            step = next;
        }
    }
}

fn unproduced() -> Status {
    Status::internal("executor: a value was read before it was produced")
}

/// The fetched values, each moved out by its last reader.
fn collect_fetches(
    plan: &Plan,
    uses: &mut [usize],
    mut get: impl FnMut(usize, bool) -> Option<Tensor>,
) -> Result<Vec<Tensor>> {
    plan.fetch_slots
        .iter()
        .map(|&slot| {
            uses[slot] -= 1;
            get(slot, uses[slot] == 0)
                .ok_or_else(|| Status::internal("executor: a fetched value was not produced"))
        })
        .collect()
}

struct ParallelState {
    values: Vec<Mutex<Option<Tensor>>>,
    uses: Vec<AtomicUsize>,
    pending: Vec<AtomicUsize>,
    error: Mutex<Option<Status>>,
}
