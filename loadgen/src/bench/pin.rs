//! `--cpus`: pinning loadgen, the gateway, the upstream and peers to named
//! cores with sched_setaffinity, so that a noisy two-core machine can be
//! split on purpose (e.g. loadgen on core 0, the gateway on core 1).

use anyhow::{bail, Context};

/// Which process a `--cpus` entry pins.
pub const WHO: [&str; 4] = ["loadgen", "gateway", "upstream", "peer"];

/// Pinning per process, from the repeatable `--cpus [WHO=]LIST` flag.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Pinning {
    /// loadgen itself (and its load threads).
    pub loadgen: Option<Vec<usize>>,
    /// The gateway.
    pub gateway: Option<Vec<usize>>,
    /// mock-upstream.
    pub upstream: Option<Vec<usize>>,
    /// Peer gateways.
    pub peer: Option<Vec<usize>>,
}

/// The machine's online cores, not the ones loadgen itself may run on: run
/// under `taskset -c 1`, `available_parallelism` is 1, and `--cpus
/// gateway=1` was refused as "core 1 does not exist" (a child may be pinned
/// to any core the machine has, whatever loadgen's own mask).
fn machine_cores() -> usize {
    // SAFETY: sysconf reads a system value.
    let online = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    let own = std::thread::available_parallelism().map_or(1, |n| n.get());
    usize::try_from(online).unwrap_or(0).max(own)
}

