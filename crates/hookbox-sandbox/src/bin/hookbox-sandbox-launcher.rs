//! The launcher as a standalone binary, for this crate's integration tests (hookbox itself runs
//! `hookbox-sandbox-exec`, or `hookbox __sandbox-exec`); see `hookbox_sandbox::launcher_main`.

fn main() {
    std::process::exit(hookbox_sandbox::launcher_main());
}
