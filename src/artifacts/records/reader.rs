//! The block reader: the input cut into blocks of about 1 MiB that end at a
//! line end, parsed by the rayon workers and merged back in file order, with
//! every line numbered in the file.

use std::collections::BTreeMap;
use std::io::{self, Read};
use std::sync::{Mutex, PoisonError};

use super::serde_path::{bad_line_finding, parse_line, LineOutcome, LineText};
use super::{fast, Metric, Phase, Record, RecordsRead, BLOCK_BYTES, FILE, MAX_LINE_BYTES};
use crate::findings::{not_listed, reading, Finding, MAX_LISTED};

/// [`super::read_from`], told the input's size so the record vector is sized once
/// (from the first block's bytes per line) instead of doubling: doubling a
/// vector of hundreds of thousands of records briefly holds two of them.
pub fn read_sized(input: &mut (dyn Read + Send), size: Option<u64>) -> io::Result<RecordsRead> {
    // On a rayon worker (many runs audited at once, one per worker), parse
    // on this thread: blocking a worker while it waits for the pool could
    // leave no worker to do the waiting-for work. The runs are the parallelism.
    if rayon::current_thread_index().is_some() {
        return read_sequential(input);
    }
    let shared = Mutex::new(Shared {
        blocks: BlockReader::new(input),
        error: None,
    });
    let merging = Mutex::new(Merging::new(size));
    // Every worker of the pool takes the next block under the lock, reads it
    // itself and parses it (the kernel's copy lands in the cache of the core
    // that parses it), then merges what is next in file order under a second
    // lock: no thread only reads or only merges, and none wakes another per
    // block.
    rayon::broadcast(|_| {
        let mut spare: Option<Vec<u8>> = None;
        loop {
            let block = {
                let mut g = shared.lock().unwrap_or_else(PoisonError::into_inner);
                if let Some(b) = spare.take() {
                    g.blocks.recycle(b);
                }
                if g.blocks.eof || g.error.is_some() {
                    break;
                }
                match g.blocks.next_block() {
                    Ok(Some(b)) => b,
                    Ok(None) => continue,
                    Err(e) => {
                        g.error = Some(e);
                        break;
                    }
                }
            };
            parse_and_merge(&block, &merging);
            spare = Some(block.bytes);
        }
    });
    let merge = merging
        .into_inner()
        .unwrap_or_else(PoisonError::into_inner)
        .merge;
    let shared = shared.into_inner().unwrap_or_else(PoisonError::into_inner);
    if let Some(e) = shared.error {
        return Err(e);
    }
    Ok(merge.finish(&shared.blocks))
}

/// [`read_sized`] for a file: every worker reads the next block of the file
/// by its position (`pread`), with no lock held, so the kernel's copies of
/// two blocks run at once; only cutting a read at its last line end (the
/// carried start of a line put before it, a search from its end) is done
/// in turn, in file order. The blocks, and so the records and findings,
/// are those [`read_sized`] makes of the same bytes.
///
/// A read shorter than a block is the end of the file: what the file gained
/// after it, while it was read, is not read.
#[cfg(unix)]
pub fn read_file(file: &std::fs::File, size: Option<u64>) -> io::Result<RecordsRead> {
    if rayon::current_thread_index().is_some() {
        return read_sequential(&mut &*file);
    }
    let mut no_input = io::empty();
    let blocks = FileBlocks {
        file,
        turns: Mutex::new(Turns {
            blocks: BlockReader::new(&mut no_input),
            next: 0,
            short: false,
            error: None,
        }),
        turn_taken: std::sync::Condvar::new(),
        claims: std::sync::atomic::AtomicU64::new(0),
    };
    let merging = Mutex::new(Merging::new(size));
    rayon::broadcast(|_| {
        let mut spare = Vec::new();
        loop {
            match blocks.next(&mut spare) {
                FileBlock::Block(block) => {
                    parse_and_merge(&block, &merging);
                    spare = block.bytes;
                }
                FileBlock::NoLineEnd => {}
                FileBlock::End => break,
            }
        }
    });
    let merge = merging
        .into_inner()
        .unwrap_or_else(PoisonError::into_inner)
        .merge;
    let turns = blocks
        .turns
        .into_inner()
        .unwrap_or_else(PoisonError::into_inner);
    if let Some(e) = turns.error {
        return Err(e);
    }
    Ok(merge.finish(&turns.blocks))
}

