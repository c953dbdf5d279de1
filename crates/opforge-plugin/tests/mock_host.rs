//! The SDK driven by a mock host: a plugin defined here with `export!` is
//! initialised through a Rust-implemented `OpforgeHostApi`, and its kernels
//! and shape functions run over plain `Vec` buffers.

mod common;
#[path = "mock_host/plugin.rs"]
mod plugin;

use std::sync::Mutex;

use common::*;
use opforge_abi::*;
use plugin::*;

/// The plugin's host table is process-wide: one test at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn init_with(host: &'static OpforgeHostApi) -> MockRegistrar {
    init(opforge_plugin_init_v1, host).unwrap()
}

fn zero_out_init(keep: i64) -> MockInit {
    MockInit {
        op: "ZeroOut".into(),
        attrs: vec![
            ("preserve_index".into(), MockAttr::Int(keep)),
            ("T".into(), MockAttr::Type(OPFORGE_DT_INT32)),
        ],
        inputs: vec![OPFORGE_DT_INT32],
        outputs: vec![OPFORGE_DT_INT32],
    }
}

// ---- tests ----

#[test]
fn init_registers_ops_kernels_and_gradients() {
    let _g = serial();
    let r = init_with(&HOST);
    let names: Vec<&str> = r.ops.iter().map(|o| o.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "ZeroOut",
            "Panicky",
            "Sharded",
            "Odd",
            "Iota",
            "Transpose2",
            "Counting",
            "Twice",
            "ZeroOutDeclared",
            "Negate",
            "ReadAfterUse",
            "Scale",
            "Split2",
        ]
    );
    // Both entries for every kernel; the declarations as written.
    assert!(r
        .kernels
        .iter()
        .all(|k| k.compute.is_some() && k.compute_views.is_some()));
    assert!(r.kernel("ZeroOut").output_like.is_empty());
    assert_eq!(
        r.kernel("ZeroOutDeclared").output_like,
        [(0, 0, OPFORGE_OUTPUT_FORWARD)]
    );
    assert_eq!(r.kernel("Negate").output_like, [(0, 0, 0)]);
    let z = r.op("ZeroOut");
    assert_eq!(
        z.attrs,
        ["T: realnumbertype = DT_INT32", "preserve_index: int = 0"]
    );
    assert_eq!(z.inputs, ["to_zero: T"]);
    assert_eq!(z.outputs, ["zeroed: T"]);
    assert_eq!(z.doc, "Zeros out every element of the input except one.");
    assert!(z.shape_fn.is_some());
    assert!(r.op("Panicky").shape_fn.is_none());
    let k = r.kernel("ZeroOut");
    assert_eq!(k.device, "CPU");
    assert_eq!(
        k.constraints,
        [(
            "T".to_string(),
            vec![OPFORGE_DT_FLOAT, OPFORGE_DT_INT32, OPFORGE_DT_INT64]
        )]
    );
    assert_eq!(r.kernel("Sharded").flags, OPFORGE_KERNEL_NOT_THREAD_SAFE);
    assert_eq!(
        r.gradients,
        [
            ("ZeroOut".to_string(), "fn"),
            ("Panicky".to_string(), "not_differentiable"),
            ("Odd".to_string(), "fn"),
            ("Twice".to_string(), "nodes"),
            ("Scale".to_string(), "fn"),
            ("Split2".to_string(), "fn"),
        ]
    );
    assert_eq!(
        r.grad_nodes,
        [(
            "Twice".to_string(),
            vec![
                "AddN([output_grad:y:-1, output_grad:y:-1]) {T=$T}".to_string(),
                "grad 0 = node0:sum:-1".to_string(),
            ]
        )]
    );
    // SAFETY: nothing of the plugin runs any more.
    unsafe { opforge_plugin_fini_v1() };
}

