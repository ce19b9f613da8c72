//! The bench's child processes: found next to loadgen, started on checked
//! ports, and always stopped (on success, failure, panic or Ctrl-C), because
//! [`Child`] stops its process when dropped.

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

/// Where `name` is in `bin_dir`, or a message that says how to build it.
pub fn binary(bin_dir: &Path, name: &str) -> anyhow::Result<PathBuf> {
    let path = bin_dir.join(name);
    if !path.is_file() {
        bail!(
            "{name} binary not found at {}: run `cargo build --release` first, or point --bin-dir at the directory holding it",
            path.display()
        );
    }
    Ok(path)
}

/// Fails with a clear message when something already listens on `port`.
pub fn check_port_free(port: u16, flag: &str) -> anyhow::Result<()> {
    if let Err(e) = TcpListener::bind(("127.0.0.1", port)) {
        bail!("port {port} on 127.0.0.1 is taken ({e}); stop what uses it or choose another with {flag}");
    }
    Ok(())
}

/// How to start a child: what, where, and on which cores.
pub struct Spawn<'a> {
    /// What it is, for messages.
    pub name: &'a str,
    /// The executable.
    pub program: &'a Path,
    /// Its arguments.
    pub args: &'a [String],
    /// Its working directory.
    pub cwd: &'a Path,
    /// Where its stderr goes.
    pub log: PathBuf,
    /// Cores to pin it (and every thread it starts) to, from `--cpus`.
    pub cpus: Option<&'a [usize]>,
}

/// A started child process, stopped by pid when dropped.
pub struct Child {
    /// What it is, for messages.
    pub name: String,
    /// The address it printed on its first stdout line ("... listening on ADDR").
    pub addr: Option<SocketAddr>,
    inner: std::process::Child,
    log: PathBuf,
}

/// In a child between fork and exec: asks the kernel to send it SIGTERM
/// when loadgen goes away (Linux `PR_SET_PDEATHSIG`), so that a loadgen
/// killed outright (`kill -9`, an OOM kill) leaves no gateway, upstream or
/// peer behind holding its port; Ctrl-C and errors stop children in
/// order. The signal follows the thread that spawned the child: the bench
/// starts every child from its main thread, which lives as long as loadgen.
fn die_with_parent(parent: u32) -> std::io::Result<()> {
    // SAFETY: prctl with PR_SET_PDEATHSIG and a signal number.
    if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // loadgen may have died between fork and prctl: no signal would come.
    // SAFETY: getppid has no preconditions.
    if unsafe { libc::getppid() } as u32 != parent {
        return Err(std::io::Error::other("loadgen exited while starting it"));
    }
    Ok(())
}

impl Child {
    /// Starts `program args` in `cwd`, stderr to `log`, and waits (at most
    /// `timeout`) for its first stdout line, which both our servers print
    /// once they listen.
    pub fn start(
        name: &str,
        program: &Path,
        args: &[String],
        cwd: &Path,
        log: PathBuf,
        timeout: Duration,
    ) -> anyhow::Result<Child> {
        let how = Spawn {
            name,
            program,
            args,
            cwd,
            log,
            cpus: None,
        };
        Child::start_with(&how, timeout)
    }

