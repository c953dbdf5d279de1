//! The `opforge` command line; see `opforge --help` and [`opforge::cli`].

fn main() -> std::process::ExitCode {
    opforge::cli::main()
}
