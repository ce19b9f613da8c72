//! Script files nested deeper than boa can parse, refused at load without
//! risking the gateway.
//!
//! boa 0.22's parser and compiler recurse once per level of nesting and
//! check no depth of their own (`compile.rs` has the figures: up to ~28 KB
//! of stack per `(` in the release build). A Rust stack overflow cannot be
//! caught: it aborts the process. Before this check, a script file of 300
//! nested parentheses aborted the gateway at start-up (the load ran on the
//! main thread's 8 MiB), and one of 10,000 would abort it on any thread, so
//! one API's file took every API down.
//!
//! Loading now runs on a thread with a script thread's stack
//! ([`on_script_stack`]), where a file nested ~8,000 levels parses (a
//! `(` takes ~28 KB of stack in the release build; ~1,300 levels and
//! ~185 KB in the tests' build).
//! Whether a deeper one fits cannot be known without parsing it, and a parse
//! cannot be stopped part-way from outside, so [`check`] parses it where an
//! overflow costs nothing: in a child process. It forks from a thread whose
//! stack is [`SCRIPT_STACK_SIZE`] less [`MARGIN`]; the child (a copy of
//! that one thread) parses and compiles the text, drops it, and exits. A
//! child that dies (Rust's overflow handler raises `SIGABRT`) means the file
//! cannot load: its API fails closed with that reason, or, for a virtual
//! endpoint's script, that endpoint's path only. A child that exits 0 proves
//! every parse of the text on a script thread fits (at load, on workers, on
//! VM threads, and per request with the `fresh` strategy): the parser is
//! deterministic, and each of those parses starts with at most [`MARGIN`]
//! of its thread's stack in use.
//!
//! Text too short to nest that deep skips the fork: a level costs at least
//! one character, so `len × STACK_PER_CHAR` bounds its stack (files under
//! ~6,000 bytes in the release build, ~960 in the tests').
//!
//! The child runs only the parse, the compile and `_exit`: no lock another
//! thread may hold at the fork is taken there except the allocator's, which
//! glibc's `fork` hands over released (boa's lazily made statics are made
//! in the parent before the first fork). Should the check itself fail (no
//! fork, a child that neither exits nor dies within [`LIMIT`]), the load
//! goes on without it, with a warning: the check guards against a
//! pathological file, and a busy system is no reason to refuse a sound one.
//! QuickJS checks its stack inside its parser and needs none of this.

use std::time::{Duration, Instant};

use boa_engine::{Context, Script, Source};

use super::compile::STACK_PER_CHAR;
use super::vmthread::SCRIPT_STACK_SIZE;

/// Stack a parse on a script thread may find in use when it starts: the
/// worker's or VM thread's own frames, the host's build (well under 1 MiB).
const MARGIN: usize = 16 << 20;

/// Longest the child may take (a parse of megabytes takes well under a
/// second).
const LIMIT: Duration = Duration::from_secs(60);

/// What [`check`] found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Every parse of the text on a script thread fits its stack.
    Fits,
    /// The text cannot be parsed on a script thread: why, for the load
    /// error.
    TooDeep(String),
    /// The check could not run (why, for a warning); the load goes on.
    Unchecked(String),
}

/// Whether `text` parses and compiles within a script thread's stack.
pub(crate) fn check(text: &str) -> Verdict {
    if text.len().saturating_mul(STACK_PER_CHAR) <= SCRIPT_STACK_SIZE - MARGIN {
        return Verdict::Fits;
    }
    check_in_child(text)
}

/// [`check`] without the length shortcut: always forks.
pub(crate) fn check_in_child(text: &str) -> Verdict {
    std::thread::scope(|s| {
        let spawned = std::thread::Builder::new()
            .name("gw-js-nesting".into())
            .stack_size(SCRIPT_STACK_SIZE - MARGIN)
            .spawn_scoped(s, || fork_and_parse(text));
        match spawned {
            Ok(thread) => thread
                .join()
                .unwrap_or_else(|_| Verdict::Unchecked("the checking thread panicked".to_string())),
            Err(e) => Verdict::Unchecked(format!("cannot start the checking thread: {e}")),
        }
    })
}

/// Runs `f` on a new thread with a script thread's stack and returns what it
/// returned, or the panic's message.
pub(crate) fn on_script_stack<T: Send>(f: impl FnOnce() -> T + Send) -> Result<T, String> {
    std::thread::scope(|s| {
        let thread = std::thread::Builder::new()
            .name("gw-js-load".into())
            .stack_size(SCRIPT_STACK_SIZE)
            .spawn_scoped(s, f)
            .map_err(|e| format!("cannot start the JS load thread: {e}"))?;
        thread.join().map_err(|panic| {
            let text = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "(no message)".to_string());
            format!("the JS host panicked loading it: {text}")
        })
    })
}

/// What the child does: everything a context build does with the text
/// before running it.
fn parse_and_compile(text: &str) {
    let mut ctx = Context::default();
    // A syntax error is the load's to report, with its line: fits.
    if let Ok(script) = Script::parse(Source::from_bytes(text), None, &mut ctx) {
        let _ = script.codeblock(&mut ctx);
    }
}

/// Exit code of a child whose parse panicked.
#[cfg(unix)]
const PANICKED: i32 = 3;

