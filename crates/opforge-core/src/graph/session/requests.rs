//! The executor's output requests (see [`OutputRequest`]): which request
//! each step's outputs get, decided once per plan, and the bindings a run
//! makes of them.
//!
//! - **`Null`** for an output nobody reads (no value slot: not consumed,
//!   not fetched), to kernels that handle it.
//! - **`InPlace`** on an (input, output) pair the op's [`FInplaceOption`]
//!   or the kernel's own declaration ([`OpKernel::inplace_pairs`]) allows,
//!   to kernels that handle it, when the input is read by this step alone
//!   (one reader, not fed, not fetched), on the same device, with the
//!   output's dtype and the output's fully known inferred shape. At run
//!   time [`call_kernel_with`](crate::kernel::call_kernel_with) offers the
//!   input only if no other tensor shares its buffer (a `Const`'s value
//!   does), else the kernel is asked to `Write`.
//! - **`Add`** for the parts of an `AddN` (how gradients sum the
//!   contributions of a tensor's consumers, `autodiff::backprop`): the
//!   parts read by the `AddN` alone, with its fully known shape, produced
//!   on its device by distinct steps, form a chain in step order. The
//!   first part is written as usual and its slot becomes the accumulator;
//!   each later part whose kernel handles `Add` is asked to add into it
//!   (its step now waits for the previous link of the chain, so the
//!   accumulator has one writer at a time), and the `AddN` is rebuilt over
//!   the accumulator and the parts whose kernels do not handle `Add` (with
//!   `N = 1` it passes the accumulator through). So no part but the first
//!   is ever materialised, and the sum's buffer is the first part's.

use super::{NodeKernel, Session, Step};
use crate::graph::Output;
use crate::kernel::{FInplaceIdentity, FInplaceOption, OutputBinding, OutputRequest};
use crate::proto::attr_value::Value;
use crate::proto::AttrValue;
use crate::{Result, Status, Tensor};
use smallvec::SmallVec;
use std::collections::HashSet;
use std::sync::{Arc, PoisonError};

use super::plan::{RunState, NO_SLOT};

/// The request a plan makes of one output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Planned {
    Write,
    Null,
    /// Flat input `.0` may become the output.
    InPlace(u32),
    /// The output's slot is an accumulator: the value there is taken
    /// before the step runs and the kernel adds into it.
    Add,
}

/// The bindings of one step's outputs for one run (inline for one output,
/// the common case: a binding holds a tensor, and moving several inline
/// was a measurable part of a small node's cost).
pub(super) type Bindings = SmallVec<[OutputBinding; 1]>;

/// A fully known shape.
fn known(s: Option<&Option<Vec<i64>>>) -> Option<&[i64]> {
    match s {
        Some(Some(d)) if d.iter().all(|&x| x >= 0) => Some(d),
        _ => None,
    }
}

/// What [`Session::plan_requests`] works on: the plan being made.
pub(super) struct PlanParts<'p> {
    pub(super) steps: &'p mut [Step],
    pub(super) slots: &'p mut [usize],
    pub(super) slot_uses: &'p mut [usize],
    pub(super) fed: &'p HashSet<Output>,
    /// Node index -> step index (`u32::MAX`: not in the plan).
    pub(super) step_of: &'p [u32],
}

impl Session {
    /// The output requests a run with these feeds, fetches and targets
    /// makes (with [`SessionOptions::output_requests`](super::SessionOptions::output_requests)):
    /// each node asked anything but `Write`, by name, with one request per
    /// output. What a kernel is finally asked may be less: `InPlace` and
    /// `Add` fall back to `Write` at run time when the buffer turns out to
    /// be shared. For tests and tools.
    pub fn planned_requests(
        &self,
        feeds: &[Output],
        fetches: &[Output],
        targets: &[crate::graph::NodeId],
    ) -> Result<Vec<(String, Vec<OutputRequest>)>> {
        let plan = self.make_plan(feeds, fetches, targets)?;
        Ok(plan
            .steps
            .iter()
            .filter_map(|s| {
                let r = s.requests.as_ref()?;
                let reqs = r
                    .iter()
                    .map(|p| match p {
                        Planned::Write => OutputRequest::Write,
                        Planned::Null => OutputRequest::Null,
                        Planned::InPlace(_) => OutputRequest::InPlace,
                        Planned::Add => OutputRequest::Add,
                    })
                    .collect();
                Some((self.graph.at(s.node as usize).name.clone(), reqs))
            })
            .collect())
    }

