//! Tests of the resource-variable ops.

use super::*;
use opforge_core::eager::EagerContext;
use opforge_core::proto::{self, OpDef, OpList};
use opforge_core::resource::Resource;
use opforge_ops_base::cpu::par::PARALLEL_THRESHOLD;
use opforge_testing::util::{ctx, t};
use std::sync::Arc;

/// A shape attr; -1 dims are unknown.
fn shape(dims: &[i64]) -> TensorShapeProto {
    dims.iter()
        .fold(TensorShapeProto::default(), |s, &d| s.tap_push(d))
}

/// A handle from VarHandleOp with this shared name.
fn handle(c: &EagerContext, name: &str, dtype: DataType, dims: &[i64]) -> Tensor {
    c.op("VarHandleOp")
        .attr("shared_name", name)
        .attr("dtype", dtype)
        .attr("shape", shape(dims))
        .run1()
        .unwrap()
}

fn assign(c: &EagerContext, h: &Tensor, v: Tensor) -> Result<()> {
    c.op("AssignVariableOp")
        .input(h.clone())
        .input(v)
        .run()
        .map(|_| ())
}

fn read(c: &EagerContext, h: &Tensor, dtype: DataType) -> Result<Tensor> {
    c.op("ReadVariableOp")
        .input(h.clone())
        .attr("dtype", dtype)
        .run1()
}

fn update(c: &EagerContext, op: &str, h: &Tensor, v: Tensor) -> Result<()> {
    c.op(op).input(h.clone()).input(v).run().map(|_| ())
}

fn fresh() -> EagerContext {
    EagerContext::new(2).unwrap()
}

#[test]
fn op_defs_match_tensorflow() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../tests/corpus/all_opdefs.pbtxt"
    );
    let list: OpList = proto::from_text(&std::fs::read_to_string(path).unwrap()).unwrap();
    let builders = [
        var_handle_op(),
        read_variable_op(),
        assign_variable_op(),
        assign_add_variable_op(),
        assign_sub_variable_op(),
        destroy_resource_op(),
        resource_apply_gradient_descent(),
    ];
    let mut names: Vec<String> = builders.iter().map(|b| b.name().to_string()).collect();
    names.sort();
    assert_eq!(
        names,
        opforge_testing::util::ops_registered_under("crates/opforge-ops/state/src/state/")
    );
    for b in builders {
        let mut op: OpDef = b.finalize().unwrap();
        assert!(!op.summary.is_empty());
        op.summary.clear();
        op.description.clear();
        let want = list.op.iter().find(|o| o.name == op.name).unwrap();
        assert_eq!(&op, want, "{}", op.name);
        assert!(op.is_stateful);
    }
}

#[test]
fn handle_carries_container_name_dtype_and_shape() {
    let c = fresh();
    let h = handle(&c, "hv", DataType::Float, &[2, -1]);
    assert_eq!(h.dtype(), DataType::Resource);
    assert_eq!(h.dims(), &[] as &[i64]);
    let rh = &h.resource_handles().unwrap()[0];
    assert_eq!(rh.container, "localhost");
    assert_eq!(rh.name, "hv");
    assert_eq!(rh.device, c.device().name());
    assert_eq!(rh.type_name, var_type_name());
    assert_eq!(
        rh.dtypes_and_shapes,
        vec![(DataType::Float, shape(&[2]).tap_push(-1))]
    );
    let other = c
        .op("VarHandleOp")
        .attr("container", "mine")
        .attr("shared_name", "hv")
        .attr("dtype", DataType::Int32)
        .attr("shape", shape(&[]))
        .run1()
        .unwrap();
    assert_eq!(other.resource_handles().unwrap()[0].container, "mine");
}

trait TapPush {
    fn tap_push(self, d: i64) -> Self;
}
impl TapPush for TensorShapeProto {
    fn tap_push(mut self, d: i64) -> Self {
        self.dim.push(opforge_core::proto::tensor_shape_proto::Dim {
            size: d,
            name: String::new(),
        });
        self
    }
}

#[test]
fn empty_shared_name_is_unique_per_kernel_and_anonymous_per_call() {
    let c = fresh();
    let a = c
        .op("VarHandleOp")
        .attr("dtype", DataType::Float)
        .attr("shape", shape(&[]))
        .run1()
        .unwrap();
    let a2 = c
        .op("VarHandleOp")
        .attr("dtype", DataType::Float)
        .attr("shape", shape(&[]))
        .run1()
        .unwrap();
    let b = c
        .op("VarHandleOp")
        .attr("dtype", DataType::Int32)
        .attr("shape", shape(&[]))
        .run1()
        .unwrap();
    let name = |t: &Tensor| t.resource_handles().unwrap()[0].name.clone();
    assert!(name(&a).starts_with("_AnonymousVar"), "{}", name(&a));
    // The same cached kernel: the same handle.
    assert_eq!(name(&a), name(&a2));
    // Another kernel (other attrs, or another context): another name.
    assert_ne!(name(&a), name(&b));
    let other_ctx = fresh();
    let a3 = other_ctx
        .op("VarHandleOp")
        .attr("dtype", DataType::Float)
        .attr("shape", shape(&[]))
        .run1()
        .unwrap();
    assert_ne!(name(&a), name(&a3));
    let anon = |c: &EagerContext| {
        c.op("VarHandleOp")
            .attr("shared_name", ANONYMOUS_NAME)
            .attr("dtype", DataType::Float)
            .attr("shape", shape(&[]))
            .run1()
            .unwrap()
    };
    assert_ne!(name(&anon(&c)), name(&anon(&c)));
}

