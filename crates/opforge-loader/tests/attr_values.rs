//! Tensor and func attrs across the ABI, from a Rust SDK plugin
//! (tests/plugins/attr_plugin.rs, built here as a cdylib with a nested
//! cargo): its `AttrProbe` reads a `value: tensor` and an `f: func` attr at
//! kernel creation (eagerly and in a session) and in its shape function.

use opforge_core::attrs::AttrMap;
use opforge_core::device::CpuDevice;
use opforge_core::eager::EagerContext;
use opforge_core::graph::{Graph, NodeSpec, Output, Session};
use opforge_core::proto::attr_value::Value as AV;
use opforge_core::proto::{AttrValue, NameAttrList};
use opforge_core::registry::Registry;
use opforge_core::{Code, DataType, Tensor};
use opforge_loader::Loader;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

/// Builds the plugin in a crate of its own under `CARGO_TARGET_TMPDIR`.
fn build() -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("attr_plugin");
    std::fs::create_dir_all(&dir).unwrap();
    let manifest = format!(
        r#"[package]
name = "attr_plugin"
version = "0.1.0"
edition = "2021"
publish = false

[lib]
crate-type = ["cdylib"]
path = "{src}"

[dependencies]
opforge-plugin = {{ path = "{sdk}" }}

# A crate of its own, not a member of the opforge workspace around it.
[workspace]
"#,
        src = here.join("tests/plugins/attr_plugin.rs").display(),
        sdk = here.join("../opforge-plugin").display(),
    );
    std::fs::write(dir.join("Cargo.toml"), manifest).unwrap();
    let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .current_dir(&dir)
        .args(["build", "--quiet", "--offline", "--target-dir"])
        .arg(dir.join("target"))
        .status()
        .expect("cargo runs");
    assert!(
        status.success(),
        "building tests/plugins/attr_plugin.rs failed"
    );
    let lib = dir.join("target/debug").join(format!(
        "{}attr_plugin{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    ));
    assert!(lib.is_file());
    lib
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
    let lib = build();
    let r = Arc::new(Registry::new());
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
