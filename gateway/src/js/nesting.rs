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
//! that one thread) parses and compiles the text, drops it, writes one byte
//! to a pipe and exits. A child that dies before writing (Rust's overflow
//! handler raises `SIGABRT`) means the file cannot load: its API fails
//! closed with that reason, or, for a virtual endpoint's script, that
//! endpoint's path only. (The pipe, not the exit status, carries the
//! verdict: a gateway started with SIGCHLD ignored never sees the status.)
//! A child that answers proves every parse of the text on a script thread
//! fits (at load, on workers, on
//! VM threads, and per request with the `fresh` strategy): the parser is
//! deterministic, and each of those parses starts with at most [`MARGIN`]
//! of its thread's stack in use.
//!
//! Text too short to nest that deep skips the fork: a level costs at least
//! one character, so `len × STACK_PER_CHAR` bounds its stack (files under
//! ~6,000 bytes in the release build, ~960 in the tests').
//!
//! The child runs only the parse, the compile, a `write` and `_exit`: no
//! lock another thread may hold at the fork is taken there except the
//! allocator's, which glibc's `fork` hands over released (boa's lazily
//! made statics are made in the parent before the first fork).
//!
//! Should the check itself fail (no fork, a child that does not answer
//! within [`LIMIT`], or one killed with SIGKILL, as the OOM killer does),
//! the load goes on without it, with a warning: the check guards against a
//! pathological file, and a busy system is no reason to refuse a sound one.
//! QuickJS checks its stack inside its parser and needs none of this.

use std::collections::HashSet;
use std::sync::{LazyLock, Mutex};
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

/// Texts a child has proven to fit, kept for the process's life: one script
/// file is often the middleware of many APIs, and each would fork again.
static PROVEN: LazyLock<Mutex<HashSet<String>>> = LazyLock::new(Mutex::default);

/// Whether `text` parses and compiles within a script thread's stack.
pub(crate) fn check(text: &str) -> Verdict {
    if text.len().saturating_mul(STACK_PER_CHAR) <= SCRIPT_STACK_SIZE - MARGIN {
        return Verdict::Fits;
    }
    if proven(text) {
        return Verdict::Fits;
    }
    let verdict = check_in_child(text);
    if verdict == Verdict::Fits {
        let mut set = PROVEN.lock().unwrap_or_else(|e| e.into_inner());
        set.insert(text.to_string());
    }
    verdict
}

/// Whether a child proved `text` fits earlier in this process.
fn proven(text: &str) -> bool {
    let set = PROVEN.lock().unwrap_or_else(|e| e.into_inner());
    set.contains(text)
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
    #[cfg(all(test, unix))]
    if text == tests::KILL_SELF {
        // SAFETY: the test's child process ends itself.
        unsafe { libc::raise(libc::SIGKILL) };
    }
    let mut ctx = Context::default();
    // A syntax error is the load's to report, with its line: fits.
    if let Ok(script) = Script::parse(Source::from_bytes(text), None, &mut ctx) {
        let _ = script.codeblock(&mut ctx);
    }
}

/// What the child writes to the pipe before it exits: it parsed (`FIT`),
/// or boa panicked (`PANICKED`). A child that dies writes nothing.
#[cfg(unix)]
const FIT: u8 = b'f';
#[cfg(unix)]
const PANICKED: u8 = b'p';

#[cfg(unix)]
fn fork_and_parse(text: &str) -> Verdict {
    use crate::forked::{keep_only, null, pipe, reap};
    use std::io::Read;
    use std::os::fd::AsRawFd;

    // Opened before the fork: the child points its standard descriptors
    // here, so the overflow handler's message does not reach the gateway's
    // log.
    let null = match null() {
        Ok(fd) => fd,
        Err(e) => return Verdict::Unchecked(format!("cannot open /dev/null: {e}")),
    };
    // The child's answer comes through a pipe rather than its exit status,
    // which a process ignoring SIGCHLD never sees (its children are reaped
    // by the kernel).
    let (read, write) = match pipe() {
        Ok(ends) => ends,
        Err(e) => return Verdict::Unchecked(format!("cannot make a pipe: {e}")),
    };
    // The lazily made statics a parse and compile touch (boa's table of
    // static strings), made here first: a child forked while another thread
    // was making one would wait for it forever.
    static WARM: std::sync::Once = std::sync::Once::new();
    WARM.call_once(|| parse_and_compile("var warm = [{ a: (1) }];"));
    // SAFETY: the child runs only `parse_and_compile` (allocation, which
    // glibc's fork leaves usable, and boa's parser and compiler, which take
    // no process-wide locks once their statics are made), one `write` and
    // `_exit`, never returning into the caller's frames or running
    // destructors shared with the parent.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: keep_only in the child just forked, on open descriptors;
        // `_exit` ends the child without unwinding into the copy of the
        // parent's thread.
        unsafe {
            // Only /dev/null and the answer pipe: the gateway's sockets and
            // files are not the child's to hold (`forked.rs`).
            let answer = keep_only(null.as_raw_fd(), null.as_raw_fd(), write.as_raw_fd());
            let parsed =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| parse_and_compile(text)));
            let verdict = if parsed.is_ok() { FIT } else { PANICKED };
            libc::write(answer, std::ptr::addr_of!(verdict).cast(), 1);
            libc::_exit(0);
        }
    }
    drop((null, write));
    if pid < 0 {
        return Verdict::Unchecked(format!("cannot fork: {}", std::io::Error::last_os_error()));
    }
    if !readable_within(&read, LIMIT) {
        // SAFETY: the child is ours and not yet reaped.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        reap(pid);
        return Verdict::Unchecked(format!(
            "the checking process did not finish in {}s",
            LIMIT.as_secs()
        ));
    }
    let mut answer = [0u8; 1];
    let got = std::fs::File::from(read).read(&mut answer);
    let status = reap(pid);
    match (got, answer[0]) {
        (Ok(1), FIT) => Verdict::Fits,
        (Ok(1), _) => Verdict::TooDeep("boa panicked parsing or compiling it".to_string()),
        (Ok(_), _) => {
            let how = match status {
                // Not the overflow (SIGABRT, or SIGSEGV past the guard):
                // the OOM killer, or an operator. Nothing is known of the
                // text.
                Some(s) if libc::WIFSIGNALED(s) && libc::WTERMSIG(s) == libc::SIGKILL => {
                    return Verdict::Unchecked(
                        "the checking process was killed (SIGKILL: out of memory?)".to_string(),
                    );
                }
                Some(s) if libc::WIFSIGNALED(s) => format!("died of signal {}", libc::WTERMSIG(s)),
                _ => "died".to_string(),
            };
            let budget = (SCRIPT_STACK_SIZE - MARGIN) >> 20;
            Verdict::TooDeep(format!(
                "it nests deeper than boa can parse on a script thread's {budget} MiB stack \
                 (boa's parser recurses once per level: a process parsing it {how})"
            ))
        }
        (Err(e), _) => {
            Verdict::Unchecked(format!("cannot read the checking process's answer: {e}"))
        }
    }
}

