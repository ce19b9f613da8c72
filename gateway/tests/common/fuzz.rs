//! What the seeded fuzz tests share: their random source (a fixed seed,
//! or another given by hand), the byte mangling, and a panic count.

use std::sync::atomic::{AtomicUsize, Ordering};

/// The fuzz's random source and its number of cases: `seed` and `cases`,
/// unless `GATEWAY_FUZZ_SEED` or `GATEWAY_FUZZ_CASES` say otherwise, to
/// look further by hand:
/// `GATEWAY_FUZZ_SEED=7 GATEWAY_FUZZ_CASES=2000 cargo test ... mangled`.
pub fn source(seed: u64, cases: usize) -> (fastrand::Rng, usize) {
    let var = |name: &str| std::env::var(name).ok().and_then(|v| v.parse().ok());
    let seed = var("GATEWAY_FUZZ_SEED").unwrap_or(seed);
    let cases = var("GATEWAY_FUZZ_CASES").map_or(cases, |n| n as usize);
    (fastrand::Rng::with_seed(seed), cases)
}

/// One to three mutations of `a`: a byte replaced by one of `bytes`,
/// removed, one of `bytes` inserted, a run of up to seven bytes repeated,
/// or the rest cut off. True when it was cut off.
pub fn mangle(rng: &mut fastrand::Rng, a: &mut Vec<u8>, bytes: &[u8]) -> bool {
    let mut cut = false;
    for _ in 0..rng.usize(1..=3) {
        if a.is_empty() {
            break;
        }
        let at = rng.usize(..a.len());
        match rng.u8(..5) {
            0 => a[at] = bytes[rng.usize(..bytes.len())],
            1 => {
                a.remove(at);
            }
            2 => a.insert(at, bytes[rng.usize(..bytes.len())]),
            3 => {
                let end = (at + rng.usize(1..8)).min(a.len());
                let piece = a[at..end].to_vec();
                a.splice(at..at, piece);
            }
            _ => {
                a.truncate(at.max(1));
                cut = true;
            }
        }
    }
    cut
}

/// Panics anywhere in this test process from now on (the gateway runs in
/// it), counted; the hook before is kept for the message. Installed once
/// per process.
pub fn panics() -> &'static AtomicUsize {
    static PANICS: AtomicUsize = AtomicUsize::new(0);
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let before = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            PANICS.fetch_add(1, Ordering::SeqCst);
            before(info)
        }));
    });
    &PANICS
}
