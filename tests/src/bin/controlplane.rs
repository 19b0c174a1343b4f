//! `controlplane`: builds the Go control plane once per machine (cached; see
//! `kubewasm_tests::build`) and replaces itself with it, passing every argument through:
//!
//! ```text
//! cargo run -q -p kubewasm-tests --bin controlplane -- --data-dir DIR --kubeconfig FILE [...]
//! cargo run -q -p kubewasm-tests --bin controlplane -- --print-path
//! ```

use std::os::unix::process::CommandExt;
use std::process::{Command, ExitCode};

fn main() -> ExitCode {
    let args: Vec<_> = std::env::args_os().skip(1).collect();
    let bin = match kubewasm_tests::controlplane_binary() {
        Ok(bin) => bin,
        Err(e) => {
            eprintln!("controlplane: {e}");
            return ExitCode::FAILURE;
        }
    };
    if args.first().is_some_and(|a| a == "--print-path") {
        println!("{}", bin.display());
        return ExitCode::SUCCESS;
    }
    let err = Command::new(&bin).args(args).exec();
    eprintln!("controlplane: exec {}: {err}", bin.display());
    ExitCode::FAILURE
}
