//! Loading a plugin library once in a throw-away child process before the
//! gateway loads it, so that a library whose initialisers kill or hang a
//! process fails its own API, not the gateway.
//!
//! `dlopen` runs a library's initialisers, and some cannot be contained
//! in-process. A Go library (`plugins/go-adapter`) starts its own Go runtime
//! there and runs the package's `init()` functions: one that panics aborts
//! the process (SIGABRT, Go's "panic: ..." on stderr), one that calls
//! `os.Exit` or `log.Fatal` exits it (with status 0 for `os.Exit(0)`, without
//! a word), and one that blocks makes the first call into the library wait
//! for ever. Before this check any of them took the whole gateway down at
//! start-up, every other API with it (the project's rule: one broken plugin
//! never takes the others down). A C or C++ library's constructors can do
//! the same.
//!
//! So [`check`] forks; the child (a copy of the calling thread alone) points
//! its stdin at `/dev/null` and its stdout and stderr at a pipe, closes every
//! other descriptor but its answer pipe (`forked::keep_only`: the gateway's
//! sockets and files are not the library's to keep), `dlopen`s the library, calls the ABI's
//! entry points a load calls (the version, the minor version and the Go
//! adapter's marker: a Go library's exported calls wait for its `init()`s to
//! finish), writes one byte to a second pipe and `_exit`s. A child that dies
//! before writing, or has not written within the limit, means the library
//! cannot be loaded here: its API fails closed with what the child printed
//! (Go's panic message), and the gateway never maps the library itself. A
//! library the child cannot `dlopen` at all passes: the gateway's own load
//! then names the system's reason.
//!
//! The child runs `dlopen` after a fork of a threaded process: glibc's fork
//! resets the loader's lock and hands the allocator's locks over released,
//! and the caller holds the library cache's lock, so no other load of the
//! gateway's is under way. What the check cannot see: an initialiser that
//! fails only sometimes, and a goroutine an `init()` starts that panics
//! later (Go ends the process on an unrecovered panic in any goroutine).
//!
//! Only load runs this, once per library file; no request does.

use std::collections::HashMap;
use std::ffi::CString;
#[cfg(unix)]
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, SystemTime};

/// Longest a library's initialisers may take in the child. Tyk waits for
/// ever; a start-up that hangs for ever names nothing, so past this the
/// API fails closed saying so.
pub(crate) const LIMIT: Duration = Duration::from_secs(30);

/// What the child printed that is kept for the error, at most.
const KEEP: usize = 2000;

/// [`check`] with [`LIMIT`], remembering refusals: several APIs often name
/// one library, and a hanging one would cost each the whole limit. A file
/// changed since (another size or modification time) is checked again.
pub(crate) fn check_once(file: &Path) -> Result<(), String> {
    type Refused = HashMap<PathBuf, (Option<(u64, SystemTime)>, String)>;
    static REFUSED: OnceLock<Mutex<Refused>> = OnceLock::new();
    let stamp = std::fs::metadata(file)
        .ok()
        .and_then(|m| Some((m.len(), m.modified().ok()?)));
    let refused = REFUSED.get_or_init(Default::default);
    if let Some((seen, why)) = refused.lock().unwrap_or_else(|p| p.into_inner()).get(file) {
        if *seen == stamp {
            return Err(why.clone());
        }
    }
    let verdict = check(file, LIMIT);
    if let Err(why) = &verdict {
        let mut map = refused.lock().unwrap_or_else(|p| p.into_inner());
        map.insert(file.to_path_buf(), (stamp, why.clone()));
    }
    verdict
}