    /// Decides every step's requests (stored in [`Step::requests`]) and
    /// rewrites the `AddN`s that accumulate; returns the dependency edges
    /// (from step, to step) the accumulation chains add.
    pub(super) fn plan_requests(&self, p: &mut PlanParts<'_>) -> Result<Vec<(u32, u32)>> {
        let mut planned: Vec<Option<Vec<Planned>>> = vec![None; p.steps.len()];
        let mut edges = Vec::new();
        for sa in 0..p.steps.len() {
            if self.graph.at(p.steps[sa].node as usize).op == "AddN" {
                self.plan_add_to(p, sa, &mut planned, &mut edges)?;
            }
        }
        for (si, plan) in planned.iter_mut().enumerate() {
            self.plan_step(p, si, plan);
        }
        for (step, plan) in p.steps.iter_mut().zip(planned) {
            step.requests = plan
                .filter(|r| r.iter().any(|&x| x != Planned::Write))
                .map(Vec::into_boxed_slice);
        }
        Ok(edges)
    }

    /// `Null` and `InPlace` for step `si` (after the `Add`s are planned).
    fn plan_step(&self, p: &PlanParts<'_>, si: usize, plan: &mut Option<Vec<Planned>>) {
        let step = &p.steps[si];
        let support = step.kernel.kernel.supported_requests();
        let null = support.handles(OutputRequest::Null);
        let inplace = support.handles(OutputRequest::InPlace);
        if !null && !inplace {
            return;
        }
        let node = self.graph.at(step.node as usize);
        let (ni, no) = (step.num_inputs as usize, step.num_outputs as usize);
        let out_slots = &p.slots[step.first_slot + ni..step.first_slot + ni + no];
        let plan = plan.get_or_insert_with(|| vec![Planned::Write; no]);
        if null {
            for (o, &slot) in out_slots.iter().enumerate() {
                if slot == NO_SLOT && plan[o] == Planned::Write {
                    plan[o] = Planned::Null;
                }
            }
        }
        if !inplace {
            return;
        }
        let mut pairs = step.kernel.kernel.inplace_pairs();
        if let Some(f) = self.registry.attr::<FInplaceOption>(&node.op) {
            pairs.extend(f(&node.attrs));
        }
        let in_slots = &p.slots[step.first_slot..step.first_slot + ni];
        let mut offered: SmallVec<[usize; 4]> = SmallVec::new();
        for (i, o) in pairs {
            if i >= ni || o >= no || plan[o] != Planned::Write || offered.contains(&i) {
                continue;
            }
            let input = node.inputs[i];
            let Some(producer) = self.producer_step(p, input) else {
                continue;
            };
            let fits = out_slots[o] != NO_SLOT
                && p.slot_uses[in_slots[i]] == 1
                && node.input_types.get(i) == node.output_types.get(o)
                && Arc::ptr_eq(&p.steps[producer].device, &step.device)
                && known(node.output_shapes.get(o)).is_some_and(|s| {
                    known(
                        self.graph
                            .at(input.node.index())
                            .output_shapes
                            .get(input.index),
                    ) == Some(s)
                        && s.iter()
                            .try_fold(1usize, |n, &d| n.checked_mul(usize::try_from(d).ok()?))
                            .is_none_or(|n| n >= self.inplace_min_elements)
                });
            if fits {
                plan[o] = Planned::InPlace(i as u32);
                offered.push(i);
            }
        }
    }

    /// The step producing `o`, unless it is fed (or not in the plan).
    fn producer_step(&self, p: &PlanParts<'_>, o: Output) -> Option<usize> {
        if p.fed.contains(&o) {
            return None;
        }
        match p.step_of[o.node.index()] {
            u32::MAX => None,
            s => Some(s as usize),
        }
    }

