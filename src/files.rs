//! Filesystem rules every reader and writer follows:
//!
//! - **Reading**: only regular files (a symlink to one is followed). A FIFO,
//!   a device or a socket in place of an artifact, a config or a claims file
//!   is refused before it is opened, so nothing ever blocks on it.
//! - **Writing**: no output path is inside an audited run. The path is
//!   resolved first (`..` and every symlink, also one that dangles, also in
//!   the parts that do not exist yet) and refused before anything is created
//!   ([`Protected`]).
//! - **Replacing**: a regular file (or a path that does not exist) is
//!   written to a temporary file beside it, named
//!   `.artifact-check-XXXXXX.tmp`, then renamed over it, so a reader never
//!   sees half a report; the file gets the usual permissions (0666 less the
//!   umask). A symlink to a regular file keeps its link: its target is
//!   replaced. A device, a FIFO or a socket (`/dev/null`, `/dev/stdout`, a
//!   named pipe) is written directly, never replaced.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Component, Path, PathBuf};

/// Why an output could not be written.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    /// The path is, or is inside, an audited run directory.
    #[error("refusing to write {out}: it is inside the audited run directory {run}")]
    InsideRun {
        /// The output path, resolved.
        out: PathBuf,
        /// The run directory, resolved.
        run: PathBuf,
    },
    /// The path is a file the audit reads from a run (the same device and
    /// inode: a symlink out of the run, a hard link), or a directory that
    /// is a run under another name (a bind mount).
    #[error("refusing to write {out}: it is {what} of the audited run directory {run}")]
    AliasOfRun {
        /// The output path, resolved.
        out: PathBuf,
        /// What it is to the run.
        what: &'static str,
        /// The run directory, resolved.
        run: PathBuf,
    },
    /// An I/O error on a named path.
    #[error("{path}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The error.
        #[source]
        source: io::Error,
    },
}

impl OutputError {
    fn io(path: &Path) -> impl FnOnce(io::Error) -> OutputError + '_ {
        move |source| OutputError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// What kind of file `meta` is, for a message ("a FIFO", ...).
pub fn kind(meta: &fs::Metadata) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        let t = meta.file_type();
        if t.is_fifo() {
            return "a FIFO (named pipe)";
        }
        if t.is_socket() {
            return "a socket";
        }
        if t.is_char_device() {
            return "a character device";
        }
        if t.is_block_device() {
            return "a block device";
        }
    }
    if meta.is_dir() {
        "a directory"
    } else if meta.is_file() {
        "a regular file"
    } else {
        "not a regular file"
    }
}

/// Opens `path` for reading if it is a regular file (after following
/// symlinks); anything else is an error that says what it is, returned
/// before the file is opened (so a FIFO never blocks).
///
/// It is opened without blocking (`O_NONBLOCK`, which a file on disk
/// ignores), so a "regular" file whose reads wait for data (`/proc/kmsg`)
/// fails its first read instead of hanging the audit; what was opened is
/// checked again (the path could have changed in between).
pub fn open_regular(path: &Path) -> io::Result<File> {
    let not_regular = |meta: &fs::Metadata| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("is {}, not a regular file; not read", kind(meta)),
        )
    };
    let meta = fs::metadata(path)?;
    if !meta.is_file() {
        return Err(not_regular(&meta));
    }
    let mut options = OpenOptions::new();
    options.read(true);
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NONBLOCK);
    }
    let file = options.open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(not_regular(&meta));
    }
    Ok(file)
}

/// Reads a regular file (see [`open_regular`]) of at most `limit` bytes into
/// a string; a larger one is an error that says the limit, and is not read
/// past it (memory follows the limit, not the file).
pub fn read_regular_to_string(path: &Path, limit: u64) -> io::Result<String> {
    let mut s = String::new();
    let file = open_regular(path)?;
    io::Read::read_to_string(&mut io::Read::take(file, limit + 1), &mut s).map_err(|e| {
        if e.kind() == io::ErrorKind::WouldBlock {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "its read would wait for data (not a file on disk); not read",
            )
        } else {
            e
        }
    })?;
    if s.len() as u64 > limit {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("is larger than {limit} bytes, the most this input may be; not read"),
        ));
    }
    Ok(s)
}

/// The most a configuration or claims file may be (bytes): a settings file
/// is a few kB; the limit keeps a wrong path from costing memory.
pub const MAX_SETTINGS_BYTES: u64 = 16 << 20;

