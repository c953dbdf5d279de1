//! Tests of the registry: ops, kernels, per-op attributes, origins,
//! duplicate policy, unload and generations, static registration, verify.

use super::*;
use crate::attrs::{AttrMap, IntoAttrValue};
use crate::kernel::{
    CreateKernel, KernelDefBuilder, KernelRegistration, OpKernel, OpKernelConstruction,
    OpKernelContext,
};
use crate::proto;
use crate::{Code, DataType};

fn op(text: &str) -> OpDef {
    proto::from_text(text).unwrap()
}

fn zero_out() -> OpDefBuilder {
    OpDefBuilder::new("RegistryTestZeroOut")
        .attr("T: {float, int32} = DT_INT32")
        .input("to_zero: T")
        .output("zeroed: T")
}

crate::register_op!(OpDefBuilder::new("RegistryTestStaticOp")
    .input("x: float")
    .output("y: float"));
// The global registry needs a kernel to pass `verify`.
crate::register_kernel!(KernelDefBuilder::new("RegistryTestStaticOp"), Nop);

#[test]
fn register_and_lookup() {
    let r = Registry::new();
    assert!(r.is_empty());
    r.register_op_def(op("name: 'Foo' input_arg { name: 'x' type: DT_FLOAT }"))
        .unwrap();
    r.register_op(zero_out()).unwrap();
    assert_eq!(r.len(), 2);
    assert!(!r.is_empty());
    let data = r.lookup("Foo").unwrap();
    assert_eq!(data.op_def.input_arg[0].name, "x");
    assert_eq!(
        r.op_def("RegistryTestZeroOut").unwrap().output_arg[0].name,
        "zeroed"
    );
    assert_eq!(r.names(), vec!["Foo", "RegistryTestZeroOut"]);
    let list = r.op_list();
    assert_eq!(
        list.op.iter().map(|o| o.name.as_str()).collect::<Vec<_>>(),
        ["Foo", "RegistryTestZeroOut"]
    );
    r.verify().unwrap();
}

#[test]
fn identical_re_registration_is_ok() {
    let r = Registry::new();
    r.register_op(zero_out()).unwrap();
    r.register_op(zero_out()).unwrap();
    r.register_op_def(r.op_def("RegistryTestZeroOut").unwrap())
        .unwrap();
    assert_eq!(r.len(), 1);
}

#[test]
fn conflicting_re_registration_is_already_exists() {
    let r = Registry::new();
    r.register_op_def(op("name: 'Foo' input_arg { name: 'x' type: DT_FLOAT }"))
        .unwrap();
    let err = r
        .register_op_def(op("name: 'Foo' input_arg { name: 'x' type: DT_INT32 }"))
        .unwrap_err();
    assert_eq!(err.code(), Code::AlreadyExists);
    let msg = err.message();
    assert!(msg.contains("'Foo'"), "{msg}");
    assert!(msg.contains("input_arg[0].type"), "{msg}");
    assert!(
        msg.contains("DT_FLOAT") && msg.contains("DT_INT32"),
        "{msg}"
    );

    let err = r
        .register_op_def(op(
            "name: 'Foo' input_arg { name: 'x' type: DT_FLOAT } is_stateful: true",
        ))
        .unwrap_err();
    assert!(err.message().contains("is_stateful"), "{err}");
    let err = r
        .register_op_def(op(
            "name: 'Foo' input_arg { name: 'x' type: DT_FLOAT } input_arg { name: 'y' type: DT_FLOAT }",
        ))
        .unwrap_err();
    assert!(err.message().contains("input_arg has 1 entry"), "{err}");
    // The first registration is kept.
    assert_eq!(r.op_def("Foo").unwrap().input_arg.len(), 1);
}

#[test]
fn invalid_op_defs_are_rejected() {
    let r = Registry::new();
    let err = r.register_op_def(op("name: 'lower_case'")).unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    let err = r
        .register_op(OpDefBuilder::new("BadSpec").input("x: not a type"))
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().contains("BadSpec"), "{err}");
    assert!(r.is_empty());
}

