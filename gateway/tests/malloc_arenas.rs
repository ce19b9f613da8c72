//! The gateway's malloc arena limit (`arenas.rs`): with it, every thread
//! that allocates gets an arena of its own, past glibc's default of 8 per
//! core, where threads would start sharing one (and contending on its
//! lock). Its own test binary: the limit must be set while the process has
//! few arenas, as the gateway sets it first thing in `main`.

#![cfg(all(target_os = "linux", target_env = "gnu"))]

use std::sync::{Arc, Barrier};

use gateway::arenas::{self, Arenas};

/// The arenas glibc has made in this process: `malloc_info`'s XML has one
/// `<heap nr=...>` element per arena.
fn arena_count() -> usize {
    let mut buf: *mut libc::c_char = std::ptr::null_mut();
    let mut len: libc::size_t = 0;
    // SAFETY: open_memstream writes the buffer's address and length into
    // the two locals when the stream is closed; the buffer is freed below.
    let text = unsafe {
        let stream = libc::open_memstream(&mut buf, &mut len);
        assert!(!stream.is_null(), "open_memstream failed");
        assert_eq!(libc::malloc_info(0, stream), 0, "malloc_info failed");
        libc::fclose(stream);
        let bytes = std::slice::from_raw_parts(buf as *const u8, len).to_vec();
        libc::free(buf.cast());
        String::from_utf8(bytes).expect("malloc_info writes ASCII XML")
    };
    text.matches("<heap nr=").count()
}

#[test]
fn every_thread_allocating_at_once_gets_its_own_arena() {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    match arenas::spread() {
        Arenas::Set(limit) => assert!(limit >= arenas::ARENAS, "{limit}"),
        // A run under MALLOC_ARENA_MAX or GLIBC_TUNABLES: the user's
        // setting stands, and is all this test can check.
        Arenas::FromEnv(var) => {
            assert!(std::env::var(var).is_ok(), "{var} said but not set");
            return;
        }
        Arenas::Unsupported => panic!("glibc refused mallopt(M_ARENA_MAX)"),
    }
    // More threads than glibc's default limit allows arenas, all
    // allocating while every other one is alive.
    let threads = (8 * cores + 8).min(arenas::ARENAS - 16);
    let started = Arc::new(Barrier::new(threads + 1));
    let counted = Arc::new(Barrier::new(threads + 1));
    let handles: Vec<_> = (0..threads)
        .map(|i| {
            let (started, counted) = (started.clone(), counted.clone());
            std::thread::spawn(move || {
                let block = std::hint::black_box(vec![i as u8; 4096]);
                started.wait();
                counted.wait();
                block.len()
            })
        })
        .collect();
    started.wait();
    let count = arena_count();
    counted.wait();
    for h in handles {
        assert_eq!(h.join().expect("thread"), 4096);
    }
    // One per live thread (the harness's own and the main arena besides).
    assert!(
        count > threads,
        "{count} arenas for {threads} threads allocating at once (glibc's default limit on {cores} cores is {})",
        8 * cores
    );
}
