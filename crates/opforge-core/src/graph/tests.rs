//! Unit tests of what the Python package needs from graphs and sessions:
//! cancellable runs, sessions over shared graphs, graph copies.

use super::{Graph, NodeSpec, Output, Session, SessionOptions};
use crate::kernel::{KernelDefBuilder, KernelRegistration, OpKernel, OpKernelContext};
use crate::registry::Registry;
use crate::{Code, OpDefBuilder, Result, Tensor};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

/// A registry with `TSrc` (no input, a float scalar 1) and `TStep`
/// (`y = x + 1`), whose kernels count their runs in `runs` and set
/// `cancel` at the `cancel_at`-th run.
fn registry(
    runs: &'static AtomicUsize,
    cancel: &'static AtomicBool,
    cancel_at: usize,
) -> Arc<Registry> {
    struct Step {
        runs: &'static AtomicUsize,
        cancel: &'static AtomicBool,
        cancel_at: usize,
        source: bool,
    }
    impl OpKernel for Step {
        fn compute(&self, ctx: &mut OpKernelContext<'_>) -> Result<()> {
            if self.runs.fetch_add(1, Ordering::SeqCst) + 1 == self.cancel_at {
                self.cancel.store(true, Ordering::SeqCst);
            }
            let v = if self.source {
                1.0
            } else {
                ctx.input(0).scalar_value::<f32>()? + 1.0
            };
            ctx.set_output(0, Tensor::scalar(v))
        }
    }
    let r = Registry::new();
    r.register_op(OpDefBuilder::new("TSrc").output("y: float"))
        .unwrap();
    r.register_op(
        OpDefBuilder::new("TStep")
            .input("x: float")
            .output("y: float"),
    )
    .unwrap();
    for (op, source) in [("TSrc", true), ("TStep", false)] {
        r.register_kernel(KernelRegistration::with_factory(
            KernelDefBuilder::new(op),
            move |_| {
                Ok(Box::new(Step {
                    runs,
                    cancel,
                    cancel_at,
                    source,
                }) as Box<dyn OpKernel>)
            },
        ))
        .unwrap();
    }
    Arc::new(r)
}

/// `TSrc` then a chain of `n` `TStep`s; the chain's end.
fn chain(registry: Arc<Registry>, n: usize) -> (Graph, Output) {
    let mut g = Graph::with_registry(registry);
    let mut x = Output::new(g.add(NodeSpec::new("TSrc", "src")).unwrap(), 0);
    for i in 0..n {
        x = Output::new(
            g.add(NodeSpec::new("TStep", &format!("step{i}")).input(x))
                .unwrap(),
            0,
        );
    }
    (g, x)
}

#[test]
fn a_run_stops_at_the_node_after_the_flag_is_set() {
    static RUNS: AtomicUsize = AtomicUsize::new(0);
    static CANCEL: AtomicBool = AtomicBool::new(false);
    // The 4th kernel run (step2) sets the flag: step3 never starts.
    let (g, end) = chain(registry(&RUNS, &CANCEL, 4), 10);
    let options = SessionOptions {
        inter_op_threads: 1,
        ..SessionOptions::default()
    };
    let sess = Session::with_options(g, options).unwrap();
    let e = sess
        .run_cancellable(vec![], &[end], &[], Some(&CANCEL))
        .unwrap_err();
    assert_eq!(e.code(), Code::Cancelled, "{e}");
    assert!(e.message().contains("{{node step3}}"), "{e}");
    assert_eq!(RUNS.load(Ordering::SeqCst), 4);
    // Cleared, the same session runs the whole chain.
    CANCEL.store(false, Ordering::SeqCst);
    let out = sess
        .run_cancellable(vec![], &[end], &[], Some(&CANCEL))
        .unwrap();
    assert_eq!(out[0].scalar_value::<f32>().unwrap(), 11.0);
    assert_eq!(RUNS.load(Ordering::SeqCst), 4 + 11);
    // Without a flag, `run` is unaffected by it.
    CANCEL.store(true, Ordering::SeqCst);
    assert!(sess.run(vec![], &[end], &[]).is_ok());
}

#[test]
fn a_clone_is_a_graph_of_its_own_with_the_same_indices() {
    static RUNS: AtomicUsize = AtomicUsize::new(0);
    static CANCEL: AtomicBool = AtomicBool::new(false);
    let (mut g, end) = chain(registry(&RUNS, &CANCEL, 0), 2);
    let copy = Arc::new(g.clone());
    assert_eq!(copy.len(), 3);
    assert_eq!(copy.node_id(3), None);
    let end_copy = Output::new(copy.node_id(end.node.index()).unwrap(), 0);
    assert_ne!(end_copy, end);
    // Each graph rejects the other's handles.
    assert_eq!(
        copy.node(end.node).unwrap_err().code(),
        Code::InvalidArgument
    );
    assert_eq!(
        g.node(end_copy.node).unwrap_err().code(),
        Code::InvalidArgument
    );
    // The copy's nodes refer to the copy: feeding its source reaches its end.
    let src_copy = Output::new(copy.node_id(0).unwrap(), 0);
    let sess = Session::builder_shared(copy.clone()).build().unwrap();
    let out = sess
        .run(vec![(src_copy, Tensor::scalar(5.0f32))], &[end_copy], &[])
        .unwrap();
    assert_eq!(out[0].scalar_value::<f32>().unwrap(), 7.0);
    // The original grows on its own.
    g.add(NodeSpec::new("TStep", "more").input(end)).unwrap();
    assert_eq!((g.len(), copy.len()), (4, 3));
}
