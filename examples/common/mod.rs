//! What the timing examples share, so each measures what the binary does:
//! the binary's allocator (huge pages decided, and malloc told to keep
//! freed memory, as the binary does: `alloc::configure`) and `out!`.

#[allow(unsafe_code, dead_code)]
#[path = "../../src/alloc.rs"]
pub mod alloc;

/// The binary's allocator, so the times are the binary's.
#[global_allocator]
static ALLOC: alloc::HugePages = alloc::HugePages;

/// `println!` that stops quietly when stdout is closed (piped into `head`).
#[allow(unused_macros)]
macro_rules! out {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($t)*);
    }};
}
