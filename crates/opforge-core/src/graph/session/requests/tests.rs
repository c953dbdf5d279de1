//! The executor's requests, with test ops in a sandbox registry whose
//! kernels record what they were asked.

use crate::graph::{Graph, NodeSpec, Output, Session, SessionOptions};
use crate::kernel::{
    FInplaceIdentity, FInplaceOption, KernelDefBuilder, KernelRegistration, OpKernel,
    OpKernelContext, OutputRequest, RequestSupport,
};
use crate::registry::Registry;
use crate::shape_inference::common::unchanged_shape;
use crate::shape_inference::ShapeFn;
use crate::{Code, OpDefBuilder, Result, Tensor};
use std::sync::{Arc, Mutex};

/// What `RTwice` saw on each run: its output's request, the input it was
/// offered, and whether its output took the input's buffer.
type Log = Arc<Mutex<Vec<(OutputRequest, Option<usize>, bool)>>>;

/// `RFresh`: a new float vector `[1, 2, 3, 4]` each run.
struct Fresh;
impl OpKernel for Fresh {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        ctx.set_output(0, Tensor::from_vec(&[4], vec![1f32, 2., 3., 4.])?)
    }
}

/// `RDup`: both outputs are its input (one buffer).
struct Dup;
impl OpKernel for Dup {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let x = ctx.take_input(0);
        ctx.set_output(1, x.clone())?;
        ctx.set_output(0, x)
    }
}

/// `RAlias`: two outputs over one allocation, each its own buffer (as a
/// plugin's `set_output_foreign` of one memory twice would make): each
/// looks uniquely owned.
struct Alias;
impl OpKernel for Alias {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let mut v = vec![1f32, 2., 3., 4.];
        let ptr = std::ptr::NonNull::new(v.as_mut_ptr().cast::<u8>()).expect("a Vec's pointer");
        let keep = Arc::new(v);
        for o in 0..2 {
            let keep = keep.clone();
            // SAFETY: the Vec's 16 bytes stay allocated until both release
            // callbacks ran (each holds the Vec); they hold valid floats.
            // Both buffers alias them on purpose: that is what the in-place
            // check must catch.
            let buf = unsafe {
                crate::tensor::Buffer::from_foreign(
                    ptr,
                    16,
                    crate::tensor::Location::Host,
                    move || drop(keep),
                )
            };
            ctx.set_output(o, Tensor::from_buffer(crate::DataType::Float, &[4], buf)?)?;
        }
        Ok(())
    }
}

/// `RTwice`: `y = 2 * x`, handling `InPlace` (and `Null`); logs.
struct Twice(Log);
impl OpKernel for Twice {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let req = ctx.output_request(0);
        let offered = ctx.inplace_input(0);
        let shape = ctx.input(0).shape().clone();
        let forwarded = match offered {
            Some(i) => ctx.forward_input_or_allocate_output(&[i], 0, &shape)?,
            None => {
                ctx.allocate_output(0, shape)?;
                None
            }
        };
        if forwarded.is_some() {
            for v in ctx.output_mut(0)?.flat_mut::<f32>()? {
                *v *= 2.0;
            }
        } else {
            let (ins, out) = ctx.inputs_and_output(0)?;
            let x = ins[0].flat::<f32>()?;
            for (o, &x) in out.flat_mut::<f32>()?.iter_mut().zip(x) {
                *o = 2.0 * x;
            }
        }
        self.0
            .lock()
            .unwrap()
            .push((req, offered, forwarded.is_some()));
        Ok(())
    }

    fn supported_requests(&self) -> RequestSupport {
        RequestSupport::INPLACE | RequestSupport::NULL
    }
}

/// `RSplit`: `(2 * x, 3 * x)`, handling `Null` (an output asked `Null` is
/// left unset); logs the requests.
struct Split(Arc<Mutex<Vec<[OutputRequest; 2]>>>);
impl OpKernel for Split {
    fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
        let reqs = [ctx.output_request(0), ctx.output_request(1)];
        self.0.lock().unwrap().push(reqs);
        for (o, k) in [(0, 2.0f32), (1, 3.0)] {
            if reqs[o] == OutputRequest::Null {
                continue;
            }
            let x: Vec<f32> = ctx.input(0).flat::<f32>()?.iter().map(|v| v * k).collect();
            ctx.set_output(o, Tensor::from_vec(ctx.input(0).dims(), x)?)?;
        }
        Ok(())
    }

    fn supported_requests(&self) -> RequestSupport {
        RequestSupport::NULL
    }
}

