//! `examples/zero_out` built as a real cdylib (debug and release): it
//! exports the entry points, imports no opforge symbol, and carries a
//! well-formed manifest that a reader finds in the file without loading
//! it (read here with the `object` crate); loaded with `dlopen`, its init
//! and kernels run against the mock host.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;
use object::{Object, ObjectSection};
use opforge_abi::*;
use serde_json::{json, Value};

/// Builds `zero_out` in its own target directory (so the outer cargo's
/// lock is not needed) and returns the library's path.
fn build(release: bool) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).join("zero_out_cdylib");
    let mut cmd = Command::new(env!("CARGO"));
    cmd.current_dir(&root)
        .args([
            "build",
            "--quiet",
            "-p",
            "zero_out",
            "--lib",
            "--target-dir",
        ])
        .arg(&target);
    if release {
        cmd.arg("--release");
    }
    let status = cmd.status().expect("run cargo");
    assert!(status.success(), "cargo build -p zero_out failed");
    let file = format!(
        "{}zero_out{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    );
    target
        .join(if release { "release" } else { "debug" })
        .join(file)
}

/// The records of a manifest section, checked as the header says.
fn records(bytes: &[u8]) -> Vec<Value> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        if bytes[at] == 0 {
            at += 1; // padding between records
            continue;
        }
        assert_eq!(at % 8, 0, "a record at {at} is not 8-aligned");
        assert_eq!(&bytes[at..at + 4], b"OPFM", "magic at {at}");
        let u = |o: usize| u32::from_le_bytes(bytes[at + o..at + o + 4].try_into().unwrap());
        assert_eq!(u(4), OPFORGE_MANIFEST_FORMAT);
        let len = u(8) as usize;
        let json = &bytes[at + 16..at + 16 + len];
        assert_eq!(u(12), opforge_plugin::manifest::crc32(json), "crc at {at}");
        out.push(serde_json::from_slice(json).expect("record JSON"));
        at += 16 + len;
    }
    out
}

