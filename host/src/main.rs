//! The `kubewasm` binary: parses the command line and hands over to [`kubewasm::cli`].

/// mimalloc rather than glibc's malloc, which keeps what loading plugins freed in one arena per
/// thread that allocated (tens of MiB with fifty plugins, never given back).
#[cfg(not(target_env = "musl"))]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    kubewasm::cli::main()
}