fn registry(log: Log, split_log: Arc<Mutex<Vec<[OutputRequest; 2]>>>) -> Arc<Registry> {
    let r = Registry::new();
    let fresh_shape: Arc<<ShapeFn as crate::op_attr::OpAttr>::Value> = Arc::new(|c| {
        let s = c.vector(4);
        c.set_output(0, s);
        Ok(())
    });
    r.register_op(
        OpDefBuilder::new("RFresh")
            .output("y: float")
            .set_attr::<ShapeFn>(fresh_shape),
    )
    .unwrap();
    let same: Arc<<ShapeFn as crate::op_attr::OpAttr>::Value> = Arc::new(|c| {
        let s = c.input(0);
        for o in 0..c.num_outputs() {
            c.set_output(o, s);
        }
        Ok(())
    });
    r.register_op(
        OpDefBuilder::new("RDup")
            .input("x: float")
            .output("a: float")
            .output("b: float")
            .set_attr::<ShapeFn>(same.clone())
            .set_attr::<FInplaceOption>(Arc::new(|_| vec![(0, 0), (0, 1)]))
            .set_attr::<FInplaceIdentity>(Arc::new(|_| vec![true, true])),
    )
    .unwrap();
    r.register_op(
        OpDefBuilder::new("RAlias")
            .output("a: float")
            .output("b: float")
            .set_attr::<ShapeFn>(Arc::new(|c| {
                let s = c.vector(4);
                c.set_output(0, s);
                c.set_output(1, s);
                Ok(())
            })),
    )
    .unwrap();
    r.register_op(
        OpDefBuilder::new("RTwice")
            .input("x: float")
            .output("y: float")
            .set_attr::<ShapeFn>(Arc::new(unchanged_shape))
            .set_attr::<FInplaceOption>(Arc::new(|_| vec![(0, 0)])),
    )
    .unwrap();
    r.register_op(
        OpDefBuilder::new("RSplit")
            .input("x: float")
            .output("a: float")
            .output("b: float")
            .set_attr::<ShapeFn>(same),
    )
    .unwrap();
    let k = |op: &str| KernelDefBuilder::new(op);
    r.register_kernel(KernelRegistration::with_factory(k("RFresh"), |_| {
        Ok(Box::new(Fresh) as Box<dyn OpKernel>)
    }))
    .unwrap();
    r.register_kernel(KernelRegistration::with_factory(k("RDup"), |_| {
        Ok(Box::new(Dup) as Box<dyn OpKernel>)
    }))
    .unwrap();
    r.register_kernel(KernelRegistration::with_factory(k("RAlias"), |_| {
        Ok(Box::new(Alias) as Box<dyn OpKernel>)
    }))
    .unwrap();
    r.register_kernel(KernelRegistration::with_factory(k("RTwice"), move |_| {
        Ok(Box::new(Twice(log.clone())) as Box<dyn OpKernel>)
    }))
    .unwrap();
    r.register_kernel(KernelRegistration::with_factory(k("RSplit"), move |_| {
        Ok(Box::new(Split(split_log.clone())) as Box<dyn OpKernel>)
    }))
    .unwrap();
    Arc::new(r)
}

fn add(g: &mut Graph, op: &str, name: &str, inputs: &[Output]) -> crate::graph::NodeId {
    let mut spec = NodeSpec::new(op, name);
    for &i in inputs {
        spec = spec.input(i);
    }
    g.add(spec).unwrap()
}

fn out(n: crate::graph::NodeId, i: usize) -> Output {
    Output::new(n, i)
}

/// Sessions of both kinds (sequential, parallel) with `options` changed by `f`.
fn sessions(g: &Graph, f: impl Fn(&mut SessionOptions)) -> Vec<Session> {
    [1, 0]
        .into_iter()
        .map(|threads| {
            let mut o = SessionOptions {
                inter_op_threads: threads,
                // The tests' tensors are small: ask InPlace at any size.
                inplace_min_elements: 0,
                ..SessionOptions::default()
            };
            f(&mut o);
            Session::with_options(g.clone_as_same(), o).unwrap()
        })
        .collect()
}

fn values(t: &Tensor) -> Vec<f32> {
    t.flat::<f32>().unwrap().to_vec()
}