/// The most a `--baseline` report may be (bytes): a JSON report of about
/// a million findings.
pub const MAX_BASELINE_BYTES: u64 = 512 << 20;

/// `path` made absolute with every `.`, `..` and symlink resolved, as the
/// kernel would on open (a dangling symlink's target included), also where
/// the path does not exist yet.
pub fn resolve(path: &Path) -> io::Result<PathBuf> {
    let abs = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()?.join(path)
    };
    resolve_in(PathBuf::new(), &abs, 0)
}

/// Opens a device, FIFO or socket path for writing in place. A FIFO nobody
/// reads would block the open: a first open without blocking fails at once
/// when there is no reader ("no reader"); held open, it lets the second,
/// ordinary open (whose writes wait for a slow reader) return at once.
fn open_in_place(path: &Path) -> io::Result<File> {
    #[cfg(target_os = "linux")]
    let _probe = {
        use std::os::unix::fs::OpenOptionsExt;
        OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)
            .map_err(|e| {
                if e.raw_os_error() == Some(libc::ENXIO) {
                    io::Error::new(
                        io::ErrorKind::InvalidInput,
                        "is a FIFO that nothing reads; not written",
                    )
                } else {
                    e
                }
            })?
    };
    OpenOptions::new().write(true).open(path)
}

/// Resolves `rel` from `base`, which is already free of symlinks.
fn resolve_in(mut base: PathBuf, rel: &Path, depth: u32) -> io::Result<PathBuf> {
    for c in rel.components() {
        match c {
            Component::Prefix(_) | Component::RootDir => base.push(c.as_os_str()),
            Component::CurDir => {}
            Component::ParentDir => {
                base.pop();
            }
            Component::Normal(name) => {
                base.push(name);
                let is_link = fs::symlink_metadata(&base).is_ok_and(|m| m.file_type().is_symlink());
                if is_link {
                    if depth >= 40 {
                        return Err(io::Error::other(format!(
                            "{}: too many levels of symbolic links",
                            base.display()
                        )));
                    }
                    let target = fs::read_link(&base)?;
                    base.pop();
                    base = resolve_in(base, &target, depth + 1)?;
                }
            }
        }
    }
    Ok(base)
}

/// The audited run directories, resolved: no output may be inside one.
#[derive(Debug, Default, Clone)]
pub struct Protected {
    runs: Vec<PathBuf>,
    /// Each run directory's (device, inode), and every file below it (links
    /// followed): what an output must not be, whatever its path.
    dirs: Vec<((u64, u64), usize)>,
    files: Vec<((u64, u64), usize)>,
}

/// A file's (device, inode), links followed.
fn identity(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// At most this many entries of one run are identified (an AIPerf run holds
/// about a dozen files), and this deep.
const MAX_IDENTIFIED: usize = 10_000;
const MAX_DEPTH: usize = 4;

impl Protected {
    /// Protects `runs` (run directories; those that cannot be resolved are
    /// kept as given, made absolute).
    pub fn new<'a>(runs: impl IntoIterator<Item = &'a Path>) -> Protected {
        let mut runs: Vec<PathBuf> = runs
            .into_iter()
            .map(|r| resolve(r).unwrap_or_else(|_| r.to_path_buf()))
            .collect();
        runs.sort();
        runs.dedup();
        let (mut dirs, mut files) = (Vec::new(), Vec::new());
        for (k, run) in runs.iter().enumerate() {
            dirs.extend(identity(run).map(|id| (id, k)));
            let mut stack = vec![(run.clone(), 0)];
            let mut seen = 0;
            while let Some((d, depth)) = stack.pop() {
                let Ok(entries) = fs::read_dir(&d) else {
                    continue;
                };
                for e in entries.flatten().take(MAX_IDENTIFIED.saturating_sub(seen)) {
                    seen += 1;
                    let p = e.path();
                    match fs::metadata(&p) {
                        Ok(m) if m.is_dir() && depth < MAX_DEPTH => stack.push((p, depth + 1)),
                        Ok(m) if m.is_file() => files.extend(identity(&p).map(|id| (id, k))),
                        _ => {}
                    }
                }
            }
        }
        Protected { runs, dirs, files }
    }

    /// `out` resolved, or the refusal when it is (inside) a protected run.
    pub fn check(&self, out: &Path) -> Result<PathBuf, OutputError> {
        let resolved = resolve(out).map_err(OutputError::io(out))?;
        if let Some(run) = self.runs.iter().find(|r| resolved.starts_with(r)) {
            return Err(OutputError::InsideRun {
                out: resolved,
                run: run.clone(),
            });
        }
        // By identity: the file itself, then every directory above it that
        // exists (a run reached through a bind mount has another path).
        if let Some(&(_, k)) =
            identity(&resolved).and_then(|id| self.files.iter().find(|(f, _)| *f == id))
        {
            return Err(OutputError::AliasOfRun {
                out: resolved,
                what: "a file the audit reads",
                run: self.runs[k].clone(),
            });
        }
        for dir in resolved.ancestors().skip(1) {
            let found = identity(dir).and_then(|id| self.dirs.iter().find(|(d, _)| *d == id));
            if let Some(&(_, k)) = found {
                return Err(OutputError::AliasOfRun {
                    out: resolved,
                    what: "inside another name",
                    run: self.runs[k].clone(),
                });
            }
        }
        Ok(resolved)
    }
}