#[test]
fn assign_read_update_destroy() {
    let c = fresh();
    let h = handle(&c, "v", DataType::Float, &[2]);
    assign(&c, &h, t(&[2], vec![1.0f32, 2.0])).unwrap();
    let r = read(&c, &h, DataType::Float).unwrap();
    assert_eq!(r.flat::<f32>().unwrap(), &[1.0, 2.0]);
    update(&c, "AssignAddVariableOp", &h, t(&[2], vec![10.0f32, 20.0])).unwrap();
    update(&c, "AssignSubVariableOp", &h, t(&[2], vec![0.5f32, 0.25])).unwrap();
    let r2 = read(&c, &h, DataType::Float).unwrap();
    assert_eq!(r2.flat::<f32>().unwrap(), &[10.5, 21.75]);
    // The first read is unchanged (copy-on-write).
    assert_eq!(r.flat::<f32>().unwrap(), &[1.0, 2.0]);
    // Re-assigning replaces the value, even with another shape.
    assign(&c, &h, t(&[3], vec![7.0f32, 8.0, 9.0])).unwrap();
    assert_eq!(
        read(&c, &h, DataType::Float)
            .unwrap()
            .flat::<f32>()
            .unwrap(),
        &[7.0, 8.0, 9.0]
    );
    c.op("DestroyResourceOp").input(h.clone()).run().unwrap();
    let e = read(&c, &h, DataType::Float).unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition);
    assert!(
        e.message().starts_with(
            "Could not find variable v. This could mean that the variable has been deleted."
        ),
        "{e}"
    );
    assert!(e.message().contains("container=localhost"), "{e}");
    // Destroying again: ignored by default, NotFound when asked.
    c.op("DestroyResourceOp").input(h.clone()).run().unwrap();
    let e = c
        .op("DestroyResourceOp")
        .input(h.clone())
        .attr("ignore_lookup_error", false)
        .run()
        .unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    // Updating a deleted variable.
    let e = update(&c, "AssignAddVariableOp", &h, t(&[1], vec![1.0f32])).unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    assert!(e.message().contains("does not exist"), "{e}");
}

#[test]
fn reading_an_unassigned_variable_fails() {
    let c = fresh();
    let h = handle(&c, "never", DataType::Float, &[]);
    let e = read(&c, &h, DataType::Float).unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition);
    assert!(e.message().contains("Could not find variable never"), "{e}");
    assert!(e.message().contains("uninitialized"), "{e}");
    // A Var that exists without a value (made through the Rust API).
    c.resource_mgr()
        .create(DEFAULT_CONTAINER, "empty", Var::new(DataType::Float))
        .unwrap();
    let h = handle(&c, "empty", DataType::Float, &[]);
    let e = read(&c, &h, DataType::Float).unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition);
    assert!(
        e.message()
            .contains("This could mean that the variable was uninitialized"),
        "{e}"
    );
    let e = update(&c, "AssignAddVariableOp", &h, Tensor::scalar(1.0f32)).unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition);
    assign(&c, &h, Tensor::scalar(4.0f32)).unwrap();
    assert!(c
        .resource_mgr()
        .lookup::<Var>(DEFAULT_CONTAINER, "empty")
        .unwrap()
        .is_initialized());
}

