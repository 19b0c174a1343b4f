//! The `kubewasm` binary: parses the command line and hands over to [`kubewasm::cli`].

fn main() -> std::process::ExitCode {
    kubewasm::cli::main()
}
