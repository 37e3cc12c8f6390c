//! Older AIPerf layouts, read into the terms of the current one.
//!
//! Before 0.12, `server_metrics_export.json` has no `phase_time_ranges`: the
//! profiling window is only `summary.start_time` / `end_time` (also in
//! `profile_export_aiperf.json`), written by Python's
//! `datetime.fromtimestamp`: a naive local time with microseconds and no
//! zone. The zone is recovered from the records: the profiling phase starts
//! moments before its first request, so the offset between the naive time
//! and that request's start (ns since the epoch) is the zone's, rounded to
//! the 15 minutes every zone offset is a multiple of. Without records the
//! zone cannot be told, and no window is made up.

use super::server_metrics::Window;
use super::RunArtifacts;

/// Nanoseconds since the epoch of a naive `YYYY-MM-DDTHH:MM:SS[.ffffff]`
/// read as if it were UTC; `None` for anything else.
pub fn naive_utc_ns(s: &str) -> Option<i128> {
    let b = s.as_bytes();
    if b.len() < 19 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b' ') {
        return None;
    }
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    let n = |r: std::ops::Range<usize>| -> Option<i64> {
        let t = s.get(r)?;
        t.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| t.parse().ok())?
    };
    let (y, mo, d) = (n(0..4)?, n(5..7)?, n(8..10)?);
    let (h, mi, sec) = (n(11..13)?, n(14..16)?, n(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    let frac_ns: i64 = match s.get(19..) {
        None | Some("") => 0,
        Some(rest) => {
            let digits = rest.strip_prefix('.')?;
            if digits.is_empty() || digits.len() > 9 || !digits.bytes().all(|c| c.is_ascii_digit())
            {
                return None;
            }
            digits.parse::<i64>().ok()? * 10i64.pow(9 - digits.len() as u32)
        }
    };
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if mo <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + h * 3600 + mi * 60 + sec;
    Some(i128::from(secs) * 1_000_000_000 + i128::from(frac_ns))
}

/// The zone offset (ns, a multiple of 15 minutes) that puts the naive
/// `start` within a minute before `first_request_ns`; `None` when no
/// offset does.
fn zone_offset(start: i128, first_request_ns: u64) -> Option<i128> {
    const QUARTER: i128 = 900 * 1_000_000_000;
    let raw = start - i128::from(first_request_ns);
    let offset = (raw as f64 / QUARTER as f64).round() as i128 * QUARTER;
    // Zones run from UTC-12 to UTC+14.
    if offset.abs() > 14 * 3600 * 1_000_000_000 {
        return None;
    }
    let lead = i128::from(first_request_ns) - (start - offset);
    (-1_000_000_000..=60_000_000_000)
        .contains(&lead)
        .then_some(offset)
}

/// Fills `phase_time_ranges.profiling` of a pre-0.12 server-metrics export
/// from its naive `start_time` / `end_time` (or the summary's), when the
/// records fix the zone. Returns whether it did.
pub fn profiling_window(run: &mut RunArtifacts) -> bool {
    let from_summary = run
        .summary
        .as_ref()
        .map(|s| (s.start_time.clone(), s.end_time.clone()));
    let Some(server) = run.server.as_ref() else {
        return false;
    };
    if !server.summary.phase_time_ranges.is_empty() {
        return false;
    }
    let (start, end) = match (&server.summary.start_time, &server.summary.end_time) {
        (Some(a), Some(b)) => (Some(a.clone()), Some(b.clone())),
        _ => from_summary.unwrap_or_default(),
    };
    let (Some(start), Some(end)) = (start, end) else {
        return false;
    };
    let (Some(s), Some(e)) = (naive_utc_ns(&start), naive_utc_ns(&end)) else {
        return false;
    };
    // The walk over the records only for an export that needs it: it runs
    // between the reading and the model, on one thread.
    let first = run.records.as_ref().and_then(|r| {
        r.records
            .iter()
            .filter(|x| x.phase == super::records::Phase::Profiling)
            .map(|x| x.request_start_ns)
            .min()
    });
    let Some(first) = first else {
        return false;
    };
    let Some(offset) = zone_offset(s, first) else {
        return false;
    };
    let (Ok(start_ns), Ok(end_ns)) = (u64::try_from(s - offset), u64::try_from(e - offset)) else {
        return false;
    };
    if end_ns < start_ns {
        return false;
    }
    let Some(server) = run.server.as_mut() else {
        return false;
    };
    server
        .summary
        .phase_time_ranges
        .insert("profiling".into(), Window { start_ns, end_ns });
    true
}

/// The layout of `profile_export.jsonl` when none of its lines could be
/// read and its first line is an AIPerf development build's of late 2025
/// (`metadata.credit_phase`, `metadata.timestamp_ns`, no
/// `request_start_ns`; metrics named `ttft`): words naming it.
pub fn development_layout(first_line: &[u8]) -> Option<&'static str> {
    let v: serde_json::Value = serde_json::from_slice(first_line).ok()?;
    let m = v.get("metadata")?.as_object()?;
    let dev = m.contains_key("credit_phase")
        && m.contains_key("timestamp_ns")
        && !m.contains_key("request_start_ns");
    dev.then_some(
        "an AIPerf development build's of late 2025 (metadata.credit_phase and \
         metadata.timestamp_ns instead of benchmark_phase and request_start_ns / \
         request_end_ns; metrics named ttft, ttst)",
    )
}

