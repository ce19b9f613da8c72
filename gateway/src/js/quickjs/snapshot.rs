//! A QuickJS heap that can be put back: every byte a runtime allocates lives
//! in one memory region ([`Arena`]), so copying the region's used part
//! ([`Image::take`]) after a context is built and copying it back
//! ([`Image::restore`]) before a call returns the runtime, its context and
//! every object in it to exactly that state. This is how the `fresh`
//! strategy gives each call a context no earlier call touched without
//! building one (`fresh.rs` says what that costs and what it must keep).
//!
//! # Why a region of our own
//!
//! QuickJS allocates through the runtime's malloc functions only (the
//! `JSRuntime` struct itself included), and quickjs-ng's small-object
//! slabs sit on top of them. So if the allocator's own state (the bump
//! offset and the free lists) is stored in the region too, one `memcpy`
//! restores a consistent heap: pointers stay valid because the region never
//! moves. No general-purpose allocator crate keeps all of its state inside
//! the memory it manages, so this one is written here; it is deliberately
//! simple (power-of-two size classes, a bump pointer, one free list per
//! class, no coalescing): within one call garbage is reused by class, and
//! the restore frees everything at once.
//!
//! # What the region costs
//!
//! The region is reserved, not committed (`MAP_NORESERVE`): pages become
//! resident as QuickJS touches them. A call's allocations past the image
//! stay resident until [`Image::restore`] gives back those beyond
//! [`TRIM_SLACK`]: before the next call, or at once after a call that
//! grew past it (`Fresh::trim`), so no request keeps memory after it ends. A block uses
//! the next power of two of its size (plus a 16-byte header), and QuickJS
//! counts that towards `--jsvm-memory`: a script's large strings and arrays
//! reach the limit up to twice as early as with libc's malloc.

use std::ptr::NonNull;

use rquickjs::allocator::Allocator;

/// Each block's header: its size class, and room to keep user data 16-byte
/// aligned.
const HEADER: usize = 16;

/// Size classes: blocks of `MIN_BLOCK << class` bytes, header included.
const CLASSES: usize = 48;
const MIN_BLOCK: usize = 32;

/// Pages a call dirtied past the image are given back above this much.
pub(crate) const TRIM_SLACK: usize = 1 << 20;

/// The allocator's state, at the start of the region it manages.
#[repr(C)]
struct State {
    /// Offset of the first byte never handed out.
    bump: usize,
    /// Offset of the first free block of each class (0: none); a free
    /// block holds the next one's offset where its data would be.
    free: [usize; CLASSES],
}

/// The mapping; unmapped when dropped (after the runtime that used it).
pub(crate) struct Region {
    base: NonNull<u8>,
    size: usize,
}

impl Region {
    /// Reserves `size` bytes of address space (rounded up to pages).
    pub(crate) fn new(size: usize) -> Result<Region, String> {
        let size = size.next_multiple_of(page_size());
        // SAFETY: an anonymous private mapping; checked for failure.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                size,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(format!(
                "cannot reserve {} MiB for a QuickJS heap: {}",
                size >> 20,
                std::io::Error::last_os_error()
            ));
        }
        let base = NonNull::new(base.cast::<u8>()).expect("mmap never returns null on success");
        let arena = Arena { base, size };
        // SAFETY: the region is fresh, writable and large enough for State.
        unsafe {
            arena.state().write(State {
                bump: std::mem::size_of::<State>().next_multiple_of(HEADER),
                free: [0; CLASSES],
            })
        };
        Ok(Region { base, size })
    }

    /// The allocator a runtime is given (it shares the region).
    pub(crate) fn arena(&self) -> Arena {
        Arena {
            base: self.base,
            size: self.size,
        }
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: our own mapping; nothing uses it once the runtime is gone.
        unsafe { libc::munmap(self.base.as_ptr().cast(), self.size) };
    }
}

/// The allocator over a [`Region`]: a pointer and a size, all state in the
/// region itself.
#[derive(Clone, Copy)]
pub(crate) struct Arena {
    base: NonNull<u8>,
    size: usize,
}

impl Arena {
    fn state(&self) -> *mut State {
        self.base.as_ptr().cast()
    }

    /// Bytes from the region's start to its first never-used byte.
    fn used(&self) -> usize {
        // SAFETY: the state was written when the region was made.
        unsafe { (*self.state()).bump }
    }

    fn class_of(size: usize) -> Option<usize> {
        let total = size.checked_add(HEADER)?.max(MIN_BLOCK);
        let class = (total.next_power_of_two() / MIN_BLOCK).trailing_zeros() as usize;
        (class < CLASSES).then_some(class)
    }
}