#[test]
fn dtype_and_shape_errors() {
    let c = fresh();
    let h = handle(&c, "i", DataType::Int32, &[2]);
    assign(&c, &h, t(&[2], vec![1i32, 2])).unwrap();
    let e = read(&c, &h, DataType::Float).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(
        e.message()
            .contains("Trying to read variable with wrong dtype. Expected float got int32"),
        "{e}"
    );
    // The handle declares int32.
    let e = assign(&c, &h, t(&[2], vec![1.0f32, 2.0])).unwrap_err();
    assert!(
        e.message()
            .contains("Trying to assign variable with wrong dtype. Expected int32 got float"),
        "{e}"
    );
    // A handle without a declared dtype: the variable's dtype decides.
    let bare = Tensor::from_resource_handles(
        &[],
        vec![ResourceHandle {
            name: "i".into(),
            ..Default::default()
        }],
    )
    .unwrap();
    let e = assign(&c, &bare, t(&[1], vec![1i64])).unwrap_err();
    assert!(e.message().contains("Expected int32 got int64"), "{e}");
    let e = update(&c, "AssignAddVariableOp", &bare, t(&[2], vec![1i64, 2])).unwrap_err();
    assert!(e.message().contains("Expected int32 got int64"), "{e}");
    assert_eq!(
        read(&c, &bare, DataType::Int32)
            .unwrap()
            .flat::<i32>()
            .unwrap(),
        &[1, 2]
    );
    let e = update(&c, "AssignSubVariableOp", &h, t(&[3], vec![1i32, 2, 3])).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(
        e.message().contains(
            "Cannot update variable with shape [2] using a Tensor with shape [3], shapes must be equal."
        ),
        "{e}"
    );
    let e = c
        .op("AssignVariableOp")
        .input(h.clone())
        .input(t(&[3], vec![1i32, 2, 3]))
        .attr("validate_shape", true)
        .run()
        .unwrap_err();
    assert!(
        e.message().contains(
            "Trying to assign to variable with tensor with wrong shape. Expected [2] got [3]"
        ),
        "{e}"
    );
    // Without validate_shape the shape may change.
    assign(&c, &h, t(&[3], vec![1i32, 2, 3])).unwrap();
    // Not a scalar handle.
    let two = Tensor::from_resource_handles(
        &[2],
        vec![ResourceHandle::default(), ResourceHandle::default()],
    )
    .unwrap();
    let e = read(&c, &two, DataType::Int32).unwrap_err();
    assert!(e.message().contains("must be a scalar"), "{e}");
    // Another device, another resource type.
    let mut rh = h.resource_handles().unwrap()[0].clone();
    rh.device = "/job:other/device:GPU:0".into();
    let e = read(
        &c,
        &Tensor::from_resource_handles(&[], vec![rh.clone()]).unwrap(),
        DataType::Int32,
    )
    .unwrap_err();
    assert!(
        e.message()
            .contains("Trying to access resource i located in device /job:other/device:GPU:0"),
        "{e}"
    );
    rh.device.clear();
    rh.type_name = "Table".into();
    let e = c
        .op("DestroyResourceOp")
        .input(Tensor::from_resource_handles(&[], vec![rh]).unwrap())
        .run()
        .unwrap_err();
    assert!(e.message().contains("using the wrong type"), "{e}");
    // Strings are not numbers: no update kernel.
    let s = handle(&c, "s", DataType::String, &[]);
    assign(
        &c,
        &s,
        Tensor::from_strings(&[], vec![b"x".to_vec()]).unwrap(),
    )
    .unwrap();
    let e = update(
        &c,
        "AssignAddVariableOp",
        &s,
        Tensor::from_strings(&[], vec![b"y".to_vec()]).unwrap(),
    )
    .unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    assert_eq!(
        read(&c, &s, DataType::String).unwrap().strings().unwrap(),
        &[b"x".to_vec()]
    );
}

#[test]
fn every_update_dtype() {
    let c = ctx();
    let h = |name: &str, dt| handle(c, name, dt, &[]);
    macro_rules! check {
        ($name:literal, $dt:ident, $t:ty, $a:expr, $b:expr, $sum:expr, $diff:expr) => {{
            let v = h($name, DataType::$dt);
            assign(c, &v, Tensor::scalar::<$t>($a)).unwrap();
            update(c, "AssignAddVariableOp", &v, Tensor::scalar::<$t>($b)).unwrap();
            let got = read(c, &v, DataType::$dt).unwrap();
            assert_eq!(got.scalar_value::<$t>().unwrap(), $sum, "{} add", $name);
            update(c, "AssignSubVariableOp", &v, Tensor::scalar::<$t>($b)).unwrap();
            update(c, "AssignSubVariableOp", &v, Tensor::scalar::<$t>($b)).unwrap();
            let got = read(c, &v, DataType::$dt).unwrap();
            assert_eq!(got.scalar_value::<$t>().unwrap(), $diff, "{} sub", $name);
        }};
    }
    use half::{bf16, f16};
    use num_complex::Complex;
    check!("u_f32", Float, f32, 1.5, 2.0, 3.5, -0.5);
    check!("u_f64", Double, f64, 1.5, 2.0, 3.5, -0.5);
    check!(
        "u_f16",
        Half,
        f16,
        f16::from_f32(1.5),
        f16::from_f32(2.0),
        f16::from_f32(3.5),
        f16::from_f32(-0.5)
    );
    check!(
        "u_bf16",
        BFloat16,
        bf16,
        bf16::from_f32(1.5),
        bf16::from_f32(2.0),
        bf16::from_f32(3.5),
        bf16::from_f32(-0.5)
    );
    check!("u_i8", Int8, i8, 120, 10, -126, 110); // wraps: 130 - 256, then -146 + 256
    check!("u_i16", Int16, i16, 1, 2, 3, -1);
    check!("u_i32", Int32, i32, 1, 2, 3, -1);
    check!("u_i64", Int64, i64, i64::MAX, 1, i64::MIN, i64::MAX - 1);
    check!("u_u8", UInt8, u8, 250, 10, 4, 240);
    check!("u_u16", UInt16, u16, 1, 2, 3, u16::MAX);
    check!("u_u32", UInt32, u32, 1, 2, 3, u32::MAX);
    check!("u_u64", UInt64, u64, 5, 2, 7, 3);
    check!(
        "u_c64",
        Complex64,
        Complex<f32>,
        Complex::new(1.0, 2.0),
        Complex::new(0.5, -1.0),
        Complex::new(1.5, 1.0),
        Complex::new(0.5, 3.0)
    );
    check!(
        "u_c128",
        Complex128,
        Complex<f64>,
        Complex::new(1.0, 2.0),
        Complex::new(0.5, -1.0),
        Complex::new(1.5, 1.0),
        Complex::new(0.5, 3.0)
    );
    // Bool variables can be assigned and read, not added to.
    let b = h("u_bool", DataType::Bool);
    assign(c, &b, t(&[2], vec![true, false])).unwrap();
    assert_eq!(
        read(c, &b, DataType::Bool).unwrap().flat::<bool>().unwrap(),
        &[true, false]
    );
    // Empty variables.
    let e = h("u_empty", DataType::Float);
    assign(c, &e, Tensor::zeros(DataType::Float, &[0, 3]).unwrap()).unwrap();
    update(
        c,
        "AssignAddVariableOp",
        &e,
        Tensor::zeros(DataType::Float, &[0, 3]).unwrap(),
    )
    .unwrap();
    assert_eq!(read(c, &e, DataType::Float).unwrap().dims(), &[0, 3]);
}