    /// As [`Child::start`], pinned to `how.cpus`.
    pub fn start_with(how: &Spawn<'_>, timeout: Duration) -> anyhow::Result<Child> {
        let mut child = Child::spawn(how)?;
        let stdout = child.inner.stdout.take().expect("piped stdout");
        // The first line arrives on another thread so that a child that
        // never prints cannot block us past `timeout`.
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let mut r = BufReader::new(stdout);
            let _ = tx.send(r.read_line(&mut line).map(|_| line));
            // Keep draining so the child never blocks on a full pipe.
            let mut sink = String::new();
            while r.read_line(&mut sink).unwrap_or(0) > 0 {
                sink.clear();
            }
        });
        match rx.recv_timeout(timeout) {
            Ok(Ok(line)) if !line.is_empty() => {
                // Both servers end that line with the bound address, which
                // is how port 0 ("any free port") becomes a real port.
                child.addr = line.split_whitespace().last().and_then(|a| a.parse().ok());
                Ok(child)
            }
            _ => {
                let status = child.exited();
                bail!(
                    "{} did not start{}; {}",
                    how.name,
                    status.map(|s| format!(" ({s})")).unwrap_or_default(),
                    child.log_tail()
                )
            }
        }
    }

    /// Starts a child without waiting for anything (peers print nothing;
    /// wait for their port with [`wait_ready`]). stdout goes to the log too.
    pub fn spawn(how: &Spawn<'_>) -> anyhow::Result<Child> {
        let err = std::fs::File::create(&how.log)
            .with_context(|| format!("cannot create log file {}", how.log.display()))?;
        let mut cmd = Command::new(how.program);
        cmd.args(how.args)
            .current_dir(how.cwd)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(err)
            // Its own process group: a terminal Ctrl-C goes to loadgen
            // only, which then stops the child itself, after reporting.
            .process_group(0);
        let set = how.cpus.map(super::pin::cpu_set).transpose()?;
        let parent = std::process::id();
        // SAFETY: prctl, getppid and sched_setaffinity are
        // async-signal-safe; the closure touches only values moved into it.
        unsafe {
            cmd.pre_exec(move || {
                die_with_parent(parent)?;
                match &set {
                    Some(set) => super::pin::apply(0, set),
                    None => Ok(()),
                }
            });
        }
        let inner = cmd
            .spawn()
            .with_context(|| format!("cannot start {}", how.program.display()))?;
        Ok(Child {
            name: how.name.into(),
            addr: None,
            inner,
            log: how.log.clone(),
        })
    }

    /// This process and its children (nginx's workers), for CPU accounting.
    pub fn pids(&self) -> Vec<u32> {
        let pid = self.pid();
        let children =
            std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
        std::iter::once(pid)
            .chain(children.split_whitespace().filter_map(|p| p.parse().ok()))
            .collect()
    }

    /// A future that resolves when this child exits, without polling: a
    /// pidfd (Linux 5.3+) becomes readable when the process ends. Where
    /// pidfds are unavailable it never resolves, and a dead child shows up
    /// as failed requests instead.
    pub fn exit_signal(&self) -> impl std::future::Future<Output = String> + 'static {
        let pid = self.pid();
        let name = self.name.clone();
        async move {
            // SAFETY: pidfd_open has no memory arguments.
            let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
            if fd < 0 {
                return std::future::pending().await;
            }
            // SAFETY: a fresh descriptor that nothing else owns.
            let fd =
                unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd as i32) };
            // SAFETY: the AsyncFd owns the descriptor, which nothing else
            // closes or uses while it is registered.
            let registered = unsafe {
                tokio::io::unix::AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE)
            };
            match registered {
                Ok(afd) => {
                    let _ = afd.readable().await;
                    let how = peek_status(pid).map_or_else(|| "exited".into(), ended);
                    format!("{name} (pid {pid}) {how}")
                }
                Err(_) => std::future::pending().await,
            }
        }
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.inner.id()
    }

    /// How it ended, if it has.
    pub fn exited(&mut self) -> Option<String> {
        match self.inner.try_wait() {
            Ok(Some(s)) => Some(ended(s)),
            _ => None,
        }
    }

    /// The last lines of its stderr, for error messages. The log itself
    /// is not named: it is in the bench's private directory, which is
    /// gone by the time anyone reads the message.
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let tail = lines[lines.len().saturating_sub(8)..].join("\n  ");
        format!("its log ends with:\n  {tail}")
    }

    /// Lines of its stderr that contain every one of `needles`.
    pub fn log_lines(&self, needles: &[&str]) -> Vec<String> {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        text.lines()
            .filter(|l| needles.iter().all(|n| l.contains(n)))
            .map(str::to_string)
            .collect()
    }

    /// SIGTERM, then SIGKILL if it has not exited within two seconds.
    pub fn stop(&mut self) {
        if self.exited().is_some() {
            return;
        }
        // SAFETY: kill(2) on the pid of a child we spawned and have not reaped.
        unsafe { libc::kill(self.inner.id() as libc::pid_t, libc::SIGTERM) };
        let until = Instant::now() + Duration::from_secs(2);
        while Instant::now() < until {
            if let Ok(Some(_)) = self.inner.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.inner.kill();
        let _ = self.inner.wait();
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        self.stop();
    }
}