fn check_file(path: &Path) {
    let data = std::fs::read(path).unwrap();
    let file = object::File::parse(&*data).unwrap();

    let exports: Vec<String> = file
        .exports()
        .unwrap()
        .iter()
        .map(|e| String::from_utf8_lossy(e.name()).into_owned())
        .collect();
    for sym in [
        OPFORGE_PLUGIN_INIT_SYMBOL,
        OPFORGE_PLUGIN_FINI_SYMBOL,
        OPFORGE_MANIFEST_ANCHOR_SYMBOL,
    ] {
        assert!(
            exports.iter().any(|e| e == sym),
            "{sym} not exported: {exports:?}"
        );
    }
    let imports: Vec<String> = file
        .imports()
        .unwrap()
        .iter()
        .map(|i| String::from_utf8_lossy(i.name()).into_owned())
        .collect();
    assert!(
        !imports
            .iter()
            .any(|i| i.to_ascii_lowercase().contains("opforge")),
        "imports an opforge symbol: {imports:?}"
    );

    let section = file
        .section_by_name(OPFORGE_MANIFEST_SECTION)
        .expect("an opforge_manifest section");
    let r = records(section.data().unwrap());
    let kinds: Vec<&str> = r.iter().map(|x| x["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "library", "op", "op", "op", "op", "op", "op", "op", "op", "kernel", "kernel",
            "kernel", "gradient", "gradient", "gradient"
        ]
    );
    let lib = &r[0];
    assert_eq!(lib["name"], "zero_out");
    assert_eq!(lib["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(
        lib["abi"],
        json!({"major": 1, "minor": 1, "min_host_minor": 0, "layout_hash": OPFORGE_LAYOUT_HASH_STR})
    );
    assert_eq!(lib["sdk"]["lang"], "rust");
    // What a host reads before loading: this host accepts it.
    let abi = LibraryAbi {
        major: lib["abi"]["major"].as_u64().unwrap() as u32,
        minor: lib["abi"]["minor"].as_u64().unwrap() as u32,
        min_host_minor: lib["abi"]["min_host_minor"].as_u64().unwrap() as u32,
        layout_hash: u64::from_str_radix(lib["abi"]["layout_hash"].as_str().unwrap(), 16).unwrap(),
    };
    assert_eq!(negotiate(&abi), Ok(()));
    assert_eq!(lib["panic"], "unwind");
    let ops: Vec<&str> = r[1..9]
        .iter()
        .map(|o| o["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        ops,
        [
            "ZeroOut",
            "ZeroOutInt32",
            "ZeroOutList",
            "AttrDefaultExampleForAllTypes",
            "PolymorphicListExample",
            "SameListInputExample",
            "MinLengthIntListExample",
            "MultipleInsAndOuts"
        ]
    );
    assert_eq!(
        r[1]["attrs"],
        json!(["T: realnumbertype = DT_INT32", "preserve_index: int = 0"])
    );
    assert_eq!(r[1]["inputs"], json!(["to_zero: T"]));
    assert_eq!(r[1]["outputs"], json!(["zeroed: T"]));
    assert_eq!(r[1]["shape_fn"], true);
    assert!(r[1]["doc"]
        .as_str()
        .unwrap()
        .starts_with("Zeros out every element"));
    assert_eq!(r[3]["inputs"], json!(["to_zero: N * T"]));
    let real = json!([
        "DT_FLOAT",
        "DT_DOUBLE",
        "DT_INT32",
        "DT_UINT8",
        "DT_INT16",
        "DT_INT8",
        "DT_INT64",
        "DT_BFLOAT16",
        "DT_UINT16",
        "DT_HALF",
        "DT_UINT32",
        "DT_UINT64"
    ]);
    // The declaration-only examples have shape functions, no kernels.
    assert!(r[4..9].iter().all(|o| o["shape_fn"] == true), "{r:?}");
    assert_eq!(r[9]["op"], "ZeroOut");
    assert_eq!(r[9]["device"], "CPU");
    assert_eq!(r[9]["constraints"], json!({ "T": real }));
    assert_eq!(r[10]["op"], "ZeroOutInt32");
    assert_eq!(r[10]["constraints"], json!({}));
    assert_eq!(r[11]["op"], "ZeroOutList");
    let grads: Vec<(&str, &str)> = r[12..]
        .iter()
        .map(|g| (g["op"].as_str().unwrap(), g["form"].as_str().unwrap()))
        .collect();
    assert_eq!(
        grads,
        [
            ("ZeroOut", "fn"),
            ("ZeroOutInt32", "not_differentiable"),
            ("ZeroOutList", "fn")
        ]
    );
}

#[test]
fn the_example_is_a_self_contained_library_with_a_manifest() {
    for release in [false, true] {
        check_file(&build(release));
    }
}

#[test]
fn the_example_runs_against_the_mock_host() {
    let path = build(false);
    // SAFETY: loading the library runs no code of it but std's own
    // initialisers (the SDK has no static constructors).
    let lib = unsafe { libloading::Library::new(&path) }.unwrap();
    // SAFETY: the symbol has the type of OpforgePluginInitFn (checked by
    // the header's declaration and export!).
    let init_fn: libloading::Symbol<'_, InitFn> =
        unsafe { lib.get(OPFORGE_PLUGIN_INIT_SYMBOL.as_bytes()) }.unwrap();
    // SAFETY: as above, for fini.
    let fini: libloading::Symbol<'_, unsafe extern "C" fn()> =
        unsafe { lib.get(OPFORGE_PLUGIN_FINI_SYMBOL.as_bytes()) }.unwrap();
    let r = init(*init_fn, &HOST).unwrap();
    assert_eq!(r.ops.len(), 8);
    assert_eq!(r.kernels.len(), 3);

    // ZeroOut, polymorphic, with preserve_index.
    let zinit = |keep: i64, t: OpforgeDType| MockInit {
        op: "ZeroOut".into(),
        attrs: vec![
            ("preserve_index".into(), MockAttr::Int(keep)),
            ("T".into(), MockAttr::Type(t)),
        ],
        inputs: vec![t],
        outputs: vec![t],
    };
    let k = Instance::create(r.kernel("ZeroOut"), &zinit(1, OPFORGE_DT_INT64)).unwrap();
    // Its output is declared like its input, forwardable.
    assert_eq!(
        r.kernel("ZeroOut").output_like,
        [(0, 0, OPFORGE_OUTPUT_FORWARD)]
    );
    for forward in [false, true] {
        let x = MockTensor::from(OPFORGE_DT_INT64, &[2, 2], &[7i64, 8, 9, 10]);
        let mut c = MockCtx::new("ZeroOut", vec![x], vec![OPFORGE_DT_INT64]);
        c.allow_forward = forward;
        k.compute(&mut c).unwrap();
        assert_eq!(c.outputs[0].as_ref().unwrap().values::<i64>(), [0, 8, 0, 0]);
        // The 1.0 entry never forwards a declared output.
        assert!(c.inputs[0].is_some());
        // The views entry: in place when forwarded, and no view asked of
        // the host either way.
        let x = MockTensor::from(OPFORGE_DT_INT64, &[2, 2], &[7i64, 8, 9, 10]);
        let mut c = MockCtx::new("ZeroOut", vec![x], vec![OPFORGE_DT_INT64]);
        c.allow_forward = forward;
        let before = view_calls();
        k.compute_views(&mut c).unwrap();
        assert_eq!(view_calls(), before);
        assert_eq!(c.outputs[0].as_ref().unwrap().values::<i64>(), [0, 8, 0, 0]);
        assert_eq!(c.inputs[0].is_none(), forward);
    }
    let x = MockTensor::from(OPFORGE_DT_HALF, &[3], &[0x3c00u16, 0x4000, 0x4200]);
    let mut c = MockCtx::new("ZeroOut", vec![x], vec![OPFORGE_DT_HALF]);
    k.compute(&mut c).unwrap();
    assert_eq!(
        c.outputs[0].as_ref().unwrap().values::<u16>(),
        [0, 0x4000, 0]
    );
    let x = MockTensor::from(OPFORGE_DT_INT64, &[1], &[7i64]);
    let mut c = MockCtx::new("ZeroOut", vec![x.clone()], vec![OPFORGE_DT_INT64]);
    let e = k.compute(&mut c).unwrap_err();
    assert_eq!(e.code, OPFORGE_INVALID_ARGUMENT);
    assert_eq!(
        e.message,
        "preserve_index out of range: 1 is not in [0, 1) for an input of shape [1]"
    );
    let mut c = MockCtx::new("ZeroOut", vec![x], vec![OPFORGE_DT_INT64]);
    c.allow_forward = true;
    let e = k.compute_views(&mut c).unwrap_err();
    assert_eq!(
        e.message,
        "preserve_index out of range: 1 is not in [0, 1) for an input of shape [1]"
    );
    drop(k);
    let e = Instance::create(r.kernel("ZeroOut"), &zinit(-3, OPFORGE_DT_FLOAT))
        .err()
        .unwrap();
    assert_eq!(e.code, OPFORGE_INVALID_ARGUMENT);
    assert_eq!(e.message, "Need preserve_index >= 0, got -3");

    // ZeroOutInt32.
    let init32 = MockInit {
        op: "ZeroOutInt32".into(),
        attrs: vec![],
        inputs: vec![OPFORGE_DT_INT32],
        outputs: vec![OPFORGE_DT_INT32],
    };
    let k = Instance::create(r.kernel("ZeroOutInt32"), &init32).unwrap();
    let x = MockTensor::from(OPFORGE_DT_INT32, &[3], &[5i32, 6, 7]);
    let mut c = MockCtx::new("ZeroOutInt32", vec![x], vec![OPFORGE_DT_INT32]);
    k.compute(&mut c).unwrap();
    assert_eq!(c.outputs[0].as_ref().unwrap().values::<i32>(), [5, 0, 0]);
    drop(k);

    // ZeroOutList over two tensors.
    let list_init = MockInit {
        op: "ZeroOutList".into(),
        attrs: vec![
            ("N".into(), MockAttr::Int(2)),
            ("T".into(), MockAttr::Type(OPFORGE_DT_FLOAT)),
        ],
        inputs: vec![OPFORGE_DT_FLOAT; 2],
        outputs: vec![OPFORGE_DT_FLOAT; 2],
    };
    let k = Instance::create(r.kernel("ZeroOutList"), &list_init).unwrap();
    let a = MockTensor::from(OPFORGE_DT_FLOAT, &[2], &[1f32, 2.0]);
    let b = MockTensor::from(OPFORGE_DT_FLOAT, &[3], &[3f32, 4.0, 5.0]);
    let mut c = MockCtx::new("ZeroOutList", vec![a, b], vec![OPFORGE_DT_FLOAT; 2]);
    c.ranges = vec![
        ("to_zero".into(), false, 0, 2),
        ("zeroed".into(), true, 0, 2),
    ];
    k.compute(&mut c).unwrap();
    assert_eq!(c.outputs[0].as_ref().unwrap().values::<f32>(), [1.0, 0.0]);
    assert_eq!(
        c.outputs[1].as_ref().unwrap().values::<f32>(),
        [3.0, 0.0, 0.0]
    );
    drop(k);

    // Shape functions: outputs have the inputs' shapes.
    assert_eq!(
        infer(r.op("ZeroOut"), &[Some(vec![4, 5])], 1).unwrap(),
        ["[4,5]"]
    );
    assert_eq!(
        infer(r.op("ZeroOutList"), &[Some(vec![2]), Some(vec![3, 1])], 2).unwrap(),
        ["[2]", "[3,1]"]
    );

    // Gradients: ZeroOut's is ZeroOut of the incoming gradient with the
    // forward preserve_index (only that element gets a gradient).
    let mut g = MockGradCtx::new("ZeroOut", 1, 1);
    g.attrs = vec![("preserve_index".into(), MockAttr::Int(3))];
    gradient(&r, &mut g).unwrap();
    assert_eq!(
        g.calls,
        [(
            "ZeroOut".to_string(),
            vec![vec![200]],
            vec![("preserve_index".to_string(), 3)]
        )]
    );
    assert_eq!(g.input_grads, [Some(1001)]);
    // A host calling it with no gradient flowing in (opforge's never
    // does): `grad()` says so, and nothing is built.
    let mut g = MockGradCtx::new("ZeroOut", 1, 1);
    g.output_grads = vec![None];
    let e = gradient(&r, &mut g).unwrap_err();
    assert_eq!(e.code, OPFORGE_FAILED_PRECONDITION, "{}", e.message);
    assert!(e.message.contains("no gradient flows"), "{}", e.message);
    assert!(g.calls.is_empty());
    assert_eq!(g.input_grads, [None]);
    // ZeroOutList: one ZeroOut per list element that has a gradient.
    let mut g = MockGradCtx::new("ZeroOutList", 2, 2);
    g.ranges = vec![
        ("to_zero".into(), false, 0, 2),
        ("zeroed".into(), true, 0, 2),
    ];
    g.output_grads = vec![None, Some(201)];
    gradient(&r, &mut g).unwrap();
    assert_eq!(
        g.calls,
        [(
            "ZeroOut".to_string(),
            vec![vec![201]],
            vec![("preserve_index".to_string(), 0)]
        )]
    );
    assert_eq!(g.input_grads, [None, Some(1001)]);

    // SAFETY: every instance is destroyed; nothing of the library runs.
    unsafe { fini() };

    // Nothing of the run pinned the library (no thread-local destructor
    // registered, ...): dlclose unmaps it.
    if cfg!(target_os = "linux") {
        let canonical = std::fs::canonicalize(&path).unwrap();
        let mapped = || {
            std::fs::read_to_string("/proc/self/maps")
                .unwrap()
                .contains(canonical.to_str().unwrap())
        };
        assert!(mapped());
        lib.close().unwrap();
        assert!(!mapped(), "the library stayed mapped after dlclose");
    }
}

#[test]
fn a_library_built_with_panic_abort_is_refused_at_build_time() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).join("zero_out_panic_abort");
    let out = Command::new(env!("CARGO"))
        .current_dir(&root)
        .args([
            "build",
            "-p",
            "zero_out",
            "--lib",
            "--config",
            "profile.dev.panic=\"abort\"",
        ])
        .arg("--target-dir")
        .arg(&target)
        .output()
        .expect("run cargo");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a panic = \"abort\" build succeeded");
    assert!(
        stderr.contains(
            "an opforge op library must be built with panic = \"unwind\": with panic = \
             \"abort\" a panic in any of its code would abort the host process"
        ),
        "{stderr}"
    );
}
