//! `hookbox-sandbox-exec`: the sandbox launcher alone (see `hookbox_sandbox::launcher_main`),
//! installed beside `hookbox`, which execs it to build every sandbox
//! (`hookbox_sandbox::handoff::Launcher::from_env_or_current_exe`). It links the launcher and
//! nothing of the CLI, so an exec maps and relocates a few MB, not the whole of hookbox.

fn main() {
    std::process::exit(hookbox_sandbox::launcher_main());
}
