//! The header and the Rust mirror are the same ABI: this test reads
//! `include/opforge/opforge.h`, generates a C program that prints what the
//! system C compiler makes of it (sizeof, alignment, offsetof and sizeof of
//! every field, whether each field's and typedef's C type is the one the
//! Rust mirror declares, the value of every constant), runs it, and compares
//! every figure with `opforge_abi` (`layout::STRUCTS`, `TYPEDEFS`,
//! `OPAQUE_TYPES`, `layout::INT_CONSTANTS`, `layout::STR_CONSTANTS`). It
//! also compiles the header as strict C99 and as C++11, and checks that
//! every frozen minor under `tests/frozen/` is a prefix of the current
//! header and keeps its pinned layout hash.
//!
//! The compiler is `$CC` (default `cc`) and `$CXX` (default `c++`); without
//! one the test fails and says so: CI has one, and the ABI is not tested
//! without it.

#[path = "layout/frozen.rs"]
mod frozen;
#[path = "layout/header.rs"]
mod header;
#[path = "layout/probe.rs"]
mod probe;
#[path = "layout/support.rs"]
mod support;

use header::*;
use probe::*;
use std::process::Command;
use support::*;

use opforge_abi::layout::{self, ConstValue};
use opforge_abi::{OPAQUE_TYPES, TYPEDEFS};

// ---------------------------------------------------------------------------
// The header and the Rust mirror agree
// ---------------------------------------------------------------------------

#[test]
fn the_header_and_the_rust_mirror_agree() {
    let text = std::fs::read_to_string(header_path()).unwrap();
    let h = parse_header(&text);

    // Names first (a field missing on one side would not compile below).
    let c_structs: Vec<(&str, Vec<&str>)> = h
        .structs
        .iter()
        .map(|s| {
            (
                s.name.as_str(),
                s.fields.iter().map(|f| f.name.as_str()).collect(),
            )
        })
        .collect();
    let r_structs: Vec<(&str, Vec<&str>)> = layout::STRUCTS
        .iter()
        .map(|s| (s.name, s.fields.iter().map(|f| f.name).collect()))
        .collect();
    assert_eq!(
        c_structs, r_structs,
        "the structs and fields of opforge.h (left) and of opforge_abi::layout::STRUCTS \
         (right) differ: same structs, same fields, same order"
    );
    let r_opaque: Vec<&str> = OPAQUE_TYPES.to_vec();
    assert_eq!(
        h.opaque, r_opaque,
        "opaque types: header (left) vs OPAQUE_TYPES (right)"
    );
    let c_typedefs: Vec<&str> = h.typedefs.iter().map(|(n, _)| n.as_str()).collect();
    let r_typedefs: Vec<&str> = TYPEDEFS.iter().map(|t| t.name).collect();
    assert_eq!(
        c_typedefs, r_typedefs,
        "typedefs: header (left) vs TYPEDEFS (right)"
    );
    let r_ints: Vec<&str> = layout::INT_CONSTANTS.iter().map(|c| c.name).collect();
    assert_eq!(
        h.int_consts, r_ints,
        "integer constants: header (left) vs INT_CONSTANTS (right)"
    );
    let r_strs: Vec<&str> = layout::STR_CONSTANTS.iter().map(|c| c.name).collect();
    assert_eq!(
        h.str_consts, r_strs,
        "string constants: header (left) vs STR_CONSTANTS (right)"
    );

    // Then the compiler's figures.
    let p = probe(&include_dir(), &h, true, &work_dir("mirror"));
    let mut errors = Vec::new();
    for (c, r) in p.structs.iter().zip(layout::STRUCTS) {
        if layout_figures(c) != layout_figures(r) {
            errors.push(format!(
                "{}: C (size, align, [(field, offset, size)]) = {:?}\n   Rust = {:?}",
                c.name,
                layout_figures(c),
                layout_figures(r)
            ));
        }
    }
    for (what, c, rust) in &p.type_mismatches {
        errors.push(format!(
            "{what}: the C type is not compatible with the Rust type `{rust}` (as C: `{c}`)"
        ));
    }
    for k in layout::INT_CONSTANTS {
        let ConstValue::Int(v) = k.value else {
            unreachable!()
        };
        if p.ints.get(k.name) != Some(&v) {
            errors.push(format!("{}: C {:?}, Rust {v}", k.name, p.ints.get(k.name)));
        }
    }
    for k in layout::STR_CONSTANTS {
        let ConstValue::Str(v) = k.value else {
            unreachable!()
        };
        if p.strs.get(k.name).map(String::as_str) != Some(v) {
            errors.push(format!(
                "{}: C {:?}, Rust {v:?}",
                k.name,
                p.strs.get(k.name)
            ));
        }
    }
    assert!(
        errors.is_empty(),
        "opforge.h and opforge-abi differ:\n - {}",
        errors.join("\n - ")
    );

    // The header's hash is the hash of the header's own layout (as the C
    // compiler sees it), and the pinned one.
    let c_hash = layout::hash_structs(&p.structs);
    assert_eq!(
        hex(c_hash),
        hex(p.ints["OPFORGE_LAYOUT_HASH"] as u64),
        "OPFORGE_LAYOUT_HASH in opforge.h is not the hash of its layout"
    );
    assert_eq!(hex(c_hash), hex(opforge_abi::layout_hash()));
    assert_eq!(p.strs["OPFORGE_LAYOUT_HASH_STR"], hex(c_hash));
}