#[test]
fn zero_out_computes_into_a_new_output_and_in_place() {
    let _g = serial();
    let r = init_with(&HOST);
    let k = Instance::create(r.kernel("ZeroOut"), &zero_out_init(2)).unwrap();
    for forward in [false, true] {
        let x = MockTensor::from(OPFORGE_DT_INT32, &[2, 3], &[1i32, 2, 3, 4, 5, 6]);
        let mut c = MockCtx::new("ZeroOut", vec![x], vec![OPFORGE_DT_INT32]);
        c.allow_forward = forward;
        k.compute(&mut c).unwrap();
        let out = c.outputs[0].as_ref().unwrap();
        assert_eq!(out.dims, [2, 3]);
        assert_eq!(
            out.values::<i32>(),
            [0, 0, 3, 0, 0, 0],
            "forward: {forward}"
        );
        assert_eq!(
            c.inputs[0].is_none(),
            forward,
            "the input moved to the output"
        );
    }
    let x = MockTensor::from(OPFORGE_DT_FLOAT, &[3], &[1.5f32, -2.0, 7.0]);
    let mut c = MockCtx::new("ZeroOut", vec![x], vec![OPFORGE_DT_FLOAT]);
    k.compute(&mut c).unwrap();
    assert_eq!(
        c.outputs[0].as_ref().unwrap().values::<f32>(),
        [0.0, 0.0, 7.0]
    );
    drop(k);
    // SAFETY: nothing of the plugin runs any more.
    unsafe { opforge_plugin_fini_v1() };
}

#[test]
fn preserve_index_is_checked_at_construction_and_compute() {
    let _g = serial();
    let r = init_with(&HOST);
    let e = Instance::create(r.kernel("ZeroOut"), &zero_out_init(-1))
        .err()
        .unwrap();
    assert_eq!(e.code, OPFORGE_INVALID_ARGUMENT);
    assert_eq!(e.message, "Need preserve_index >= 0, got -1");

    let k = Instance::create(r.kernel("ZeroOut"), &zero_out_init(5)).unwrap();
    let x = MockTensor::from(OPFORGE_DT_INT32, &[3], &[1i32, 2, 3]);
    let mut c = MockCtx::new("ZeroOut", vec![x], vec![OPFORGE_DT_INT32]);
    let e = k.compute(&mut c).unwrap_err();
    assert_eq!(e.code, OPFORGE_INVALID_ARGUMENT);
    assert_eq!(e.message, "preserve_index out of range: 5 is not in [0, 3)");
    assert_eq!(e.flags, 0, "an error, not a panic");

    // A dtype the kernel has no code for.
    let x = MockTensor::from(OPFORGE_DT_DOUBLE, &[6], &[1f64; 6]);
    let mut c = MockCtx::new("ZeroOut", vec![x], vec![OPFORGE_DT_DOUBLE]);
    let e = k.compute(&mut c).unwrap_err();
    assert_eq!(e.code, OPFORGE_UNIMPLEMENTED);
    assert_eq!(e.message, "no code for dtype double");
    drop(k);
    // SAFETY: nothing of the plugin runs any more.
    unsafe { opforge_plugin_fini_v1() };
}

#[test]
fn a_panicking_compute_is_internal_naming_library_op_and_location() {
    let _g = serial();
    let r = init_with(&HOST);
    let init = MockInit {
        op: "Panicky".into(),
        attrs: vec![],
        inputs: vec![OPFORGE_DT_FLOAT],
        outputs: vec![OPFORGE_DT_FLOAT],
    };
    let k = Instance::create(r.kernel("Panicky"), &init).unwrap();
    let x = MockTensor::from(OPFORGE_DT_FLOAT, &[2], &[1f32, 2.0]);
    let mut c = MockCtx::new("Panicky", vec![x.clone()], vec![OPFORGE_DT_FLOAT]);
    let e = k.compute(&mut c).unwrap_err();
    assert_eq!(e.code, OPFORGE_INTERNAL);
    assert_eq!(e.flags, OPFORGE_STATUS_PANICKED);
    assert!(
        e.message
            .starts_with("compute of kernel Panicky (library mock_test_lib 9.8.7) panicked at "),
        "{}",
        e.message
    );
    assert!(
        e.message.contains("tests/mock_host/plugin.rs:"),
        "{}",
        e.message
    );
    assert!(
        e.message
            .ends_with("index out of bounds: the len is 0 but the index is 2"),
        "{}",
        e.message
    );
    // The instance is poisoned; the process goes on.
    let mut c = MockCtx::new("Panicky", vec![x], vec![OPFORGE_DT_FLOAT]);
    let e = k.compute(&mut c).unwrap_err();
    assert_eq!(e.code, OPFORGE_INTERNAL);
    assert_eq!(
        e.message,
        "kernel Panicky (library mock_test_lib 9.8.7) was poisoned by an earlier panic"
    );
    drop(k);
    // Other kernels keep working.
    let z = Instance::create(r.kernel("ZeroOut"), &zero_out_init(0)).unwrap();
    let x = MockTensor::from(OPFORGE_DT_INT32, &[2], &[4i32, 5]);
    let mut c = MockCtx::new("ZeroOut", vec![x], vec![OPFORGE_DT_INT32]);
    z.compute(&mut c).unwrap();
    assert_eq!(c.outputs[0].as_ref().unwrap().values::<i32>(), [4, 0]);
    drop(z);
    // SAFETY: nothing of the plugin runs any more.
    unsafe { opforge_plugin_fini_v1() };
}

