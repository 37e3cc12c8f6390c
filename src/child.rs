//! The child process that reads a parquet file
//! (`artifacts::scrapes::parquet`): polars aborts the process on some
//! damaged files, so the binary reads each one in a child of its own, and
//! an abort there is an unreadable-file finding here. A child makes no core
//! file: with a relative `core_pattern` it would be written in the working
//! directory, which can be an audited run.

use std::process::ExitCode;

use artifact_check::artifacts::scrapes::parquet;

/// When this process is such a child, its work and exit code; otherwise
/// every parquet file from now on is read in a child running this
/// executable (where it can be found), and `None`.
pub fn run_or_enable() -> Option<ExitCode> {
    if std::env::var_os(parquet::CHILD_ENV).is_some() {
        no_core_file();
        if let Some(code) = parquet::child_main() {
            return Some(ExitCode::from(code));
        }
    }
    if let Ok(exe) = std::env::current_exe() {
        parquet::read_in_child_processes(exe);
    }
    None
}

/// On other systems than Unix: nothing to lower.
#[cfg(not(unix))]
fn no_core_file() {}

#[cfg(unix)]
fn no_core_file() {
    let none = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `setrlimit` reads the struct passed by reference, which lives
    // through the call; lowering this process's own core-file limit has no
    // other effect. A failure leaves the limit as it was.
    unsafe {
        libc::setrlimit(libc::RLIMIT_CORE, &none);
    }
}
