//! The sandbox launcher as a standalone binary; see `hookbox_isolation::launcher`.

fn main() {
    std::process::exit(hookbox_isolation::launcher::main());
}
