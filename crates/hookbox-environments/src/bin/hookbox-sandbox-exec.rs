//! The sandbox launcher as a standalone binary; see `hookbox_isolation::launcher_main`.

fn main() {
    std::process::exit(hookbox_isolation::launcher_main());
}
