//! The parallel read of the raw scrapes: chunks of lines scanned into
//! blocks by the rayon workers, the blocks merged into the columns in file
//! order, the caps held (a block stops at the line that passes one, the
//! merge refuses it and the rest of the file with a finding).

use std::io::Read;

use rayon::prelude::*;

use super::block::{Block, Interest, Problem};
use super::source::{Chunk, Source};
use super::{reference, scan, store, Scrape, ScrapesRead, FILE};
use crate::artifacts::records::MAX_LINE_BYTES;
use crate::findings::{not_listed, reading, Finding, MAX_LISTED};

/// Reads the raw-scrape JSON lines, every family kept. Bad lines become
/// findings.
pub fn read_from(input: impl Read + Send) -> std::io::Result<ScrapesRead> {
    read_with(input, &Interest::default(), None)
}

/// Reads the raw-scrape JSON lines, keeping the families of `interest`;
/// `size`, when known, sizes the columns once. Blocks are scanned by the
/// rayon workers a batch at a time while the batch before is merged (in
/// file order) and the next one read.
pub fn read_with(
    input: impl Read + Send,
    interest: &Interest,
    size: Option<u64>,
) -> std::io::Result<ScrapesRead> {
    let mut src = Source::new(input);
    let mut out = ScrapesRead::default();
    let mut merge = Merge {
        size,
        ..Merge::default()
    };
    let batch = 2 * rayon::current_num_threads().max(1);
    let mut chunks = src.batch(batch)?;
    // Two sets of blocks: one scanned while the other is merged; each
    // block's allocations reused from chunk to chunk.
    let (mut scanning, mut parsed): (Vec<Block>, Vec<Block>) = Default::default();
    while !chunks.is_empty() || !parsed.is_empty() {
        scanning.resize_with(chunks.len(), Block::default);
        let ((), next) = rayon::join(
            || {
                (chunks.par_iter())
                    .zip(scanning.par_iter_mut())
                    .for_each(|(c, b)| read_block(c, interest, b));
            },
            || {
                for b in parsed.iter_mut() {
                    merge.add(&mut out, b);
                    b.reset();
                }
                src.batch(batch)
            },
        );
        for c in chunks.drain(..) {
            src.recycle(c);
        }
        std::mem::swap(&mut scanning, &mut parsed);
        chunks = next?;
        if merge.full {
            // Past a cap nothing more is kept: the rest is not read either.
            break;
        }
    }
    merge.finish(&mut out);
    Ok(out)
}

/// Reads a chunk's lines (numbered from 1 in the block) into the empty
/// block `b`.
pub(super) fn read_block(chunk: &Chunk, interest: &Interest, b: &mut Block) {
    let bytes = match chunk {
        Chunk::TooLong => {
            b.lines = 1;
            b.problems.push(Problem {
                line: 1,
                code: reading::OVERSIZED_LINE,
                message: String::new(),
                field: None,
            });
            return;
        }
        Chunk::Lines(bytes) => bytes.as_slice(),
    };
    b.bytes = bytes.len();
    let mut start = 0;
    while start < bytes.len() {
        // A line that fits a shape: its end is where the shape's is, and
        // it is the shape's text (valid UTF-8) around ASCII numbers, so it
        // is neither searched for its end nor checked for UTF-8.
        let mark = b.mark();
        if let Some(next) = scan::read_shaped(bytes, start, b.lines + 1, b) {
            if next - start <= MAX_LINE_BYTES {
                b.lines += 1;
                start = next;
                continue;
            }
            // Past the limit (its trailing blanks): taken back, and
            // refused below.
            b.rewind(mark);
            b.scrapes.pop();
        }
        let end = memchr::memchr(b'\n', &bytes[start..]).map_or(bytes.len(), |i| start + i);
        let terminated = end < bytes.len();
        b.lines += 1;
        let no = b.lines;
        let (from, to) = (start, end);
        start = end + 1;
        if to - from > MAX_LINE_BYTES {
            b.problems.push(Problem {
                line: no,
                code: reading::OVERSIZED_LINE,
                message: String::new(),
                field: None,
            });
            continue;
        }
        let raw = bytes[from..to].trim_ascii();
        if raw.is_empty() {
            continue;
        }
        let mark = b.mark();
        let fast = simdutf8::basic::from_utf8(raw)
            .ok()
            .and_then(|line| scan::read_scanned(line, no, b, interest));
        if fast.is_none() {
            b.rewind(mark);
            if !b.names_full() {
                reference::read_line(raw, no, terminated, b, interest);
            }
        }
        if b.names_full() {
            // Ever-new label sets: the rest of the chunk is not read (the
            // merge refuses the block, naming where), so a block's memory
            // follows the cap, not a line of a million sets.
            b.over_cap = Some(no);
            break;
        }
    }
    b.keep_texts(bytes);
    let (mut arena, mut at) = (std::mem::take(&mut b.arena), std::mem::take(&mut b.at));
    store::code_rows(b, &mut arena, &mut at);
    (b.arena, b.at) = (arena, at);
}

