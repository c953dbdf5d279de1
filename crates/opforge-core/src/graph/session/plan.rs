//! A session's plans: for one (feeds, fetches, targets) the steps to run
//! (pruned, placed, each with its kernel), one flat array of value slots,
//! the dependency edges between steps, and the per-run state a plan hands
//! out and takes back.

use super::requests::{PlanParts, Planned};
use super::{NodeKernel, Session};
use crate::device::Device;
use crate::graph::{NodeId, Output};
use crate::{Result, Status, Tensor};
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex, PoisonError};

pub(super) struct Step {
    /// The node's index in the graph.
    pub(super) node: u32,
    /// The node's kernel, built when the plan was made.
    pub(super) kernel: Arc<NodeKernel>,
    /// Copies of the kernel's device and of whether all its inputs must be
    /// on the host, kept here so that a run reads one contiguous array
    /// rather than one more cache line of every node's kernel.
    pub(super) device: Arc<dyn Device>,
    pub(super) host_inputs: bool,
    /// Where the step's slots start in `Plan::slots`: the value slot of
    /// each flat input, then of each flat output ([`NO_SLOT`] if nothing
    /// reads it). One array for the whole plan keeps a run's walk over it
    /// sequential in memory.
    pub(super) first_slot: usize,
    pub(super) num_inputs: u32,
    pub(super) num_outputs: u32,
    /// The output requests beyond `Write` (see `requests.rs`), one per
    /// output; `None`: every output `Write` (the plain call).
    pub(super) requests: Option<Box<[Planned]>>,
}

/// The slot of an output nothing reads.
pub(super) const NO_SLOT: usize = usize::MAX;

pub(super) struct Plan {
    pub(super) steps: Vec<Step>,
    /// Every step's input and output slots (see [`Step::first_slot`]).
    pub(super) slots: Vec<usize>,
    /// The steps that wait for each step (deduplicated), all in one array:
    /// those of step `i` are `successors[succ_start[i]..succ_start[i + 1]]`.
    pub(super) successors: Vec<u32>,
    pub(super) succ_start: Vec<u32>,
    pub(super) num_slots: usize,
    pub(super) feed_slots: Vec<usize>,
    pub(super) fetch_slots: Vec<usize>,
    /// Readers of each slot (consumers plus fetches).
    pub(super) slot_uses: Vec<usize>,
    pub(super) pending: Vec<usize>,
    pub(super) roots: Vec<usize>,
    /// Run on the caller's thread, in order: no inter-op parallelism pays off.
    pub(super) sequential: bool,
    /// The per-run buffers of finished runs, for the next runs to reuse: a
    /// large plan would otherwise allocate, and fault in, fresh pages on
    /// every run. Each holds no value between runs.
    pub(super) spare: Mutex<Vec<RunState>>,
}

/// The buffers one run works in: a value slot per used output, the readers
/// each slot still has, and (parallel runs) the unfinished predecessors of
/// each step and the first error.
pub(super) struct RunState {
    pub(super) values: Vec<Mutex<Option<Tensor>>>,
    pub(super) uses: Vec<AtomicUsize>,
    pub(super) pending: Vec<AtomicUsize>,
    pub(super) error: Mutex<Option<Status>>,
}

/// Spare run states kept per plan (more only with more concurrent runs).
const SPARE_RUN_STATES: usize = 4;

impl Plan {
    /// The value slots of `step`'s flat inputs.
    #[inline]
    pub(super) fn inputs(&self, step: &Step) -> &[usize] {
        &self.slots[step.first_slot..step.first_slot + step.num_inputs as usize]
    }

    /// The value slots of `step`'s flat outputs ([`NO_SLOT`] where unread).
    #[inline]
    pub(super) fn outputs(&self, step: &Step) -> &[usize] {
        let start = step.first_slot + step.num_inputs as usize;
        &self.slots[start..start + step.num_outputs as usize]
    }

    /// The steps that wait for step `i`.
    #[inline]
    pub(super) fn successors(&self, i: usize) -> &[u32] {
        &self.successors[self.succ_start[i] as usize..self.succ_start[i + 1] as usize]
    }

    /// A run state with the feeds in their slots and every count at its start.
    pub(super) fn start_run(&self, feeds: Vec<(Output, Tensor)>) -> RunState {
        let spare = self
            .spare
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop();
        let mut state = match spare {
            Some(mut st) => {
                for (u, &n) in st.uses.iter_mut().zip(&self.slot_uses) {
                    *u.get_mut() = n;
                }
                for (p, &n) in st.pending.iter_mut().zip(&self.pending) {
                    *p.get_mut() = n;
                }
                st
            }
            None => RunState {
                values: (0..self.num_slots).map(|_| Mutex::new(None)).collect(),
                uses: self
                    .slot_uses
                    .iter()
                    .map(|&n| AtomicUsize::new(n))
                    .collect(),
                pending: self.pending.iter().map(|&n| AtomicUsize::new(n)).collect(),
                error: Mutex::new(None),
            },
        };
        for (&slot, (_, t)) in self.feed_slots.iter().zip(feeds) {
            // A fed value nothing reads is dropped now, so a finished run
            // leaves every slot empty.
            if self.slot_uses[slot] > 0 {
                *state.values[slot]
                    .get_mut()
                    .unwrap_or_else(PoisonError::into_inner) = Some(t);
            }
        }
        state
    }

