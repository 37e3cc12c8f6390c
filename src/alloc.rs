//! The binary's allocator: the system allocator, asking Linux to back large
//! allocations with transparent huge pages.
//!
//! A gigabyte run keeps its records (about 100 MB per GB of file) and the
//! checks' columns in a few large vectors. With the kernel's default THP
//! setting (`madvise`), these are backed by 4 KiB pages unless asked: every
//! 4 KiB is a page fault when first written, and every walk of a check over
//! them misses the TLB once per page. `MADV_HUGEPAGE` on the 2 MiB-aligned
//! part of each large allocation turns that into one fault and one TLB entry
//! per 2 MiB (see docs/performance.md for the measured effect).
//!
//! Except in a virtual machine that reports its free memory to the host
//! (virtio-balloon free page reporting): there the host takes back every
//! free 2 MiB block after a few seconds, so a huge page is almost always one
//! the host must supply again, which costs more than the 4 KiB faults it
//! saves (measured in docs/performance.md). [`configure`] detects that, and
//! `ARTIFACT_CHECK_HUGE_PAGES` overrides it.
//!
//! Nothing changes for small allocations, nor on other systems. Memory use
//! grows by at most one partly used 2 MiB page per large allocation.
//!
//! It also asks glibc's malloc to keep freed memory for reuse
//! ([`keep_freed_memory`]): what the load, the model and a check free, the
//! checks after them reuse, where glibc had unmapped it and mapped fresh
//! memory again, a page fault per 4 KiB. `ARTIFACT_CHECK_REUSE_MEMORY=off`
//! leaves malloc as it is.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, Ordering};

/// Allocations at least this large are advised; smaller ones cannot hold
/// enough whole huge pages to matter.
pub const LARGE: usize = 4 << 20;

/// [`System`], advising large allocations to use huge pages once
/// [`configure`] (or [`set_enabled`]) turned that on.
pub struct HugePages;

/// Whether large allocations are advised; off until [`configure`] decides.
static ENABLED: AtomicBool = AtomicBool::new(false);

/// The environment variable that overrides the detection: `on` or `off`
/// (anything else, or unset: detect).
pub const ENV: &str = "ARTIFACT_CHECK_HUGE_PAGES";

/// The environment variable that turns [`keep_freed_memory`] off: `off`
/// (anything else, or unset: on).
pub const REUSE_ENV: &str = "ARTIFACT_CHECK_REUSE_MEMORY";

/// Decides whether to advise huge pages, from [`ENV`] or, by default, from
/// the machine ([`reports_free_pages`]), and keeps freed memory for reuse
/// unless [`REUSE_ENV`] says `off`. Call once, early in `main` (it reads a
/// few small files, so not from the allocator).
pub fn configure() {
    set_enabled(match std::env::var(ENV).as_deref() {
        Ok("on") => true,
        Ok("off") => false,
        _ => !reports_free_pages(),
    });
    if std::env::var(REUSE_ENV).as_deref() != Ok("off") {
        keep_freed_memory();
    }
}

/// Blocks up to this size come from malloc's heaps, where a freed one is
/// reused, instead of each being a fresh mapping: glibc's ceiling for its
/// `M_MMAP_THRESHOLD` on 64-bit targets (a larger value is refused).
pub const REUSED_UP_TO: usize = 32 << 20;

/// Free memory at the top of a heap that malloc keeps for reuse before it
/// gives it back to the system (`M_TRIM_THRESHOLD`).
pub const KEPT_FREE: usize = 64 << 20;

/// Asks glibc's malloc to serve blocks up to [`REUSED_UP_TO`] from its
/// heaps and to keep up to [`KEPT_FREE`] of freed memory: whether it took
/// both (`false` on other systems, where nothing changes).
///
/// By default glibc maps every block of 128 KiB or more on its own and
/// unmaps it when freed, raising that threshold only to the largest block
/// freed so far. The checks' columns (a few MB per metric) were then mostly
/// fresh mappings, a page fault per 4 KiB, while memory freed earlier in
/// the run lay unused or was given back. The records of a gigabyte run
/// (100 MB) stay a mapping of their own. Peak memory grows by what the
/// heaps keep (docs/performance.md).
pub fn keep_freed_memory() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let (Ok(up_to), Ok(kept)) = (
            libc::c_int::try_from(REUSED_UP_TO),
            libc::c_int::try_from(KEPT_FREE),
        ) else {
            return false;
        };
        // SAFETY: `mallopt` only sets malloc's tuning parameters (under
        // malloc's own lock); no memory is touched. An out-of-range value
        // is refused (0), not applied.
        unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, up_to) == 1
                && libc::mallopt(libc::M_TRIM_THRESHOLD, kept) == 1
        }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}

