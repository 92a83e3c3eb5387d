//! The seccomp filter through the real kernel: installed in a forked child, which then makes
//! each call and reports its errno. Every denied call is made with arguments that would fail
//! with another errno (`EFAULT`, `EINVAL`, `EBADF`, ...) if the filter let it through, so an
//! `EPERM` is the filter's.

use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use hookbox_sandbox::seccomp;

/// One call the child makes: its number and arguments, and the errno expected (0: succeeds).
struct Case {
    name: String,
    nr: i64,
    args: [u64; 6],
    errno: i32,
}

fn case(name: impl Into<String>, nr: i64, args: [u64; 6], errno: i32) -> Case {
    Case {
        name: name.into(),
        nr,
        args,
        errno,
    }
}

const CLONE_NAMESPACE_FLAGS: &[(i32, &str)] = &[
    (libc::CLONE_NEWUSER, "CLONE_NEWUSER"),
    (libc::CLONE_NEWNS, "CLONE_NEWNS"),
    (libc::CLONE_NEWPID, "CLONE_NEWPID"),
    (libc::CLONE_NEWNET, "CLONE_NEWNET"),
    (libc::CLONE_NEWIPC, "CLONE_NEWIPC"),
    (libc::CLONE_NEWUTS, "CLONE_NEWUTS"),
    (libc::CLONE_NEWCGROUP, "CLONE_NEWCGROUP"),
];

/// A value no call accepts as a pointer, descriptor, flags or command.
const BAD: u64 = u64::MAX;

