//! Benchmark: what the seccomp filter costs the host kernel, the binary-search program against
//! the two linear `seccompiler` filters it replaced, interleaved in one run.
//!
//! Per round and per layout, `--children N` forked children each (1) attach the filter (the
//! kernel copies, checks and JIT-compiles it: what each program pays under gVisor, in a cold
//! launch and in a one-shot command's call; a warm host's programs under namespaces add only
//! the shorter `seccomp::Stacked::call`) and (2) make 2 000 `getppid` calls under it (every
//! system call of a sandboxed program runs the filter). Each child times both on its own thread's CPU clock and reports
//! them over a pipe. Prints the medians of each round and the new/old ratios with their spread.
//!
//! Run: `cargo bench -p hookbox-sandbox --bench seccomp [-- --rounds R --children N]`.
//! Prints numbers; asserts nothing.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark binary may panic

use std::collections::BTreeMap;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use hookbox_sandbox::seccomp;
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

const SYSCALLS: u32 = 2_000;

/// The pair of filters hookbox installed before the binary search (as in `seccomp`'s tests).
fn old_pair() -> Vec<BpfProgram> {
    let arch = TargetArch::try_from(std::env::consts::ARCH).unwrap();
    let rule = |arg, len, op, value| {
        SeccompRule::new(vec![SeccompCondition::new(arg, len, op, value).unwrap()]).unwrap()
    };
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = seccomp::DENIED
        .iter()
        .map(|(nr, _, _)| (*nr, Vec::new()))
        .collect();
    let flags = [
        libc::CLONE_NEWUSER,
        libc::CLONE_NEWNS,
        libc::CLONE_NEWPID,
        libc::CLONE_NEWNET,
        libc::CLONE_NEWIPC,
        libc::CLONE_NEWUTS,
        libc::CLONE_NEWCGROUP,
    ];
    rules.insert(
        libc::SYS_clone,
        flags
            .iter()
            .map(|f| {
                let f = *f as u64;
                rule(0, SeccompCmpArgLen::Qword, SeccompCmpOp::MaskedEq(f), f)
            })
            .collect(),
    );
    #[allow(clippy::unnecessary_cast)]
    let requests = [libc::TIOCSTI as u64, 0x541C];
    rules.insert(
        libc::SYS_ioctl,
        requests
            .iter()
            .map(|r| rule(1, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, *r))
            .collect(),
    );
    let eperm = SeccompAction::Errno(libc::EPERM as u32);
    let deny = SeccompFilter::new(rules, SeccompAction::Allow, eperm, arch).unwrap();
    let clone3 = SeccompFilter::new(
        BTreeMap::from([(libc::SYS_clone3, Vec::new())]),
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
        arch,
    )
    .unwrap();
    vec![deny.try_into().unwrap(), clone3.try_into().unwrap()]
}

fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Forks `children` children that attach `filters` and call `getppid` under them; returns
/// their (attach ns, ns per syscall) samples.
fn measure(filters: &[BpfProgram], children: usize) -> (Vec<f64>, Vec<f64>) {
    let (mut attach, mut per_call) = (Vec::new(), Vec::new());
    for _ in 0..children {
        let mut fds = [0; 2];
        // SAFETY: `fds` is two ints for pipe2 to fill.
        assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
        // SAFETY: just created, owned here.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        // SAFETY: single-threaded here; the child makes system calls and `_exit`s.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            // SAFETY: system calls on memory allocated before the fork, then `_exit`.
            unsafe {
                let t0 = thread_cpu_ns();
                for filter in filters {
                    if seccompiler::apply_filter(filter).is_err() {
                        libc::_exit(3);
                    }
                }
                let t1 = thread_cpu_ns();
                for _ in 0..SYSCALLS {
                    libc::syscall(libc::SYS_getppid);
                }
                let t2 = thread_cpu_ns();
                let out = [t1 - t0, t2 - t1];
                libc::write(write.as_raw_fd(), out.as_ptr().cast(), 16);
                libc::_exit(0);
            }
        }
        drop(write);
        let mut bytes = Vec::new();
        std::fs::File::from(read).read_to_end(&mut bytes).unwrap();
        let mut status = 0;
        // SAFETY: waiting for our own child.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        assert_eq!(bytes.len(), 16, "child failed (status {status})");
        let a = u64::from_ne_bytes(bytes[0..8].try_into().unwrap());
        let b = u64::from_ne_bytes(bytes[8..16].try_into().unwrap());
        attach.push(a as f64);
        per_call.push(b as f64 / f64::from(SYSCALLS));
    }
    (attach, per_call)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn arg(name: &str, default: usize) -> usize {
    std::env::args()
        .skip_while(|a| a != name)
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let rounds = arg("--rounds", 5);
    let children = arg("--children", 300);
    let old = old_pair();
    let new = vec![seccomp::build().unwrap()];
    // Without any filter: what a getppid costs bare, for reference.
    println!(
        "filters: old pair {} + {} instructions, new one {} instructions",
        old[0].len(),
        old[1].len(),
        new[0].len()
    );
    println!(
        "round  attach_us old  new  new/old   getppid_ns none  old  new  (new-none)/(old-none)"
    );
    let (mut attach_ratios, mut call_ratios) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        // Alternate which goes first.
        let (o, n) = if round % 2 == 0 {
            let o = measure(&old, children);
            (o, measure(&new, children))
        } else {
            let n = measure(&new, children);
            (measure(&old, children), n)
        };
        // Children with no filter at all: getppid's own cost.
        let bare = measure(&[], children / 3).1;
        let (oa, na) = (median(o.0) / 1e3, median(n.0) / 1e3);
        let (oc, nc, bc) = (median(o.1), median(n.1), median(bare));
        let attach_ratio = na / oa;
        let call_ratio = (nc - bc) / (oc - bc);
        attach_ratios.push(attach_ratio);
        call_ratios.push(call_ratio);
        println!(
            "{round:>5}  {oa:>13.1} {na:>5.1} {attach_ratio:>7.2}x   {bc:>13.0} {oc:>5.0} {nc:>5.0}  {call_ratio:>8.2}x"
        );
    }
    let spread = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        format!("{:.2}x ({:.2}-{:.2})", v[v.len() / 2], v[0], v[v.len() - 1])
    };
    println!(
        "attach new/old: median {}; filter cost per syscall new/old: {}",
        spread(&mut attach_ratios),
        spread(&mut call_ratios)
    );
}