#[test]
fn updates_are_in_place_unless_a_read_shares_the_buffer() {
    let c = fresh();
    let h = handle(&c, "cow", DataType::Float, &[3]);
    // A uniquely owned value becomes the variable's buffer.
    let v = t(&[3], vec![1.0f32, 2.0, 3.0]);
    let addr = v.bytes().unwrap().as_ptr();
    assign(&c, &h, v).unwrap();
    update(&c, "AssignAddVariableOp", &h, t(&[3], vec![1.0f32; 3])).unwrap();
    let r1 = read(&c, &h, DataType::Float).unwrap();
    assert_eq!(r1.bytes().unwrap().as_ptr(), addr, "updated in place");
    assert_eq!(r1.flat::<f32>().unwrap(), &[2.0, 3.0, 4.0]);
    // Reads share the buffer; an update while r1 lives copies.
    let r2 = read(&c, &h, DataType::Float).unwrap();
    assert!(r1.shares_storage_with(&r2));
    update(&c, "AssignAddVariableOp", &h, t(&[3], vec![10.0f32; 3])).unwrap();
    assert_eq!(r1.flat::<f32>().unwrap(), &[2.0, 3.0, 4.0]);
    assert_eq!(r2.flat::<f32>().unwrap(), &[2.0, 3.0, 4.0]);
    let r3 = read(&c, &h, DataType::Float).unwrap();
    assert_eq!(r3.flat::<f32>().unwrap(), &[12.0, 13.0, 14.0]);
    assert!(!r3.shares_storage_with(&r1));
    // A value the caller keeps is shared, never written.
    let mine = t(&[3], vec![5.0f32; 3]);
    assign(&c, &h, mine.clone()).unwrap();
    update(&c, "AssignSubVariableOp", &h, t(&[3], vec![1.0f32; 3])).unwrap();
    assert_eq!(mine.flat::<f32>().unwrap(), &[5.0; 3]);
    // Adding a variable to itself.
    let me = read(&c, &h, DataType::Float).unwrap();
    update(&c, "AssignAddVariableOp", &h, me.clone()).unwrap();
    assert_eq!(me.flat::<f32>().unwrap(), &[4.0; 3]);
    assert_eq!(
        read(&c, &h, DataType::Float)
            .unwrap()
            .flat::<f32>()
            .unwrap(),
        &[8.0; 3]
    );
}

fn sgd(c: &EagerContext, h: &Tensor, alpha: Tensor, delta: Tensor) -> Result<()> {
    c.op("ResourceApplyGradientDescent")
        .input(h.clone())
        .input(alpha)
        .input(delta)
        .run()
        .map(|_| ())
}

#[test]
fn apply_gradient_descent_subtracts_alpha_times_delta() {
    let c = fresh();
    let h = handle(&c, "w", DataType::Float, &[3]);
    assign(&c, &h, t(&[3], vec![1.0f32, 2.0, 3.0])).unwrap();
    sgd(
        &c,
        &h,
        Tensor::scalar(0.5f32),
        t(&[3], vec![2.0f32, -4.0, 0.5]),
    )
    .unwrap();
    let r = read(&c, &h, DataType::Float).unwrap();
    assert_eq!(r.flat::<f32>().unwrap(), &[0.0, 4.0, 2.75]);
    // Integers wrap, as TensorFlow's do.
    let hi = handle(&c, "i", DataType::Int32, &[2]);
    assign(&c, &hi, t(&[2], vec![i32::MAX, 7])).unwrap();
    sgd(&c, &hi, Tensor::scalar(-1i32), t(&[2], vec![1i32, 2])).unwrap();
    let r = read(&c, &hi, DataType::Int32).unwrap();
    assert_eq!(r.flat::<i32>().unwrap(), &[i32::MIN, 9]);
    // Large, in place (no reader) and copy-on-write (a reader holds the value).
    let n = PARALLEL_THRESHOLD * 3 + 5;
    let hb = handle(&c, "big", DataType::Double, &[n as i64]);
    let start: Vec<f64> = (0..n).map(|i| i as f64).collect();
    assign(&c, &hb, t(&[n as i64], start)).unwrap();
    let delta = || {
        t(
            &[n as i64],
            (0..n).map(|i| (i % 7) as f64).collect::<Vec<f64>>(),
        )
    };
    sgd(&c, &hb, Tensor::scalar(0.25f64), delta()).unwrap();
    let kept = read(&c, &hb, DataType::Double).unwrap();
    sgd(&c, &hb, Tensor::scalar(2.0f64), delta()).unwrap();
    let now = read(&c, &hb, DataType::Double).unwrap();
    for (i, (&k, &v)) in kept
        .flat::<f64>()
        .unwrap()
        .iter()
        .zip(now.flat::<f64>().unwrap())
        .enumerate()
    {
        let d = (i % 7) as f64;
        assert_eq!(k, i as f64 - 0.25 * d);
        assert_eq!(v, i as f64 - 0.25 * d - 2.0 * d);
    }
}

