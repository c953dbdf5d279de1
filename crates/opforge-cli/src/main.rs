//! The `opforge` command line; see `opforge --help` and [`opforge_cli`].

fn main() -> std::process::ExitCode {
    opforge_cli::main()
}