#[cfg(unix)]
fn fork_and_parse(text: &str) -> Verdict {
    use std::os::fd::AsRawFd;

    // Opened before the fork: the child only points its stderr here, so the
    // overflow handler's message does not reach the gateway's log.
    let null = match std::fs::OpenOptions::new().write(true).open("/dev/null") {
        Ok(f) => f,
        Err(e) => return Verdict::Unchecked(format!("cannot open /dev/null: {e}")),
    };
    // The lazily made statics a parse and compile touch (boa's table of
    // static strings), made here first: a child forked while another thread
    // was making one would wait for it forever.
    static WARM: std::sync::Once = std::sync::Once::new();
    WARM.call_once(|| parse_and_compile("var warm = [{ a: (1) }];"));
    // SAFETY: the child runs only `parse_and_compile` (allocation, which
    // glibc's fork leaves usable, and boa's parser and compiler, which take
    // no process-wide locks once their statics are made) and then `_exit`,
    // never returning into the caller's frames or running destructors
    // shared with the parent.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: dup2 of two open descriptors; `_exit` ends the child
        // without unwinding into the copy of the parent's thread.
        unsafe {
            libc::dup2(null.as_raw_fd(), 2);
            let parsed =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| parse_and_compile(text)));
            libc::_exit(if parsed.is_ok() { 0 } else { PANICKED });
        }
    }
    drop(null);
    if pid < 0 {
        return Verdict::Unchecked(format!("cannot fork: {}", std::io::Error::last_os_error()));
    }
    match wait(pid) {
        Ok(status) => verdict(status),
        Err(why) => Verdict::Unchecked(why),
    }
}

#[cfg(not(unix))]
fn fork_and_parse(_text: &str) -> Verdict {
    Verdict::Unchecked("no fork on this system".to_string())
}

/// Waits up to [`LIMIT`] for the child; then kills and reaps it.
#[cfg(unix)]
fn wait(pid: libc::pid_t) -> Result<libc::c_int, String> {
    let start = Instant::now();
    let mut pause = Duration::from_micros(100);
    loop {
        let mut status = 0;
        // SAFETY: waitpid on our own child with a valid out-pointer.
        let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if r == pid {
            return Ok(status);
        }
        if r < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(format!("cannot wait for the checking process: {e}"));
        }
        if start.elapsed() > LIMIT {
            // SAFETY: as above; the child is ours and not yet reaped.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, &mut status, 0);
            }
            return Err(format!(
                "the checking process did not finish in {}s",
                LIMIT.as_secs()
            ));
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(10));
    }
}

#[cfg(unix)]
fn verdict(status: libc::c_int) -> Verdict {
    let budget = (SCRIPT_STACK_SIZE - MARGIN) >> 20;
    if libc::WIFEXITED(status) {
        return match libc::WEXITSTATUS(status) {
            0 => Verdict::Fits,
            PANICKED => Verdict::TooDeep("boa panicked parsing or compiling it".to_string()),
            code => Verdict::Unchecked(format!("the checking process exited with {code}")),
        };
    }
    if libc::WIFSIGNALED(status) {
        let signal = libc::WTERMSIG(status);
        return Verdict::TooDeep(format!(
            "it nests deeper than boa can parse on a script thread's {budget} MiB stack \
             (boa's parser recurses once per level: a process parsing it died of signal \
             {signal})"
        ));
    }
    Verdict::Unchecked(format!("the checking process ended with status {status}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parens(depth: usize) -> String {
        format!("var x = {}1{};", "(".repeat(depth), ")".repeat(depth))
    }

    #[test]
    fn text_within_the_length_bound_fits_without_a_fork_and_truly_fits() {
        assert_eq!(check("var x = 1;"), Verdict::Fits);
        // The longest text the shortcut passes, nested as deep as its length
        // allows (unclosed: the parser recurses all the way, then finds the
        // syntax error), in the two costliest shapes: the shortcut says it
        // fits, and a child's parse agrees (STACK_PER_CHAR holds in this
        // build).
        let longest = (SCRIPT_STACK_SIZE - MARGIN) / STACK_PER_CHAR;
        for open in ["(", "["] {
            let text = format!("var x = {}", open.repeat(longest - "var x = ".len()));
            assert_eq!(text.len(), longest);
            assert_eq!(check(&text), Verdict::Fits, "{open}");
            assert_eq!(check_in_child(&text), Verdict::Fits, "{open}");
        }
    }

    #[test]
    fn a_parse_that_fits_is_proven_in_a_child() {
        // Long, shallow: the usual big script.
        let text = "var a = [1, 2, 3].map(function (x) { return (x + 1) * 2; });\n".repeat(2_000);
        assert_eq!(check_in_child(&text), Verdict::Fits);
        // A syntax error is for the load to report.
        assert_eq!(check_in_child("var = ;"), Verdict::Fits);
    }

    #[test]
    fn a_parse_that_overflows_kills_only_the_child() {
        for text in [
            parens(50_000),
            format!("var x = {}1;", "!".repeat(3_000_000)),
        ] {
            match check_in_child(&text) {
                Verdict::TooDeep(why) => assert!(why.contains("nests deeper"), "{why}"),
                other => panic!("{other:?}"),
            }
        }
        // This process is still here, and parses again.
        assert_eq!(check_in_child(&parens(100)), Verdict::Fits);
    }

    #[test]
    fn a_panic_on_the_load_thread_is_an_error() {
        let got = on_script_stack(|| -> u8 { panic!("boom") });
        assert!(got.unwrap_err().contains("boom"));
        assert_eq!(on_script_stack(|| 7), Ok(7));
    }
}
