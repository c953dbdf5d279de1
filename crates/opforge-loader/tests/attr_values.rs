//! Tensor and func attrs across the ABI, from a Rust SDK plugin
//! (tests/plugins/attr_plugin.rs, built here as a cdylib with a nested
//! cargo): its `AttrProbe` reads a `value: tensor` and an `f: func` attr at
//! kernel creation (eagerly and in a session) and in its shape function;
//! the other way, its gradients give the host tensor, shape and float-list
//! attr values (a declarative gradient with a `Const` node, a gradient
//! function calling an op with a `list(float)` attr).

use opforge_core::attrs::{AttrMap, IntoAttrValue};
use opforge_core::autodiff::{
    compute_gradient, compute_gradient_error, gradients, GradientTape, Ops, Sym, SymArg,
};
use opforge_core::device::CpuDevice;
use opforge_core::eager::EagerContext;
use opforge_core::graph::{Graph, NodeSpec, Output, Session};
use opforge_core::proto::attr_value::Value as AV;
use opforge_core::proto::{AttrValue, NameAttrList};
use opforge_core::registry::Registry;
use opforge_core::{Code, DataType, Tensor, TensorShape};
use opforge_loader::Loader;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// One test at a time: both load the same file, and the SDK keeps its host
/// table in a global of the library, so one test's unload (fini) would cut
/// off the other's kernels.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(PoisonError::into_inner)
}

#[path = "plugins/build.rs"]
mod plugin_build;

/// Builds the plugin in a crate of its own under `CARGO_TARGET_TMPDIR`.
fn build() -> PathBuf {
    plugin_build::build_plugin("attr_plugin")
}

/// A sandbox registry with the standard op library (the ops the plugin's
/// gradients call: Const, Cast, Square, Mul, PlaceholderWithDefault).
fn std_registry() -> Arc<Registry> {
    opforge_ops::link();
    Arc::new(Registry::with_builtins())
}

fn func(name: &str, attrs: &[(&str, AttrValue)]) -> AttrValue {
    let mut f = NameAttrList {
        name: name.into(),
        ..Default::default()
    };
    for (k, v) in attrs {
        f.attr.insert(k.to_string(), v.clone());
    }
    AttrValue {
        value: Some(AV::Func(f)),
    }
}

fn tensor(t: &Tensor) -> AttrValue {
    AttrValue {
        value: Some(AV::Tensor(Box::new(t.to_proto().unwrap()))),
    }
}

fn int(i: i64) -> AttrValue {
    AttrValue {
        value: Some(AV::I(i)),
    }
}

fn info(t: &Tensor) -> Vec<String> {
    t.strings()
        .unwrap()
        .iter()
        .map(|s| String::from_utf8(s.clone()).unwrap())
        .collect()
}

#[test]
fn tensor_and_func_attrs_reach_kernels_and_shape_functions() {
    let _s = serial();
    let lib = build();
    let r = std_registry();
    let loader = Loader::new(r.clone());
    loader.load(&lib).unwrap();
    let ctx = EagerContext::with_registry(Arc::new(CpuDevice::new(2).unwrap()), r.clone());

    // Eager: the kernel reads both attrs at creation.
    let value = Tensor::from_vec(&[2, 3], vec![1f32, -2., 3.5, 4., 5., 6.]).unwrap();
    let f = func("MyFn", &[("T", int(1)), ("n", int(3))]);
    let mut attrs = AttrMap::new();
    attrs.insert("value".into(), tensor(&value));
    attrs.insert("f".into(), f.clone());
    let out = ctx.execute("AttrProbe", vec![], &attrs).unwrap();
    assert_eq!(out[0].dims(), &[2, 3]);
    assert_eq!(out[0].flat::<f32>().unwrap(), &[1., -2., 3.5, 4., 5., 6.]);
    assert_eq!(
        info(&out[1]),
        [
            (DataType::Float as i32).to_string(),
            "MyFn".into(),
            "T,n".into()
        ]
    );

    // Other dtypes and ranks: an int64 scalar, a string vector.
    let mut attrs = AttrMap::new();
    attrs.insert(
        "value".into(),
        tensor(&Tensor::from_vec(&[], vec![-7i64]).unwrap()),
    );
    attrs.insert("f".into(), func("Other", &[]));
    let out = ctx.execute("AttrProbe", vec![], &attrs).unwrap();
    assert_eq!(out[0].dims(), &[] as &[i64]);
    assert_eq!(out[0].flat::<f32>().unwrap(), &[-7.]);
    assert_eq!(
        info(&out[1]),
        [
            (DataType::Int64 as i32).to_string(),
            "Other".into(),
            String::new()
        ]
    );
    let strs =
        Tensor::from_strings(&[3], vec![b"a".to_vec(), b"".to_vec(), b"xyz".to_vec()]).unwrap();
    attrs.insert("value".into(), tensor(&strs));
    let out = ctx.execute("AttrProbe", vec![], &attrs).unwrap();
    assert_eq!(out[0].flat::<f32>().unwrap(), &[1., 0., 3.]);
    assert_eq!(info(&out[1])[0], (DataType::String as i32).to_string());

    // A graph: the shape function reads both attrs (y's shape is the
    // tensor's dims), and a session creates the kernel.
    let mut g = Graph::with_registry(r.clone());
    let p = g
        .add(
            NodeSpec::new("AttrProbe", "p")
                .attr("value", &value)
                .attr("f", f.clone()),
        )
        .unwrap();
    assert_eq!(
        g.output_shape(Output::new(p, 0)).unwrap(),
        Some(&[2, 3][..])
    );
    assert_eq!(g.output_shape(Output::new(p, 1)).unwrap(), Some(&[3][..]));
    let e = g
        .add(
            NodeSpec::new("AttrProbe", "bad")
                .attr("value", &value)
                .attr("f", func("", &[])),
        )
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");
    assert!(e.message().contains("f names no function"), "{e}");
    let s = Session::new(g).unwrap();
    let out = s
        .run(vec![], &[Output::new(p, 0), Output::new(p, 1)], &[])
        .unwrap();
    assert_eq!(out[0].flat::<f32>().unwrap(), &[1., -2., 3.5, 4., 5., 6.]);
    assert_eq!(info(&out[1])[1], "MyFn");
}