fn float_init(op: &str) -> MockInit {
    MockInit {
        op: op.into(),
        attrs: vec![],
        inputs: vec![OPFORGE_DT_FLOAT],
        outputs: vec![OPFORGE_DT_FLOAT],
    }
}

#[test]
fn the_views_entry_runs_an_elementwise_kernel_without_host_calls() {
    let _g = serial();
    let r = init_with(&HOST);
    let k = Instance::create(r.kernel("Negate"), &float_init("Negate")).unwrap();
    let x = || MockTensor::from(OPFORGE_DT_FLOAT, &[2, 2], &[1f32, -2.0, 3.0, 0.5]);
    let mut c = MockCtx::new("Negate", vec![x()], vec![OPFORGE_DT_FLOAT]);
    let before = view_calls();
    k.compute_views(&mut c).unwrap();
    assert_eq!(
        view_calls(),
        before,
        "the views entry asked the host for views"
    );
    let out = c.outputs[0].as_ref().unwrap();
    assert_eq!(out.dims, [2, 2]);
    assert_eq!(out.values::<f32>(), [-1.0, 2.0, -3.0, -0.5]);
    // The 1.0 entry computes the same, asking the host (the SDK allocates
    // the declared output first).
    let mut c = MockCtx::new("Negate", vec![x()], vec![OPFORGE_DT_FLOAT]);
    let before = view_calls();
    k.compute(&mut c).unwrap();
    assert!(view_calls() > before);
    assert_eq!(
        c.outputs[0].as_ref().unwrap().values::<f32>(),
        [-1.0, 2.0, -3.0, -0.5]
    );
    drop(k);
    // SAFETY: nothing of the plugin runs any more.
    unsafe { opforge_plugin_fini_v1() };
}

#[test]
fn a_declared_output_answers_the_kernels_own_forward_call() {
    let _g = serial();
    let r = init_with(&HOST);
    let mut init = zero_out_init(1);
    init.op = "ZeroOutDeclared".into();
    let k = Instance::create(r.kernel("ZeroOutDeclared"), &init).unwrap();
    let x = || MockTensor::from(OPFORGE_DT_INT32, &[3], &[7i32, 8, 9]);
    for forward in [false, true] {
        let mut c = MockCtx::new("ZeroOutDeclared", vec![x()], vec![OPFORGE_DT_INT32]);
        c.allow_forward = forward;
        let before = view_calls();
        k.compute_views(&mut c).unwrap();
        assert_eq!(view_calls(), before, "forward: {forward}");
        assert_eq!(c.outputs[0].as_ref().unwrap().values::<i32>(), [0, 8, 0]);
        assert_eq!(c.inputs[0].is_none(), forward, "computed in place");
    }
    // On the 1.0 entry the SDK allocates the declared output (never
    // forwarding), and the kernel's forward call gets that output.
    let mut c = MockCtx::new("ZeroOutDeclared", vec![x()], vec![OPFORGE_DT_INT32]);
    c.allow_forward = true;
    k.compute(&mut c).unwrap();
    assert_eq!(c.outputs[0].as_ref().unwrap().values::<i32>(), [0, 8, 0]);
    assert!(c.inputs[0].is_some(), "the 1.0 entry forwarded");
    drop(k);
    // SAFETY: nothing of the plugin runs any more.
    unsafe { opforge_plugin_fini_v1() };
}