/// Turns the advice on or off.
pub fn set_enabled(on: bool) {
    ENABLED.store(on, Ordering::Relaxed);
}

/// Whether this machine is a virtual machine whose balloon device reports
/// free pages to the host (virtio feature bit 5,
/// `VIRTIO_BALLOON_F_REPORTING`, as the guest kernel lists it in
/// `/sys/bus/virtio/drivers/virtio_balloon/*/features`: one `0`/`1` per bit,
/// bit 0 first).
pub fn reports_free_pages() -> bool {
    reports_free_pages_in(std::path::Path::new(
        "/sys/bus/virtio/drivers/virtio_balloon",
    ))
}

/// [`reports_free_pages`] for the balloon devices listed in `driver`.
fn reports_free_pages_in(driver: &std::path::Path) -> bool {
    const REPORTING: usize = 5;
    let Ok(devices) = std::fs::read_dir(driver) else {
        return false;
    };
    devices.flatten().any(|d| {
        std::fs::read(d.path().join("features"))
            .is_ok_and(|bits| bits.get(REPORTING) == Some(&b'1'))
    })
}

/// Advises the 2 MiB-aligned part of a new allocation `[ptr, ptr + size)`
/// to use huge pages, when it is large and the advice is on.
fn advise(ptr: *mut u8, size: usize) {
    if size < LARGE || ptr.is_null() || !ENABLED.load(Ordering::Relaxed) {
        return;
    }
    #[cfg(target_os = "linux")]
    {
        const HUGE: usize = 2 << 20;
        let start = ptr as usize;
        let from = start.next_multiple_of(HUGE);
        let to = (start + size) / HUGE * HUGE;
        if to > from {
            // SAFETY: [from, to) lies inside the allocation just made, which
            // this process owns; MADV_HUGEPAGE only changes how the kernel
            // backs those pages, never their contents. Failure (e.g. THP
            // disabled) is harmless and ignored.
            unsafe {
                libc::madvise(from as *mut libc::c_void, to - from, libc::MADV_HUGEPAGE);
            }
        }
    }
}