#[test]
fn apply_gradient_descent_errors() {
    let c = fresh();
    let h = handle(&c, "w", DataType::Float, &[3]);
    // Never assigned: not found, as for AssignSubVariableOp.
    let e = sgd(&c, &h, Tensor::scalar(1.0f32), t(&[3], vec![1.0f32; 3])).unwrap_err();
    assert_eq!(e.code(), Code::NotFound, "{e}");
    assign(&c, &h, t(&[3], vec![1.0f32; 3])).unwrap();
    let e = sgd(&c, &h, t(&[2], vec![1.0f32; 2]), t(&[3], vec![1.0f32; 3])).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(e.message().starts_with("alpha is not a scalar: [2]"), "{e}");
    let e = sgd(&c, &h, Tensor::scalar(1.0f32), t(&[2], vec![1.0f32; 2])).unwrap_err();
    assert!(
        e.message()
            .starts_with("var and delta do not have the same shape[3] [2]"),
        "{e}"
    );
    let e = sgd(&c, &h, Tensor::scalar(1.0f64), t(&[3], vec![1.0f64; 3])).unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(
        e.message()
            .starts_with("Trying to assign variable with wrong dtype. Expected float got double"),
        "{e}"
    );
    // Nothing changed.
    let r = read(&c, &h, DataType::Float).unwrap();
    assert_eq!(r.flat::<f32>().unwrap(), &[1.0; 3]);
}

#[test]
fn large_updates_are_sharded_and_correct() {
    let c = fresh();
    let n = PARALLEL_THRESHOLD * 3 + 7;
    let h = handle(&c, "big", DataType::Int64, &[n as i64]);
    assign(&c, &h, t(&[n as i64], (0..n as i64).collect())).unwrap();
    update(
        &c,
        "AssignAddVariableOp",
        &h,
        t(&[n as i64], (0..n as i64).map(|i| 2 * i).collect()),
    )
    .unwrap();
    let keep = read(&c, &h, DataType::Int64).unwrap();
    update(&c, "AssignSubVariableOp", &h, t(&[n as i64], vec![1i64; n])).unwrap();
    let r = read(&c, &h, DataType::Int64).unwrap();
    let got = r.flat::<i64>().unwrap();
    assert!(got.iter().enumerate().all(|(i, &x)| x == 3 * i as i64 - 1));
    let kept = keep.flat::<i64>().unwrap();
    assert!(kept.iter().enumerate().all(|(i, &x)| x == 3 * i as i64));
}

#[test]
fn concurrent_updates_and_reads_from_eight_threads() {
    let c = Arc::new(fresh());
    let h = handle(&c, "counter", DataType::Int64, &[4]);
    assign(&c, &h, t(&[4], vec![0i64; 4])).unwrap();
    let threads: Vec<_> = (0..8)
        .map(|k| {
            let (c, h) = (c.clone(), h.clone());
            std::thread::spawn(move || {
                for i in 0..200 {
                    if k % 2 == 0 {
                        update(&c, "AssignAddVariableOp", &h, t(&[4], vec![3i64; 4])).unwrap();
                        if i % 4 == 0 {
                            update(&c, "AssignSubVariableOp", &h, t(&[4], vec![1i64; 4])).unwrap();
                        }
                    }
                    let r = read(&c, &h, DataType::Int64).unwrap();
                    let v = r.flat::<i64>().unwrap();
                    // Every read sees one whole update: all four equal.
                    assert!(v.iter().all(|&x| x == v[0]), "torn read {v:?}");
                    // Every value is a sum of whole updates (+3s and -1s).
                    assert!(v[0] >= 0 && v[0] <= 4 * 600, "{}", v[0]);
                    // Held across other threads' updates, it never changes.
                    let snapshot = v.to_vec();
                    std::thread::yield_now();
                    assert_eq!(r.flat::<i64>().unwrap(), snapshot.as_slice());
                }
            })
        })
        .collect();
    for th in threads {
        th.join().unwrap();
    }
    // 4 writer threads × (200 × 3 − 50 × 1).
    let r = read(&c, &h, DataType::Int64).unwrap();
    assert_eq!(r.flat::<i64>().unwrap(), &[4 * (600 - 50); 4]);
}

