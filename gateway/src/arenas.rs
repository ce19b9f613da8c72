//! One malloc arena per thread: glibc's arena limit raised at start.
//!
//! glibc gives each thread that allocates an arena of its own until there
//! are 8 per core (16 on a 2-core machine); past that, a new thread is
//! handed an arena another thread already uses, and two busy threads on one
//! arena take turns on its lock. The gateway runs more threads than that:
//! its workers, a JS VM thread per worker and JS API (18 with this repo's
//! `apis/` on 2 cores), the log writer, a Go plugin's runtime. Which
//! threads ended up sharing changed from one start to the next, and with it
//! a route's cost: `/jsvm-fresh/`, whose two VM threads build a whole boa
//! context per request, cost 2,570 to 2,800 µs of gateway CPU per request
//! in the starts where they shared an arena and 1,400 to 1,450 in those
//! where they did not (`perf record` on a slow start: the VM threads' time
//! in glibc's lock wake and wait, 68,000 context switches a second).
//!
//! [`spread`] raises the limit to [`ARENAS`] (or to glibc's own 8 per core
//! when that is more) before the gateway starts a thread, unless the
//! environment already decides it (`MALLOC_ARENA_MAX`, or the
//! `glibc.malloc.arena_max` tunable in `GLIBC_TUNABLES`). An arena that a
//! thread leaves idle costs its address space reservation and the little
//! it holds; `malloc_trim` (after a burst of connections, after a large
//! body) returns every arena's free pages.

/// The arena limit the gateway sets: more than the threads it runs with
/// any reasonable set of APIs. Past it, threads share arenas, as before.
pub const ARENAS: usize = 256;

/// What [`spread`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Arenas {
    /// The limit was set to this many arenas.
    Set(usize),
    /// The environment sets the limit (the variable named); left alone.
    FromEnv(&'static str),
    /// glibc refused the setting, or this is not glibc.
    Unsupported,
}

impl std::fmt::Display for Arenas {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Arenas::Set(n) => write!(f, "up to {n}"),
            Arenas::FromEnv(var) => write!(f, "as {var} sets"),
            Arenas::Unsupported => f.write_str("the allocator's default"),
        }
    }
}

/// The limit to set on a machine with `cores` cores, given the values of
/// `MALLOC_ARENA_MAX` and `GLIBC_TUNABLES`: `Err` names the variable that
/// decides it instead.
pub fn limit_for(
    cores: usize,
    arena_max: Option<&str>,
    tunables: Option<&str>,
) -> Result<usize, &'static str> {
    if arena_max.is_some() {
        return Err("MALLOC_ARENA_MAX");
    }
    if tunables.is_some_and(|t| t.contains("glibc.malloc.arena_max")) {
        return Err("GLIBC_TUNABLES");
    }
    Ok(ARENAS.max(8 * cores.max(1)))
}

/// Raises the process's malloc arena limit ([`limit_for`]). Call it before
/// any thread starts: glibc fixes the limit once a process has more than
/// eight arenas, and threads keep the arena they were given.
pub fn spread() -> Arenas {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let arena_max = std::env::var("MALLOC_ARENA_MAX").ok();
    let tunables = std::env::var("GLIBC_TUNABLES").ok();
    match limit_for(cores, arena_max.as_deref(), tunables.as_deref()) {
        Ok(limit) => set_limit(limit),
        Err(var) => Arenas::FromEnv(var),
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn set_limit(limit: usize) -> Arenas {
    let Ok(value) = libc::c_int::try_from(limit) else {
        return Arenas::Unsupported;
    };
    // SAFETY: mallopt only changes a parameter of glibc's allocator.
    match unsafe { libc::mallopt(libc::M_ARENA_MAX, value) } {
        1 => Arenas::Set(limit),
        _ => Arenas::Unsupported,
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn set_limit(_limit: usize) -> Arenas {
    Arenas::Unsupported
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_decides_when_it_says() {
        assert_eq!(limit_for(2, Some("4"), None), Err("MALLOC_ARENA_MAX"));
        assert_eq!(
            limit_for(
                2,
                None,
                Some("glibc.malloc.tcache_count=0:glibc.malloc.arena_max=2")
            ),
            Err("GLIBC_TUNABLES")
        );
        // Another tunable leaves the limit to the gateway.
        assert_eq!(
            limit_for(2, None, Some("glibc.malloc.tcache_count=0")),
            Ok(ARENAS)
        );
        assert_eq!(limit_for(2, None, None), Ok(ARENAS));
        // Never below glibc's own 8 per core.
        assert_eq!(limit_for(64, None, None), Ok(512));
    }
}