// SAFETY: every block is 16-byte aligned (the bump offset starts aligned
// and grows by powers of two of at least 32; data follows a 16-byte
// header); `usable_size` reads the header `alloc` wrote; a null pointer
// means out of memory, as QuickJS expects.
unsafe impl Allocator for Arena {
    fn alloc(&mut self, size: usize) -> *mut u8 {
        let Some(class) = Self::class_of(size) else {
            return std::ptr::null_mut();
        };
        let base = self.base.as_ptr();
        // SAFETY: offsets in the state are inside the region (they were
        // handed out below `size`); a free block holds its successor.
        unsafe {
            let state = &mut *self.state();
            let offset = match state.free[class] {
                0 => {
                    let bytes = MIN_BLOCK << class;
                    if self.size - state.bump < bytes {
                        return std::ptr::null_mut();
                    }
                    state.bump += bytes;
                    state.bump - bytes
                }
                offset => {
                    state.free[class] = base.add(offset + HEADER).cast::<usize>().read();
                    offset
                }
            };
            let block = base.add(offset);
            block.cast::<usize>().write(class);
            block.add(HEADER)
        }
    }

    fn calloc(&mut self, count: usize, size: usize) -> *mut u8 {
        let Some(bytes) = count.checked_mul(size) else {
            return std::ptr::null_mut();
        };
        let ptr = self.alloc(bytes);
        if !ptr.is_null() {
            // SAFETY: `alloc` returned at least `bytes` bytes. The region's
            // pages past an earlier call's data are not zero.
            unsafe { ptr.write_bytes(0, bytes) };
        }
        ptr
    }

    unsafe fn dealloc(&mut self, ptr: *mut u8) {
        // SAFETY: `ptr` came from `alloc` (the trait's contract).
        unsafe {
            let block = ptr.sub(HEADER);
            let class = block.cast::<usize>().read();
            let state = &mut *self.state();
            ptr.cast::<usize>().write(state.free[class]);
            state.free[class] = block as usize - self.base.as_ptr() as usize;
        }
    }

    unsafe fn realloc(&mut self, ptr: *mut u8, new_size: usize) -> *mut u8 {
        if ptr.is_null() {
            return self.alloc(new_size);
        }
        // SAFETY: `ptr` came from `alloc`; the copy stays in both blocks.
        unsafe {
            let old = Self::usable_size(ptr);
            if new_size <= old {
                return ptr;
            }
            let new = self.alloc(new_size);
            if !new.is_null() {
                new.copy_from_nonoverlapping(ptr, old);
                self.dealloc(ptr);
            }
            new
        }
    }

    unsafe fn usable_size(ptr: *mut u8) -> usize {
        // SAFETY: `ptr` came from `alloc`, which wrote the class.
        let class = unsafe { ptr.sub(HEADER).cast::<usize>().read() };
        (MIN_BLOCK << class) - HEADER
    }
}

/// A copy of a region's used bytes, to put back before each call.
pub(crate) struct Image {
    arena: Arena,
    bytes: Vec<u8>,
}

impl Image {
    /// Copies what `region` holds now. No JS may be running.
    pub(crate) fn take(region: &Region) -> Image {
        let arena = region.arena();
        let used = arena.used();
        // SAFETY: the first `used` bytes of the region are mapped and ours.
        let bytes = unsafe { std::slice::from_raw_parts(arena.base.as_ptr(), used) }.to_vec();
        Image { arena, bytes }
    }

    /// Bytes in the image.
    pub(crate) fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Whether the heap has grown past what [`Image::restore`] keeps
    /// resident (the image and [`TRIM_SLACK`]).
    pub(crate) fn outgrown(&self) -> bool {
        self.arena.used() > (self.bytes.len() + TRIM_SLACK).next_multiple_of(page_size())
    }

    /// Puts the image back, and gives the pages a call used beyond it (past
    /// [`TRIM_SLACK`]) back to the kernel. No JS may be running, and no
    /// handle to a JS value made since the image was taken may be alive:
    /// it would point into memory the image overwrites.
    pub(crate) fn restore(&self) {
        let base = self.arena.base.as_ptr();
        let used = self.arena.used();
        // SAFETY: the image was taken from this region; nothing reads it
        // while it is copied (the caller's contract).
        unsafe { base.copy_from_nonoverlapping(self.bytes.as_ptr(), self.bytes.len()) };
        let keep = (self.bytes.len() + TRIM_SLACK).next_multiple_of(page_size());
        if used > keep {
            // SAFETY: a page-aligned range of our mapping past everything
            // the restored heap uses; its contents are dead.
            unsafe {
                libc::madvise(
                    base.add(keep).cast(),
                    used.next_multiple_of(page_size()) - keep,
                    libc::MADV_DONTNEED,
                )
            };
        }
    }
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(size).unwrap_or(4096)
}
