//! How fast the kernel copies a file from the page cache into a 1 MiB
//! buffer at a 64-byte-aligned address and at one 16 bytes off: the
//! measurement behind `READ_ALIGN` in `src/artifacts/records.rs`. Read the
//! file once first (`cat FILE > /dev/null`) so it is in the page cache.
//!
//!     cargo run --release --example read_alignment -- FILE
use std::io::Read;
use std::time::Instant;

const BLOCK: usize = 1 << 20;

fn seconds(path: &str, offset: usize) -> std::io::Result<(f64, usize)> {
    let mut file = std::fs::File::open(path)?;
    let mut raw = vec![0u8; BLOCK + 8192];
    // The first 4096-aligned address in the buffer, plus the offset.
    let at = (raw.as_ptr() as usize).wrapping_neg() % 4096 + offset;
    let t = Instant::now();
    let mut total = 0;
    loop {
        let n = file.read(&mut raw[at..at + BLOCK])?;
        if n == 0 {
            break;
        }
        total += n;
    }
    Ok((t.elapsed().as_secs_f64(), total))
}

fn main() -> std::io::Result<()> {
    let path = std::env::args().nth(1).expect("usage: read_alignment FILE");
    // Alternating, best of five each: the machine may be shared.
    let mut best = [f64::INFINITY; 2];
    let mut bytes = 0;
    for _ in 0..5 {
        for (slot, offset) in [0, 16].into_iter().enumerate() {
            let (s, n) = seconds(&path, offset)?;
            best[slot] = best[slot].min(s);
            bytes = n;
        }
    }
    let gb = bytes as f64 / 1e9;
    println!("{bytes} bytes, best of five");
    println!(
        "64-byte aligned: {:.3} s ({:.3} s per GB)",
        best[0],
        best[0] / gb
    );
    println!(
        "16 bytes off:    {:.3} s ({:.3} s per GB)",
        best[1],
        best[1] / gb
    );
    println!("ratio: {:.2}x", best[1] / best[0]);
    Ok(())
}
