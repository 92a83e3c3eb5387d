//! A one-shot command's address space outlives the command, held by a keeper process, so that
//! whoever waits for the command does not also wait for the kernel to free it.
//!
//! A process's exit unmaps its whole address space before it closes its descriptors and before
//! its parent learns of the exit. For `hookbox`, a large binary with some 2 800 pages mapped by
//! the end of a `hookbox tool` call, that took 0.3-0.4 ms of its caller's wait (issue 35's
//! 2-core machine: about a twentieth of the call). A process that shares the address space
//! (`clone(CLONE_VM)` without `CLONE_THREAD`: a process of its own, which the command's exit
//! does not end) keeps it referenced: the command's exit then only drops its reference, closes
//! its descriptors and tells its parent, and the kernel frees the address space when the keeper
//! ends, killed by the parent-death signal it armed as the command ended.
//!
//! The keeper touches no memory but its own stack, from which it never returns: it closes every
//! descriptor it was given a copy of (so that no pipe the caller reads stays open because of
//! it), arms the signal, ends if the command is gone already, and sleeps with every signal it
//! can block blocked (glibc keeps two of its own open, whose handlers do nothing for a process
//! that did not send them). Its system calls go through rustix's raw backend or cannot fail
//! (`close_range` is tried first, in the command), so it never writes the `errno` it shares
//! with the command's main thread (the same thread pointer: no `CLONE_SETTLS`).
//!
//! What the address space holds is let go a moment after the caller saw the command end: the
//! binary stays busy for writing (`ETXTBSY`) until the keeper is gone, microseconds later. The
//! keeper is an orphan by then, reaped by the init of its PID namespace (or a subreaper), as
//! the sandbox's launcher, which a one-shot command does not wait for either, already is: so
//! only for the commands that build a sandbox and exit ([`super::Command::keeps_address_space`])
//! and never as PID 1 (the PID namespace's end would wait for the keeper).

use std::ffi::c_void;

/// The keeper's stack: it calls a handful of system calls, no more.
const STACK: usize = 16 * 1024;

/// Starts the keeper; best effort (without one the command only exits more slowly). Call it
/// while the process has one thread: the signal mask set around the clone is the thread's.
pub fn keep_address_space_past_exit() {
    use rustix::mm::{MapFlags, ProtFlags};
    let command = rustix::process::getpid();
    if command.is_init() {
        return;
    }
    // The keeper's first call, which must not fail there (where it would write errno): tried
    // here on no descriptor at all (a kernel or a seccomp profile without it refuses it).
    // SAFETY: closes nothing: the range holds no descriptor.
    if unsafe { libc::syscall(libc::SYS_close_range, u32::MAX, u32::MAX, 0u32) } != 0 {
        return;
    }
    // SAFETY: a new anonymous mapping placed by the kernel; never unmapped: the keeper runs on
    // it until the process's address space goes with the keeper.
    let Ok(stack) = (unsafe {
        rustix::mm::mmap_anonymous(
            std::ptr::null_mut(),
            STACK,
            ProtFlags::READ | ProtFlags::WRITE,
            MapFlags::PRIVATE | MapFlags::STACK,
        )
    }) else {
        return;
    };
    // SAFETY: sigset_t is plain data, valid zeroed; sigfillset only writes the set it is given.
    let (all, mut before) = unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        (all, std::mem::zeroed::<libc::sigset_t>())
    };
    // SAFETY: the clone shares this address space and runs `keeper` on its own stack (the top
    // of the mapping above), with every signal blocked (the mask it inherits), so no handler of
    // ours ever runs on it; `keeper` reads only its argument, the command's pid, passed by
    // value, and never returns. Exit signal none: the command never waits for it.
    unsafe {
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut before);
        libc::clone(
            keeper,
            stack.cast::<u8>().add(STACK).cast(),
            libc::CLONE_VM,
            command.as_raw_nonzero().get() as usize as *mut c_void,
        );
        libc::pthread_sigmask(libc::SIG_SETMASK, &before, std::ptr::null_mut());
    }
}

/// The keeper (see the module's documentation).
extern "C" fn keeper(command: *mut c_void) -> i32 {
    let command = command as usize as i32;
    // First, so that no copy outlives the command even if the keeper ends below.
    // SAFETY: closes this process's own copies of the command's descriptors (its table is its
    // own: no CLONE_FILES). The command tried close_range: it does not fail, libc writes no errno.
    unsafe { libc::syscall(libc::SYS_close_range, 0u32, u32::MAX, 0u32) };
    // Cannot fail with a valid signal.
    let _ = rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL));
    // The command ended before the signal was armed: nothing would end this process.
    if rustix::process::getppid().map(|p| p.as_raw_nonzero().get()) != Some(command) {
        // SAFETY: ends this process only (its own thread group), running nothing of ours.
        unsafe { libc::_exit(0) };
    }
    loop {
        rustix::event::pause();
    }
}
