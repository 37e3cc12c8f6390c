//! What mapping the records file would save over reading it: the cost of
//! getting every byte of a file in the page cache in front of the parser,
//! by `pread` into a reused 1 MiB buffer (what `records::read_file` does)
//! and by `mmap`, with one thread and with two (each a contiguous half).
//! Each way also reads every byte once (a sum of 8-byte words, as the
//! parser reads them), so the copy's buffer being hot in the cache counts.
//! Read the file once first (`cat FILE > /dev/null`); best of five each,
//! the ways alternating.
//!
//!     cargo run --release --example map_or_copy -- FILE
//!
//! The library reads and never maps (no `unsafe` there, and a file that
//! shrinks while mapped, AIPerf still writing, kills the process with
//! `SIGBUS`); this example maps only to measure what that would gain.
use std::os::unix::fs::FileExt;
use std::time::Instant;

const BLOCK: usize = 1 << 20;

#[derive(Clone, Copy)]
enum Way {
    /// `pread` into a 1 MiB buffer, nothing else.
    Copy,
    /// `pread`, then every byte of the buffer read.
    CopyAndRead,
    /// `mmap`, one byte read per 4 KiB page (the mapping's faults alone).
    MapTouch,
    /// `mmap`, every byte read.
    MapAndRead,
}

fn sum(bytes: &[u8]) -> u64 {
    bytes
        .chunks_exact(8)
        .map(|w| u64::from_le_bytes(w.try_into().unwrap_or_default()))
        .fold(0, u64::wrapping_add)
}

/// One thread's part, `[from, to)` of the file (empty at the end of a
/// small file: nothing to read or map).
fn part(file: &std::fs::File, from: u64, to: u64, way: Way) -> u64 {
    let mut seen = 0u64;
    if from >= to {
        return seen;
    }
    match way {
        Way::Copy | Way::CopyAndRead => {
            let mut buf = vec![0u8; BLOCK + 4096];
            // A 4096-aligned start, as the reader's 64-byte alignment.
            let at = (buf.as_ptr() as usize).wrapping_neg() % 4096;
            let mut pos = from;
            while pos < to {
                let n = ((to - pos) as usize).min(BLOCK);
                let got = file.read_at(&mut buf[at..at + n], pos).unwrap_or(0);
                if got == 0 {
                    break;
                }
                seen = seen.wrapping_add(match way {
                    Way::CopyAndRead => sum(&buf[at..at + got]),
                    _ => u64::from(buf[at]),
                });
                pos += got as u64;
            }
        }
        Way::MapTouch | Way::MapAndRead => {
            use std::os::fd::AsRawFd;
            let len = (to - from) as usize;
            // SAFETY: a private read-only mapping of a file this example
            // opened and nobody truncates while it runs; it is only read
            // within `len` bytes and unmapped before returning.
            let bytes = unsafe {
                let p = libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_READ,
                    libc::MAP_PRIVATE,
                    file.as_raw_fd(),
                    from as libc::off_t,
                );
                assert!(p != libc::MAP_FAILED, "mmap failed");
                std::slice::from_raw_parts(p as *const u8, len)
            };
            seen = match way {
                Way::MapAndRead => sum(bytes),
                _ => bytes.iter().step_by(4096).map(|&b| u64::from(b)).sum(),
            };
            // SAFETY: the mapping made above, no longer used.
            unsafe { libc::munmap(bytes.as_ptr() as *mut libc::c_void, len) };
        }
    }
    seen
}

/// The whole file the `way`, in `threads` contiguous parts at once.
fn seconds(path: &str, way: Way, threads: u64) -> f64 {
    let file = std::fs::File::open(path).expect("open");
    let size = file.metadata().expect("size").len();
    let per = size.div_ceil(threads).next_multiple_of(4096);
    let t = Instant::now();
    let seen: u64 = std::thread::scope(|s| {
        let parts: Vec<_> = (0..threads)
            .map(|k| {
                let file = &file;
                s.spawn(move || part(file, (k * per).min(size), ((k + 1) * per).min(size), way))
            })
            .collect();
        parts.into_iter().map(|p| p.join().unwrap_or(0)).sum()
    });
    std::hint::black_box(seen);
    t.elapsed().as_secs_f64()
}

fn main() {
    let path = std::env::args().nth(1).expect("usage: map_or_copy FILE");
    let gb = std::fs::metadata(&path).expect("size").len() as f64 / 1e9;
    let ways = [
        ("pread", Way::Copy),
        ("pread + read", Way::CopyAndRead),
        ("mmap, a byte per page", Way::MapTouch),
        ("mmap + read", Way::MapAndRead),
    ];
    for threads in [1, 2] {
        let mut best = [f64::INFINITY; 4];
        for _ in 0..5 {
            for (k, &(_, way)) in ways.iter().enumerate() {
                best[k] = best[k].min(seconds(&path, way, threads));
            }
        }
        for (k, (name, _)) in ways.iter().enumerate() {
            println!(
                "{threads} thread(s), {name:<22} {:.3} s ({:.3} s per GB)",
                best[k],
                best[k] / gb
            );
        }
    }
}