#[cfg(not(unix))]
fn fork_and_parse(_text: &str) -> Verdict {
    Verdict::Unchecked("no fork on this system".to_string())
}

/// Whether `fd` has data or end-of-file within `limit`.
#[cfg(unix)]
fn readable_within(fd: &std::os::fd::OwnedFd, limit: Duration) -> bool {
    use std::os::fd::AsRawFd;
    let start = Instant::now();
    loop {
        let left = limit.saturating_sub(start.elapsed());
        let mut poll = libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = left.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: one valid pollfd.
        match unsafe { libc::poll(&mut poll, 1, ms) } {
            n if n > 0 => return true,
            0 => return false,
            _ if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted => {}
            _ => return false,
        }
    }
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
    fn a_text_proven_once_is_not_checked_again() {
        // Long enough to need a child, and unique to this test.
        let text = format!(
            "var proven = 'a_text_proven_once';\n{}",
            "var a = [1, 2, 3].map(function (x) { return x * 2; });\n".repeat(500)
        );
        assert!(!proven(&text));
        assert_eq!(check(&text), Verdict::Fits);
        assert!(proven(&text));
        assert_eq!(check(&text), Verdict::Fits);
        // What does not fit is never recorded.
        let deep = format!("var proven = 'not'; {}", parens(50_000));
        assert!(matches!(check(&deep), Verdict::TooDeep(_)));
        assert!(!proven(&deep));
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

    /// Some supervisors start their children with SIGCHLD ignored, which
    /// they inherit: the kernel then reaps the checking process, and its
    /// exit status is gone. The verdict comes through the pipe all the
    /// same. Run in a process of its own (this test binary again), as the
    /// disposition is process-wide.
    #[test]
    fn a_process_ignoring_sigchld_still_gets_the_verdict() {
        const NAME: &str = "js::nesting::tests::a_process_ignoring_sigchld_still_gets_the_verdict";
        if std::env::var_os("GW_NESTING_SIGCHLD_IGNORED").is_some() {
            // SAFETY: sets this (test) process's SIGCHLD disposition.
            unsafe { libc::signal(libc::SIGCHLD, libc::SIG_IGN) };
            match check_in_child(&parens(50_000)) {
                Verdict::TooDeep(why) => {
                    assert!(why.ends_with("a process parsing it died)"), "{why}")
                }
                other => panic!("{other:?}"),
            }
            assert_eq!(check_in_child(&parens(10)), Verdict::Fits);
            return;
        }
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([NAME, "--exact", "--test-threads", "1"])
            .env("GW_NESTING_SIGCHLD_IGNORED", "1")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{stdout}");
        assert!(stdout.contains("1 passed"), "{stdout}");
    }

    /// Text the child answers by killing itself, as the OOM killer would.
    pub(super) const KILL_SELF: &str = "/* the test's child: SIGKILL */";

    #[test]
    fn a_child_killed_from_outside_says_nothing_of_the_text() {
        match check_in_child(KILL_SELF) {
            Verdict::Unchecked(why) => assert!(why.contains("SIGKILL"), "{why}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_panic_on_the_load_thread_is_an_error() {
        let got = on_script_stack(|| -> u8 { panic!("boom") });
        assert!(got.unwrap_err().contains("boom"));
        assert_eq!(on_script_stack(|| 7), Ok(7));
    }
}
