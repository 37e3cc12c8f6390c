//! The parallel read of the raw scrapes: chunks of lines scanned into
//! blocks by the rayon workers, the blocks merged into the columns in file
//! order, the caps held (a block stops at the line that passes one, the
//! merge refuses it and the rest of the file with a finding).

use std::collections::BTreeMap;
use std::io::Read;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

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
/// `size`, when known, sizes the columns once.
///
/// Every worker of the pool takes the next chunk of lines under one lock
/// (the read is sequential), scans it into a block of its own without
/// any lock, then, under a second lock, merges every block now next in
/// file order into the columns (a block scanned ahead of its turn waits).
/// No worker waits for the others between chunks, unless it is four chunks
/// per worker ahead of the merge (memory stays bounded when a worker is
/// held up): with batches and a barrier after each, a worker sat idle
/// while the last chunk of a batch was scanned (1.66-1.84 CPUs busy of 2;
/// docs/performance.md).
///
/// On a rayon worker (many runs audited at once, one per worker) the chunks
/// are read on this thread, one after the other: the runs are the
/// parallelism, and a worker blocked waiting for the pool could leave none
/// to do the work.
pub fn read_with(
    input: impl Read + Send,
    interest: &Interest,
    size: Option<u64>,
) -> std::io::Result<ScrapesRead> {
    let shared = Shared::new(input, size, 4 * rayon::current_num_threads().max(1) as u64);
    if rayon::current_thread_index().is_some() {
        shared.work(interest);
    } else {
        rayon::broadcast(|_| shared.work(interest));
    }
    shared.finish()
}

/// What the workers of [`read_with`] share.
struct Shared<R> {
    reading: Mutex<Reading<R>>,
    merging: Mutex<Merging>,
    /// Once the columns are full nothing more is kept: no chunk is read. A
    /// worker that panics stops the others too (so none waits for its
    /// block).
    stop: AtomicBool,
    /// The chunk merged next.
    merged: AtomicU64,
    /// How far past the merge a worker may read: a worker held up
    /// (descheduled on a busy machine) leaves at most this many blocks
    /// waiting for it, so memory stays bounded.
    lead: u64,
}

impl<R: Read> Shared<R> {
    /// Nothing read yet; workers `lead` chunks past the merge wait.
    fn new(input: R, size: Option<u64>, lead: u64) -> Self {
        Shared {
            reading: Mutex::new(Reading {
                src: Source::new(input),
                seq: 0,
                done: false,
                error: None,
            }),
            merging: Mutex::new(Merging {
                merge: Merge {
                    size,
                    ..Merge::default()
                },
                out: ScrapesRead::default(),
                waiting: BTreeMap::new(),
                next: 0,
                spare: Vec::new(),
            }),
            stop: AtomicBool::new(false),
            merged: AtomicU64::new(0),
            lead,
        }
    }

    /// What the workers read, once they are done: the input's error, if
    /// it failed.
    fn finish(self) -> std::io::Result<ScrapesRead> {
        let Shared {
            reading, merging, ..
        } = self;
        if let Some(e) = reading
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner)
            .error
        {
            return Err(e);
        }
        let Merging {
            mut merge, mut out, ..
        } = merging.into_inner().unwrap_or_else(PoisonError::into_inner);
        merge.finish(&mut out);
        Ok(out)
    }

    /// One worker: the next chunk, scanned into its block, merged in turn.
    fn work(&self, interest: &Interest) {
        let _stops = StopOnPanic(&self.stop);
        let mut block = Block::default();
        let mut used: Option<Chunk> = None;
        while let Some((seq, chunk)) = self.next(used.take()) {
            read_block(&chunk, interest, &mut block);
            used = Some(chunk);
            block = self.merge(seq, block);
        }
    }

    /// The next chunk and its number, once `used` (the chunk before) is
    /// recycled; `None` at the end of the input, on its error or a stop.
    fn next(&self, mut used: Option<Chunk>) -> Option<(u64, Chunk)> {
        loop {
            let mut r = self.reading.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(c) = used.take() {
                r.src.recycle(c);
            }
            if r.done || self.stop.load(Ordering::Relaxed) {
                return None;
            }
            if r.seq >= self.merged.load(Ordering::Acquire) + self.lead {
                drop(r);
                std::thread::sleep(std::time::Duration::from_micros(100));
                continue;
            }
            return match r.src.next_chunk() {
                Ok(Some(c)) => {
                    r.seq += 1;
                    Some((r.seq - 1, c))
                }
                Ok(None) => {
                    r.done = true;
                    None
                }
                Err(e) => {
                    (r.done, r.error) = (true, Some(e));
                    None
                }
            };
        }
    }

    /// Puts block `seq` with the others, merges every one now next, and
    /// returns an emptied block for the next chunk.
    fn merge(&self, seq: u64, block: Block) -> Block {
        let mut m = self.merging.lock().unwrap_or_else(PoisonError::into_inner);
        m.waiting.insert(seq, block);
        m.merge_ready();
        self.merged.store(m.next, Ordering::Release);
        if m.merge.full {
            self.stop.store(true, Ordering::Relaxed);
        }
        m.spare.pop().unwrap_or_default()
    }
}

/// Sets its flag when its thread unwinds from a panic.
struct StopOnPanic<'a>(&'a AtomicBool);