#[test]
fn a_forwarded_input_is_readable_until_its_output_is_used() {
    let _g = serial();
    let r = init_with(&HOST);
    let k = Instance::create(r.kernel("ReadAfterUse"), &float_init("ReadAfterUse")).unwrap();
    let x = || MockTensor::from(OPFORGE_DT_FLOAT, &[2], &[4f32, 5.0]);
    // Not forwarded: the input stays readable throughout.
    let mut c = MockCtx::new("ReadAfterUse", vec![x()], vec![OPFORGE_DT_FLOAT]);
    k.compute_views(&mut c).unwrap();
    assert_eq!(c.outputs[0].as_ref().unwrap().values::<f32>(), [5.0, 5.0]);
    // Forwarded: readable before the output is used (the first read gave
    // 4), the host's error after (the memory is the output's now).
    let mut c = MockCtx::new("ReadAfterUse", vec![x()], vec![OPFORGE_DT_FLOAT]);
    c.allow_forward = true;
    let e = k.compute_views(&mut c).unwrap_err();
    assert_eq!(e.code, OPFORGE_FAILED_PRECONDITION);
    assert_eq!(e.message, "input 0 was forwarded");
    assert_eq!(c.outputs[0].as_ref().unwrap().values::<f32>(), [5.0, 5.0]);
    // The 1.0 entry never forwards a declared output.
    let mut c = MockCtx::new("ReadAfterUse", vec![x()], vec![OPFORGE_DT_FLOAT]);
    c.allow_forward = true;
    k.compute(&mut c).unwrap();
    drop(k);
    // SAFETY: nothing of the plugin runs any more.
    unsafe { opforge_plugin_fini_v1() };
}

#[test]
fn a_panic_in_the_views_entry_is_internal_and_poisons_the_instance() {
    let _g = serial();
    let r = init_with(&HOST);
    let k = Instance::create(r.kernel("Panicky"), &float_init("Panicky")).unwrap();
    let x = MockTensor::from(OPFORGE_DT_FLOAT, &[2], &[1f32, 2.0]);
    let mut c = MockCtx::new("Panicky", vec![x.clone()], vec![OPFORGE_DT_FLOAT]);
    let e = k.compute_views(&mut c).unwrap_err();
    assert_eq!(e.code, OPFORGE_INTERNAL);
    assert_eq!(e.flags, OPFORGE_STATUS_PANICKED);
    assert!(
        e.message
            .starts_with("compute of kernel Panicky (library mock_test_lib 9.8.7) panicked at "),
        "{}",
        e.message
    );
    assert!(
        e.message
            .ends_with("index out of bounds: the len is 0 but the index is 2"),
        "{}",
        e.message
    );
    // Poisoned for both entries.
    let mut c = MockCtx::new("Panicky", vec![x.clone()], vec![OPFORGE_DT_FLOAT]);
    let e = k.compute_views(&mut c).unwrap_err();
    assert_eq!(e.code, OPFORGE_INTERNAL);
    assert_eq!(
        e.message,
        "kernel Panicky (library mock_test_lib 9.8.7) was poisoned by an earlier panic"
    );
    let mut c = MockCtx::new("Panicky", vec![x], vec![OPFORGE_DT_FLOAT]);
    assert_eq!(k.compute(&mut c).unwrap_err().code, OPFORGE_INTERNAL);
    drop(k);
    // SAFETY: nothing of the plugin runs any more.
    unsafe { opforge_plugin_fini_v1() };
}

