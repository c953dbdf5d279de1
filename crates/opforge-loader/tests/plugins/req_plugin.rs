//! A test op library (built by tests/output_requests.rs with a nested
//! cargo) whose kernel reports the output requests it sees.
//!
//! `ReqProbe` (kernel registered with `output_requests`, so the host asks
//! it for every request) and `ReqProbePlain` (the same kernel without the
//! flag: the host asks only for WRITE) compute `y = 2 * x` (float, `y`
//! declared like `x` with forwarding) honouring `y`'s request:
//! WRITE and INPLACE write `y`, ADD adds `2 * x` into the bound `y`, NULL
//! leaves it unset. `seen` (int32, shape `[3]`) is what the kernel saw:
//! the request codes of `y` and `seen` (`OPFORGE_REQ_*`), and the input `y`
//! took over (`forwarded_from(0)`, -1 for none).

use opforge_plugin::prelude::*;
use opforge_plugin::OutputRequest;

const fn probe(name: &'static str) -> OpDefBuilder {
    OpDefBuilder::new(name)
        .input("x: float")
        .output("y: float")
        .output("seen: int32")
        .set_shape_fn(probe_shape)
        .doc("y = 2 * x, and the requests the kernel saw.")
}

/// `ReqProbe`'s declaration.
pub const REQ_PROBE: OpDefBuilder = probe("ReqProbe");
/// `ReqProbePlain`'s declaration.
pub const REQ_PROBE_PLAIN: OpDefBuilder = probe("ReqProbePlain");

fn probe_shape(c: &mut InferenceContext<'_>) -> Result<()> {
    let x = c.input(0);
    c.set_output(0, x)?;
    let seen = c.vector(3)?;
    c.set_output(1, seen)
}

fn code(r: OutputRequest) -> i32 {
    match r {
        OutputRequest::Null => 0,
        OutputRequest::Write => 1,
        OutputRequest::InPlace => 2,
        OutputRequest::Add => 3,
        OutputRequest::Other(n) => n as i32,
    }
}

/// The kernel of both ops.
pub struct ProbeKernel;

impl CreateKernel for ProbeKernel {
    fn create(_: &OpKernelConstruction<'_>) -> Result<Self> {
        Ok(ProbeKernel)
    }
}

impl OpKernel for ProbeKernel {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let (r0, r1) = (ctx.output_request(0), ctx.output_request(1));
        let from = ctx.forwarded_from(0).map_or(-1, |j| j as i32);
        match r0 {
            OutputRequest::Null => {}
            OutputRequest::Add => {
                let (ins, mut out) = ctx.inputs_and_output(0)?;
                for (y, &x) in out.flat_mut::<f32>()?.iter_mut().zip(ins[0].flat::<f32>()?) {
                    *y += 2.0 * x;
                }
            }
            _ if from == 0 => {
                // In place: the output holds x.
                for v in ctx.output_mut(0)?.flat_mut::<f32>()? {
                    *v *= 2.0;
                }
            }
            _ => {
                let (ins, mut out) = ctx.inputs_and_output(0)?;
                for (y, &x) in out.flat_mut::<f32>()?.iter_mut().zip(ins[0].flat::<f32>()?) {
                    *y = 2.0 * x;
                }
            }
        }
        if r1 != OutputRequest::Null {
            let mut seen = ctx.allocate_output(1, &[3])?;
            seen.flat_mut::<i32>()?
                .copy_from_slice(&[code(r0), code(r1), from]);
        }
        Ok(())
    }
}

opforge_plugin::export! {
    name: "req_plugin",
    version: "0.1.0",
    ops: [REQ_PROBE, REQ_PROBE_PLAIN],
    kernels: [
        KernelDefBuilder::new("ReqProbe")
            .output_requests()
            .output_like_forwarding(0, 0)
            .build::<ProbeKernel>(),
        KernelDefBuilder::new("ReqProbePlain")
            .output_like_forwarding(0, 0)
            .build::<ProbeKernel>(),
    ],
}