impl Drop for StopOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.store(true, Ordering::Relaxed);
        }
    }
}

/// The input's side of [`read_with`]: chunks handed out in file order.
struct Reading<R> {
    src: Source<R>,
    /// The number of the next chunk.
    seq: u64,
    /// The input ended, or failed.
    done: bool,
    error: Option<std::io::Error>,
}

/// The columns' side of [`read_with`]: blocks merged in file order.
struct Merging {
    merge: Merge,
    out: ScrapesRead,
    /// Blocks scanned ahead of their turn, by chunk number.
    waiting: BTreeMap<u64, Block>,
    /// The chunk merged next.
    next: u64,
    /// Merged blocks, emptied, for the next chunks.
    spare: Vec<Block>,
}

impl Merging {
    /// Merges every waiting block that is next in file order. Past the
    /// columns' caps a block is dropped whole (its bad lines too: the
    /// finding says the rest of the file is not read), whichever worker
    /// scanned it, so what is reported does not depend on the threads.
    fn merge_ready(&mut self) {
        while let Some(mut b) = self.waiting.remove(&self.next) {
            self.next += 1;
            if !self.merge.full {
                self.merge.add(&mut self.out, &mut b);
            }
            b.reset();
            self.spare.push(b);
        }
    }
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

/// The finding of a block the columns refused: its first line read
/// `first` and the line `at` that passed a cap (the same when not known),
/// both in the block, whose first line is `base + 1` of the file.
fn cap_finding(base: u64, first: u64, at: u64) -> Finding {
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
    Finding::new(reading::UNREADABLE_FILE, text)
        .file(FILE)
        .line(base + at)
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
    /// Merges block `b`, the next in file order, while the columns are not
    /// full ([`Merging::merge_ready`] merges nothing after).
    fn add(&mut self, out: &mut ScrapesRead, b: &mut Block) {
        debug_assert!(!self.full, "nothing is merged once the columns are full");
        let base = self.base;
        self.base += b.lines;
        let refused = b.over_cap.is_some() || !out.store.fits(b);
        // The block's first line read (or where it stopped): a refused block
        // is refused whole, and the file is not read from there on, so its
        // problems from there on are not reported either (whichever worker
        // scanned the block and wherever its chunk ends).
        let first = b.scrapes.first().map(|s| s.line).or(b.over_cap);
        let unread_from = first.filter(|_| refused);
        for p in &b.problems {
            if unread_from.is_some_and(|at| p.line >= at) {
                continue;
            }
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
        if refused {
            // The line that passed a cap, when known.
            if let Some(first) = first {
                let at = b.over_cap.unwrap_or(first);
                out.findings.push(cap_finding(base, first, at));
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A worker held up with its chunk leaves the others at most the lead
    /// past the merge: they wait (their blocks are the only ones waiting),
    /// and go on once its block is merged, to the same scrapes as a
    /// sequential read. No hook in the scan: the held-up worker is this
    /// test, which takes chunk 0 and merges it only when told to.
    #[test]
    fn a_worker_held_up_leaves_at_most_the_lead_waiting() {
        let runs = concat!(env!("CARGO_MANIFEST_DIR"), "/sample-artifacts/runs");
        let one = std::fs::read(format!("{runs}/vllm-dp/{FILE}")).expect("sample scrapes");
        let mut input = Vec::new();
        while input.len() < 12 * super::super::source::BLOCK_BYTES {
            input.extend_from_slice(&one);
        }
        let lead = 3;
        let shared = Shared::new(input.as_slice(), None, lead);
        let interest = Interest::default();
        let (first, chunk) = shared.next(None).expect("a first chunk");
        assert_eq!(first, 0);
        let merged_by_other = AtomicU64::new(0);
        let waiting = || {
            let m = shared
                .merging
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            m.waiting.len() as u64
        };
        // Chunks 1 to lead - 1, then it waits for chunk 0: how many it
        // had merged, and how many blocks waited, once it stopped. Chunk 0
        // is merged whatever they are, so a failure cannot leave the other
        // worker waiting for ever.
        let at_bound = std::thread::scope(|s| {
            s.spawn(|| {
                let (mut block, mut used) = (Block::default(), None);
                while let Some((seq, c)) = shared.next(used.take()) {
                    read_block(&c, &interest, &mut block);
                    used = Some(c);
                    block = shared.merge(seq, block);
                    merged_by_other.fetch_add(1, Ordering::SeqCst);
                }
            });
            let t = std::time::Instant::now();
            while merged_by_other.load(Ordering::SeqCst) < lead - 1 && t.elapsed().as_secs() < 60 {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
            let at_bound = (merged_by_other.load(Ordering::SeqCst), waiting());
            let mut block = Block::default();
            read_block(&chunk, &interest, &mut block);
            shared.merge(0, block);
            at_bound
        });
        assert_eq!(at_bound, (lead - 1, lead - 1));
        assert_eq!(waiting(), 0);
        let chunks = merged_by_other.load(Ordering::SeqCst) + 1;
        assert!(chunks >= 12, "{chunks} chunks");
        let read = shared.finish().expect("read");
        let alone = read_from(input.as_slice()).expect("read alone");
        assert_eq!(read.scrapes, alone.scrapes);
        assert_eq!(read.findings, alone.findings);
    }
}