/// When no record of `profile_export.jsonl` could be read and the file is
/// in a layout [`development_layout`] recognises: one finding naming it and
/// what cannot be checked, in place of an `invalid-record` per line; the
/// records are then not read at all.
pub fn unsupported_records(run: &mut RunArtifacts) {
    use super::records;
    use crate::findings::{reading, Finding};
    let Some(r) = run.records.as_ref() else {
        return;
    };
    let invalid =
        |f: &Finding| f.code == reading::INVALID_RECORD && f.file.as_deref() == Some(records::FILE);
    if !r.records.is_empty() || !run.findings.iter().any(invalid) {
        return;
    }
    let first = std::fs::File::open(run.dir.join(records::FILE))
        .ok()
        .and_then(|f| {
            use std::io::{BufRead, Read};
            let mut line = Vec::new();
            std::io::BufReader::new(f.take(1 << 20))
                .read_until(b'\n', &mut line)
                .ok()?;
            Some(line)
        });
    let Some(layout) = first.as_deref().and_then(development_layout) else {
        return;
    };
    let lines = r.lines;
    run.findings.retain(|f| !invalid(f));
    run.findings.push(
        Finding::new(
            reading::UNSUPPORTED_LAYOUT,
            format!(
                "{} is in {layout}: none of its {lines} line(s) is read, so cold_connections, \
                 the clients' cache hit rate and prefill throughput, the phase check's request \
                 counts (taken from the configuration instead) and the summary's \
                 recomputation cannot tell",
                records::FILE
            ),
        )
        .file(records::FILE)
        .expected_found(
            "request_start_ns, benchmark_phase",
            "timestamp_ns, credit_phase",
        )
        .effect("lines_not_read", lines as f64, crate::findings::Unit::Count),
    );
    run.records = None;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_development_layout_is_recognised_by_its_metadata() {
        // The record layout AIPerf's documentation showed in late 2025.
        let dev = br#"{"record_id":"","metadata":{"conversation_id":"c","turn_index":0,"timestamp_ns":1234567890123456789,"worker_id":"w","record_processor_id":"p","credit_phase":"profiling","error":null},"metrics":{"request_latency":{"value":123.45,"unit":"ms"},"ttft":{"value":45.67,"unit":"ms"}}}"#;
        assert!(development_layout(dev).is_some());
        let current = br#"{"metadata":{"benchmark_phase":"profiling","request_start_ns":1,"request_end_ns":2,"timestamp_ns":1},"metrics":{}}"#;
        assert!(development_layout(current).is_none());
        assert!(development_layout(b"not json").is_none());
    }

    #[test]
    fn naive_times_read_as_utc() {
        assert_eq!(naive_utc_ns("1970-01-01T00:00:00"), Some(0));
        assert_eq!(
            naive_utc_ns("2026-12-01T19:14:02.967517"),
            Some(1_796_152_442_967_517_000)
        );
        assert_eq!(
            naive_utc_ns("2000-02-29 12:00:00.5"),
            Some(951_825_600_500_000_000)
        );
        for bad in [
            "",
            "2026-13-01T00:00:00",
            "2026-12-01T19:14",
            "2026-12-01T19:14:02.",
            "x026-12-01T19:14:02",
        ] {
            assert_eq!(naive_utc_ns(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_zone_is_the_quarter_hour_that_puts_the_start_just_before_the_first_request() {
        let first = 1_796_152_442_971_871_668u64;
        let naive_utc = 1_796_152_442_967_517_000i128;
        assert_eq!(zone_offset(naive_utc, first), Some(0));
        // The same instant written in UTC+5:30 and UTC-8.
        let h = 3_600_000_000_000i128;
        assert_eq!(zone_offset(naive_utc + 11 * h / 2, first), Some(11 * h / 2));
        assert_eq!(zone_offset(naive_utc - 8 * h, first), Some(-8 * h));
        // A start far from any request: no zone fits.
        assert_eq!(zone_offset(naive_utc + 7 * 60 * 1_000_000_000, first), None);
    }
}