#[test]
fn not_found_suggests_close_names() {
    let r = Registry::new();
    for name in ["Foo", "ZeroOut", "AddV2", "Add", "MatMul", "BatchMatMulV2"] {
        r.register_op_def(op(&format!("name: '{name}'"))).unwrap();
    }
    let err = r.lookup("Fooo").unwrap_err();
    assert_eq!(err.code(), Code::NotFound);
    let msg = err.message();
    assert!(
        msg.starts_with("Op type not registered 'Fooo' in binary running on"),
        "{msg}"
    );
    assert!(msg.contains("Did you mean 'Foo'?"), "{msg}");
    assert!(msg.contains("op library"), "{msg}");

    let msg = r.lookup("zeroout").unwrap_err().message().to_string();
    assert!(msg.contains("Did you mean 'ZeroOut'?"), "{msg}");
    let msg = r.lookup("AddV3").unwrap_err().message().to_string();
    assert!(msg.contains("Did you mean one of 'AddV2', 'Add'?"), "{msg}");
    let msg = r.lookup("Conv2D").unwrap_err().message().to_string();
    assert!(!msg.contains("Did you mean"), "{msg}");
    let msg = r.lookup("batchmatmulv2").unwrap_err().message().to_string();
    assert!(msg.contains("'BatchMatMulV2'"), "{msg}");
}

#[test]
fn startup_check_fails_loudly_on_an_empty_registry() {
    let err = Registry::new().verify().unwrap_err();
    assert_eq!(err.code(), Code::Internal);
    assert!(err.message().contains("no ops are registered"), "{err}");
}

#[test]
fn static_registrations_and_their_failures() {
    let regs = [
        StaticRegistration::op(zero_out, "a.rs", 1),
        StaticRegistration::op(|| OpDefBuilder::new("Broken").input("x: nope"), "b.rs", 2),
        StaticRegistration::op(
            || OpDefBuilder::new("RegistryTestZeroOut").input("x: float"),
            "c.rs",
            3,
        ),
        StaticRegistration::op(|| OpDefBuilder::new("Fine"), "d.rs", 4),
    ];
    let r = Registry::new();
    r.register_static(&regs, None);
    assert_eq!(r.names(), ["Fine", "RegistryTestZeroOut"]);
    let err = r.verify().unwrap_err();
    assert_eq!(err.code(), Code::Internal);
    let msg = err.message();
    assert!(msg.contains("2 problems"), "{msg}");
    assert!(msg.contains("b.rs:2: ") && msg.contains("Broken"), "{msg}");
    assert!(msg.contains("c.rs:3: ALREADY_EXISTS"), "{msg}");
    assert_eq!(regs[0].file(), "a.rs");
    assert_eq!(regs[0].line(), 1);
    let StaticKind::Op(build) = regs[0].kind() else {
        panic!("an op registration")
    };
    assert_eq!(build().name(), "RegistryTestZeroOut");
}

#[test]
fn selective_registration_filters_static_registrations() {
    assert!(should_register_op("A", None));
    assert!(should_register_op("A", Some(&["B", "A"])));
    assert!(!should_register_op("A", Some(&["B"])));
    assert!(!should_register_op("A", Some(&[])));

    let regs = [
        StaticRegistration::op(|| OpDefBuilder::new("Kept"), "a.rs", 1),
        StaticRegistration::op(|| OpDefBuilder::new("Skipped"), "a.rs", 2),
        // A broken op that is not selected is not even finalized.
        StaticRegistration::op(|| OpDefBuilder::new("Bad").input("x"), "a.rs", 3),
    ];
    let r = Registry::new();
    r.register_static(&regs, Some(&["Kept"]));
    assert_eq!(r.names(), ["Kept"]);
    r.verify().unwrap();
    // Run-time registrations are not filtered.
    r.register_op_def(op("name: 'Skipped'")).unwrap();
    assert_eq!(r.len(), 2);

    let r = Registry::new();
    r.register_static(&regs, Some(&["Elsewhere"]));
    assert!(r.verify().is_err());
}