/// `0,2-3` into `[0, 2, 3]`.
pub fn parse_list(s: &str) -> anyhow::Result<Vec<usize>> {
    let mut out = Vec::new();
    for part in s.split(',').filter(|p| !p.is_empty()) {
        let num = |x: &str| {
            x.trim()
                .parse::<usize>()
                .with_context(|| format!("--cpus: {x:?} is not a core number"))
        };
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (num(a)?, num(b)?);
                if a > b {
                    bail!("--cpus: range {part:?} runs backwards");
                }
                out.extend(a..=b);
            }
            None => out.push(num(part)?),
        }
    }
    if out.is_empty() {
        bail!("--cpus: empty core list");
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

impl Pinning {
    /// Reads every `--cpus` value: `LIST` pins all processes, `WHO=LIST` one.
    pub fn parse(values: &[String]) -> anyhow::Result<Pinning> {
        let mut p = Pinning::default();
        for v in values {
            let (who, list) = match v.split_once('=') {
                Some((w, l)) => (Some(w.trim()), l),
                None => (None, v.as_str()),
            };
            let cores = parse_list(list)?;
            let cap = machine_cores();
            if let Some(c) = cores.iter().find(|&&c| c >= cap) {
                bail!(
                    "--cpus {v}: core {c} does not exist (this machine has cores 0-{})",
                    cap - 1
                );
            }
            let slots = [&mut p.loadgen, &mut p.gateway, &mut p.upstream, &mut p.peer];
            match who {
                None => slots.into_iter().for_each(|s| *s = Some(cores.clone())),
                Some(w) => match WHO.iter().position(|x| *x == w) {
                    Some(i) => *slots.into_iter().nth(i).expect("four slots") = Some(cores),
                    None => bail!("--cpus {v}: {w:?} is not one of {}", WHO.join(", ")),
                },
            }
        }
        Ok(p)
    }
}

/// A kernel CPU set of `cores`.
pub fn cpu_set(cores: &[usize]) -> anyhow::Result<libc::cpu_set_t> {
    // SAFETY: cpu_set_t is plain data; all zeroes is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cores {
        if c >= libc::CPU_SETSIZE as usize {
            bail!("--cpus: core {c} is out of range");
        }
        // SAFETY: c is within the set's size.
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    Ok(set)
}

/// Pins process (or thread) `pid` (0: the calling thread) to `set`.
pub fn apply(pid: libc::pid_t, set: &libc::cpu_set_t) -> std::io::Result<()> {
    // SAFETY: `set` is a valid cpu_set_t of the size passed.
    let rc = unsafe { libc::sched_setaffinity(pid, std::mem::size_of::<libc::cpu_set_t>(), set) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// The cores the calling thread may run on now (its affinity mask).
pub fn allowed() -> Vec<usize> {
    // SAFETY: cpu_set_t is plain data; sched_getaffinity fills it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid cpu_set_t of the size passed.
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    let n = std::thread::available_parallelism().map_or(1, |n| n.get());
    if rc != 0 {
        return (0..n).collect();
    }
    // SAFETY: every index is below the set's size.
    (0..libc::CPU_SETSIZE as usize)
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect()
}

/// How many distinct cores processes pinned to `pins` can run on together,
/// an unpinned one (`None`) anywhere in `all`: the cores a run could keep busy.
pub fn cores_of(all: &[usize], pins: &[Option<&[usize]>]) -> usize {
    let mut used: Vec<usize> = pins
        .iter()
        .flat_map(|p| p.unwrap_or(all))
        .copied()
        .collect();
    used.sort_unstable();
    used.dedup();
    used.len().max(1)
}

/// Pins the calling thread; threads it starts later inherit the set, so
/// calling this before the first run pins every load thread.
pub fn pin_self(cores: &[usize]) -> anyhow::Result<()> {
    apply(0, &cpu_set(cores)?).context("--cpus: sched_setaffinity failed")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cores_outside_loadgens_own_mask_can_be_named() {
        // As under `taskset -c 0`: this thread may run on core 0 alone.
        if machine_cores() < 2 {
            eprintln!("skipped: one core");
            return;
        }
        std::thread::spawn(|| {
            // SAFETY: cpu_set_t is plain data; the set names core 0.
            let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
            unsafe { libc::CPU_SET(0, &mut set) };
            // SAFETY: pins this thread alone, with a valid set.
            let rc =
                unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
            assert_eq!(rc, 0);
            assert_eq!(std::thread::available_parallelism().unwrap().get(), 1);
            let p = Pinning::parse(&["gateway=1".to_string()]).unwrap();
            assert_eq!(p.gateway, Some(vec![1]));
            let e = Pinning::parse(&[format!("gateway={}", machine_cores())]).unwrap_err();
            assert!(e.to_string().contains("does not exist"), "{e}");
        })
        .join()
        .unwrap();
    }

    #[test]
    fn lists_and_ranges() {
        assert_eq!(parse_list("0").unwrap(), vec![0]);
        assert_eq!(parse_list("1,0-1").unwrap(), vec![0, 1]);
        assert!(parse_list("2-1").is_err());
        assert!(parse_list("x").is_err());
        assert!(parse_list("").is_err());
    }

    #[test]
    fn one_list_pins_all_and_named_entries_pin_one() {
        let all = Pinning::parse(&["0".into()]).unwrap();
        assert_eq!(all.gateway, Some(vec![0]));
        assert_eq!(all.loadgen, Some(vec![0]));
        let one = Pinning::parse(&["gateway=0".into()]).unwrap();
        assert_eq!((one.gateway, one.loadgen), (Some(vec![0]), None));
        let err = Pinning::parse(&["proxy=0".into()]).unwrap_err().to_string();
        assert!(err.contains("\"proxy\" is not one of"), "{err}");
        assert!(Pinning::parse(&["4096".into()]).is_err());
    }

    #[test]
    fn a_run_can_keep_busy_the_union_of_its_processes_cores() {
        let all = [0, 1, 2, 3];
        assert_eq!(cores_of(&all, &[None, None]), 4);
        assert_eq!(cores_of(&all, &[Some(&[0]), Some(&[1]), Some(&[1])]), 2);
        assert_eq!(cores_of(&all, &[Some(&[0]), None]), 4);
        assert_eq!(cores_of(&all, &[Some(&[2]), Some(&[2])]), 1);
        assert!(!allowed().is_empty());
    }
}