    /// Plans the accumulation of the `AddN` of step `sa` (see the module's
    /// documentation).
    fn plan_add_to(
        &self,
        p: &mut PlanParts<'_>,
        sa: usize,
        planned: &mut [Option<Vec<Planned>>],
        edges: &mut Vec<(u32, u32)>,
    ) -> Result<()> {
        let node = self.graph.at(p.steps[sa].node as usize);
        let Some(shape) = known(node.output_shapes.first()) else {
            return Ok(());
        };
        let a = &p.steps[sa];
        let in_slots = p.slots[a.first_slot..a.first_slot + a.num_inputs as usize].to_vec();
        // The eligible parts: (producer step, output index, position in the AddN).
        let mut parts: Vec<(usize, usize, usize)> = Vec::new();
        for (pos, &input) in node.inputs.iter().enumerate() {
            let Some(ps) = self.producer_step(p, input) else {
                continue;
            };
            let producer = self.graph.at(input.node.index());
            let eligible = p.slot_uses[in_slots[pos]] == 1
                && Arc::ptr_eq(&p.steps[ps].device, &a.device)
                && known(producer.output_shapes.get(input.index)) == Some(shape)
                && !parts.iter().any(|&(s, _, _)| s == ps);
            if eligible {
                parts.push((ps, input.index, pos));
            }
        }
        parts.sort_unstable();
        let Some(&(first, _, first_pos)) = parts.first() else {
            return Ok(());
        };
        let adders: Vec<(usize, usize, usize)> = parts[1..]
            .iter()
            .copied()
            .filter(|&(ps, _, _)| {
                p.steps[ps]
                    .kernel
                    .kernel
                    .supported_requests()
                    .handles(OutputRequest::Add)
            })
            .collect();
        if adders.is_empty() {
            return Ok(());
        }
        // The AddN over the accumulator and the parts left.
        let kept: Vec<usize> = (0..in_slots.len())
            .filter(|pos| !adders.iter().any(|&(_, _, ap)| ap == *pos))
            .collect();
        let mut attrs = node.attrs.clone();
        attrs.insert(
            "N".to_string(),
            AttrValue {
                value: Some(Value::I(kept.len() as i64)),
            },
        );
        let device = a.device.clone();
        let built = match self.registry.build_kernel(
            &node.registration.op_def,
            &node.name,
            attrs,
            device.as_ref(),
        ) {
            Ok(b) => b,
            // No kernel for the shorter AddN: no accumulation, the AddN runs as it is.
            Err(_) => return Ok(()),
        };
        let acc_slot = in_slots[first_pos];
        let mut chain = first;
        for &(ps, o, pos) in &adders {
            let step = &p.steps[ps];
            let at = step.first_slot + step.num_inputs as usize + o;
            p.slot_uses[in_slots[pos]] -= 1;
            p.slots[at] = acc_slot;
            planned[ps].get_or_insert_with(|| vec![Planned::Write; step.num_outputs as usize])[o] =
                Planned::Add;
            edges.push((chain as u32, ps as u32));
            chain = ps;
        }
        let input_memory: crate::device::InputMemory = built.input_memory(device.as_ref());
        let a = &mut p.steps[sa];
        let out_slot = p.slots[a.first_slot + a.num_inputs as usize];
        for (k, &pos) in kept.iter().enumerate() {
            p.slots[a.first_slot + k] = in_slots[pos];
        }
        p.slots[a.first_slot + kept.len()] = out_slot;
        a.num_inputs = kept.len() as u32;
        a.host_inputs = input_memory.all_host();
        a.kernel = Arc::new(NodeKernel {
            sig: built.sig,
            kernel: built.kernel,
            registration: built.registration,
            device,
            input_memory,
        });
        Ok(())
    }

    /// The bindings of `step`'s outputs for this run: an `Add` takes the
    /// accumulator out of its slot (`take`).
    pub(super) fn bind(
        &self,
        step: &Step,
        requests: &[Planned],
        outputs: &[usize],
        mut take: impl FnMut(usize) -> Option<Tensor>,
    ) -> Result<Bindings> {
        requests
            .iter()
            .zip(outputs)
            .map(|(r, &slot)| {
                Ok(match *r {
                    Planned::Write => OutputBinding::Write,
                    Planned::Null => OutputBinding::Null,
                    Planned::InPlace(i) => OutputBinding::InPlace { input: i as usize },
                    Planned::Add => OutputBinding::Add(take(slot).ok_or_else(|| {
                        self.annotate(
                            Status::internal("executor: the accumulator was not produced"),
                            step.node as usize,
                        )
                    })?),
                })
            })
            .collect()
    }