/// Writes `path` with `write`, after [`Protected::check`]: devices, FIFOs
/// and sockets directly, anything else atomically (see the module docs).
pub fn write(
    path: &Path,
    protected: &Protected,
    write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> Result<(), OutputError> {
    let resolved = protected.check(path)?;
    let err = |e| OutputError::io(path)(e);
    match fs::metadata(path) {
        Ok(m) if m.is_dir() => Err(err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "is a directory",
        ))),
        // `/dev/stdout`, `/proc/self/fd/N`, a FIFO, `/dev/null`: the kernel
        // resolves the path (a magic link included); written in place.
        Ok(m) if !m.is_file() => {
            let mut f = open_in_place(path).map_err(err)?;
            let mut buf = io::BufWriter::new(&mut f);
            write(&mut buf).and_then(|_| buf.flush()).map_err(err)
        }
        _ => {
            // A report's directory is created (`--report junit=out/x.xml`):
            // it was checked not to be inside a run.
            if let Some(parent) = resolved.parent().filter(|p| !p.exists()) {
                fs::create_dir_all(parent).map_err(err)?;
            }
            write_atomic(&resolved, write).map_err(err)
        }
    }
}

/// Writes a regular file atomically: a temporary file beside it, synced,
/// renamed over it.
fn write_atomic(
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> io::Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut builder = tempfile::Builder::new();
    builder.prefix(".artifact-check-").suffix(".tmp");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        // Created with 0666: the kernel applies the umask, as for any file.
        builder.permissions(fs::Permissions::from_mode(0o666));
    }
    let mut tmp = builder.tempfile_in(dir)?;
    {
        let mut buf = io::BufWriter::new(tmp.as_file_mut());
        write(&mut buf)?;
        buf.flush()?;
    }
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_dotdot_and_symlinks_also_past_what_exists() {
        let t = tempfile::tempdir().expect("tempdir");
        let root = t.path().canonicalize().expect("canonical");
        fs::create_dir_all(root.join("run/phases")).expect("mkdir");
        fs::create_dir(root.join("elsewhere")).expect("mkdir");
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(root.join("run"), root.join("link")).expect("symlink");
            std::os::unix::fs::symlink(root.join("run/new.json"), root.join("dangling"))
                .expect("symlink");
        }
        let r = |p: &str| resolve(&root.join(p)).expect("resolves");
        assert_eq!(r("run/../run/x"), root.join("run/x"));
        assert_eq!(r("elsewhere/a/b/../../../run/c"), root.join("run/c"));
        #[cfg(unix)]
        {
            assert_eq!(r("link/a/b"), root.join("run/a/b"));
            assert_eq!(r("link/../elsewhere"), root.join("elsewhere"));
            assert_eq!(r("dangling"), root.join("run/new.json"));
        }
        let p = Protected::new([root.join("run").as_path()]);
        assert!(p.check(&root.join("run/phases/x")).is_err());
        assert!(p.check(&root.join("run")).is_err());
        assert!(p.check(&root.join("elsewhere/report.json")).is_ok());
        // A sibling whose name starts like the run's is not inside it.
        assert!(p.check(&root.join("run2/report.json")).is_ok());
        #[cfg(unix)]
        {
            assert!(p.check(&root.join("link/report.json")).is_err());
            assert!(p.check(&root.join("dangling")).is_err());
        }
    }
}