#[test]
fn a_rust_type_renders_as_its_c_type() {
    assert_eq!(rust_to_c("* const c_char"), "char const*");
    assert_eq!(rust_to_c("*mut *mut core::ffi::c_void"), "void**");
    assert_eq!(rust_to_c("[u8; 4]"), "uint8_t[4]");
    assert_eq!(
        rust_to_c(r#"Option<unsafe extern "C" fn(a: *const OpforgeStatus, u32) -> OpforgeCode>"#),
        "OpforgeCode (*)(OpforgeStatus const*, uint32_t)"
    );
    assert_eq!(
        rust_to_c(r#"Option<unsafe extern "C" fn()>"#),
        "void (*)(void)"
    );
}

#[test]
fn the_header_reader_finds_every_declaration() {
    let h = parse_header(
        "/* c */ #define OPFORGE_A 1\n#define OPFORGE_B (-1)\n#define OPFORGE_C OPFORGE_A\n\
         #define OPFORGE_S \"x\" /* no */\n#define OPFORGE_F(x) x\n#define OPFORGE_I_ 3\n\
         typedef int32_t OpforgeCode;\ntypedef struct OpforgeX OpforgeX;\n\
         typedef void (*OpforgeFn)(void* a, OpforgeStr b);\n\
         typedef struct OpforgeS {\n  size_t struct_size; /* x; y */\n  uint8_t m[4];\n  \
         OpforgeCode (*call)(OpforgeX* x,\n    size_t n);\n} OpforgeS;\n",
    );
    assert_eq!(h.int_consts, ["OPFORGE_A", "OPFORGE_B", "OPFORGE_C"]);
    assert_eq!(h.str_consts, ["OPFORGE_S"]);
    assert_eq!(h.opaque, ["OpforgeX"]);
    let names: Vec<&str> = h.typedefs.iter().map(|t| t.0.as_str()).collect();
    assert_eq!(names, ["OpforgeCode", "OpforgeFn"]);
    let s = &h.structs[0];
    let fields: Vec<(&str, &str)> = s
        .fields
        .iter()
        .map(|f| (f.name.as_str(), f.decl.as_str()))
        .collect();
    assert_eq!(
        fields,
        [
            ("struct_size", "size_t struct_size"),
            ("m", "uint8_t m[4]"),
            ("call", "OpforgeCode (*call)(OpforgeX* x, size_t n)"),
        ]
    );
}

// ---------------------------------------------------------------------------
// The header compiles as strict C99 and as C++11
// ---------------------------------------------------------------------------

/// A translation unit that uses every macro of the header a plugin uses.
const PLUGIN_TU: &str = r#"#include "opforge/opforge.h"

OPFORGE_LIBRARY("layout_test", "0.1.0");
OPFORGE_MANIFEST_OP("\"name\":\"ZeroOut\",\"inputs\":[\"to_zero: int32\"],\"outputs\":[\"zeroed: int32\"]");
OPFORGE_MANIFEST_KERNEL("\"op\":\"ZeroOut\",\"device\":\"CPU\"");
OPFORGE_MANIFEST_GRADIENT("\"op\":\"ZeroOut\",\"form\":\"not_differentiable\"");

static const OpforgeHostApi* opforge_host;

static OpforgeCode compute(void* state, OpforgeKernelCtx* ctx, OpforgeStatus* status) {
  OpforgeTensor view;
  OpforgeStr name = OPFORGE_STR_LIT("x");
  (void)state;
  (void)name;
  memset(&view, 0, sizeof view);
  view.struct_size = sizeof view;
  if (!OPFORGE_HAS_SLOT(opforge_host->kernel, input)) return OPFORGE_UNIMPLEMENTED;
  return opforge_host->kernel->input(ctx, 0, &view, status);
}

/* 1.1: the views entry, with output 0 declared like input 0. */
static OpforgeCode compute_views(void* state, OpforgeKernelCtx* ctx,
                                 const OpforgeKernelViews* views, OpforgeStatus* status) {
  const OpforgeTensor* in;
  const OpforgeTensor* out;
  (void)state;
  (void)ctx;
  (void)status;
  if (views->num_inputs < 1 || views->num_outputs < 1) return OPFORGE_INTERNAL;
  in = OPFORGE_ARRAY_AT(OpforgeTensor, views->inputs, 0);
  out = OPFORGE_ARRAY_AT(OpforgeTensor, views->outputs, 0);
  if (views->forwarded_from[0] == OPFORGE_NOT_FORWARDED && in->num_elements > 0)
    memcpy(out->data, in->data, (size_t)in->byte_len);
  return OPFORGE_OK;
}

OpforgeCode opforge_plugin_init_v1(const OpforgeHostApi* host, OpforgeRegistrar* registrar,
                                   OpforgeStatus* status) {
  static const OpforgeStr inputs[] = {OPFORGE_STR_LIT("to_zero: int32")};
  OpforgeOutputLike like;
  OpforgeOpDef def;
  OpforgeKernelDef k;
  OpforgeCode code;
  opforge_host = host;
  memset(&def, 0, sizeof def);
  def.struct_size = sizeof def;
  def.name = opforge_str("ZeroOut");
  def.inputs = inputs;
  def.num_inputs = 1;
  code = host->registration->op(registrar, &def, status);
  if (code != OPFORGE_OK) return code;
  memset(&k, 0, sizeof k);
  k.struct_size = sizeof k;
  k.op = opforge_str("ZeroOut");
  k.device_type = opforge_str("CPU");
  k.compute = compute;
  memset(&like, 0, sizeof like);
  like.struct_size = sizeof like;
  like.output = 0;
  like.input = 0;
  like.flags = OPFORGE_OUTPUT_FORWARD;
  k.compute_views = compute_views;
  k.output_like = &like;
  k.num_output_like = 1;
  if (OPFORGE_ARRAY_AT(OpforgeKernelDef, &k, 0)->struct_size != sizeof k) return OPFORGE_INTERNAL;
  return host->registration->kernel(registrar, &k, status);
}

void opforge_plugin_fini_v1(void) {}
"#;

const CXX_EXTRA: &str = r#"
#include <stdexcept>
static OpforgeCode throwing(void* state, OpforgeKernelCtx* ctx, OpforgeStatus* status) {
  OPFORGE_GUARD(status, {
    (void)state;
    (void)ctx;
    throw std::runtime_error("boom");
  })
}
static void destroying(void* state, void* user) {
  OPFORGE_GUARD_VOID({
    (void)state;
    (void)user;
    throw 1;
  })
}
OpforgeKernelComputeFn use_throwing = throwing;
OpforgeKernelDestroyFn use_destroying = destroying;
"#;

#[test]
fn the_header_compiles_as_strict_c99() {
    let dir = work_dir("c99");
    let src = dir.join("plugin.c");
    std::fs::write(&src, PLUGIN_TU).unwrap();
    let mut cmd = Command::new(cc());
    cmd.args(["-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", "-c"])
        .arg("-I")
        .arg(include_dir())
        .arg(&src)
        .arg("-o")
        .arg(dir.join("plugin.o"));
    run(
        cmd,
        "compiling opforge.h as C99 with -Wall -Wextra -Werror -pedantic",
    );
}

#[test]
fn the_header_compiles_as_cxx11() {
    let dir = work_dir("cxx11");
    let src = dir.join("plugin.cc");
    std::fs::write(&src, format!("{PLUGIN_TU}{CXX_EXTRA}")).unwrap();
    let mut cmd = Command::new(cxx());
    cmd.args([
        "-std=c++11",
        "-fsyntax-only",
        "-Wall",
        "-Wextra",
        "-Werror",
        "-pedantic",
    ])
    .arg("-I")
    .arg(include_dir())
    .arg(&src);
    run(cmd, "compiling opforge.h as C++11 (-fsyntax-only)");
}
