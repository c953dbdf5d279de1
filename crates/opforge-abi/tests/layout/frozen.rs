//! Frozen minors: each released minor's header is a prefix of the current
//! one (append-only) and keeps its pinned layout hash.

use super::header::{parse_header, CStruct, Header};
use super::probe::{hex, probe, Probe};
use super::support::*;
use opforge_abi::layout::{self, StructLayout};
use opforge_abi::KNOWN_LAYOUTS;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

// ---------------------------------------------------------------------------
// Frozen minors: append-only, pinned hashes
// ---------------------------------------------------------------------------

/// Constants whose value belongs to one minor.
pub(crate) const PER_MINOR: &[&str] = &[
    "OPFORGE_ABI_MINOR",
    "OPFORGE_LAYOUT_HASH",
    "OPFORGE_LAYOUT_HASH_STR",
    "OPFORGE_MIN_HOST_MINOR",
];

/// Why `new` is not an append-only extension of `old` (empty: it is).
pub(crate) fn extension_errors(
    old: &Header,
    old_p: &Probe,
    new: &Header,
    new_p: &Probe,
) -> Vec<String> {
    let mut errs = Vec::new();
    let new_structs: BTreeMap<&str, (&CStruct, &StructLayout)> = new
        .structs
        .iter()
        .zip(&new_p.structs)
        .map(|(s, l)| (s.name.as_str(), (s, l)))
        .collect();
    for (os, ol) in old.structs.iter().zip(&old_p.structs) {
        let Some(&(ns, nl)) = new_structs.get(os.name.as_str()) else {
            errs.push(format!("struct {} was removed", os.name));
            continue;
        };
        if nl.align != ol.align {
            errs.push(format!(
                "{}: alignment {} became {}",
                os.name, ol.align, nl.align
            ));
        }
        if nl.size < ol.size {
            errs.push(format!(
                "{}: size {} shrank to {}",
                os.name, ol.size, nl.size
            ));
        }
        for (i, (of, ofl)) in os.fields.iter().zip(ol.fields).enumerate() {
            match ns.fields.get(i).zip(nl.fields.get(i)) {
                None => errs.push(format!("{}.{}: removed", os.name, of.name)),
                Some((nf, nfl)) => {
                    if nf.decl != of.decl {
                        errs.push(format!(
                            "{} field {i}: `{}` became `{}` (fields are only appended, never \
                             renamed, retyped, reordered or inserted)",
                            os.name, of.decl, nf.decl
                        ));
                    }
                    if (nfl.offset, nfl.size) != (ofl.offset, ofl.size) {
                        errs.push(format!(
                            "{}.{}: offset/size ({}, {}) became ({}, {})",
                            os.name, of.name, ofl.offset, ofl.size, nfl.offset, nfl.size
                        ));
                    }
                }
            }
        }
    }
    let new_typedefs: BTreeMap<&str, &str> = new
        .typedefs
        .iter()
        .map(|(n, d)| (n.as_str(), d.as_str()))
        .collect();
    for (n, d) in &old.typedefs {
        match new_typedefs.get(n.as_str()) {
            None => errs.push(format!("typedef {n} was removed")),
            Some(nd) if nd != d => errs.push(format!("typedef {n}: `{d}` became `{nd}`")),
            _ => {}
        }
    }
    let new_opaque: BTreeSet<&str> = new.opaque.iter().map(String::as_str).collect();
    for o in &old.opaque {
        if !new_opaque.contains(o.as_str()) {
            errs.push(format!("opaque type {o} was removed"));
        }
    }
    for (k, v) in &old_p.ints {
        if PER_MINOR.contains(&k.as_str()) {
            continue;
        }
        match new_p.ints.get(k) {
            None => errs.push(format!("constant {k} was removed")),
            Some(nv) if nv != v => errs.push(format!("constant {k}: {v} became {nv}")),
            _ => {}
        }
    }
    for (k, v) in &old_p.strs {
        if PER_MINOR.contains(&k.as_str()) {
            continue;
        }
        match new_p.strs.get(k) {
            None => errs.push(format!("constant {k} was removed")),
            Some(nv) if nv != v => errs.push(format!("constant {k}: {v:?} became {nv:?}")),
            _ => {}
        }
    }
    if new_p.ints.get("OPFORGE_ABI_MAJOR") != old_p.ints.get("OPFORGE_ABI_MAJOR") {
        errs.push("OPFORGE_ABI_MAJOR changed: a new major starts a new frozen series".into());
    }
    errs
}

/// Every frozen header: (major, minor, directory), oldest first.
pub(crate) fn frozen_headers() -> Vec<(u32, u32, PathBuf)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(frozen_dir()).expect("tests/frozen exists") {
        let e = e.unwrap();
        let name = e.file_name().into_string().unwrap();
        let (ma, mi) = name
            .split_once('.')
            .unwrap_or_else(|| panic!("tests/frozen/{name}: expected MAJOR.MINOR"));
        out.push((ma.parse().unwrap(), mi.parse().unwrap(), e.path()));
    }
    out.sort();
    out
}

