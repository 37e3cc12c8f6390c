//! The input cut into chunks of whole lines for the workers: about
//! [`BLOCK_BYTES`] each, read straight into reused buffers; a line past
//! [`MAX_LINE_BYTES`] is consumed through its end and not kept.

use std::io::Read;

use crate::artifacts::records::MAX_LINE_BYTES;

/// Bytes a block of lines aims at.
pub const BLOCK_BYTES: usize = 1 << 20;

/// Lines cut from the input: whole lines (the last one unterminated only
/// at the end), or a line too long to keep, skipped.
pub enum Chunk {
    /// Whole lines.
    Lines(Vec<u8>),
    /// A line past the limit, skipped.
    TooLong,
}

/// The input, cut into chunks at line ends.
pub struct Source<R> {
    input: R,
    /// The start of a line the last chunk did not finish.
    carry: Vec<u8>,
    eof: bool,
    /// Buffers to reuse.
    spare: Vec<Vec<u8>>,
}

impl<R: Read> Source<R> {
    /// The chunks of `input`.
    pub fn new(input: R) -> Self {
        Source {
            input,
            carry: Vec::new(),
            eof: false,
            spare: Vec::new(),
        }
    }

    pub fn recycle(&mut self, c: Chunk) {
        if let Chunk::Lines(b) = c {
            if b.capacity() <= 2 * BLOCK_BYTES {
                self.spare.push(b);
            }
        }
    }

    /// Reads up to `want` more bytes onto `buf`: how many (0 at the end).
    fn more(&mut self, buf: &mut Vec<u8>, want: usize) -> std::io::Result<usize> {
        buf.reserve(want);
        let n = (&mut self.input).take(want as u64).read_to_end(buf)?;
        self.eof |= n == 0;
        Ok(n)
    }

    /// The next chunk: about [`BLOCK_BYTES`] of whole lines; `None` at the
    /// end.
    pub fn next_chunk(&mut self) -> std::io::Result<Option<Chunk>> {
        let mut buf = self.spare.pop().unwrap_or_default();
        buf.clear();
        buf.extend_from_slice(&self.carry);
        self.carry.clear();
        // Bytes searched for a line end without finding one.
        let mut searched = 0;
        loop {
            if buf.len() < BLOCK_BYTES && !self.eof {
                let want = BLOCK_BYTES - buf.len();
                self.more(&mut buf, want)?;
                continue;
            }
            if self.eof {
                return Ok((!buf.is_empty()).then_some(Chunk::Lines(buf)));
            }
            if let Some(i) = memchr::memrchr(b'\n', &buf[searched..]) {
                let end = searched + i + 1;
                self.carry.extend_from_slice(&buf[end..]);
                buf.truncate(end);
                return Ok(Some(Chunk::Lines(buf)));
            }
            searched = buf.len();
            if buf.len() > MAX_LINE_BYTES {
                // One line past the limit: consumed through its end, not kept.
                loop {
                    buf.clear();
                    if self.more(&mut buf, BLOCK_BYTES)? == 0 {
                        break;
                    }
                    if let Some(i) = memchr::memchr(b'\n', &buf) {
                        self.carry.extend_from_slice(&buf[i + 1..]);
                        break;
                    }
                }
                self.recycle(Chunk::Lines(buf));
                return Ok(Some(Chunk::TooLong));
            }
            self.more(&mut buf, BLOCK_BYTES)?;
        }
    }
}