/// How a child ended, in words: `exited with status 1`, `killed by signal
/// 9 (SIGKILL)`.
pub fn ended(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with status {code}"),
        (None, Some(sig)) => {
            let name = signal_name(sig).map(|n| format!(" ({n})"));
            let core = if status.core_dumped() {
                ", core dumped"
            } else {
                ""
            };
            format!("killed by signal {sig}{}{core}", name.unwrap_or_default())
        }
        _ => format!("ended ({status})"),
    }
}

/// The names of the signals a child is likely to die of.
fn signal_name(sig: i32) -> Option<&'static str> {
    Some(match sig {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGTRAP => "SIGTRAP",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGUSR2 => "SIGUSR2",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        libc::SIGXCPU => "SIGXCPU",
        libc::SIGSYS => "SIGSYS",
        _ => return None,
    })
}

/// The status of child `pid`, which has exited, read without reaping it
/// (`waitid` with `WNOWAIT`): the [`Child`] that owns it still reaps it
/// when stopped. `None` if it cannot be read.
fn peek_status(pid: u32) -> Option<std::process::ExitStatus> {
    use std::os::unix::process::ExitStatusExt;
    // SAFETY: siginfo_t is plain data; zeroed is a valid value.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    let flags = libc::WEXITED | libc::WNOWAIT;
    // SAFETY: waitid on our own child's pid, writing into `info`.
    if unsafe { libc::waitid(libc::P_PID, pid, &mut info, flags) } != 0 {
        return None;
    }
    // SAFETY: filled by a successful waitid for an exited child.
    let status = unsafe { info.si_status() };
    // As waitpid's status word: the code in the second byte, or the
    // signal in the first (0x80 when it dumped core).
    let raw = match info.si_code {
        libc::CLD_EXITED => (status & 0xff) << 8,
        libc::CLD_KILLED => status & 0x7f,
        libc::CLD_DUMPED => (status & 0x7f) | 0x80,
        _ => return None,
    };
    Some(std::process::ExitStatus::from_raw(raw))
}

/// Waits until `addr` answers `GET path` with any status (at most `timeout`).
pub fn wait_ready(
    child: &mut Child,
    addr: SocketAddr,
    path: &str,
    timeout: Duration,
) -> anyhow::Result<()> {
    let until = Instant::now() + timeout;
    loop {
        if super::probe::get(addr, path, &[]).is_ok() {
            return Ok(());
        }
        if let Some(s) = child.exited() {
            bail!("{} {s} before answering; {}", child.name, child.log_tail());
        }
        if Instant::now() > until {
            bail!(
                "{} did not answer on {addr} within {timeout:?}; {}",
                child.name,
                child.log_tail()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Starts `sh -c script` as a bench child and returns what the bench
    /// says when it exits, and its log's tail.
    fn end_of(script: &str) -> (String, String) {
        let dir = tempfile::tempdir().unwrap();
        let args = ["-c".to_string(), script.to_string()];
        let how = Spawn {
            name: "gateway",
            program: Path::new("/bin/sh"),
            args: &args,
            cwd: dir.path(),
            log: dir.path().join("gateway.log"),
            cpus: None,
        };
        let child = Child::spawn(&how).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let why = rt.block_on(async {
            tokio::time::timeout(Duration::from_secs(30), child.exit_signal())
                .await
                .expect("the child exits")
        });
        (why, child.log_tail())
    }

    #[test]
    fn a_child_that_exits_says_how_and_names_no_deleted_log() {
        let (why, tail) = end_of("echo broken >&2; exit 3");
        assert!(why.starts_with("gateway (pid "), "{why}");
        assert!(why.ends_with(") exited with status 3"), "{why}");
        assert_eq!(tail, "its log ends with:\n  broken");
        let (why, _) = end_of("kill -9 $$");
        assert!(why.ends_with(") killed by signal 9 (SIGKILL)"), "{why}");
        let (why, _) = end_of("kill -SEGV $$");
        assert!(why.contains(") killed by signal 11 (SIGSEGV"), "{why}");
    }
}