#[test]
fn every_frozen_minor_is_a_prefix_of_the_current_header() {
    let current_text = std::fs::read_to_string(header_path()).unwrap();
    let current = parse_header(&current_text);
    let current_p = probe(&include_dir(), &current, false, &work_dir("frozen-current"));
    let frozen = frozen_headers();
    assert!(
        frozen.iter().any(|&(ma, mi, _)| (ma, mi) == (1, 0)),
        "tests/frozen/1.0 is missing"
    );
    let mut errors = Vec::new();
    // The first size of each struct: its size in the oldest frozen header
    // that has it.
    let mut first_size: BTreeMap<String, usize> = BTreeMap::new();
    for (major, minor, dir) in &frozen {
        let text = std::fs::read_to_string(dir.join("opforge/opforge.h")).unwrap();
        let old = parse_header(&text);
        let old_p = probe(
            dir,
            &old,
            false,
            &work_dir(&format!("frozen-{major}.{minor}")),
        );
        let v = format!("{major}.{minor}");
        if old_p.ints["OPFORGE_ABI_MAJOR"] != *major as i128
            || old_p.ints["OPFORGE_ABI_MINOR"] != *minor as i128
        {
            errors.push(format!(
                "tests/frozen/{v}: the header defines another version"
            ));
        }
        // Its hash is its layout's, and pinned.
        let hash = layout::hash_structs(&old_p.structs);
        if hash != old_p.ints["OPFORGE_LAYOUT_HASH"] as u64 {
            errors.push(format!(
                "tests/frozen/{v}: OPFORGE_LAYOUT_HASH is not the hash of its layout ({})",
                hex(hash)
            ));
        }
        match opforge_abi::known_layout_hash(*major, *minor) {
            Some(pinned) if pinned == hash => {}
            other => errors.push(format!(
                "KNOWN_LAYOUTS pins {:?} for {v}, its frozen header hashes to {}",
                other.map(hex),
                hex(hash)
            )),
        }
        for l in &old_p.structs {
            first_size.entry(l.name.to_string()).or_insert(l.size);
        }
        for e in extension_errors(&old, &old_p, &current, &current_p) {
            errors.push(format!("{v} -> current: {e}"));
        }
    }
    // Every pinned minor up to the current one has a frozen header, except
    // the current minor while it is unreleased... which is still pinned:
    // the pin is what a released library carries, so freeze it too.
    for &(ma, mi, _) in KNOWN_LAYOUTS {
        if !frozen.iter().any(|&(fa, fi, _)| (fa, fi) == (ma, mi)) {
            errors.push(format!(
                "KNOWN_LAYOUTS pins {ma}.{mi}, but tests/frozen/{ma}.{mi} is missing"
            ));
        }
    }
    // Versioned structs accept struct_size down to their first size.
    for l in layout::STRUCTS {
        let expect = first_size.get(l.name).copied().unwrap_or(l.size);
        if l.min_size != expect {
            errors.push(format!(
                "{}: min_size {} in opforge-abi, but its first released size is {expect}",
                l.name, l.min_size
            ));
        }
    }
    assert!(
        errors.is_empty(),
        "frozen ABI check failed:\n - {}",
        errors.join("\n - ")
    );
}

/// The frozen check itself catches each kind of break.
#[test]
fn the_frozen_check_catches_breaks() {
    let base = "typedef struct OpforgeA {\n size_t struct_size;\n uint32_t x;\n} OpforgeA;\n\
                typedef struct OpforgeB {\n size_t struct_size;\n} OpforgeB;\n";
    let cases: &[(&str, &str, bool)] = &[
        ("identical", base, true),
        (
            "a field appended",
            "typedef struct OpforgeA {\n size_t struct_size;\n uint32_t x;\n uint32_t y;\n} OpforgeA;\n\
             typedef struct OpforgeB {\n size_t struct_size;\n} OpforgeB;\n",
            true,
        ),
        (
            "a struct added",
            "typedef struct OpforgeA {\n size_t struct_size;\n uint32_t x;\n} OpforgeA;\n\
             typedef struct OpforgeC {\n size_t struct_size;\n} OpforgeC;\n\
             typedef struct OpforgeB {\n size_t struct_size;\n} OpforgeB;\n",
            true,
        ),
        (
            "a field inserted",
            "typedef struct OpforgeA {\n size_t struct_size;\n uint32_t w;\n uint32_t x;\n} OpforgeA;\n\
             typedef struct OpforgeB {\n size_t struct_size;\n} OpforgeB;\n",
            false,
        ),
        (
            "a field retyped",
            "typedef struct OpforgeA {\n size_t struct_size;\n int32_t x;\n} OpforgeA;\n\
             typedef struct OpforgeB {\n size_t struct_size;\n} OpforgeB;\n",
            false,
        ),
        (
            "a field renamed",
            "typedef struct OpforgeA {\n size_t struct_size;\n uint32_t y;\n} OpforgeA;\n\
             typedef struct OpforgeB {\n size_t struct_size;\n} OpforgeB;\n",
            false,
        ),
        (
            "a struct removed",
            "typedef struct OpforgeA {\n size_t struct_size;\n uint32_t x;\n} OpforgeA;\n",
            false,
        ),
        (
            "a field removed",
            "typedef struct OpforgeA {\n size_t struct_size;\n} OpforgeA;\n\
             typedef struct OpforgeB {\n size_t struct_size;\n} OpforgeB;\n",
            false,
        ),
    ];
    let dir = work_dir("frozen-check");
    let probe_of = |name: &str, text: &str| {
        let inc = dir.join(name);
        std::fs::create_dir_all(inc.join("opforge")).unwrap();
        let full = format!(
            "#include <stddef.h>\n#include <stdint.h>\n#define OPFORGE_ABI_MAJOR 1\n{text}"
        );
        std::fs::write(inc.join("opforge/opforge.h"), &full).unwrap();
        let h = parse_header(&full);
        let p = probe(&inc, &h, false, &inc);
        (h, p)
    };
    let (old, old_p) = probe_of("base", base);
    for (i, (what, text, ok)) in cases.iter().enumerate() {
        let (new, new_p) = probe_of(&format!("case{i}"), text);
        let errs = extension_errors(&old, &old_p, &new, &new_p);
        assert_eq!(errs.is_empty(), *ok, "{what}: {errs:?}");
    }
}
