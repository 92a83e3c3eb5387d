//! The sandbox launcher as a standalone binary, for this crate's tests and benches (hookbox
//! installs its own `hookbox-sandbox-exec`); see `hookbox_sandbox::launcher_main`.

fn main() {
    std::process::exit(hookbox_sandbox::launcher_main());
}
