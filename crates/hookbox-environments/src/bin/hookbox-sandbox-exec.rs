//! The sandbox launcher as a standalone binary; see `hookbox_sandbox::launcher_main`.

fn main() {
    std::process::exit(hookbox_sandbox::launcher_main());
}
