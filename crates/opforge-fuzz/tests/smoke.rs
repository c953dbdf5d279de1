//! The stable smoke run of every fuzz target (CI runs it on every push as
//! part of `cargo test --workspace`): the target's seed corpus, its
//! regression inputs, then deterministic mutations of the seeds until the
//! target's time budget is spent. No coverage guidance: this finds what the
//! seeds and their near neighbours reach; `scripts/fuzz` runs cargo-fuzz
//! with coverage guidance for longer.
//!
//! The budget is `OPFORGE_FUZZ_SMOKE_SECONDS` per target (default 4;
//! seeds and regressions count, and at least 200 mutations run). The
//! mutation sequence is fixed (seeded by the target's name), so a failure
//! reproduces: the failing input is printed in hex and written to
//! `$CARGO_TARGET_TMPDIR/fuzz-smoke/<target>-<n>` (after an abort, the
//! input that was running is `<target>-current` there); copy it into
//! `crates/opforge-fuzz/regressions/<target>/` once fixed.

use opforge_fuzz::mutate::{mutate, Rng};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant};

/// At most this many seeds run unmutated (evenly spread over the corpus).
const MAX_SEEDS: usize = 400;
/// The fewest mutations a target gets, whatever the time budget.
const MIN_MUTATIONS: u64 = 200;

fn budget() -> Duration {
    let secs = std::env::var("OPFORGE_FUZZ_SMOKE_SECONDS")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .unwrap_or(4.0);
    Duration::from_secs_f64(secs)
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn smoke(name: &str) {
    let target = opforge_fuzz::target(name).expect("a target of that name");
    let seeds = opforge_fuzz::seeds::seeds(name);
    assert!(!seeds.is_empty(), "{name} has no seeds");
    let regressions = opforge_fuzz::regressions(name);
    let start = Instant::now();
    let failures = std::cell::RefCell::new(Vec::<String>::new());
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("fuzz-smoke");
    std::fs::create_dir_all(&dir).expect("creating the smoke test's directory");
    // An abort (a failed allocation, a stack overflow) cannot be caught:
    // with OPFORGE_FUZZ_SMOKE_TRACE=N, each input from mutation N on is
    // written here before it runs, so the last one survives (off by
    // default: it is slow), and every 1000th mutation is logged. The
    // mutation sequence does not depend on timing, so a traced rerun with
    // a budget at least as long reaches the same input.
    let trace_from: Option<u64> = std::env::var("OPFORGE_FUZZ_SMOKE_TRACE")
        .ok()
        .and_then(|v| v.parse().ok());
    let trace = std::cell::Cell::new(trace_from == Some(0));
    let current = dir.join(format!("{name}-current"));
    let run = |label: String, input: &[u8]| {
        let mut failures = failures.borrow_mut();
        if trace.get() {
            std::fs::write(&current, input).expect("writing the current input");
        }
        if catch_unwind(AssertUnwindSafe(|| target(input))).is_err() {
            let file = dir.join(format!("{name}-{}", failures.len()));
            let _ = std::fs::write(&file, input);
            let case = opforge_fuzz::describe(name, input)
                .map(|d| format!("\n  case: {d}"))
                .unwrap_or_default();
            failures.push(format!(
                "{label} ({} bytes, saved as {}): {}{case}",
                input.len(),
                file.display(),
                hex(&input[..input.len().min(512)])
            ));
        }
    };
    for (file, input) in &regressions {
        run(format!("regression {file}"), input);
    }
    let stride = seeds.len().div_ceil(MAX_SEEDS);
    let mut seeds_run = 0;
    for (i, s) in seeds.iter().enumerate().step_by(stride) {
        run(format!("seed {i}"), s);
        seeds_run += 1;
    }
    // OPFORGE_FUZZ_SMOKE_SEED picks another fixed sequence (to explore
    // locally; CI uses the default).
    let extra: u64 = std::env::var("OPFORGE_FUZZ_SMOKE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let mut rng = Rng::new(
        name.bytes()
            .fold(0u64, |h, b| h.wrapping_mul(31) ^ u64::from(b))
            .wrapping_add(extra.wrapping_mul(0x9E37_79B9)),
    );
    let mut mutations = 0u64;
    // At least MIN_MUTATIONS, however slow the machine; then until the
    // budget is spent.
    while (mutations < MIN_MUTATIONS || start.elapsed() < budget()) && failures.borrow().len() < 5 {
        let a = &seeds[rng.below(seeds.len())];
        let b = &seeds[rng.below(seeds.len())];
        let input = mutate(&mut rng, a, b);
        if let Some(from) = trace_from {
            trace.set(mutations >= from);
            if mutations % 1000 == 0 {
                eprintln!("{name}: mutation {mutations}");
            }
        }
        run(format!("mutation {mutations}"), &input);
        mutations += 1;
    }
    eprintln!(
        "{name}: {} regressions, {seeds_run} of {} seeds, {mutations} mutations in {:.1?}",
        regressions.len(),
        seeds.len(),
        start.elapsed()
    );
    let failures = failures.into_inner();
    assert!(
        failures.is_empty(),
        "{name}: {} inputs failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

macro_rules! smoke_tests {
    ($($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                smoke(stringify!($name));
            }
        )*

        #[test]
        fn every_target_has_a_smoke_test() {
            let here = [$(stringify!($name)),*];
            for (name, _) in opforge_fuzz::TARGETS {
                assert!(here.contains(name), "no smoke test for {name}");
            }
        }
    };
}

smoke_tests!(
    spec_parser,
    text_format,
    graph_def,
    tensor_proto,
    tensor_json,
    shape_inference,
    kernel,
    compat,
    manifest,
);