/// A graph `y = op(x)` for a float placeholder `x` of `shape` (attrs
/// `attrs`), with `dy/dx` added by `gradients()`: (graph, x, dx).
fn graph_gradient(
    r: &Arc<Registry>,
    op: &str,
    attrs: &AttrMap,
    shape: &[i64],
) -> opforge_core::Result<(Graph, Output, Output)> {
    let mut g = Graph::with_registry(r.clone());
    let x = g.add(
        NodeSpec::new("Placeholder", "x")
            .attr("dtype", DataType::Float)
            .attr("shape", TensorShape::new(shape)?.to_proto()),
    )?;
    let x = Output::new(x, 0);
    let mut spec = NodeSpec::new(op, "y").input(x);
    for (k, v) in attrs {
        spec = spec.attr(k, v.clone());
    }
    let y = Output::new(g.add(spec)?, 0);
    let dx = gradients(&mut g, &[y], &[x], None)?[0].expect("a gradient");
    Ok((g, x, dx))
}

#[test]
fn gradients_give_the_host_tensor_shape_and_float_list_attrs() {
    let _s = serial();
    let lib = build();
    let r = std_registry();
    Loader::new(r.clone()).load(&lib).unwrap();
    let ctx = EagerContext::with_registry(Arc::new(CpuDevice::new(2).unwrap()), r.clone());
    let none = AttrMap::new();

    // CubeLib's declarative gradient, eagerly: dy * 3 * x^2 (its Const node
    // holds the tensor 3.0, cast to T).
    let mut tape = GradientTape::new(&ctx, false);
    let x = tape.watch(Tensor::from_vec(&[2, 3], vec![1f32, -2., 0.5, 3., 0., -1.]).unwrap());
    let y = tape.call("CubeLib", &[SymArg::One(x)], &none).unwrap()[0];
    let g = tape.gradient_tensors(y, &[x]).unwrap();
    assert_eq!(
        g[0].as_ref().unwrap().flat::<f32>().unwrap(),
        &[3., 12., 0.75, 27., 0., 3.]
    );
    // In double (the Cast to $T), against the numeric gradient.
    let cube = |ops: &mut dyn Ops, xs: &[Sym]| {
        Ok(ops.call("CubeLib", &[SymArg::One(xs[0])], &AttrMap::new())?[0])
    };
    let x0 = Tensor::from_vec(&[2, 2], vec![0.5f64, -1.5, 2., 1.25]).unwrap();
    let jac = compute_gradient(&ctx, &cube, &[x0]).unwrap();
    let err = compute_gradient_error(&jac);
    assert!(err < 1e-6, "{err}");

    // In a graph, the PlaceholderWithDefault node's shape attr [?, ?]
    // reached the host: dx has that static shape (the declared one, as in
    // TensorFlow), a matrix passes, and a vector fails there.
    let (g, x, dx) = graph_gradient(&r, "CubeLib", &none, &[2, 2]).unwrap();
    assert_eq!(g.output_shape(dx).unwrap(), Some(&[-1, -1][..]));
    let s = Session::new(g).unwrap();
    let feed = Tensor::from_vec(&[2, 2], vec![1f32, 2., -3., 0.]).unwrap();
    let out = s.run(vec![(x, feed)], &[dx], &[]).unwrap();
    assert_eq!(out[0].flat::<f32>().unwrap(), &[3., 12., 27., 0.]);
    let Err(e) = graph_gradient(&r, "CubeLib", &none, &[4]) else {
        panic!("the gradient of a vector passed the shape [?, ?]");
    };
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");
    assert!(e.message().contains("PlaceholderWithDefault"), "{e}");
    assert!(e.message().contains("rank"), "{e}");

    // Polyval's gradient function calls Polyval with the derivative's
    // coefficients, a list(float) value: p = 1 + 2x + 3x^2, p' = 2 + 6x,
    // p'' = 6.
    let mut attrs = AttrMap::new();
    attrs.insert("coeffs".into(), vec![1f32, 2., 3.].into_attr_value());
    let mut tape = GradientTape::new(&ctx, false);
    let x = tape.watch(Tensor::from_vec(&[3], vec![0f32, 1., -0.5]).unwrap());
    let y = tape.call("Polyval", &[SymArg::One(x)], &attrs).unwrap()[0];
    assert_eq!(
        tape.value(y).unwrap().flat::<f32>().unwrap(),
        &[1., 6., 0.75]
    );
    let g = tape.gradient_tensors(y, &[x]).unwrap();
    assert_eq!(
        g[0].as_ref().unwrap().flat::<f32>().unwrap(),
        &[2., 8., -1.]
    );
    let (mut g, x, dx) = graph_gradient(&r, "Polyval", &attrs, &[3]).unwrap();
    let ddx = gradients(&mut g, &[dx], &[x], None).unwrap()[0].unwrap();
    let s = Session::new(g).unwrap();
    let feed = Tensor::from_vec(&[3], vec![0f32, 1., -0.5]).unwrap();
    let out = s.run(vec![(x, feed)], &[dx, ddx], &[]).unwrap();
    assert_eq!(out[0].flat::<f32>().unwrap(), &[2., 8., -1.]);
    assert_eq!(out[1].flat::<f32>().unwrap(), &[6., 6., 6.]);
}