    /// The in-place check ([`SessionOptions::check_inplace`](super::SessionOptions::check_inplace)):
    /// `Internal` if the memory an `InPlace` or `Add` request lets be
    /// written (one the runtime grants: the kernel handles the request and
    /// no other tensor holds the buffer) overlaps the memory of another
    /// input of the step or of a value of the run still waiting for its
    /// readers. Memory ranges are compared, not buffers, so two buffers
    /// over one allocation (foreign memory wrapped twice) are caught.
    /// Pairs the op declares identity ([`FInplaceIdentity`]) are exempt.
    pub(super) fn check_inplace(
        &self,
        step: &Step,
        inputs: &[Tensor],
        bindings: &Bindings,
        state: &RunState,
    ) -> Result<()> {
        let node = self.graph.at(step.node as usize);
        let support = step.kernel.kernel.supported_requests();
        let mut identity = None;
        for (o, b) in bindings.iter().enumerate() {
            let (t, what, skip) = match b {
                OutputBinding::InPlace { input } => {
                    let Some(t) = inputs.get(*input) else {
                        continue;
                    };
                    let granted = support.handles(OutputRequest::InPlace)
                        && node.output_types.get(o).is_some_and(|&dt| {
                            crate::kernel::can_take_over(t, dt, step.device.location())
                        });
                    let identity = identity.get_or_insert_with(|| self.identity_pairs(node));
                    if !granted || identity.contains(&(*input, o)) {
                        continue;
                    }
                    (t, format!("input {input}"), Some(*input))
                }
                // Written by the kernel or by the runtime's add, unless shared (then copied).
                OutputBinding::Add(acc) if acc.is_uniquely_owned() => {
                    (acc, "the accumulator".to_string(), None)
                }
                _ => continue,
            };
            let Some(range) = host_range(t) else {
                continue;
            };
            let overlaps = |x: &Tensor| host_range(x).is_some_and(|r| overlap(r, range));
            let other_input = inputs
                .iter()
                .enumerate()
                .find(|&(j, x)| Some(j) != skip && overlaps(x));
            let holder = match other_input {
                Some((j, _)) => Some(format!("input {j} of the same node")),
                None => state.values.iter().enumerate().find_map(|(slot, v)| {
                    let v = v.try_lock().ok()?;
                    v.as_ref()
                        .is_some_and(&overlaps)
                        .then(|| format!("value slot {slot} of the run (a pending reader's)"))
                }),
            };
            if let Some(holder) = holder {
                let req = match b {
                    OutputBinding::Add(_) => "Add",
                    _ => "InPlace",
                };
                return Err(self.annotate(
                    Status::internal(format!(
                        "in-place check (OPFORGE_CHECK_INPLACE): output {o} would be written \
                         ({req}) in the memory of {what}, which {holder} still reads"
                    )),
                    step.node as usize,
                ));
            }
        }
        Ok(())
    }

    /// The (input, output) pairs the op declares identity.
    fn identity_pairs(&self, node: &crate::graph::Node) -> Vec<(usize, usize)> {
        let (Some(opts), Some(ident)) = (
            self.registry.attr::<FInplaceOption>(&node.op),
            self.registry.attr::<FInplaceIdentity>(&node.op),
        ) else {
            return Vec::new();
        };
        opts(&node.attrs)
            .into_iter()
            .zip(ident(&node.attrs))
            .filter(|&(_, same)| same)
            .map(|(pair, _)| pair)
            .collect()
    }
}

/// The host memory a dense tensor's elements take (`None`: empty, or not
/// on the host).
fn host_range(t: &Tensor) -> Option<(usize, usize)> {
    let (p, len) = t.host_data()?;
    (len > 0).then_some((p as usize, p as usize + len))
}

fn overlap(a: (usize, usize), b: (usize, usize)) -> bool {
    a.0 < b.1 && b.0 < a.1
}

impl RunState {
    /// Takes the value of `slot` (an accumulator) without counting a read.
    pub(super) fn take_value(&self, slot: usize) -> Option<Tensor> {
        self.values
            .get(slot)?
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }
}

#[cfg(test)]
mod tests;
