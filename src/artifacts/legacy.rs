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
    let first = run.records.as_ref().and_then(|r| {
        r.records
            .iter()
            .filter(|x| x.phase == super::records::Phase::Profiling)
            .map(|x| x.request_start_ns)
            .min()
    });
    let from_summary = run
        .summary
        .as_ref()
        .map(|s| (s.start_time.clone(), s.end_time.clone()));
    let Some(server) = run.server.as_mut() else {
        return false;
    };
    if !server.summary.phase_time_ranges.is_empty() {
        return false;
    }
    let (start, end) = match (&server.summary.start_time, &server.summary.end_time) {
        (Some(a), Some(b)) => (Some(a.clone()), Some(b.clone())),
        _ => from_summary.unwrap_or_default(),
    };
    let (Some(start), Some(end), Some(first)) = (start, end, first) else {
        return false;
    };
    let (Some(s), Some(e)) = (naive_utc_ns(&start), naive_utc_ns(&end)) else {
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
    server
        .summary
        .phase_time_ranges
        .insert("profiling".into(), Window { start_ns, end_ns });
    true
}

#[cfg(test)]
mod tests {
    use super::*;

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