fn sharded(r: &MockRegistrar, panic_at: i64) -> std::result::Result<Vec<f32>, MockStatus> {
    let init = MockInit {
        op: "Sharded".into(),
        attrs: vec![("panic_at".into(), MockAttr::Int(panic_at))],
        inputs: vec![OPFORGE_DT_FLOAT],
        outputs: vec![OPFORGE_DT_FLOAT],
    };
    let k = Instance::create(r.kernel("Sharded"), &init)?;
    let x = MockTensor::from(OPFORGE_DT_FLOAT, &[4], &[1f32, 2.0, 3.0, 4.0]);
    let mut c = MockCtx::new("Sharded", vec![x], vec![OPFORGE_DT_FLOAT]);
    k.compute(&mut c)?;
    Ok(c.outputs[0].as_ref().unwrap().values::<f32>())
}

#[test]
fn parallel_for_runs_shards_and_catches_their_panics() {
    let _g = serial();
    let r = init_with(&HOST);
    assert_eq!(sharded(&r, -1).unwrap(), [10.0; 4]);
    let e = sharded(&r, 3).unwrap_err();
    assert_eq!(e.code, OPFORGE_INTERNAL);
    assert!(
        e.message.starts_with(
            "a parallel_for body of compute of kernel Sharded (library mock_test_lib 9.8.7) \
             panicked at "
        ),
        "{}",
        e.message
    );
    assert!(e.message.ends_with(": shard 2..4 refuses"), "{}", e.message);
    // SAFETY: nothing of the plugin runs any more.
    unsafe { opforge_plugin_fini_v1() };
}

#[test]
fn a_slot_the_host_lacks_is_unimplemented() {
    let _g = serial();
    let r = init_with(&OLD_HOST);
    let e = sharded(&r, -1).unwrap_err();
    assert_eq!(e.code, OPFORGE_UNIMPLEMENTED);
    assert_eq!(
        e.message,
        "the host's kernel API has no `parallel_for` (host opforge C ABI 1.0; library \
         mock_test_lib 9.8.7 needs a newer host for this call)"
    );
    // SAFETY: nothing of the plugin runs any more.
    unsafe { opforge_plugin_fini_v1() };
}

#[test]
fn shape_functions_run_through_the_host() {
    let _g = serial();
    let r = init_with(&HOST);
    let out = infer(r.op("ZeroOut"), &[Some(vec![2, 3])], 1).unwrap();
    assert_eq!(out, ["[2,3]"]);
    let out = infer(r.op("ZeroOut"), &[None], 1).unwrap();
    assert_eq!(out, ["?"]);
    // A shape function with TensorFlow's vocabulary: transpose a matrix.
    let out = infer(r.op("Transpose2"), &[Some(vec![2, -1])], 1).unwrap();
    assert_eq!(out, ["[?,2]"]);
    let out = infer(r.op("Transpose2"), &[None], 1).unwrap();
    assert_eq!(out, ["[?,?]"]);
    let e = infer(r.op("Transpose2"), &[Some(vec![1, 2, 3])], 1).unwrap_err();
    assert_eq!(e.code, OPFORGE_INVALID_ARGUMENT);
    assert_eq!(e.message, "Shape must be rank 2 but is rank 3");
    let e = infer(r.op("Transpose2"), &[Some(vec![0, 2])], 1).unwrap_err();
    assert_eq!(
        e.message,
        "Transpose2 needs a non-empty first dim, got [0,2]"
    );
    // A query whose slot the host lacks fails the shape function.
    let e = infer(r.op("Counting"), &[Some(vec![3])], 1).unwrap_err();
    assert_eq!(e.code, OPFORGE_UNIMPLEMENTED);
    assert!(
        e.message
            .starts_with("the host's shape API has no `num_elements`"),
        "{}",
        e.message
    );
    // SAFETY: nothing of the plugin runs any more.
    unsafe { opforge_plugin_fini_v1() };
}

#[test]
fn a_callback_after_fini_fails_without_crashing() {
    let _g = serial();
    let r = init_with(&HOST);
    // SAFETY: a test of the guard outside init..fini.
    unsafe { opforge_plugin_fini_v1() };
    let e = Instance::create(r.kernel("ZeroOut"), &zero_out_init(0))
        .err()
        .unwrap();
    assert_eq!(e.code, OPFORGE_INTERNAL);
}

