//! What the checks run in a forked child share: `js::nesting` parses a
//! script there (a parse that overflows the stack kills only the child),
//! `native::preflight` loads a plugin library there (an initialiser that
//! ends or hangs the process ends only the child). Each child answers
//! through a pipe, and its status is read back here.
//!
//! A forked child starts with a copy of every descriptor the gateway holds
//! at that moment (close-on-exec does not apply: it never execs): the
//! listening sockets, client connections, upstream connections, log files.
//! So each child first keeps only what it needs ([`keep_only`]); before,
//! a library initialiser that left a daemon behind, or a child held up to
//! its limit, kept the gateway's port bound after the gateway stopped, and a
//! client's connection open after the gateway closed it (the client never
//! saw end-of-file).

#[cfg(unix)]
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

/// The descriptor a child's answer pipe has after [`keep_only`].
#[cfg(unix)]
pub(crate) const ANSWER: RawFd = 3;

/// `/dev/null`, read and write, close-on-exec: what a child's standard
/// descriptors point at when it has nothing to say on them.
#[cfg(unix)]
pub(crate) fn null() -> std::io::Result<OwnedFd> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")?;
    Ok(file.into())
}

/// In a child just forked: makes `stdin` its descriptor 0, `out` its 1 and
/// 2, `answer` its [`ANSWER`], and closes every other one. Returns the
/// descriptor to answer on: [`ANSWER`], or `answer` itself when the
/// descriptors could not be moved (no descriptor left to move them
/// through): then only 1 and 2 are pointed at `out` and nothing is closed,
/// and the check still answers, rather than refuse a sound input.
///
/// # Safety
/// Only in a child just forked (it closes descriptors that belong to the
/// parent's objects, which the child must never use again), with
/// descriptors valid there. It calls only async-signal-safe functions
/// (`fcntl`, `dup2`, `close_range` and `close`, `getrlimit`), so it may run
/// in the child of a threaded process.
#[cfg(unix)]
pub(crate) unsafe fn keep_only(stdin: RawFd, out: RawFd, answer: RawFd) -> RawFd {
    // Each moved above ANSWER first: one may itself be 0..=3 (a gateway
    // started with a standard descriptor closed gets a pipe there), and a
    // `dup2` onto it would lose it before it was placed.
    // SAFETY (all calls): plain descriptor calls on this process's table.
    let lifted =
        [stdin, out, answer].map(|fd| unsafe { libc::fcntl(fd, libc::F_DUPFD, ANSWER + 1) });
    if lifted.iter().any(|&fd| fd < 0) {
        unsafe {
            libc::dup2(out, 1);
            libc::dup2(out, 2);
        }
        return answer;
    }
    let [stdin, out, answer] = lifted;
    unsafe {
        libc::dup2(stdin, 0);
        libc::dup2(out, 1);
        libc::dup2(out, 2);
        libc::dup2(answer, ANSWER);
        close_from(ANSWER + 1);
    }
    ANSWER
}

/// Closes every descriptor from `first` up.
///
/// # Safety
/// As [`keep_only`].
#[cfg(unix)]
unsafe fn close_from(first: RawFd) {
    // Linux 5.9 and later: one call.
    #[cfg(target_os = "linux")]
    {
        let (first, last, flags) = (first as libc::c_uint, libc::c_uint::MAX, 0 as libc::c_uint);
        // SAFETY: close_range(2) takes three unsigned ints.
        if unsafe { libc::syscall(libc::SYS_close_range, first, last, flags) } == 0 {
            return;
        }
    }
    // Older kernels (ENOSYS) and other systems: each descriptor below the
    // process's limit (what is open lies below it, unless the limit was
    // lowered since), at most 2^20 of them.
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit fills our struct.
    let top = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0
        && limit.rlim_cur != libc::RLIM_INFINITY
    {
        limit.rlim_cur.min(1 << 20) as RawFd
    } else {
        1 << 20
    };
    for fd in first..top {
        // SAFETY: closing a descriptor number, open or not.
        unsafe { libc::close(fd) };
    }
}