/// Blocks joining the columns in file order.
#[derive(Default)]
struct Merge {
    /// The input's size, if known.
    size: Option<u64>,
    /// Lines before the next block.
    base: u64,
    /// Bad lines past the cap, only counted (bounded memory).
    unlisted: u64,
    /// Whether the columns are full (32-bit ids): later scrapes are not read.
    full: bool,
}

impl Merge {
    fn add(&mut self, out: &mut ScrapesRead, b: &mut Block) {
        let base = self.base;
        self.base += b.lines;
        for p in &b.problems {
            let line = base + p.line;
            if out.findings.len() >= MAX_LISTED {
                self.unlisted += 1;
                continue;
            }
            let f = if p.code == reading::OVERSIZED_LINE {
                let text = format!(
                    "line {line} is longer than {} MiB; it is skipped",
                    MAX_LINE_BYTES >> 20
                );
                Finding::new(p.code, text)
            } else {
                Finding::new(p.code, format!("line {line}: {}", p.message))
            };
            let f = f.file(FILE).line(line);
            out.findings.push(match &p.field {
                Some(field) => f.field(field.clone()),
                None => f,
            });
        }
        if self.full || b.over_cap.is_some() || !out.store.fits(b) {
            // The block's first line read (or where it stopped): the block
            // is refused whole; the line that passed a cap, when known.
            let first = b.scrapes.first().map(|s| s.line).or(b.over_cap);
            if let Some(first) = first.filter(|_| !self.full) {
                let at = b.over_cap.unwrap_or(first);
                let lost = if at == first {
                    "this line and the rest of the file are not read".to_string()
                } else {
                    format!("the file is not read from line {} on", base + first)
                };
                let text = format!(
                    "line {}: more samples (2^32), distinct label sets ({}), families ({}), \
                     endpoints ({}) or buckets ({} in a series, {} in all bounds sets) than the \
                     reader holds; {lost}",
                    base + at,
                    store::MAX_LABEL_SETS,
                    store::MAX_FAMILIES,
                    store::MAX_ENDPOINTS,
                    store::MAX_BUCKETS,
                    store::MAX_BOUND_TEXTS
                );
                out.findings.push(
                    Finding::new(reading::UNREADABLE_FILE, text)
                        .file(FILE)
                        .line(base + at),
                );
            }
            self.full = true;
            return;
        }
        if base == 0 {
            if let Some(size) = self.size.filter(|_| b.bytes > 0) {
                out.store.reserve_for(b, size as f64 / b.bytes as f64);
            }
        }
        for m in out.store.merge(b) {
            out.scrapes.push(Scrape {
                endpoint: m.endpoint,
                timestamp_ns: m.timestamp_ns,
                request_sent_ns: m.request_sent_ns,
                line: base + m.line,
                layout: m.layout,
                first_row: m.first_row,
                phase: m.phase,
            });
        }
    }

    fn finish(&mut self, out: &mut ScrapesRead) {
        if self.unlisted > 0 {
            out.findings.push(not_listed(
                reading::INVALID_RECORD,
                Some(FILE.into()),
                self.unlisted,
            ));
        }
        out.store.finish();
        out.scrapes.shrink_to_fit();
        debug_assert!(out.scrapes.windows(2).all(|w| w[0].line < w[1].line));
    }
}