#[test]
fn panics_in_shape_functions_gradients_and_destroy_do_not_escape() {
    let _g = serial();
    let r = init_with(&HOST);
    let e = infer(r.op("Odd"), &[Some(vec![2])], 1).unwrap_err();
    assert_eq!(e.code, OPFORGE_INTERNAL);
    assert_eq!(e.flags, OPFORGE_STATUS_PANICKED);
    assert!(
        e.message
            .starts_with("the shape function of Odd (library mock_test_lib 9.8.7) panicked at "),
        "{}",
        e.message
    );
    assert!(e.message.ends_with(": no shapes today"), "{}", e.message);

    let mut g = MockGradCtx::new("Odd", 1, 1);
    let e = gradient(&r, &mut g).unwrap_err();
    assert_eq!(e.code, OPFORGE_INTERNAL);
    assert!(
        e.message
            .starts_with("the gradient of Odd (library mock_test_lib 9.8.7) panicked at "),
        "{}",
        e.message
    );

    let init = MockInit {
        op: "Odd".into(),
        attrs: vec![],
        inputs: vec![OPFORGE_DT_FLOAT],
        outputs: vec![OPFORGE_DT_FLOAT],
    };
    LOG.with(|l| l.borrow_mut().clear());
    drop(Instance::create(r.kernel("Odd"), &init).unwrap());
    let log = LOG.with(|l| l.borrow().clone());
    assert_eq!(log.len(), 1, "{log:?}");
    assert!(
        log[0].starts_with("destroy of kernel Odd (library mock_test_lib 9.8.7) panicked at "),
        "{}",
        log[0]
    );
    assert!(log[0].ends_with(": cannot let go"), "{}", log[0]);
    // SAFETY: nothing of the plugin runs any more.
    unsafe { opforge_plugin_fini_v1() };
}

#[test]
fn grad_is_the_gradient_of_a_one_output_op() {
    let _g = serial();
    let r = init_with(&HOST);
    // One output with a gradient: dx = Mul(dy, x).
    let mut g = MockGradCtx::new("Scale", 1, 1);
    gradient(&r, &mut g).unwrap();
    let dy = g.output_grads[0].unwrap();
    assert_eq!(
        g.calls,
        [("Mul".to_string(), vec![vec![dy], vec![g.inputs[0]]], vec![])]
    );
    assert_eq!(g.input_grads, [Some(g.next)]);
    // Several outputs: grad() says to use output_grad(i).
    let mut g = MockGradCtx::new("Split2", 1, 2);
    let e = gradient(&r, &mut g).unwrap_err();
    assert_eq!(e.code, OPFORGE_INVALID_ARGUMENT);
    assert_eq!(
        e.message,
        "GradientContext::grad: op Split2 has 2 outputs, not 1; use output_grad(i) for the \
         gradient of output i"
    );
    assert!(g.calls.is_empty());
    // A host that calls the function with no gradient flowing.
    let mut g = MockGradCtx::new("Scale", 1, 1);
    g.output_grads = vec![None];
    let e = gradient(&r, &mut g).unwrap_err();
    assert_eq!(e.code, OPFORGE_FAILED_PRECONDITION);
    assert!(
        e.message
            .starts_with("GradientContext::grad: no gradient flows into the output of op Scale"),
        "{}",
        e.message
    );
    // SAFETY: nothing of the plugin runs any more.
    unsafe { opforge_plugin_fini_v1() };
}

#[test]
fn outputs_from_shards_and_from_plugin_memory() {
    let _g = serial();
    let r = init_with(&HOST);
    for from_vec in [false, true] {
        let init = MockInit {
            op: "Iota".into(),
            attrs: vec![("from_vec".into(), MockAttr::Bool(from_vec))],
            inputs: vec![OPFORGE_DT_INT64],
            outputs: vec![OPFORGE_DT_INT64],
        };
        let k = Instance::create(r.kernel("Iota"), &init).unwrap();
        let n = MockTensor::from(OPFORGE_DT_INT64, &[], &[5i64]);
        let mut c = MockCtx::new("Iota", vec![n], vec![OPFORGE_DT_INT64]);
        c.shards = 3;
        LOG.with(|l| l.borrow_mut().clear());
        k.compute(&mut c).unwrap();
        assert_eq!(LOG.with(|l| l.borrow().clone()), ["iota of 5"]);
        if from_vec {
            assert!(c.outputs[0].is_none());
            let f = &c.foreign[0];
            assert_eq!((f.output, f.dims.as_slice()), (0, &[5][..]));
            assert_eq!(f.values::<i64>(), [0, 1, 2, 3, 4]);
            // Dropping the mock context releases the Vec through the SDK.
        } else {
            assert_eq!(
                c.outputs[0].as_ref().unwrap().values::<i64>(),
                [0, 1, 2, 3, 4]
            );
        }
    }
    // SAFETY: nothing of the plugin runs any more.
    unsafe { opforge_plugin_fini_v1() };
}