    /// Keeps a finished run's state for the next run. After an error,
    /// values may remain: they are dropped here.
    pub(super) fn finish_run(&self, mut state: RunState, failed: bool) {
        if failed {
            for v in &mut state.values {
                *v.get_mut().unwrap_or_else(PoisonError::into_inner) = None;
            }
            *state
                .error
                .get_mut()
                .unwrap_or_else(PoisonError::into_inner) = None;
        }
        debug_assert!(state
            .values
            .iter_mut()
            .all(|v| v.get_mut().is_ok_and(|v| v.is_none())));
        let mut spare = self.spare.lock().unwrap_or_else(PoisonError::into_inner);
        if spare.len() < SPARE_RUN_STATES {
            spare.push(state);
        }
    }
}

/// Outputs whose every known shape is at most this many elements count as
/// small: a plan of only small nodes runs sequentially.
const SMALL_ELEMENTS: i64 = 1 << 12;

impl Session {
    pub(super) fn make_plan(
        &self,
        feeds: &[Output],
        fetches: &[Output],
        targets: &[NodeId],
    ) -> Result<Plan> {
        let g = &self.graph;
        let fed: std::collections::HashSet<Output> = feeds.iter().copied().collect();
        // Which nodes must run.
        let mut needed = vec![false; g.len()];
        let mut stack: Vec<usize> = fetches
            .iter()
            .filter(|o| !fed.contains(o))
            .map(|o| o.node.index())
            .collect();
        stack.extend(targets.iter().map(|t| t.index()));
        while let Some(n) = stack.pop() {
            if std::mem::replace(&mut needed[n], true) {
                continue;
            }
            let node = g.at(n);
            stack.extend(
                node.inputs
                    .iter()
                    .filter(|o| !fed.contains(o))
                    .map(|o| o.node.index()),
            );
            stack.extend(node.control_inputs.iter().map(|c| c.index()));
        }
        drop(stack);
        // Value slots: feeds first, then used outputs of needed nodes, then
        // fetches. The slot of output `i` of node `n` is
        // `slot_of[out_base[n] + i]` (NO_SLOT until it has one): arrays
        // rather than a hash map, for a plan of a large graph.
        let mut out_base: Vec<usize> = Vec::with_capacity(g.len() + 1);
        let mut total_outputs = 0usize;
        for n in g.nodes() {
            out_base.push(total_outputs);
            total_outputs += n.output_types.len();
        }
        let mut slot_of: Vec<usize> = vec![NO_SLOT; total_outputs];
        let mut num_slots = 0usize;
        let mut slot_for = |o: Output| {
            let s = &mut slot_of[out_base[o.node.index()] + o.index];
            if *s == NO_SLOT {
                *s = num_slots;
                num_slots += 1;
            }
            *s
        };
        let feed_slots: Vec<usize> = feeds.iter().map(|&o| slot_for(o)).collect();
        let mut slot_uses: Vec<usize> =
            vec![0; feed_slots.iter().map(|&s| s + 1).max().unwrap_or(0)];
        // The steps, in graph order; `step_of[n]` is node n's step.
        let mut step_of: Vec<u32> = vec![u32::MAX; g.len()];
        let mut num_steps = 0u32;
        for (n, _) in needed.iter().enumerate().filter(|&(_, &x)| x) {
            step_of[n] = num_steps;
            num_steps += 1;
        }
        drop(needed);
        let order = || step_of.iter().enumerate().filter(|&(_, &s)| s != u32::MAX);
        let mut steps: Vec<Step> = Vec::with_capacity(num_steps as usize);
        // Every step's inputs' slots, then room for its outputs' slots
        // (filled once the fetches have theirs).
        let mut slots: Vec<usize> = Vec::new();
        // Each step's predecessors (deduplicated), all in one array.
        let mut preds: Vec<u32> = Vec::new();
        let mut pred_start: Vec<u32> = Vec::with_capacity(num_steps as usize + 1);
        let mut all_small = true;
        for (n, _) in order() {
            let node = g.at(n);
            let first_slot = slots.len();
            let first_pred = preds.len();
            for &o in &node.inputs {
                let slot = slot_for(o);
                if slot == slot_uses.len() {
                    slot_uses.push(0);
                }
                slot_uses[slot] += 1;
                slots.push(slot);
                if !fed.contains(&o) {
                    preds.push(step_of[o.node.index()]);
                }
            }
            preds.extend(node.control_inputs.iter().map(|c| step_of[c.index()]));
            preds[first_pred..].sort_unstable();
            let unique = dedup_in_place(&mut preds[first_pred..]);
            preds.truncate(first_pred + unique);
            pred_start.push(edge_index(first_pred)?);
            slots.resize(slots.len() + node.output_types.len(), NO_SLOT);
            all_small &= node.output_shapes.iter().all(|s| {
                s.as_ref().is_some_and(|d| {
                    // Checked: an inferred shape may have dims whose product
                    // overflows (the kernel then refuses it).
                    d.iter().all(|&x| x >= 0)
                        && d.iter()
                            .try_fold(1i64, |n, &x| n.checked_mul(x))
                            .is_some_and(|n| n <= SMALL_ELEMENTS)
                })
            });
            let kernel = self.kernel(n)?;
            steps.push(Step {
                node: n as u32,
                device: kernel.device.clone(),
                host_inputs: kernel.input_memory.all_host(),
                kernel,
                first_slot,
                num_inputs: node.inputs.len() as u32,
                num_outputs: node.output_types.len() as u32,
                requests: None,
            });
        }
        pred_start.push(edge_index(preds.len())?);
        let mut fetch_slots = Vec::with_capacity(fetches.len());
        for &o in fetches {
            let slot = slot_for(o);
            if slot == slot_uses.len() {
                slot_uses.push(0);
            }
            slot_uses[slot] += 1;
            fetch_slots.push(slot);
        }
        let num_slots = slot_uses.len();
        // Each step's output slots: NO_SLOT where nothing reads the output,
        // or where it is fed (the fed value is read instead).
        for (step, (n, _)) in steps.iter().zip(order()) {
            let start = step.first_slot + step.num_inputs as usize;
            let base = out_base[n];
            for (i, s) in slots[start..start + step.num_outputs as usize]
                .iter_mut()
                .enumerate()
            {
                let o = Output {
                    node: g.id_at(n),
                    index: i,
                };
                if !fed.contains(&o) {
                    *s = slot_of[base + i];
                }
            }
        }
        if self.output_requests {
            let extra = self.plan_requests(&mut PlanParts {
                steps: &mut steps,
                slots: &mut slots,
                slot_uses: &mut slot_uses,
                fed: &fed,
                step_of: &step_of,
            })?;
            if !extra.is_empty() {
                (preds, pred_start) = add_edges(&preds, &pred_start, &extra)?;
            }
        }
        drop((slot_of, out_base, step_of));
        // Successors of each step: the steps that have it as a predecessor,
        // in step order.
        let pending: Vec<usize> = pred_start
            .windows(2)
            .map(|w| (w[1] - w[0]) as usize)
            .collect();
        let mut succ_start: Vec<u32> = vec![0; steps.len() + 1];
        for &p in &preds {
            succ_start[p as usize + 1] += 1;
        }
        for i in 0..steps.len() {
            succ_start[i + 1] += succ_start[i];
        }
        let mut successors: Vec<u32> = vec![0; preds.len()];
        let mut fill: Vec<u32> = succ_start[..steps.len()].to_vec();
        for si in 0..steps.len() {
            for &p in &preds[pred_start[si] as usize..pred_start[si + 1] as usize] {
                successors[fill[p as usize] as usize] = si as u32;
                fill[p as usize] += 1;
            }
        }
        drop((preds, pred_start, fill));
        let roots = (0..steps.len()).filter(|&i| pending[i] == 0).collect();
        slots.shrink_to_fit();
        slot_uses.shrink_to_fit();
        Ok(Plan {
            num_slots,
            steps,
            slots,
            successors,
            succ_start,
            feed_slots,
            fetch_slots,
            slot_uses,
            pending,
            roots,
            sequential: all_small,
            spare: Mutex::new(Vec::new()),
        })
    }
}