#[test]
fn concurrent_first_assigns_create_one_variable() {
    let c = Arc::new(fresh());
    let h = handle(&c, "race", DataType::Float, &[]);
    let threads: Vec<_> = (0..8)
        .map(|k| {
            let (c, h) = (c.clone(), h.clone());
            std::thread::spawn(move || assign(&c, &h, Tensor::scalar(k as f32)).unwrap())
        })
        .collect();
    for th in threads {
        th.join().unwrap();
    }
    let v = read(&c, &h, DataType::Float)
        .unwrap()
        .scalar_value::<f32>()
        .unwrap();
    assert!((0.0..8.0).contains(&v));
    assert_eq!(c.resource_mgr().len(), 1);
}

#[test]
fn var_api_and_debug_string() {
    let v = Var::new(DataType::Float);
    assert!(!v.is_initialized());
    assert_eq!(v.debug_string(), "Var(dtype: float, uninitialized)");
    let v = Var::with_value(t(&[1], vec![2.0f32]));
    assert_eq!(v.dtype(), DataType::Float);
    assert!(
        v.debug_string().contains("values: 2"),
        "{}",
        v.debug_string()
    );
    assert_eq!(v.value().unwrap().flat::<f32>().unwrap(), &[2.0]);
}

/// Shape functions and gradients.
mod shape_and_gradient_tests {
    use super::shape;
    use opforge_core::autodiff::{gradients, Gradient, GradientFn, GradientTape, OpsExt};
    use opforge_core::graph::{Graph, NodeSpec, Output, Session};
    use opforge_core::proto::TensorShapeProto;
    use opforge_core::shape_inference::{InferenceContext, ShapeAndType};
    use opforge_core::{DataType, Registry, Result};
    use opforge_testing::shape::{check_outputs, parse_shapes, run_shape_fn, ShapeTestOp};
    use opforge_testing::util::{assert_close, ctx, t};
    use opforge_testing::{infer_error, infer_ok};

    /// Runs `op`'s shape function with handle data for some inputs.
    fn infer_with_handles(
        op: &ShapeTestOp,
        ins: &str,
        handles: &[(usize, &[(&str, DataType)])],
    ) -> Result<InferenceContext> {
        let data = Registry::global().lookup(&op.op)?;
        let shapes = parse_shapes(ins).unwrap();
        let n_out = data.op_def.output_arg.len();
        let mut c = InferenceContext::new(&data.op_def, "", &op.attrs, &shapes, n_out);
        for (i, list) in handles {
            let mut v = Vec::new();
            for (shape, dtype) in list.iter() {
                let dims = parse_shapes(shape).unwrap().pop().unwrap();
                let shape = c.make_partial_shape(dims.as_deref());
                v.push(ShapeAndType {
                    shape,
                    dtype: *dtype,
                });
            }
            c.set_input_handle_shapes_and_types(*i, v);
        }
        (opforge_core::registry::Registry::global()
            .attr::<opforge_core::shape_inference::ShapeFn>(&data.op_def.name)
            .unwrap())(&mut c)?;
        Ok(c)
    }

    #[test]
    fn var_handle_op_shape_function() {
        let op = ShapeTestOp::new("VarHandleOp")
            .attr("dtype", DataType::Float)
            .attr("shape", shape(&[2, -1]));
        infer_ok!(op, "", "[]");
        let c = run_shape_fn(&op, "").unwrap();
        let data = c.output_handle_shapes_and_types(0).unwrap();
        assert_eq!(data.len(), 1);
        assert_eq!(data[0].dtype, DataType::Float);
        assert_eq!(c.shape_values(data[0].shape), Some(vec![2, -1]));
        let unknown = TensorShapeProto {
            unknown_rank: true,
            ..Default::default()
        };
        let op = ShapeTestOp::new("VarHandleOp")
            .attr("dtype", DataType::Int32)
            .attr("shape", unknown);
        let c = run_shape_fn(&op, "").unwrap();
        let data = c.output_handle_shapes_and_types(0).unwrap();
        assert_eq!(
            (c.shape_values(data[0].shape), data[0].dtype),
            (None, DataType::Int32)
        );
        infer_error!(
            ShapeTestOp::new("VarHandleOp"),
            "",
            "No attr named 'dtype' in NodeDef"
        );
        infer_error!(
            ShapeTestOp::new("VarHandleOp").attr("dtype", DataType::Float),
            "",
            "No attr named 'shape' in NodeDef"
        );
    }