#[test]
fn a_refused_registration_fails_init_and_leaves_nothing_running() {
    let _g = serial();
    let e = init(opforge_plugin_init_v1, &REFUSING_HOST).err().unwrap();
    assert_eq!(e.code, OPFORGE_ALREADY_EXISTS);
    assert_eq!(
        e.message,
        "registering op ZeroOut: Op with name ZeroOut already registered by library other"
    );
    // The failed init forgot the host: a stray callback reports INTERNAL.
    let r = init_with(&HOST);
    // SAFETY: as fini does.
    unsafe { opforge_plugin_fini_v1() };
    let e = Instance::create(r.kernel("ZeroOut"), &zero_out_init(0))
        .err()
        .unwrap();
    assert_eq!(e.code, OPFORGE_INTERNAL);
}

/// Sends a kernel instance's state pointer to other threads (the SDK's
/// states are `Send + Sync`; the host calls compute from any thread).
struct SharedState(*mut std::ffi::c_void);
// SAFETY: the state is an SDK kernel instance, `Send + Sync`.
unsafe impl Send for SharedState {}
// SAFETY: as above.
unsafe impl Sync for SharedState {}

#[test]
fn sixteen_threads_compute_on_one_instance_and_panic_independently() {
    let _g = serial();
    let r = init_with(&HOST);
    let z = Instance::create(r.kernel("ZeroOut"), &zero_out_init(1)).unwrap();
    let zstate = SharedState(z.state);
    let pinit = MockInit {
        op: "Panicky".into(),
        attrs: vec![],
        inputs: vec![OPFORGE_DT_FLOAT],
        outputs: vec![OPFORGE_DT_FLOAT],
    };
    let zk = r.kernel("ZeroOut");
    let pk = r.kernel("Panicky");
    std::thread::scope(|s| {
        for t in 0..16i32 {
            let zstate = &zstate;
            let pinit = &pinit;
            s.spawn(move || {
                for round in 0..50 {
                    let x = MockTensor::from(OPFORGE_DT_INT32, &[3], &[t, t + 1, round]);
                    let mut c = MockCtx::new("ZeroOut", vec![x], vec![OPFORGE_DT_INT32]);
                    let mut st = MockStatus::default();
                    // SAFETY: the instance's compute with this host's objects.
                    let code = unsafe { (zk.compute.unwrap())(zstate.0, c.ptr(), st.ptr()) };
                    assert_eq!(code, OPFORGE_OK, "{st:?}");
                    assert_eq!(
                        c.outputs[0].as_ref().unwrap().values::<i32>(),
                        [0, t + 1, 0]
                    );
                }
                // Each thread's panic is reported with its own text.
                let p = Instance::create(pk, pinit).unwrap();
                let x = MockTensor::from(OPFORGE_DT_FLOAT, &[t as i64], &vec![0f32; t as usize]);
                let mut c = MockCtx::new("Panicky", vec![x], vec![OPFORGE_DT_FLOAT]);
                let e = p.compute(&mut c).unwrap_err();
                assert_eq!(e.code, OPFORGE_INTERNAL);
                assert!(
                    e.message
                        .ends_with(&format!("the len is 0 but the index is {t}")),
                    "{}",
                    e.message
                );
            });
        }
    });
    drop(z);
    // SAFETY: nothing of the plugin runs any more.
    unsafe { opforge_plugin_fini_v1() };
}