#[test]
fn in_place_is_asked_when_the_input_has_no_other_reader() {
    let log: Log = Default::default();
    let mut g = Graph::with_registry(registry(log.clone(), Default::default()));
    let x = add(&mut g, "RFresh", "x", &[]);
    let y = add(&mut g, "RTwice", "y", &[out(x, 0)]);
    for s in sessions(&g, |_| {}) {
        log.lock().unwrap().clear();
        let got = s.run(vec![], &[out(y, 0)], &[]).unwrap();
        assert_eq!(values(&got[0]), [2., 4., 6., 8.]);
        assert_eq!(
            *log.lock().unwrap(),
            [(OutputRequest::InPlace, Some(0), true)],
            "asked in place, and the output took the input's buffer"
        );
    }
    // Turned off: Write, and the kernel allocates.
    for s in sessions(&g, |o| o.output_requests = false) {
        log.lock().unwrap().clear();
        let got = s.run(vec![], &[out(y, 0)], &[]).unwrap();
        assert_eq!(values(&got[0]), [2., 4., 6., 8.]);
        assert_eq!(*log.lock().unwrap(), [(OutputRequest::Write, None, false)]);
    }
    // Four elements are below the default size for InPlace: Write.
    for s in sessions(&g, |o| o.inplace_min_elements = 5) {
        log.lock().unwrap().clear();
        s.run(vec![], &[out(y, 0)], &[]).unwrap();
        assert_eq!(*log.lock().unwrap(), [(OutputRequest::Write, None, false)]);
    }
    assert!(SessionOptions::default().inplace_min_elements > 4);
}

#[test]
fn in_place_is_refused_when_the_input_has_another_reader() {
    let log: Log = Default::default();
    let mut g = Graph::with_registry(registry(log.clone(), Default::default()));
    let x = add(&mut g, "RFresh", "x", &[]);
    let y = add(&mut g, "RTwice", "y", &[out(x, 0)]);
    let z = add(&mut g, "RTwice", "z", &[out(x, 0)]);
    for s in sessions(&g, |_| {}) {
        // x fetched as well: it has another reader.
        log.lock().unwrap().clear();
        let got = s.run(vec![], &[out(y, 0), out(x, 0)], &[]).unwrap();
        assert_eq!(values(&got[0]), [2., 4., 6., 8.]);
        assert_eq!(
            values(&got[1]),
            [1., 2., 3., 4.],
            "the fetched input is intact"
        );
        assert_eq!(*log.lock().unwrap(), [(OutputRequest::Write, None, false)]);
        // Two consumers of x: neither is asked in place.
        log.lock().unwrap().clear();
        let got = s.run(vec![], &[out(y, 0), out(z, 0)], &[]).unwrap();
        assert_eq!(values(&got[0]), [2., 4., 6., 8.]);
        assert_eq!(values(&got[1]), [2., 4., 6., 8.]);
        assert_eq!(
            *log.lock().unwrap(),
            [(OutputRequest::Write, None, false); 2]
        );
        // x fed: not in place either (the caller gave the value).
        log.lock().unwrap().clear();
        let fed = Tensor::from_vec(&[4], vec![1f32, 1., 1., 1.]).unwrap();
        let keep = fed.clone();
        let got = s.run(vec![(out(x, 0), fed)], &[out(y, 0)], &[]).unwrap();
        assert_eq!(values(&got[0]), [2.; 4]);
        assert_eq!(values(&keep), [1.; 4]);
        assert_eq!(*log.lock().unwrap(), [(OutputRequest::Write, None, false)]);
    }
}

#[test]
fn a_shared_buffer_is_never_written_in_place() {
    // RDup's outputs share one buffer; `a` is read by RTwice alone, so the
    // plan asks for InPlace, but `b` (fetched) still holds the buffer: the
    // kernel is asked to Write (with the check on too: nothing is wrong).
    let log: Log = Default::default();
    let mut g = Graph::with_registry(registry(log.clone(), Default::default()));
    let x = add(&mut g, "RFresh", "x", &[]);
    let d = add(&mut g, "RDup", "d", &[out(x, 0)]);
    let y = add(&mut g, "RTwice", "y", &[out(d, 0)]);
    for check in [false, true] {
        for s in sessions(&g, |o| o.check_inplace = check) {
            log.lock().unwrap().clear();
            let got = s.run(vec![], &[out(y, 0), out(d, 1)], &[]).unwrap();
            assert_eq!(values(&got[0]), [2., 4., 6., 8.]);
            assert_eq!(
                values(&got[1]),
                [1., 2., 3., 4.],
                "the other reader's value is intact"
            );
            assert_eq!(*log.lock().unwrap(), [(OutputRequest::Write, None, false)]);
            // Without the other reader the request is taken.
            log.lock().unwrap().clear();
            let got = s.run(vec![], &[out(y, 0)], &[]).unwrap();
            assert_eq!(values(&got[0]), [2., 4., 6., 8.]);
            assert_eq!(
                *log.lock().unwrap(),
                [(OutputRequest::InPlace, Some(0), true)]
            );
        }
    }
}