    #[test]
    fn read_variable_op_shape_function() {
        let op = ShapeTestOp::new("ReadVariableOp").attr("dtype", DataType::Float);
        // Without handle data: unknown.
        infer_ok!(op, "[]", "?");
        infer_ok!(op, "?", "?");
        // With handle data: the very shape the handle holds.
        let c = infer_with_handles(&op, "[]", &[(0, &[("[2,?]", DataType::Float)])]).unwrap();
        let held = c.input_handle_shapes_and_types(0).unwrap()[0].shape;
        assert_eq!(c.output(0), Some(held));
        check_outputs(&c, "[2,?]").unwrap();
        let e = infer_with_handles(&op, "[]", &[(0, &[("[2]", DataType::Int32)])]).unwrap_err();
        assert_eq!(
            e.message(),
            "Trying to read variable with wrong dtype. Expected int32 got float"
        );
        // Empty handle data counts as none (and the dtype is not checked).
        let c = infer_with_handles(&op, "[]", &[(0, &[])]).unwrap();
        check_outputs(&c, "?").unwrap();
        // A `_shape` annotation wins.
        let annotated = ShapeTestOp::new("ReadVariableOp")
            .attr("dtype", DataType::Float)
            .attr("_shape", shape(&[3]));
        let c = infer_with_handles(&annotated, "[]", &[(0, &[("[2]", DataType::Int32)])]).unwrap();
        check_outputs(&c, "[3]").unwrap();
        // A variant variable's nested handle data passes on.
        let variant = ShapeTestOp::new("ReadVariableOp").attr("dtype", DataType::Variant);
        let c = infer_with_handles(
            &variant,
            "[]",
            &[(0, &[("[]", DataType::Variant), ("[4]", DataType::Float)])],
        )
        .unwrap();
        check_outputs(&c, "[]").unwrap();
        let nested = c.output_handle_shapes_and_types(0).unwrap();
        assert_eq!(
            (c.shape_values(nested[0].shape), nested[0].dtype),
            (Some(vec![4]), DataType::Float)
        );
        // The dtype is read only with handle data: a bare node without it is fine.
        infer_ok!(ShapeTestOp::new("ReadVariableOp"), "[]", "?");
    }

    #[test]
    fn assign_ops_check_the_value_against_the_handle() {
        for name in [
            "AssignVariableOp",
            "AssignAddVariableOp",
            "AssignSubVariableOp",
        ] {
            let op = ShapeTestOp::new(name).attr("dtype", DataType::Float);
            infer_ok!(op, "[];[2,3]", "");
            infer_ok!(op, "?;?", "");
            let handle = [(0, &[("[2,?]", DataType::Float)][..])];
            let c = infer_with_handles(&op, "[];[2,3]", &handle).unwrap();
            check_outputs(&c, "").unwrap();
            infer_with_handles(&op, "[];?", &handle).unwrap();
            let e = infer_with_handles(&op, "[];[3]", &handle).unwrap_err();
            assert_eq!(
                e.message(),
                "Shapes must be equal rank, but are 2 and 1",
                "{name}"
            );
            let e = infer_with_handles(&op, "[];[3,3]", &handle).unwrap_err();
            assert!(
                e.message()
                    .starts_with("Dimension 0 in both shapes must be equal, but are 2 and 3"),
                "{name}: {e}"
            );
            let e = infer_with_handles(&op, "[];[2,3]", &[(0, &[("[2,3]", DataType::Double)])])
                .unwrap_err();
            assert_eq!(
                e.message(),
                "Trying to read variable with wrong dtype. Expected double got float"
            );
            // A variant variable: the value's handle data must have the nested size.
            let op = ShapeTestOp::new(name).attr("dtype", DataType::Variant);
            let e = infer_with_handles(
                &op,
                "[];[]",
                &[
                    (0, &[("[]", DataType::Variant), ("[4]", DataType::Float)]),
                    (1, &[]),
                ],
            )
            .unwrap_err();
            assert_eq!(
                e.message(),
                "Incompatible handle variant shape_and_type size and input shape_and_type size: 1 vs. 0"
            );
        }
        // ResourceApplyGradientDescent: alpha a scalar, delta the variable's shape.
        let sgd = ShapeTestOp::new("ResourceApplyGradientDescent").attr("T", DataType::Float);
        infer_ok!(sgd, "[];[];[2,3]", "");
        infer_ok!(sgd, "?;?;?", "");
        let handle = [(0, &[("[2,?]", DataType::Float)][..])];
        infer_with_handles(&sgd, "[];[];[2,3]", &handle).unwrap();
        let e = infer_with_handles(&sgd, "[];[1];[2,3]", &handle).unwrap_err();
        assert_eq!(e.message(), "Shape must be rank 0 but is rank 1");
        let e = infer_with_handles(&sgd, "[];[];[3,3]", &handle).unwrap_err();
        assert!(
            e.message()
                .starts_with("Dimension 0 in both shapes must be equal, but are 2 and 3"),
            "{e}"
        );
        let destroy = ShapeTestOp::new("DestroyResourceOp");
        infer_ok!(destroy, "[]", "");
        infer_ok!(destroy, "?", "");
    }

    #[test]
    fn state_op_gradient_registrations() {
        let r = opforge_core::registry::Registry::global();
        assert!(matches!(
            r.attr::<Gradient>("ReadVariableOp").as_deref(),
            Some(GradientFn::Fn(_))
        ));
        for op in [
            "VarHandleOp",
            "AssignVariableOp",
            "AssignAddVariableOp",
            "AssignSubVariableOp",
            "DestroyResourceOp",
        ] {
            assert!(
                matches!(
                    r.attr::<Gradient>(op).as_deref(),
                    Some(GradientFn::NotDifferentiable)
                ),
                "{op}"
            );
        }
    }