/// A new pipe, `(read, write)`, close-on-exec: another thread's child
/// that execs must not keep the write end (the reader's end-of-file).
#[cfg(unix)]
pub(crate) fn pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills `fds` with two new descriptors on success.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both descriptors are new and owned here alone.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Waits for the child to end; its status, unless it was reaped already
/// (SIGCHLD ignored).
#[cfg(unix)]
pub(crate) fn reap(pid: libc::pid_t) -> Option<libc::c_int> {
    loop {
        let mut status = 0;
        // SAFETY: waitpid on our own child with a valid out-pointer.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r == pid {
            return Some(status);
        }
        if r < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
            continue;
        }
        return None;
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::fd::AsRawFd;

    /// Forks a child that runs `arrange` (given the answer pipe's and the
    /// output pipe's write ends, it returns the descriptor to answer on),
    /// then reports through it which descriptors below 4,096 it holds and
    /// writes "out" to its descriptor 1. Returns (bitmask of 0..64, count
    /// of all, what reached the output pipe).
    fn child_sees(arrange: impl Fn(RawFd, RawFd) -> RawFd) -> (u64, u32, Vec<u8>) {
        let (answer_r, answer_w) = pipe().unwrap();
        let (out_r, out_w) = pipe().unwrap();
        // SAFETY: the child calls only async-signal-safe functions (those
        // of `arrange`, fcntl, write, _exit).
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            let answer = arrange(answer_w.as_raw_fd(), out_w.as_raw_fd());
            let (mut mask, mut count) = (0u64, 0u32);
            for fd in 0..4096 {
                // SAFETY: a flags query on a descriptor number.
                if unsafe { libc::fcntl(fd, libc::F_GETFD) } >= 0 {
                    count += 1;
                    if fd < 64 {
                        mask |= 1 << fd;
                    }
                }
            }
            let mut report = [0u8; 12];
            report[..8].copy_from_slice(&mask.to_le_bytes());
            report[8..].copy_from_slice(&count.to_le_bytes());
            // SAFETY: writes from our buffers; _exit never returns.
            unsafe {
                libc::write(1, b"out".as_ptr().cast(), 3);
                libc::write(answer, report.as_ptr().cast(), report.len());
                libc::_exit(0);
            }
        }
        drop((answer_w, out_w));
        let mut report = Vec::new();
        std::fs::File::from(answer_r)
            .read_to_end(&mut report)
            .unwrap();
        assert_eq!(reap(pid).map(|s| libc::WIFEXITED(s)), Some(true));
        let mut out = Vec::new();
        std::fs::File::from(out_r).read_to_end(&mut out).unwrap();
        assert_eq!(report.len(), 12, "{report:?}");
        let mask = u64::from_le_bytes(report[..8].try_into().unwrap());
        let count = u32::from_le_bytes(report[8..].try_into().unwrap());
        (mask, count, out)
    }

    /// A child keeps /dev/null, its output pipe and its answer pipe, and
    /// nothing the parent had open (here a listening socket and a file,
    /// besides the test harness's own): a listener a forked child held
    /// stayed bound as long as the child lived.
    #[test]
    fn a_child_keeps_only_its_standard_descriptors_and_its_answer() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let file = std::fs::File::open("/proc/self/status").unwrap();
        let null = null().unwrap();
        let (mask, count, out) = child_sees(|answer, out| {
            // SAFETY: in the child just forked.
            unsafe { keep_only(null.as_raw_fd(), out, answer) }
        });
        assert_eq!((mask, count), (0b1111, 4), "{mask:#b}");
        assert_eq!(out, b"out");
        // Without keep_only the child holds them all (the test's premise).
        let (mask, _, _) = child_sees(|answer, out| {
            // SAFETY: in the child just forked.
            unsafe { libc::dup2(out, 1) };
            answer
        });
        for fd in [listener.as_raw_fd(), file.as_raw_fd(), null.as_raw_fd()] {
            assert!(fd >= 64 || mask & (1 << fd) != 0, "{fd}: {mask:#b}");
        }
    }

    /// The pipes may sit where the standard descriptors go (a gateway
    /// started with them closed): each is moved out of the way before
    /// another lands on it.
    #[test]
    fn pipes_at_the_standard_numbers_are_not_lost() {
        let null = null().unwrap();
        let (mask, count, out) = child_sees(|answer, out| {
            // SAFETY: in the child just forked: the answer pipe at 0 and
            // the output pipe at 3, the worst order for the moves.
            unsafe {
                libc::dup2(answer, 0);
                libc::dup2(out, 3);
                keep_only(null.as_raw_fd(), 3, 0)
            }
        });
        assert_eq!((mask, count), (0b1111, 4), "{mask:#b}");
        assert_eq!(out, b"out");
    }
}