// SAFETY: every method forwards to `System` with the same arguments and
// returns its result unchanged; `advise` only changes page backing.
unsafe impl GlobalAlloc for HugePages {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract, which
        // is `System.alloc`'s.
        let p = unsafe { System.alloc(layout) };
        advise(p, layout.size());
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for `alloc`.
        let p = unsafe { System.alloc_zeroed(layout) };
        advise(p, layout.size());
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator, i.e. from `System`, with
        // `layout` (the caller's contract).
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as for `dealloc`, plus `new_size`'s contract, the caller's.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        advise(p, new_size);
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Allocates through [`HugePages`] (not the test binary's allocator).
    fn with_layout<R>(size: usize, f: impl FnOnce(*mut u8) -> R) -> R {
        let layout = Layout::from_size_align(size, 64).unwrap();
        // SAFETY: a non-zero size and a valid alignment.
        let p = unsafe { HugePages.alloc_zeroed(layout) };
        assert!(!p.is_null());
        let r = f(p);
        // SAFETY: `p` was allocated just above with `layout`.
        unsafe { HugePages.dealloc(p, layout) };
        r
    }

    #[test]
    fn large_and_small_allocations_keep_their_contents() {
        for size in [1, 4095, LARGE - 1, LARGE, 3 * LARGE + 17] {
            let layout = Layout::from_size_align(size, 64).unwrap();
            // SAFETY: a non-zero size and a valid alignment.
            let p = unsafe { HugePages.alloc_zeroed(layout) };
            assert!(!p.is_null());
            // SAFETY: `p` holds `size` initialised (zeroed) bytes we own.
            let bytes = unsafe { std::slice::from_raw_parts_mut(p, size) };
            assert!(bytes.iter().all(|&b| b == 0), "alloc_zeroed of {size}");
            for (i, b) in bytes.iter_mut().enumerate() {
                *b = (i % 251) as u8;
            }
            // Grow across the threshold and shrink below it: realloc keeps
            // the common prefix.
            let grown = size * 2 + LARGE;
            // SAFETY: `p` came from this allocator with `layout`.
            let q = unsafe { HugePages.realloc(p, layout, grown) };
            assert!(!q.is_null());
            // SAFETY: realloc kept the first `size` bytes, all initialised.
            let kept = unsafe { std::slice::from_raw_parts(q, size) };
            assert!(kept.iter().enumerate().all(|(i, &b)| b == (i % 251) as u8));
            let big = Layout::from_size_align(grown, 64).unwrap();
            // SAFETY: `q` came from this allocator with layout `big`.
            let r = unsafe { HugePages.realloc(q, big, size.min(100)) };
            // SAFETY: the shrunk block keeps its first `size.min(100)` bytes.
            let kept = unsafe { std::slice::from_raw_parts(r, size.min(100)) };
            assert!(kept.iter().enumerate().all(|(i, &b)| b == (i % 251) as u8));
            let small = Layout::from_size_align(size.min(100), 64).unwrap();
            // SAFETY: `r` came from this allocator with layout `small`.
            unsafe { HugePages.dealloc(r, small) };
        }
    }

    /// The `VmFlags` line of the mapping of this process that holds `addr`.
    #[cfg(target_os = "linux")]
    fn vm_flags(addr: usize) -> Option<String> {
        let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
        let mut inside = false;
        for line in smaps.lines() {
            let range = line.split_whitespace().next().unwrap_or("");
            if let Some((a, b)) = range.split_once('-') {
                if let (Ok(a), Ok(b)) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16))
                {
                    inside = (a..b).contains(&addr);
                    continue;
                }
            }
            if inside {
                if let Some(flags) = line.strip_prefix("VmFlags:") {
                    return Some(flags.to_string());
                }
            }
        }
        None
    }

    /// `hg` in `VmFlags` is the kernel's record of `MADV_HUGEPAGE`: it is
    /// set for the 2 MiB-aligned part of a large allocation, and only there.
    #[cfg(target_os = "linux")]
    #[test]
    fn large_allocations_are_advised_and_small_ones_are_not() {
        if !std::path::Path::new("/sys/kernel/mm/transparent_hugepage").exists() {
            eprintln!("this kernel has no transparent huge pages; nothing to check");
            return;
        }
        const HUGE: usize = 2 << 20;
        set_enabled(true);
        let advised = |p: *mut u8| {
            let inner = (p as usize).next_multiple_of(HUGE);
            let flags = vm_flags(inner).expect("the allocation is mapped");
            flags.split_whitespace().any(|f| f == "hg")
        };
        assert!(with_layout(3 * LARGE, advised), "a large allocation");
        assert!(!with_layout(64 << 10, advised), "a small allocation");
        set_enabled(false);
        let off = with_layout(3 * LARGE, advised);
        set_enabled(true);
        assert!(!off, "a large allocation with the advice turned off");
    }

    /// Bytes malloc holds in blocks mapped on their own.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    fn mapped_bytes() -> usize {
        // SAFETY: `mallinfo2` only reads malloc's statistics.
        unsafe { libc::mallinfo2() }.hblkhd
    }

    /// Run alone in a child process (malloc's settings are the process's:
    /// the huge-page test above must not get reused blocks): before
    /// [`keep_freed_memory`] an 8 MiB block is a mapping of its own, after
    /// it a 24 MiB one is not (glibc's own threshold, raised by the freed
    /// 8 MiB, would have mapped it).
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn kept_freed_memory_serves_blocks_up_to_its_threshold_from_the_heap() {
        const CHILD: &str = "ARTIFACT_CHECK_ALLOC_TEST_CHILD";
        let name =
            "alloc::tests::kept_freed_memory_serves_blocks_up_to_its_threshold_from_the_heap";
        if std::env::var_os(CHILD).is_none() {
            let exe = std::env::current_exe().unwrap();
            let out = std::process::Command::new(exe)
                .args(["--exact", name, "--test-threads", "1", "--nocapture"])
                .env(CHILD, "1")
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(out.status.success(), "the child failed:\n{text}");
            assert!(text.contains("1 passed"), "the child ran no test:\n{text}");
            return;
        }
        let mapped_while_held = |size: usize| {
            let before = mapped_bytes();
            let v: Vec<u8> = vec![1; size];
            let during = mapped_bytes();
            std::hint::black_box(&v);
            during.saturating_sub(before) >= size
        };
        assert!(mapped_while_held(8 << 20), "glibc's default maps 8 MiB");
        assert!(keep_freed_memory(), "glibc refused the settings");
        assert!(!mapped_while_held(24 << 20), "24 MiB from the heap");
        assert!(
            mapped_while_held(REUSED_UP_TO + (1 << 20)),
            "above it, mapped"
        );
    }

    #[test]
    fn free_page_reporting_is_read_from_the_balloon_features() {
        let dir = tempfile::tempdir().unwrap();
        assert!(!reports_free_pages_in(&dir.path().join("absent")));
        let device = |name: &str, bits: &str| {
            let d = dir.path().join(name);
            std::fs::create_dir(&d).unwrap();
            std::fs::write(d.join("features"), bits).unwrap();
        };
        // Bits 1, 2 and 32: statistics and deflate-on-OOM, no reporting.
        device("virtio0", "0110000000000000000000000000000010000000\n");
        assert!(!reports_free_pages_in(dir.path()));
        // This machine's balloon: bits 1, 2, 5, 7 and 32.
        device("virtio1", "0110010100000000000000000000000010000000\n");
        assert!(reports_free_pages_in(dir.path()));
    }
}