/// Forks; the child installs `programs` in order, makes every call of `cases` and writes one
/// `i32` per call (its errno, 0 if it succeeded), and a last one for a plain `fork` and `wait`
/// (0 when both worked). Returns what the child wrote.
fn run_in_child(programs: &[&seccomp::Programs], cases: &[Case]) -> Vec<i32> {
    let mut fds = [0; 2];
    // SAFETY: `fds` is two ints for pipe2 to fill.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: both descriptors were just created and are owned here.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let mut results = vec![-1i32; cases.len() + 1];
    // SAFETY: the child only makes system calls on memory allocated before the fork and exits
    // with `_exit`: nothing it does allocates or takes a lock another thread could hold.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        unsafe { child(programs, cases, &mut results, write.as_raw_fd()) }
    }
    drop(write);
    let mut bytes = Vec::new();
    std::fs::File::from(read).read_to_end(&mut bytes).unwrap();
    let status = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(pid), None).unwrap();
    assert_eq!(
        status,
        nix::sys::wait::WaitStatus::Exited(nix::unistd::Pid::from_raw(pid), 0),
        "the child did not finish its calls"
    );
    assert_eq!(bytes.len(), results.len() * 4, "the child's report");
    bytes
        .chunks_exact(4)
        .map(|b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

/// The forked child (see [`run_in_child`]); never returns.
unsafe fn child(
    programs: &[&seccomp::Programs],
    cases: &[Case],
    results: &mut [i32],
    out: i32,
) -> ! {
    // SAFETY (whole function): system calls on memory the parent allocated; `_exit` at the end.
    unsafe {
        for program in programs {
            if seccomp::install(program).is_err() {
                libc::_exit(3);
            }
        }
        for (case, result) in cases.iter().zip(results.iter_mut()) {
            let [a, b, c, d, e, f] = case.args;
            let rc = libc::syscall(case.nr, a, b, c, d, e, f);
            if rc == 0 && case.nr == libc::SYS_clone {
                // A clone the filter let through: this is the new process.
                libc::_exit(0);
            }
            *result = if rc == -1 {
                *libc::__errno_location()
            } else {
                0
            };
            if rc > 0 && case.nr == libc::SYS_clone {
                libc::waitpid(rc as i32, std::ptr::null_mut(), 0);
            }
        }
        // A plain fork (glibc's: clone with SIGCHLD and no namespace flag) works.
        let last = results.len() - 1;
        let pid = libc::fork();
        if pid == 0 {
            libc::_exit(7);
        }
        let mut status = 0;
        results[last] = if pid > 0
            && libc::waitpid(pid, &mut status, 0) == pid
            && libc::WIFEXITED(status)
            && libc::WEXITSTATUS(status) == 7
        {
            0
        } else {
            -1
        };
        let len = std::mem::size_of_val(results);
        let written = libc::write(out, results.as_ptr().cast(), len);
        libc::_exit(if written == len as isize { 0 } else { 4 })
    }
}

fn check(programs: &[&seccomp::Programs], cases: &[Case]) {
    let results = run_in_child(programs, cases);
    let mut wrong = Vec::new();
    for (case, errno) in cases.iter().zip(&results) {
        if *errno != case.errno {
            wrong.push(format!(
                "{}: errno {errno}, expected {}",
                case.name, case.errno
            ));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
    assert_eq!(
        results.last(),
        Some(&0),
        "a plain fork failed under the filter"
    );
}

/// The calls whose verdict is the same under both builds of the filter.
fn common_cases() -> Vec<Case> {
    let sigchld = libc::SIGCHLD as u64;
    let mut cases = vec![
        case("clone3", libc::SYS_clone3, [0; 6], libc::ENOSYS),
        case(
            "clone3 (bad args)",
            libc::SYS_clone3,
            [BAD; 6],
            libc::ENOSYS,
        ),
        // clone with only SIGCHLD (a fork): allowed.
        case(
            "clone(SIGCHLD)",
            libc::SYS_clone,
            [sigchld, 0, 0, 0, 0, 0],
            0,
        ),
        #[allow(clippy::unnecessary_cast)]
        case(
            "ioctl(TIOCSTI)",
            libc::SYS_ioctl,
            [BAD, libc::TIOCSTI as u64, 0, 0, 0, 0],
            libc::EPERM,
        ),
        case(
            "ioctl(TIOCLINUX)",
            libc::SYS_ioctl,
            [BAD, 0x541C, 0, 0, 0, 0],
            libc::EPERM,
        ),
        // Only the request's low 32 bits count (the kernel's `unsigned int cmd`).
        #[allow(clippy::unnecessary_cast)]
        case(
            "ioctl(TIOCSTI | 1 << 32)",
            libc::SYS_ioctl,
            [BAD, libc::TIOCSTI as u64 | 1 << 32, 0, 0, 0, 0],
            libc::EPERM,
        ),
        #[allow(clippy::unnecessary_cast)]
        case(
            "ioctl(TCGETS) on a bad descriptor",
            libc::SYS_ioctl,
            [BAD, libc::TCGETS as u64, 0, 0, 0, 0],
            libc::EBADF,
        ),
        case("getpid", libc::SYS_getpid, [0; 6], 0),
        case("close(-1)", libc::SYS_close, [BAD; 6], libc::EBADF),
    ];
    for (flag, name) in CLONE_NAMESPACE_FLAGS {
        cases.push(case(
            format!("clone({name} | SIGCHLD)"),
            libc::SYS_clone,
            [*flag as u64 | sigchld, 0, 0, 0, 0, 0],
            libc::EPERM,
        ));
    }
    if cfg!(target_arch = "x86_64") {
        // x32's getpid and ptrace: denied like everything x32.
        for nr in [39, 521] {
            cases.push(case(
                format!("x32 syscall {nr}"),
                0x4000_0000 | nr,
                [BAD; 6],
                libc::EPERM,
            ));
        }
    }
    cases
}

#[test]
fn every_denied_syscall_fails_with_eperm_through_the_kernel() {
    let program = seccomp::build().unwrap();
    let mut cases = common_cases();
    for (nr, name, _) in seccomp::DENIED {
        cases.push(case(*name, *nr, [BAD; 6], libc::EPERM));
    }
    check(&[&program], &cases);
}

#[test]
fn the_gvisor_filter_allows_syslog_and_denies_the_rest_through_the_kernel() {
    let program = seccomp::build_gvisor().unwrap();
    let mut cases = common_cases();
    for (nr, name, _) in seccomp::DENIED {
        if *nr == libc::SYS_syslog {
            // Through: the kernel refuses the bad type itself.
            cases.push(case(*name, *nr, [BAD; 6], libc::EINVAL));
        } else {
            cases.push(case(*name, *nr, [BAD; 6], libc::EPERM));
        }
    }
    check(&[&program], &cases);
}

/// Issue 35: a warm call host installs `Stacked::host` on itself once, and each of its programs
/// adds `Stacked::call`. Through the kernel, the pair denies every call the one program denies;
/// the host part alone lets the host's own calls (`HOST_NEEDS`) through, and only them.
#[test]
fn the_stacked_pair_denies_through_the_kernel_what_the_one_program_denies() {
    let seccomp::Stacked { host, call } = seccomp::build_stacked().unwrap();
    let mut cases = common_cases();
    for (nr, name, _) in seccomp::DENIED {
        cases.push(case(*name, *nr, [BAD; 6], libc::EPERM));
    }
    check(&[&host, &call], &cases);

    let mut cases = common_cases();
    let mut through = Vec::new();
    for (nr, name, _) in seccomp::DENIED {
        if seccomp::HOST_NEEDS.contains(nr) {
            through.push((*nr, *name));
        } else {
            cases.push(case(*name, *nr, [BAD; 6], libc::EPERM));
        }
    }
    assert_eq!(through.len(), seccomp::HOST_NEEDS.len(), "{through:?}");
    check(&[&host], &cases);
    let made: Vec<Case> = through
        .iter()
        .map(|(nr, name)| case(*name, *nr, [BAD; 6], 0))
        .collect();
    let results = run_in_child(&[&host], &made);
    for ((_, name), errno) in through.iter().zip(&results) {
        assert!(
            *errno != 0 && *errno != libc::EPERM,
            "{name} under the host part alone: errno {errno}"
        );
    }
}

/// Without the filter, the same calls fail otherwise: the errnos above are the filter's.
#[test]
fn without_the_filter_the_same_calls_fail_with_other_errnos() {
    for (nr, name, _) in seccomp::DENIED {
        // Calls with side effects even on bad arguments are left out (none are, with BAD).
        let [a, b, c, d, e, f] = [BAD; 6];
        // SAFETY: every argument is invalid, so the call fails before doing anything.
        let rc = unsafe { libc::syscall(*nr, a, b, c, d, e, f) };
        let errno = std::io::Error::last_os_error().raw_os_error();
        assert!(
            rc == -1 && errno != Some(libc::EPERM),
            "{name}: rc {rc}, errno {errno:?}"
        );
    }
}