#[test]
fn global_registry_holds_static_registrations() {
    let global = Registry::global();
    assert!(std::ptr::eq(global, Registry::global()));
    if should_register_op("RegistryTestStaticOp", OPS_TO_REGISTER) {
        let def = global.op_def("RegistryTestStaticOp").unwrap();
        assert_eq!(def.input_arg[0].r#type, crate::DataType::Float as i32);
        global.verify().unwrap();
    }
}

#[test]
fn concurrent_registration() {
    let r = Arc::new(Registry::new());
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let r = Arc::clone(&r);
            std::thread::spawn(move || {
                for i in 0..50 {
                    r.register_op_def(op(&format!("name: 'Op{t}x{i}'")))
                        .unwrap();
                    // Every thread also registers the same shared ops.
                    r.register_op_def(op(&format!("name: 'Shared{i}'")))
                        .unwrap();
                    assert!(r.lookup(&format!("Shared{i}")).is_ok());
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(r.len(), 8 * 50 + 50);
    let names = r.names();
    assert!(names.windows(2).all(|w| w[0] < w[1]));
}

// ---- kernels ----

struct Nop;
impl OpKernel for Nop {
    fn compute(&self, _: &mut OpKernelContext<'_>) -> Result<()> {
        Ok(())
    }
}
impl CreateKernel for Nop {
    fn create(_: &OpKernelConstruction<'_>) -> Result<Self> {
        Ok(Nop)
    }
}

fn zero_out_k() -> OpDef {
    OpDefBuilder::new("ZeroOutK")
        .attr("T: realnumbertype")
        .input("x: T")
        .output("y: T")
        .finalize()
        .unwrap()
}

fn attrs(t: DataType) -> AttrMap {
    [("T".to_string(), t.into_attr_value())]
        .into_iter()
        .collect()
}

#[test]
fn selection_by_dtype_label_and_priority() {
    let reg = Registry::new();
    reg.register_kernel(KernelRegistration::of::<Nop>(
        KernelDefBuilder::new("ZeroOutK").type_constraint::<i32>("T"),
    ))
    .unwrap();
    reg.register_kernel(KernelRegistration::of::<Nop>(
        KernelDefBuilder::new("ZeroOutK").type_constraint::<f32>("T"),
    ))
    .unwrap();
    reg.register_kernel(KernelRegistration::of::<Nop>(
        KernelDefBuilder::new("ZeroOutK")
            .type_constraint::<f32>("T")
            .priority(5),
    ))
    .unwrap();
    reg.register_kernel(KernelRegistration::of::<Nop>(
        KernelDefBuilder::new("ZeroOutK")
            .type_constraint::<f32>("T")
            .label("fast"),
    ))
    .unwrap();
    let dup = reg.register_kernel(KernelRegistration::of::<Nop>(
        KernelDefBuilder::new("ZeroOutK").type_constraint::<i32>("T"),
    ));
    assert_eq!(dup.unwrap_err().code(), crate::Code::AlreadyExists);
    let op = zero_out_k();
    let k = reg
        .find_kernel(&op, "n", &attrs(DataType::Float), "CPU")
        .unwrap();
    assert_eq!(k.def.priority, 5);
    let k = reg
        .find_kernel(&op, "n", &attrs(DataType::Int32), "CPU")
        .unwrap();
    assert_eq!(k.def.constraints[0].1, vec![DataType::Int32]);
    let mut labeled = attrs(DataType::Float);
    labeled.insert("_kernel".into(), "fast".into_attr_value());
    assert_eq!(
        reg.find_kernel(&op, "n", &labeled, "CPU")
            .unwrap()
            .def
            .label,
        "fast"
    );
    assert!(reg
        .find_kernel(&op, "n", &attrs(DataType::Float), "GPU")
        .is_err());
}

#[test]
fn no_match_lists_registered_kernels_like_tensorflow() {
    let reg = Registry::new();
    reg.register_kernel(KernelRegistration::of::<Nop>(
        KernelDefBuilder::new("ZeroOutK")
            .type_constraint_list("T", &[DataType::Int32, DataType::Float]),
    ))
    .unwrap();
    let err = reg
        .find_kernel(&zero_out_k(), "ZeroOutK", &attrs(DataType::Double), "CPU")
        .unwrap_err();
    assert_eq!(err.code(), crate::Code::NotFound);
    assert_eq!(
        err.message(),
        "No OpKernel was registered to support Op 'ZeroOutK' used by {{node ZeroOutK}} with these attrs: [T=DT_DOUBLE]\n\
         Registered devices: [CPU]\nRegistered kernels:\n  device='CPU'; T in [DT_INT32, DT_FLOAT]"
    );
    let none = Registry::new()
        .find_kernel(&zero_out_k(), "z", &attrs(DataType::Double), "CPU")
        .unwrap_err();
    assert!(
        none.message()
            .ends_with("Registered kernels:\n  <no registered kernels>"),
        "{none}"
    );
}

#[test]
fn ambiguous_matches_are_an_error() {
    let reg = Registry::new();
    reg.register_kernel(KernelRegistration::of::<Nop>(
        KernelDefBuilder::new("ZeroOutK").type_constraint::<f32>("T"),
    ))
    .unwrap();
    reg.register_kernel(KernelRegistration::of::<Nop>(
        KernelDefBuilder::new("ZeroOutK")
            .type_constraint_list("T", &[DataType::Float, DataType::Double]),
    ))
    .unwrap();
    let err = reg
        .find_kernel(&zero_out_k(), "n", &attrs(DataType::Float), "CPU")
        .unwrap_err();
    assert!(
        err.message()
            .starts_with("Multiple OpKernel registrations match"),
        "{err}"
    );
}

#[test]
fn startup_check_finds_unknown_ops_and_attrs() {
    let mut reg = Registry::new();
    reg.require_kernels = true;
    reg.register_op_def(zero_out_k()).unwrap();
    assert!(reg
        .verify()
        .unwrap_err()
        .message()
        .contains("no kernels are registered"));
    reg.register_kernel(KernelRegistration::of::<Nop>(KernelDefBuilder::new("Nope")))
        .unwrap();
    reg.register_kernel(KernelRegistration::of::<Nop>(
        KernelDefBuilder::new("ZeroOutK").type_constraint::<f32>("U"),
    ))
    .unwrap();
    let msg = reg.verify().unwrap_err().to_string();
    assert!(
        msg.contains("op 'Nope', which is not a registered op"),
        "{msg}"
    );
    assert!(
        msg.contains("constrains 'U', which is not a type attr"),
        "{msg}"
    );
}

// ---- per-op attributes, owners, unload ----

struct Cost;
impl OpAttr for Cost {
    type Value = u32;
    const NAME: &'static str = "Cost";
}

fn unary(name: &str) -> OpDefBuilder {
    OpDefBuilder::new(name).input("x: float").output("y: float")
}

#[test]
fn typed_attributes_and_their_duplicate_policy() {
    use crate::autodiff::{Gradient, GradientFn, OpsExt};
    use crate::shape_inference::ShapeFn;
    let r = Registry::new();
    r.register_op(unary("A").set_shape_fn(|c| {
        let s = c.input(0);
        c.set_output(0, s);
        Ok(())
    }))
    .unwrap();
    assert!(r.attr::<ShapeFn>("A").is_some());
    assert!(r.attr::<Gradient>("A").is_none());
    let cost = Arc::new(7u32);
    r.set_attr::<Cost>("A", cost.clone()).unwrap();
    // The same value again: a no-op.
    r.set_attr::<Cost>("A", cost).unwrap();
    assert_eq!(*r.attr::<Cost>("A").unwrap(), 7);
    // A different one: AlreadyExists naming both origins.
    let err = r.set_attr::<Cost>("A", Arc::new(8)).unwrap_err();
    assert_eq!(err.code(), Code::AlreadyExists);
    let msg = err.message();
    assert!(msg.contains("Op 'A' already has a Cost"), "{msg}");
    assert_eq!(msg.matches("registry/tests.rs:").count(), 2, "{msg}");
    assert_eq!(*r.attr::<Cost>("A").unwrap(), 7);
    // Gradients are closures: a captured value flows into the function.
    let scale = 3.0;
    let grad = GradientFn::from_fn(move |ctx| {
        let k = ctx.scalar(DataType::Float, scale)?;
        let d = ctx.mul(ctx.grad()?, k)?;
        ctx.set_input_grad(0, d)
    });
    r.set_attr::<Gradient>("A", Arc::new(grad)).unwrap();
    let not_diff = Arc::new(GradientFn::NotDifferentiable);
    r.register_op(unary("B")).unwrap();
    r.set_attr::<Gradient>("B", not_diff).unwrap();
    // Declaring an op not differentiable twice is the same registration.
    r.set_attr::<Gradient>("B", Arc::new(GradientFn::NotDifferentiable))
        .unwrap();
    assert_eq!(r.attr_names("A"), ["Cost", "Gradient", "ShapeFn"]);
    assert_eq!(r.ops_with_attr::<Gradient>(), ["A", "B"]);
    assert_eq!(r.attr_origins::<Cost>("A").len(), 1);
    r.verify().unwrap();
}

#[test]
fn verify_rejects_attributes_of_unknown_ops() {
    use crate::autodiff::{Gradient, GradientFn};
    let r = Registry::new();
    r.register_op(unary("Known")).unwrap();
    r.set_attr::<Gradient>("Unknown", Arc::new(GradientFn::NotDifferentiable))
        .unwrap();
    let err = r.verify().unwrap_err();
    assert_eq!(err.code(), Code::Internal);
    assert!(
        err.message()
            .contains("a Gradient is registered for op 'Unknown', which is not a registered op"),
        "{err}"
    );
}

#[test]
fn an_op_with_a_conflicting_attribute_is_not_half_registered() {
    let r = Registry::new();
    r.set_attr::<Cost>("C", Arc::new(1)).unwrap();
    let b = unary("C").set_attr::<Cost>(Arc::new(2));
    let err = r.register_op(b).unwrap_err();
    assert_eq!(err.code(), Code::AlreadyExists);
    assert!(r.lookup("C").is_err(), "the op must not be registered");
}

#[test]
fn libraries_register_and_unload_what_they_own() {
    use crate::shape_inference::ShapeFn;
    let r = Registry::new();
    r.register_op(unary("Shared")).unwrap();
    let lib = r.add_owner("/tmp/libdemo.so");
    assert_eq!(r.owner_name(lib).as_deref(), Some("/tmp/libdemo.so"));
    let reg = r.registrar(lib, "/tmp/libdemo.so");
    reg.op(unary("Demo").set_shape_fn(|c| {
        let s = c.input(0);
        c.set_output(0, s);
        Ok(())
    }))
    .unwrap();
    // An identical OpDef from another owner is shared.
    reg.op(unary("Shared")).unwrap();
    reg.kernel(KernelRegistration::of::<Nop>(KernelDefBuilder::new("Demo")))
        .unwrap();
    reg.set_attr::<Cost>("Demo", Arc::new(3)).unwrap();
    // A different OpDef under a taken name names both origins.
    let err = reg
        .op(OpDefBuilder::new("Shared").input("x: int32"))
        .unwrap_err();
    assert_eq!(err.code(), Code::AlreadyExists);
    assert!(err.message().contains("library '/tmp/libdemo.so'"), "{err}");
    assert!(
        err.message()
            .contains("built-in (crates/opforge-core/src/registry/tests.rs:"),
        "{err}"
    );
    assert_eq!(r.ops_of(lib), ["Demo", "Shared"]);

    let demo = r.lookup("Demo").unwrap();
    let shared = r.lookup("Shared").unwrap();
    let kernel = r.kernels_for("Demo").pop().unwrap();
    let generation = r.generation();
    let unloaded = r.unload(lib);
    assert_eq!(unloaded.ops, ["Demo"]);
    assert_eq!((unloaded.kernels, unloaded.attrs), (1, 2));
    assert!(r.generation() > generation);
    assert!(!demo.is_live() && !kernel.is_live());
    assert!(shared.is_live(), "still registered by the built-in code");
    assert!(r.lookup("Demo").is_err());
    assert!(r.kernels_for("Demo").is_empty());
    assert!(r.attr::<ShapeFn>("Demo").is_none() && r.attr::<Cost>("Demo").is_none());
    assert!(demo.state().describe_origins().contains("libdemo.so"));
    assert!(r.owner_name(lib).is_none());
    // Unloading again removes nothing and keeps the generation.
    let generation = r.generation();
    assert!(r.unload(lib).is_empty());
    assert_eq!(r.generation(), generation);
}

#[test]
fn identical_kernels_are_a_no_op_and_different_ones_name_both_origins() {
    let r = Registry::new();
    let a = KernelRegistration::of::<Nop>(KernelDefBuilder::new("K"));
    let factory = a.factory.clone();
    r.register_kernel(a).unwrap();
    // The same factory again (a library registering the same kernel twice).
    r.register_kernel(KernelRegistration {
        def: KernelDefBuilder::new("K").build(),
        factory,
        state: EntryState::default(),
    })
    .unwrap();
    assert_eq!(r.kernel_count(), 1);
    let err = r
        .register_kernel(KernelRegistration::of::<Nop>(KernelDefBuilder::new("K")))
        .unwrap_err();
    assert_eq!(err.code(), Code::AlreadyExists);
    assert_eq!(
        err.message().matches("registry/tests.rs:").count(),
        2,
        "{err}"
    );
}

#[test]
fn require_ops_names_what_is_missing() {
    let r = Registry::new();
    r.register_op(unary("AddN")).unwrap();
    r.require_ops(&["AddN"], "autodiff").unwrap();
    let err = r
        .require_ops(&["AddN", "OnesLike", "Const"], "autodiff")
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition);
    assert!(
        err.message()
            .starts_with("autodiff needs the ops 'OnesLike', 'Const'"),
        "{err}"
    );
}

#[test]
fn selective_registration_applies_to_kernels_and_attributes() {
    use crate::autodiff::{Gradient, GradientFn};
    let regs = [
        StaticRegistration::op(|| unary("Kept"), "a.rs", 1),
        StaticRegistration::op(|| unary("Dropped"), "a.rs", 2),
        StaticRegistration::kernel(
            || KernelRegistration::of::<Nop>(KernelDefBuilder::new("Kept")),
            "a.rs",
            3,
        ),
        StaticRegistration::kernel(
            || KernelRegistration::of::<Nop>(KernelDefBuilder::new("Dropped")),
            "a.rs",
            4,
        ),
        StaticRegistration::attr(
            "Kept",
            || ErasedAttr::new::<Gradient>(Arc::new(GradientFn::NotDifferentiable)),
            "a.rs",
            5,
        ),
        StaticRegistration::attr(
            "Dropped",
            || ErasedAttr::new::<Gradient>(Arc::new(GradientFn::NotDifferentiable)),
            "a.rs",
            6,
        ),
    ];
    let r = Registry::new();
    r.register_static(&regs, Some(&["Kept"]));
    assert_eq!(r.names(), ["Kept"]);
    assert_eq!(r.kernel_count(), 1);
    assert_eq!(r.ops_with_attr::<Gradient>(), ["Kept"]);
    r.verify().unwrap();
    // Running the same static registrations again changes nothing.
    r.register_static(&regs, Some(&["Kept"]));
    assert_eq!(r.kernel_count(), 1);
    r.verify().unwrap();
}