/// [`read_file`]'s blocks: read by position, cut in turn.
#[cfg(unix)]
struct FileBlocks<'f, 'a> {
    file: &'f std::fs::File,
    turns: Mutex<Turns<'a>>,
    /// Signalled when a block's turn is over.
    turn_taken: std::sync::Condvar,
    /// The next block to read (block k starts at `k * BLOCK_BYTES`).
    claims: std::sync::atomic::AtomicU64,
}

/// What a worker of [`read_file`] got.
#[cfg(unix)]
enum FileBlock {
    Block(Block),
    /// Its read ended no line (part of a long one): nothing to parse.
    NoLineEnd,
    /// The file ended, or a read failed.
    End,
}

#[cfg(unix)]
impl FileBlocks<'_, '_> {
    /// The carried start of a line goes before a read, in this much room.
    const ROOM: usize = 64 << 10;
    const BUFFER: usize = Self::ROOM + READ_ALIGN + BLOCK_BYTES;

    /// Reads the next block of the file into `spare` (a buffer the worker
    /// had; taken) and cuts it in its turn.
    fn next(&self, spare: &mut Vec<u8>) -> FileBlock {
        use std::os::unix::fs::FileExt;
        let k = self
            .claims
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut buf = std::mem::take(spare);
        if buf.len() != Self::BUFFER {
            buf = vec![0u8; Self::BUFFER];
        }
        let base = buf.as_ptr() as usize + Self::ROOM;
        let read_at = Self::ROOM + (READ_ALIGN - base % READ_ALIGN) % READ_ALIGN;
        let read = read_at_full(
            |b, at| self.file.read_at(b, at),
            &mut buf[read_at..read_at + BLOCK_BYTES],
            k.saturating_mul(BLOCK_BYTES as u64),
        );
        // Block k is cut after block k - 1; every block claimed is cut, so
        // no turn is waited for in vain.
        let mut g = self.turns.lock().unwrap_or_else(PoisonError::into_inner);
        while g.next != k {
            g = (self.turn_taken.wait(g)).unwrap_or_else(PoisonError::into_inner);
        }
        g.next += 1;
        let block = match read {
            _ if g.blocks.eof || g.error.is_some() => None,
            Err(e) => {
                g.error = Some(e);
                None
            }
            Ok(n) => {
                // After a short read, the end.
                let n = if g.short { 0 } else { n };
                g.short = n < BLOCK_BYTES;
                g.blocks
                    .next_block_read(std::mem::take(&mut buf), read_at, n)
            }
        };
        let end = g.blocks.eof || g.error.is_some();
        // A buffer cut into nothing went back to the pool (or became the
        // carry): the worker takes one for its next read.
        if buf.is_empty() && block.is_none() {
            buf = g.blocks.pool.pop().unwrap_or_default();
        }
        *spare = buf;
        drop(g);
        self.turn_taken.notify_all();
        match block {
            Some(b) => FileBlock::Block(b),
            None if end => FileBlock::End,
            None => FileBlock::NoLineEnd,
        }
    }
}

/// [`read_sized`] elsewhere: the file read in turn.
#[cfg(not(unix))]
pub fn read_file(file: &std::fs::File, size: Option<u64>) -> io::Result<RecordsRead> {
    read_sized(&mut &*file, size)
}

/// Fills `buf` from position `at` by `read_at` until it is full or the
/// input ends; returns the bytes read.
#[cfg(unix)]
fn read_at_full(
    read_at: impl Fn(&mut [u8], u64) -> io::Result<usize>,
    buf: &mut [u8],
    at: u64,
) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match read_at(&mut buf[n..], at + n as u64) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// The cutting of [`read_file`]'s blocks, taken in turn.
#[cfg(unix)]
struct Turns<'a> {
    blocks: BlockReader<'a>,
    /// The block whose turn it is.
    next: u64,
    /// A read came back short: the file ended there.
    short: bool,
    error: Option<io::Error>,
}

