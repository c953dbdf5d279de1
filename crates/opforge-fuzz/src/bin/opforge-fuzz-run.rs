//! Runs one target on input files, on stable: `opforge-fuzz-run TARGET
//! FILE...`. Prints what each input decodes to (structured targets) before
//! running it, so a crash or abort found by cargo-fuzz or the smoke test
//! can be read and reproduced without nightly.

fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(name), files) = (args.next(), args.collect::<Vec<_>>()) else {
        eprintln!("usage: opforge-fuzz-run TARGET FILE...");
        std::process::exit(2);
    };
    let Some(target) = opforge_fuzz::target(&name) else {
        let names: Vec<&str> = opforge_fuzz::TARGETS.iter().map(|(n, _)| *n).collect();
        eprintln!(
            "unknown target '{name}'; the targets are {}",
            names.join(", ")
        );
        std::process::exit(2);
    };
    for f in files {
        let data = std::fs::read(&f).unwrap_or_else(|e| panic!("{f}: {e}"));
        match opforge_fuzz::describe(&name, &data) {
            Some(d) => println!("{f}: {d}"),
            None => println!("{f}: {} bytes", data.len()),
        }
        target(&data);
        println!("{f}: ok");
    }
}