/// Moves the distinct values of a sorted slice to its front: their count.
fn dedup_in_place(v: &mut [u32]) -> usize {
    let mut unique = 0;
    for i in 0..v.len() {
        if i == 0 || v[i] != v[unique - 1] {
            v[unique] = v[i];
            unique += 1;
        }
    }
    unique
}

/// The predecessor lists (`preds`, `pred_start`) with the edges `extra`
/// (from step, to step) added, each list sorted and deduplicated.
fn add_edges(
    preds: &[u32],
    pred_start: &[u32],
    extra: &[(u32, u32)],
) -> Result<(Vec<u32>, Vec<u32>)> {
    let steps = pred_start.len() - 1;
    let mut more: Vec<Vec<u32>> = vec![Vec::new(); steps];
    for &(from, to) in extra {
        more[to as usize].push(from);
    }
    let mut out = Vec::with_capacity(preds.len() + extra.len());
    let mut start = Vec::with_capacity(pred_start.len());
    for (si, added) in more.into_iter().enumerate() {
        let first = out.len();
        start.push(edge_index(first)?);
        out.extend_from_slice(&preds[pred_start[si] as usize..pred_start[si + 1] as usize]);
        out.extend(added);
        out[first..].sort_unstable();
        let unique = dedup_in_place(&mut out[first..]);
        out.truncate(first + unique);
    }
    start.push(edge_index(out.len())?);
    Ok((out, start))
}

/// A position in a plan's array of dependency edges, as a `u32`.
fn edge_index(n: usize) -> Result<u32> {
    u32::try_from(n).map_err(|_| {
        Status::resource_exhausted(format!(
            "the plan has more than {} dependencies: too many to run",
            u32::MAX
        ))
    })
}