/// Parses `block` and merges every parsed block now next in file order.
fn parse_and_merge(block: &Block, merging: &Mutex<Merging>) {
    let parsed = parse_block(block);
    merging.lock().unwrap_or_else(PoisonError::into_inner).put(
        block.seq,
        block.text().len() as u64,
        parsed,
    );
}

/// Parsed blocks on their way into the records, in file order.
struct Merging {
    merge: Merge,
    /// Blocks parsed before the ones ahead of them in the file.
    waiting: BTreeMap<u64, (u64, Parsed)>,
    /// The block merged next.
    next_seq: u64,
    /// The input's size, if known (see [`read_sized`]).
    size: Option<u64>,
}

impl Merging {
    fn new(size: Option<u64>) -> Merging {
        Merging {
            merge: Merge::default(),
            waiting: BTreeMap::new(),
            next_seq: 0,
            size,
        }
    }

    /// Takes block `seq` (`len` bytes) and merges every block now next.
    fn put(&mut self, seq: u64, len: u64, parsed: Parsed) {
        self.waiting.insert(seq, (len, parsed));
        while let Some((len, parsed)) = self.waiting.remove(&self.next_seq) {
            self.next_seq += 1;
            self.merge.add(parsed);
            let records = &mut self.merge.out.records;
            // After the first block, size the records from its bytes per
            // record.
            if self.next_seq == 1 {
                if let Some(size) = self.size.filter(|_| !records.is_empty()) {
                    let per_record = len as f64 / records.len() as f64;
                    let estimate = (size as f64 / per_record.max(1.0) * 1.02) as usize + 64;
                    records.reserve(estimate.saturating_sub(records.len()));
                }
            }
        }
    }
}

/// The block reader the workers share, and its error.
struct Shared<'a> {
    blocks: BlockReader<'a>,
    error: Option<io::Error>,
}

/// The same reading, block by block on the calling thread.
fn read_sequential(input: &mut (dyn Read + Send)) -> io::Result<RecordsRead> {
    let mut merge = Merge::default();
    let mut blocks = BlockReader::new(input);
    while !blocks.eof {
        if let Some(b) = blocks.next_block()? {
            merge.add(parse_block(&b));
            blocks.recycle(b.bytes);
        }
    }
    Ok(merge.finish(&blocks))
}

/// Puts parsed blocks together, in file order, and numbers their lines: a
/// block's lines are numbered from 1 while it is parsed (nobody has counted
/// the lines before it yet).
#[derive(Default)]
struct Merge {
    out: RecordsRead,
    /// Lines of the blocks merged so far.
    lines: u64,
    /// For each block merged, the lines of the blocks before it.
    lines_before: Vec<u64>,
    /// Bad lines with a finding of their own, and those only counted.
    listed_bad: usize,
    unlisted_bad: u64,
    /// Impossible values with a finding of their own, and those only counted.
    listed_impossible: usize,
    unlisted_impossible: u64,
}

impl Merge {
    fn add(&mut self, mut parsed: Parsed) {
        // Line 1 of the block is this line of the file.
        let first = 1 + self.lines + parsed.skipped_before;
        for r in &mut parsed.records {
            r.line += first - 1;
        }
        self.out.records.append(&mut parsed.records);
        self.out.through_shapes += parsed.through_shapes;
        for (line, m, v, why, phase) in parsed.impossible {
            *self.out.refused.entry((m, phase)).or_default() += 1;
            if self.listed_impossible >= MAX_LISTED {
                self.unlisted_impossible += 1;
                continue;
            }
            self.listed_impossible += 1;
            self.out.findings.push(
                Finding::new(
                    reading::IMPOSSIBLE_VALUE,
                    if v == super::NOT_A_NUMBER {
                        format!(
                            "{} is not a number: {why}; it is kept out of every figure",
                            m.tag()
                        )
                    } else {
                        format!("{} is {v}: {why}; it is kept out of every figure", m.tag())
                    },
                )
                .file(FILE)
                .line(first + line - 1)
                .field(format!("metrics.{}", m.tag())),
            );
        }
        for bad in parsed.bad {
            // Past the cap a bad line is only counted: memory stays bounded
            // however many there are.
            if self.listed_bad >= MAX_LISTED && !bad.last_unterminated {
                self.unlisted_bad += 1;
                continue;
            }
            self.listed_bad += 1;
            self.out.findings.push(bad_line_finding(
                &bad.bytes,
                first + bad.line - 1,
                bad.last_unterminated,
            ));
        }
        self.lines_before.push(self.lines);
        self.lines += parsed.lines;
    }

