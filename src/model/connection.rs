//! Connection temperature: whether a request paid for DNS and connect.
//!
//! AIPerf counts connection setup inside TTFT, latency and prefill
//! throughput. A request is **cold** when it opened a new connection
//! (`http_req_connection_reused` is 0) or paid DNS / connect above the
//! thresholds, **warm** when it reused a connection under them, and
//! **unknown** when the record lacks the fields (older AIPerf, other
//! transports): unknown is never counted as warm.

use crate::artifacts::records::{Metric, Record};
use crate::config::ColdSettings;

closed_set! {
    /// Connection state of one request.
    pub enum Temperature {
        /// Opened a new connection (or paid DNS/connect above threshold).
        Cold => "cold",
        /// Reused a connection.
        Warm => "warm",
        /// The record lacks the connection fields.
        Unknown => "unknown",
    }
}

/// One record's connection temperature: cold when it opened a connection
/// (not reused) or paid DNS or connect above the thresholds, warm when it
/// reused one, unknown without the fields to tell.
pub fn temperature(r: &Record, s: &ColdSettings) -> Temperature {
    let reused = r.values.get(Metric::HttpReqConnectionReused);
    let dns = r.values.get(Metric::HttpReqDnsLookup);
    let connecting = r.values.get(Metric::HttpReqConnecting);
    let over = |v: Option<f64>, t: f64| v.is_some_and(|v| v > t);
    if reused == Some(0.0) || over(dns, s.dns_ms) || over(connecting, s.connect_ms) {
        Temperature::Cold
    } else if reused == Some(1.0) {
        Temperature::Warm
    } else {
        Temperature::Unknown
    }
}

/// The DNS lookup and connect a request paid before sending (ms): the one
/// rule for connection time. `None` when the record lacks
/// `http_req_connecting` (its setup cannot be told); a missing DNS lookup
/// counts 0 (a connection to an address, or a cached name); a negative
/// time, which no client measures, counts 0.
pub fn setup_ms(r: &Record) -> Option<f64> {
    let dns = r
        .values
        .get(Metric::HttpReqDnsLookup)
        .unwrap_or(0.0)
        .max(0.0);
    let connect = r.values.get(Metric::HttpReqConnecting)?.max(0.0);
    Some(dns + connect)
}

/// The temperature of the record at `index` among `temperatures` (file
/// order); unknown for an index they do not hold.
pub fn temperature_at(temperatures: &[Temperature], index: usize) -> Temperature {
    temperatures
        .get(index)
        .copied()
        .unwrap_or(Temperature::Unknown)
}

/// Every record's temperature, in file order: the one walk that classifies
/// them (the model keeps it: [`crate::model::RunModel::temperatures`]).
pub fn temperatures(records: &[Record], s: &ColdSettings) -> Vec<Temperature> {
    records.iter().map(|r| temperature(r, s)).collect()
}

/// Published metrics measured after the first token, so they never hold
/// a connection's DNS + connect time: a cold/warm difference in them is
/// sampling (or which requests happened to be cold), not the connection.
pub const AFTER_FIRST_TOKEN: &[crate::artifacts::records::Metric] = &[
    crate::artifacts::records::Metric::InterTokenLatency,
    crate::artifacts::records::Metric::OutputTokenThroughputPerUser,
];

/// When the request reached the server (ns): its start plus the DNS
/// lookup and connect it paid first. A cold request is sent a handshake
/// after a warm one that started with it; the server orders them by this.
pub fn arrival_ns(r: &crate::artifacts::records::Record) -> u64 {
    let paid_ms = setup_ms(r).unwrap_or(0.0);
    let paid_ns = if paid_ms.is_finite() && paid_ms > 0.0 {
        (paid_ms * 1e6).min(u64::MAX as f64) as u64
    } else {
        0
    };
    r.request_start_ns.saturating_add(paid_ns)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::artifacts::records::Values;

    fn rec(reused: Option<f64>, dns: Option<f64>, conn: Option<f64>) -> Record {
        let mut values = Values::default();
        values.set(Metric::HttpReqConnectionReused, reused);
        values.set(Metric::HttpReqDnsLookup, dns);
        values.set(Metric::HttpReqConnecting, conn);
        Record::with_values(values)
    }

    #[test]
    fn classification_rules() {
        let s = ColdSettings::default();
        let t = |r, d, c| temperature(&rec(r, d, c), &s);
        assert_eq!(t(Some(0.0), Some(0.0), Some(0.0)), Temperature::Cold);
        assert_eq!(t(Some(1.0), Some(0.0), Some(0.0)), Temperature::Warm);
        assert_eq!(t(Some(1.0), Some(500.0), None), Temperature::Cold);
        assert_eq!(t(None, None, Some(200.0)), Temperature::Cold);
        // Absent fields are unknown, never warm.
        assert_eq!(t(None, None, None), Temperature::Unknown);
        assert_eq!(t(None, Some(0.0), Some(0.0)), Temperature::Unknown);
    }
}
