//! What the checks run in a forked child share: `js::nesting` parses a
//! script there (a parse that overflows the stack kills only the child),
//! `native::preflight` loads a plugin library there (an initialiser that
//! ends or hangs the process ends only the child). Each child answers
//! through a pipe, and its status is read back here.

#[cfg(unix)]
use std::os::fd::{FromRawFd, OwnedFd};

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