    fn finish(mut self, blocks: &BlockReader) -> RecordsRead {
        for &(seq, skipped_before) in &blocks.oversized {
            // The first line after the blocks before it and the long lines
            // skipped before it.
            let before = usize::try_from(seq)
                .ok()
                .and_then(|i| self.lines_before.get(i))
                .copied()
                .unwrap_or(self.lines);
            let line = 1 + before + skipped_before;
            self.out.findings.push(
                Finding::new(
                    reading::OVERSIZED_LINE,
                    format!(
                        "line {line} is longer than {} MiB; it is skipped",
                        MAX_LINE_BYTES >> 20
                    ),
                )
                .file(FILE)
                .line(line),
            );
        }
        self.out.findings.sort_by_key(|f| f.line);
        if self.unlisted_impossible > 0 {
            self.out.findings.push(not_listed(
                reading::IMPOSSIBLE_VALUE,
                Some(FILE.to_string()),
                self.unlisted_impossible,
            ));
        }
        if self.unlisted_bad > 0 {
            self.out.findings.push(not_listed(
                reading::INVALID_RECORD,
                Some(FILE.to_string()),
                self.unlisted_bad,
            ));
        }
        self.out.lines = self.lines + blocks.skipped;
        self.out.bytes = blocks.bytes;
        self.out
    }
}

struct Block {
    /// Position in the file, to restore order after parallel parsing.
    seq: u64,
    /// Lines longer than [`MAX_LINE_BYTES`] skipped before this block.
    skipped_before: u64,
    /// The input ended with this block: its last line may be cut off.
    last: bool,
    /// A reusable buffer; the block is `bytes[start..end]`.
    bytes: Vec<u8>,
    start: usize,
    end: usize,
}

impl Block {
    fn text(&self) -> &[u8] {
        &self.bytes[self.start..self.end]
    }
}

/// Where reads land in a buffer. The kernel copies from the page cache
/// about twice as fast to a 64-byte-aligned address as to one 16 bytes off
/// (`examples/read_alignment.rs`: 0.060 s against 0.123 s per GB here), and
/// a read lands right after the carried start of a line, at any offset,
/// unless placed.
const READ_ALIGN: usize = 64;

/// Cuts the input into blocks that end at a line end.
struct BlockReader<'a> {
    input: &'a mut (dyn Read + Send),
    seq: u64,
    /// The start of a line the last block did not finish.
    carry: Vec<u8>,
    /// Buffers to reuse, each fully initialized (`len()` is their size), so
    /// reads go straight into them without zeroing.
    pool: Vec<Vec<u8>>,
    bytes: u64,
    eof: bool,
    skipping_long_line: bool,
    /// Lines longer than [`MAX_LINE_BYTES`] skipped so far.
    skipped: u64,
    /// Each such line: the block that follows it and the long lines skipped
    /// before it (its line number is known once the blocks are counted).
    oversized: Vec<(u64, u64)>,
}

impl<'a> BlockReader<'a> {
    fn new(input: &'a mut (dyn Read + Send)) -> Self {
        BlockReader {
            input,
            seq: 0,
            carry: Vec::new(),
            pool: Vec::new(),
            bytes: 0,
            eof: false,
            skipping_long_line: false,
            skipped: 0,
            oversized: Vec::new(),
        }
    }

