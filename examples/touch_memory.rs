//! Times the first write to fresh memory, one byte per 4 KiB page, through
//! the binary's allocator: what a page fault costs on this machine, with
//! 4 KiB pages or with huge pages (`alloc::set_enabled`). The figures of
//! "Huge pages" in docs/performance.md; run it after `sleep 8` to see memory
//! the host has taken back (a VM with free page reporting).
//!
//!     cargo run --release --example touch_memory -- MB [4k|huge]
// The binary's allocator and `out!` (examples/common).
#[macro_use]
mod common;
use common::alloc;

use std::time::Instant;

fn main() {
    let mut args = std::env::args().skip(1);
    let mb: usize = args
        .next()
        .and_then(|a| a.parse().ok())
        .expect("usage: touch_memory MB [4k|huge]");
    let mode = args.next().unwrap_or_else(|| "4k".into());
    alloc::set_enabled(mode == "huge");
    let n = mb << 20;
    let t = Instant::now();
    let mut v: Vec<u8> = Vec::with_capacity(n);
    let spare = v.spare_capacity_mut();
    for i in (0..n).step_by(4096) {
        spare[i].write(1);
    }
    std::hint::black_box(&spare);
    let first = t.elapsed().as_secs_f64();
    let t = Instant::now();
    for i in (0..n).step_by(4096) {
        spare[i].write(2);
    }
    std::hint::black_box(&spare);
    let again = t.elapsed().as_secs_f64();
    println!(
        "{mode}: first write to {mb} MB {:.1} ms ({:.2} GB/s), again {:.2} ms",
        first * 1e3,
        n as f64 / first / 1e9,
        again * 1e3
    );
}