/// `Ok` when loading the library at `file` (canonical) and calling its ABI
/// entry points lets a process live; otherwise why not, for the load error.
#[cfg(unix)]
pub(crate) fn check(file: &Path, limit: Duration) -> Result<(), String> {
    use crate::forked::{keep_only, null, pipe, reap};
    use std::os::unix::ffi::OsStrExt;
    let Ok(path) = CString::new(file.as_os_str().as_bytes()) else {
        return Ok(()); // a NUL in the path: dlopen in the gateway refuses it
    };
    let ends =
        || pipe().map_err(|e| format!("cannot make a pipe to check it in a child process: {e}"));
    let (answer_r, answer_w) = ends()?;
    let (out_r, out_w) = ends()?;
    let null =
        null().map_err(|e| format!("cannot open /dev/null to check it in a child process: {e}"))?;
    // Made before the fork: the child allocates nothing of Rust's.
    let symbols: [&[u8]; 3] = [
        b"gw_plugin_abi_version\0",
        b"gw_plugin_abi_minor\0",
        b"gw_go_adapter_handlers\0",
    ];
    // SAFETY: the child calls only async-signal-safe functions (prctl,
    // keep_only's, write, _exit) besides dlopen/dlsym and the library's own
    // entry points, which glibc's fork leaves usable (see the module doc);
    // it never returns into the caller's frames.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: as above; every descriptor and pointer is valid in the
        // child's copy of this thread.
        unsafe {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            let answer = keep_only(null.as_raw_fd(), out_w.as_raw_fd(), answer_w.as_raw_fd());
            let handle = libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL);
            if !handle.is_null() {
                for name in symbols {
                    let f = libc::dlsym(handle, name.as_ptr().cast());
                    if !f.is_null() {
                        // Each returns an integer or a pointer, read from a
                        // register and never used: the call is the point.
                        let f: unsafe extern "C" fn() -> usize = std::mem::transmute(f);
                        f();
                    }
                }
            }
            let ok = b'k';
            libc::write(answer, std::ptr::addr_of!(ok).cast(), 1);
            libc::_exit(0);
        }
    }
    drop((answer_w, out_w, null));
    if pid < 0 {
        // No child, no verdict: load as before rather than refuse a sound
        // library on a busy system.
        return Ok(());
    }
    let (answered, printed) = wait(&answer_r, &out_r, limit);
    if answered != Some(true) {
        // SAFETY: our child, not yet reaped.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    let status = reap(pid);
    let printed = said(&printed);
    match answered {
        Some(true) => Ok(()),
        None => Err(format!(
            "its initialisers did not finish within {limit:?} in a process that tried to load \
             it (a Go init() that blocks?), so the gateway does not load it{printed}"
        )),
        Some(false) => {
            let how = match status {
                Some(s) if libc::WIFSIGNALED(s) => {
                    let sig = libc::WTERMSIG(s);
                    format!("died of signal {sig}{}", signal_name(sig))
                }
                Some(s) if libc::WIFEXITED(s) => {
                    format!("exited with status {}", libc::WEXITSTATUS(s))
                }
                _ => "died".to_string(),
            };
            Err(format!(
                "loading it ends the process: a process that loaded it {how} before its ABI \
                 entry points answered (a Go init() that panics or calls os.Exit/log.Fatal, or a \
                 constructor that crashes), so the gateway does not load it{printed}"
            ))
        }
    }
}

#[cfg(not(unix))]
pub(crate) fn check(_file: &Path, _limit: Duration) -> Result<(), String> {
    Ok(())
}