#[test]
fn the_check_catches_memory_aliased_by_two_buffers() {
    // RAlias's outputs are two buffers over one allocation: each looks
    // uniquely owned, so InPlace would be granted on `a` while `b` (fetched)
    // reads the same memory. The check compares memory and fails the run.
    let log: Log = Default::default();
    let mut g = Graph::with_registry(registry(log.clone(), Default::default()));
    let d = add(&mut g, "RAlias", "d", &[]);
    let y = add(&mut g, "RTwice", "y", &[out(d, 0)]);
    for s in sessions(&g, |o| o.check_inplace = true) {
        log.lock().unwrap().clear();
        let e = s.run(vec![], &[out(y, 0), out(d, 1)], &[]).unwrap_err();
        assert_eq!(e.code(), Code::Internal, "{e}");
        assert!(e.message().contains("in-place check"), "{e}");
        assert!(e.message().contains("{{node y}}"), "{e}");
        assert!(e.message().contains("memory of input 0"), "{e}");
        assert!(e.message().contains("still reads"), "{e}");
        assert!(log.lock().unwrap().is_empty(), "the kernel did not run");
        // Nothing else reads the memory: the run passes.
        let got = s.run(vec![], &[out(y, 0)], &[]).unwrap();
        assert_eq!(values(&got[0]), [2., 4., 6., 8.]);
    }
}

#[test]
fn null_is_asked_for_an_output_nobody_reads() {
    let split_log: Arc<Mutex<Vec<[OutputRequest; 2]>>> = Default::default();
    let mut g = Graph::with_registry(registry(Default::default(), split_log.clone()));
    let x = add(&mut g, "RFresh", "x", &[]);
    let s2 = add(&mut g, "RSplit", "s", &[out(x, 0)]);
    use OutputRequest::*;
    for s in sessions(&g, |_| {}) {
        split_log.lock().unwrap().clear();
        let got = s.run(vec![], &[out(s2, 1)], &[]).unwrap();
        assert_eq!(values(&got[0]), [3., 6., 9., 12.]);
        let got = s.run(vec![], &[out(s2, 0)], &[]).unwrap();
        assert_eq!(values(&got[0]), [2., 4., 6., 8.]);
        let got = s.run(vec![], &[out(s2, 0), out(s2, 1)], &[]).unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(
            *split_log.lock().unwrap(),
            [[Null, Write], [Write, Null], [Write, Write]]
        );
    }
    for s in sessions(&g, |o| o.output_requests = false) {
        split_log.lock().unwrap().clear();
        s.run(vec![], &[out(s2, 1)], &[]).unwrap();
        assert_eq!(*split_log.lock().unwrap(), [[Write, Write]]);
    }
}

#[test]
fn shapes_must_be_known_for_in_place() {
    // `unknown` has an input of unknown shape: its output's shape is not
    // fully known, so no InPlace is planned.
    let log: Log = Default::default();
    let r = registry(log.clone(), Default::default());
    r.register_op(OpDefBuilder::new("RAny").output("y: float"))
        .unwrap();
    r.register_kernel(KernelRegistration::with_factory(
        KernelDefBuilder::new("RAny"),
        |_| Ok(Box::new(Fresh) as Box<dyn OpKernel>),
    ))
    .unwrap();
    let mut g = Graph::with_registry(r);
    let x = add(&mut g, "RAny", "x", &[]);
    let y = add(&mut g, "RTwice", "y", &[out(x, 0)]);
    let s = Session::new(g).unwrap();
    let got = s.run(vec![], &[out(y, 0)], &[]).unwrap();
    assert_eq!(values(&got[0]), [2., 4., 6., 8.]);
    assert_eq!(*log.lock().unwrap(), [(OutputRequest::Write, None, false)]);
}