    fn add(g: &mut Graph, spec: NodeSpec) -> Output {
        Output::new(g.add(spec).unwrap(), 0)
    }

    /// One step of gradient descent on a resource variable in a graph:
    /// `loss = sum((w * x - y)^2)` by `gradients()` with respect to the
    /// value `ReadVariableOp` reads, applied with `AssignSubVariableOp`.
    #[test]
    fn graph_training_step_through_a_read_variable_op() {
        let mut g = Graph::new();
        let h = add(
            &mut g,
            NodeSpec::new("VarHandleOp", "w")
                .attr("dtype", DataType::Double)
                .attr("shape", shape(&[2]))
                .attr("shared_name", "w"),
        );
        let init_value = add(
            &mut g,
            NodeSpec::new("Const", "w0")
                .attr("value", &t(&[2], vec![1.0f64, -1.0]))
                .attr("dtype", DataType::Double),
        );
        let init = g
            .add(
                NodeSpec::new("AssignVariableOp", "init")
                    .input(h)
                    .input(init_value),
            )
            .unwrap();
        let read = add(
            &mut g,
            NodeSpec::new("ReadVariableOp", "read")
                .input(h)
                .attr("dtype", DataType::Double),
        );
        let x = add(
            &mut g,
            NodeSpec::new("Const", "x")
                .attr("value", &t(&[3, 2], vec![1.0f64, 2.0, 3.0, 4.0, 5.0, 6.0]))
                .attr("dtype", DataType::Double),
        );
        let y = add(
            &mut g,
            NodeSpec::new("Const", "y")
                .attr("value", &t(&[3, 1], vec![1.0f64, 0.0, -1.0]))
                .attr("dtype", DataType::Double),
        );
        let wx = add(&mut g, NodeSpec::new("Mul", "wx").input(read).input(x));
        let d = add(
            &mut g,
            NodeSpec::new("SquaredDifference", "d").input(wx).input(y),
        );
        // The loss is the sum of d's elements: the default seed (ones) of
        // gradients() sums them.
        let loss = d;
        let grad = gradients(&mut g, &[loss], &[read], None).unwrap()[0].unwrap();
        let lr = add(
            &mut g,
            NodeSpec::new("Const", "lr")
                .attr("value", &t(&[], vec![0.01f64]))
                .attr("dtype", DataType::Double),
        );
        let step = add(&mut g, NodeSpec::new("Mul", "step").input(grad).input(lr));
        let train = g
            .add(
                NodeSpec::new("AssignSubVariableOp", "train")
                    .input(h)
                    .input(step),
            )
            .unwrap();
        let sess = Session::new(g).unwrap();
        sess.run(vec![], &[], &[init]).unwrap();
        let out = sess.run(vec![], &[grad, loss], &[]).unwrap();
        // w = [1, -1]: w*x = [[1,-2],[3,-4],[5,-6]], minus y = [[0,-3],[3,-4],[6,-5]];
        // dloss/dw_j = sum_i 2 (w_j x_ij - y_i) x_ij.
        let want_grad = [
            2.0 * (0.0 * 1.0 + 3.0 * 3.0 + 6.0 * 5.0),
            2.0 * (-3.0 * 2.0 + -4.0 * 4.0 + -5.0 * 6.0),
        ];
        assert_close(&out[0], &[2], &want_grad, 1e-12);
        assert_close(&out[1], &[3, 2], &[0.0, 9.0, 9.0, 16.0, 36.0, 25.0], 1e-12);
        sess.run(vec![], &[], &[train]).unwrap();
        let w = sess.run(vec![], &[read], &[]).unwrap();
        assert_close(
            &w[0],
            &[2],
            &[1.0 - 0.01 * want_grad[0], -1.0 - 0.01 * want_grad[1]],
            1e-12,
        );
    }

    /// Eagerly, the tape tracks what is computed from a watched handle,
    /// so the value a `ReadVariableOp` reads can be a source.
    #[test]
    fn tape_gradient_with_respect_to_a_read_value() {
        let c = ctx();
        let h = c
            .op("VarHandleOp")
            .attr("shared_name", "tape_w")
            .attr("dtype", DataType::Double)
            .attr("shape", shape(&[2]))
            .run1()
            .unwrap();
        c.op("AssignVariableOp")
            .input(h.clone())
            .input(t(&[2], vec![3.0f64, -2.0]))
            .run()
            .unwrap();
        let mut tape = GradientTape::new(c, false);
        let hs = tape.watch(h);
        let dtype = opforge_core::attrs::IntoAttrValue::into_attr_value(DataType::Double);
        let w = tape
            .op1("ReadVariableOp", &[hs], &[("dtype", dtype)])
            .unwrap();
        let loss = tape.mul(w, w).unwrap();
        let g = tape.gradient_tensors(loss, &[w, hs]).unwrap();
        assert_close(g[0].as_ref().unwrap(), &[2], &[6.0, -4.0], 0.0);
        assert!(g[1].is_none(), "no gradient flows into a resource handle");
    }
}