/// Waits for the child's answer within `limit`, reading what it prints
/// meanwhile (so a chatty child never blocks on a full pipe). `Some(true)`:
/// it answered; `Some(false)`: it ended without answering; `None`: time ran
/// out.
#[cfg(unix)]
fn wait(answer: &OwnedFd, out: &OwnedFd, limit: Duration) -> (Option<bool>, Vec<u8>) {
    let start = std::time::Instant::now();
    let mut printed = Vec::new();
    let mut out_open = true;
    loop {
        let left = limit.saturating_sub(start.elapsed());
        if left.is_zero() {
            return (None, printed);
        }
        let mut fds = [
            libc::pollfd {
                fd: answer.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: if out_open { out.as_raw_fd() } else { -1 },
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        let ms = left.as_millis().clamp(1, i32::MAX as u128) as i32;
        // SAFETY: two valid pollfds (a negative fd is skipped).
        let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, ms) };
        if n < 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return (None, printed);
        }
        if fds[1].revents != 0 {
            let mut buf = [0u8; 4096];
            // SAFETY: reading into our buffer from our descriptor.
            let got = unsafe { libc::read(out.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            if got <= 0 {
                out_open = false;
            } else if printed.len() < KEEP {
                printed.extend_from_slice(&buf[..got as usize]);
            }
        }
        if fds[0].revents != 0 {
            let mut byte = 0u8;
            // SAFETY: one byte into our variable.
            let got =
                unsafe { libc::read(answer.as_raw_fd(), std::ptr::addr_of_mut!(byte).cast(), 1) };
            if got == 1 || got == 0 {
                if got == 0 {
                    // Ended: what it printed last is still in the pipe.
                    drain(out, &mut printed);
                }
                return (Some(got == 1), printed);
            }
        }
    }
}

/// Reads what is left in the output pipe without waiting.
#[cfg(unix)]
fn drain(out: &OwnedFd, printed: &mut Vec<u8>) {
    loop {
        let mut fd = libc::pollfd {
            fd: out.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd, no wait.
        if unsafe { libc::poll(&mut fd, 1, 0) } <= 0 {
            return;
        }
        let mut buf = [0u8; 4096];
        // SAFETY: as in `wait`.
        let got = unsafe { libc::read(out.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if got <= 0 {
            return;
        }
        if printed.len() < KEEP {
            printed.extend_from_slice(&buf[..got as usize]);
        }
    }
}

#[cfg(unix)]
fn signal_name(sig: libc::c_int) -> &'static str {
    match sig {
        libc::SIGABRT => " (SIGABRT)",
        libc::SIGSEGV => " (SIGSEGV)",
        libc::SIGBUS => " (SIGBUS)",
        libc::SIGKILL => " (SIGKILL)",
        libc::SIGILL => " (SIGILL)",
        libc::SIGFPE => " (SIGFPE)",
        _ => "",
    }
}

/// What the child printed, for the end of the error: "; it printed: ...",
/// cut at [`KEEP`] bytes on a character boundary.
fn said(printed: &[u8]) -> String {
    let text = String::from_utf8_lossy(&printed[..printed.len().min(KEEP)]);
    let text = text.trim();
    if text.is_empty() {
        String::new()
    } else {
        format!("; it printed: {text}")
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::process::Command;

    /// A C library whose constructor runs `body`, built with the system's
    /// compiler; `None` without one.
    fn c_library(dir: &Path, name: &str, body: &str) -> Option<std::path::PathBuf> {
        let src = dir.join(format!("{name}.c"));
        let out = dir.join(format!("lib{name}.so"));
        std::fs::write(
            &src,
            format!(
                "#include <stdio.h>\n#include <stdlib.h>\n#include <unistd.h>\n\
                 __attribute__((constructor)) static void start(void) {{ {body} }}\n\
                 unsigned gw_plugin_abi_version(void) {{ return 1; }}\n"
            ),
        )
        .unwrap();
        let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
        let ok = Command::new(&cc)
            .args(["-shared", "-fPIC", "-o"])
            .arg(&out)
            .arg(&src)
            .status()
            .ok()?
            .success();
        ok.then_some(out)
    }

    #[test]
    fn libraries_whose_initialisers_end_or_hang_a_process_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let Some(fine) = c_library(dir.path(), "fine", "") else {
            eprintln!("skipped: no C compiler");
            return;
        };
        assert_eq!(check(&fine, LIMIT), Ok(()));

        let abort = c_library(dir.path(), "abort", r#"fputs("boom\n", stderr); abort();"#).unwrap();
        let e = check(&abort, LIMIT).unwrap_err();
        assert!(e.contains("died of signal 6 (SIGABRT)"), "{e}");
        assert!(e.contains("it printed: boom"), "{e}");

        let exit = c_library(dir.path(), "exit", "_exit(0);").unwrap();
        let e = check(&exit, LIMIT).unwrap_err();
        assert!(e.contains("exited with status 0"), "{e}");

        let hang = c_library(dir.path(), "hang", "for (;;) pause();").unwrap();
        let e = check(&hang, Duration::from_millis(300)).unwrap_err();
        assert!(e.contains("did not finish within"), "{e}");

        // Not a library at all: the gateway's own load names the reason.
        let text = dir.path().join("libtext.so");
        std::fs::write(&text, "not ELF").unwrap();
        assert_eq!(check(&text, LIMIT), Ok(()));
    }

    #[test]
    fn what_a_child_printed_is_cut() {
        assert_eq!(said(b"  \n"), "");
        assert_eq!(said(b"panic: x\n"), "; it printed: panic: x");
        let long = "é".repeat(KEEP);
        assert!(said(long.as_bytes()).len() <= KEEP + 40);
    }
}
