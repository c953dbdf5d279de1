//! Writes every target's seed corpus to `fuzz/corpus/<target>/` (or the
//! directory given as the first argument), one file per seed named by a
//! hash of its bytes, plus the regression inputs of
//! `crates/opforge-fuzz/regressions/<target>/`. `scripts/fuzz` runs it
//! before cargo-fuzz. Usage: `opforge-fuzz-seeds [DIR] [TARGET...]`.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::PathBuf;

fn main() {
    let mut args = std::env::args().skip(1);
    let dir = args
        .next()
        .map(PathBuf::from)
        .unwrap_or_else(|| opforge_fuzz::seeds::repo().join("fuzz/corpus"));
    let wanted: Vec<String> = args.collect();
    for (name, _) in opforge_fuzz::TARGETS {
        if !wanted.is_empty() && !wanted.iter().any(|w| w == name) {
            continue;
        }
        let out = dir.join(name);
        std::fs::create_dir_all(&out).expect("creating the corpus directory");
        let mut inputs = opforge_fuzz::seeds::seeds(name);
        inputs.extend(opforge_fuzz::regressions(name).into_iter().map(|(_, b)| b));
        for bytes in &inputs {
            let mut h = DefaultHasher::new();
            bytes.hash(&mut h);
            std::fs::write(out.join(format!("seed-{:016x}", h.finish())), bytes)
                .expect("writing a seed");
        }
        println!("{name}: {} seeds in {}", inputs.len(), out.display());
    }
}