    /// Reads into `buf` until it is full or the input ends; returns the bytes
    /// read.
    fn fill(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut n = 0;
        while n < buf.len() {
            match self.input.read(&mut buf[n..]) {
                Ok(0) => break,
                Ok(k) => n += k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(n)
    }

    /// The next block, or `None` when this read produced no complete line yet.
    /// A buffer for the next read, holding the carried bytes: `(buffer,
    /// where the carried bytes start, where the read goes)`.
    #[inline]
    fn buffer(&mut self) -> (Vec<u8>, usize, usize) {
        if self.carry.len() >= BLOCK_BYTES {
            // A long line in progress: read on after it in place rather
            // than copy it into a fresh buffer per read.
            let mut buf = std::mem::take(&mut self.carry);
            let read_at = buf.len();
            buf.resize(read_at + BLOCK_BYTES, 0);
            return (buf, 0, read_at);
        }
        let size = BLOCK_BYTES + self.carry.len() + READ_ALIGN;
        let mut buf = match self.pool.pop() {
            Some(b) if b.len() >= size => b,
            // A new buffer comes zeroed from the allocator (`calloc`:
            // fresh pages, no fill), not filled here: a small file
            // would pay for filling 1.5 MiB it never uses.
            _ => vec![0u8; size.max(BLOCK_BYTES + BLOCK_BYTES / 2)],
        };
        // Put the carried bytes where the read after them is aligned.
        let base = buf.as_ptr() as usize + self.carry.len();
        let start = (READ_ALIGN - base % READ_ALIGN) % READ_ALIGN;
        let read_at = start + self.carry.len();
        buf[start..read_at].copy_from_slice(&self.carry);
        self.carry.clear();
        (buf, start, read_at)
    }

    fn next_block(&mut self) -> io::Result<Option<Block>> {
        let (mut buf, start, read_at) = self.buffer();
        let n = self.fill(&mut buf[read_at..read_at + BLOCK_BYTES])?;
        Ok(self.cut(buf, start, read_at, n))
    }

    /// [`BlockReader::next_block`] for `n` bytes already read, at `read_at`
    /// of `buf` (a read of the input's next bytes, done by the caller): the
    /// carried start of a line is put before them, in `buf`'s first
    /// `read_at` bytes when it fits there.
    fn next_block_read(&mut self, mut buf: Vec<u8>, read_at: usize, n: usize) -> Option<Block> {
        let carried = self.carry.len();
        if carried <= read_at {
            let start = read_at - carried;
            buf[start..read_at].copy_from_slice(&self.carry);
            self.carry.clear();
            return self.cut(buf, start, read_at, n);
        }
        // A long line in progress: the read goes after it.
        let mut line = std::mem::take(&mut self.carry);
        let at = line.len();
        line.extend_from_slice(&buf[read_at..read_at + n]);
        self.recycle(buf);
        self.cut(line, 0, at, n)
    }

    /// Cuts `buf[start..read_at + n]` (the carried bytes, then `n` bytes
    /// just read; none at the end of the input) at its last line end: the
    /// block before it, the rest carried. `None` when no line ends in it.
    fn cut(
        &mut self,
        mut buf: Vec<u8>,
        mut start: usize,
        read_at: usize,
        n: usize,
    ) -> Option<Block> {
        let mut end = read_at + n;
        self.bytes += n as u64;
        self.eof = n == 0;
        if self.skipping_long_line {
            match memchr::memchr(b'\n', &buf[start..end]) {
                Some(i) => {
                    self.skipping_long_line = false;
                    self.skipped += 1;
                    start += i + 1;
                }
                None => {
                    self.recycle(buf);
                    return None;
                }
            }
        }
        let cut = if self.eof {
            Some(end)
        } else {
            memchr::memrchr(b'\n', &buf[start..end]).map(|i| start + i + 1)
        };
        match cut {
            Some(cut) => {
                self.carry.extend_from_slice(&buf[cut..end]);
                end = cut;
                // The line carried from earlier reads may have passed the
                // limit in this one (the other lines are shorter than a read).
                let first = memchr::memchr(b'\n', &buf[start..end]).unwrap_or(end - start);
                if first > MAX_LINE_BYTES {
                    self.oversized.push((self.seq, self.skipped));
                    self.skipped += 1;
                    start = (start + first + 1).min(end);
                }
                if end == start {
                    self.recycle(buf);
                    return None;
                }
                let block = Block {
                    seq: self.seq,
                    skipped_before: self.skipped,
                    last: self.eof,
                    bytes: buf,
                    start,
                    end,
                };
                self.seq += 1;
                Some(block)
            }
            None if end - start > MAX_LINE_BYTES => {
                self.oversized.push((self.seq, self.skipped));
                self.skipping_long_line = true;
                self.recycle(buf);
                None
            }
            None => {
                // No line end yet: keep everything for the next read.
                if start == 0 && self.carry.is_empty() {
                    buf.truncate(end);
                    self.carry = buf;
                } else {
                    self.carry.extend_from_slice(&buf[start..end]);
                    self.recycle(buf);
                }
                None
            }
        }
    }

    /// Keeps a block-sized buffer for reuse; drops one grown for a long line.
    fn recycle(&mut self, buf: Vec<u8>) {
        if buf.len() <= 2 * BLOCK_BYTES {
            self.pool.push(buf);
        }
    }
}

/// A value refused as impossible: (line within the block, metric, value,
/// why, the record's phase).
type Refused = (u64, Metric, f64, &'static str, Phase);

/// One block's records and bad lines, in line order, its lines numbered
/// from 1.
#[derive(Default)]
struct Parsed {
    records: Vec<Record>,
    bad: Vec<BadLine>,
    /// Values outside their metric's domain, kept out of the records:
    /// (line within the block, metric, value, why, the record's phase).
    impossible: Vec<Refused>,
    /// Lines in the block.
    lines: u64,
    /// The block's [`Block::skipped_before`].
    skipped_before: u64,
    /// Records read through a line shape.
    through_shapes: u64,
}

/// Takes every value outside its metric's domain ([`Metric::domain`]) out
/// of `r` (absent: unknown, kept out of every figure), noting it.
fn refuse_impossible(r: &mut Record, line: u64, out: &mut Vec<Refused>) {
    for &m in Metric::ALL {
        if let Some(v) = r.values.get(m) {
            if let Some(why) = m.domain().refuses(v) {
                r.values.set(m, None);
                out.push((line, m, v, why, r.phase));
            }
        }
    }
}

/// A line that is not a record, kept until its number is known.
struct BadLine {
    /// Line within its block, from 1.
    line: u64,
    /// The line, trimmed.
    bytes: Vec<u8>,
    /// The last line of the input, without a line end: it may be cut off.
    last_unterminated: bool,
}

fn parse_block(b: &Block) -> Parsed {
    let block = b.text();
    // One UTF-8 check for the whole block; the lines of a block that fails it
    // are parsed as bytes, so only the bad line is reported.
    let text = simdutf8::basic::from_utf8(block).ok();
    let mut out = Parsed {
        records: Vec::with_capacity(block.len() / 1024 + 1),
        skipped_before: b.skipped_before,
        ..Parsed::default()
    };
    let mut line = 1;
    let mut start = 0;
    let mut shapes = fast::Shapes::default();
    while start < block.len() {
        let (end, next, terminated) = match memchr::memchr(b'\n', &block[start..]) {
            Some(i) => (start + i, start + i + 1, true),
            None => (block.len(), block.len(), false),
        };
        // A '\n' byte is always a char boundary, so slicing the text is safe.
        let this = match text {
            Some(t) => LineText::Text(&t[start..end]),
            None => LineText::Bytes(&block[start..end]),
        };
        match parse_line(this, line, &mut shapes) {
            LineOutcome::Record(mut r) => {
                refuse_impossible(&mut r, line, &mut out.impossible);
                out.records.push(r);
            }
            LineOutcome::Blank => {}
            LineOutcome::Bad => out.bad.push(BadLine {
                line,
                bytes: block[start..end].trim_ascii().to_vec(),
                last_unterminated: b.last && !terminated,
            }),
        }
        line += 1;
        start = next;
    }
    out.lines = line - 1;
    out.through_shapes = shapes.hits();
    out
}
