//! The server's hit rates: every framework formula whose counters exist
//! (the tables of [`crate::frameworks`]), summed over endpoints and label
//! sets. Where the series belong to several roles (a frontend and its
//! workers, prefill and decode workers, each scraped on its own endpoint or
//! labelled with its role), only one role's series count, so that one
//! request is counted once: prefill first (a decode worker counts the KV it
//! received as hits), then the frontend, then unlabelled series, decode
//! last.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::{PREFIX_CACHE_GAUGE_ONLY, PREFIX_CACHE_INCONSISTENT};
use crate::artifacts::server_metrics::{self, lookup, Families, MetricType};
use crate::findings::{Finding, Unit};
use crate::frameworks::{
    role_of, CacheFormula, Framework, LabelFilter, CACHE_FORMULAS, HIT_RATE_GAUGES,
    PROMPT_TOKEN_COUNTERS, SECONDARY_CACHE_FORMULAS,
};
use crate::model::observers::normalise_role;
use crate::stats;

/// A server-side hit rate by one framework formula.
#[derive(Debug, Clone, Serialize)]
pub struct ServerRate {
    /// The framework of the formula.
    pub framework: Framework,
    /// The formula, naming the metrics.
    pub formula: String,
    /// numerator / denominator (0..1); `null` when undefined or above 1.
    pub hit_rate: Option<f64>,
    /// Numerator (tokens).
    pub numerator: f64,
    /// Denominator (tokens).
    pub denominator: f64,
    /// Endpoints whose series were summed.
    pub endpoints: Vec<String>,
    /// True for a gauge average (not a token-weighted rate).
    pub gauge: bool,
    /// Only prefill-role series were used.
    pub prefill_only: bool,
    /// The role whose series were used, when the series belong to several
    /// (`prefill`, `frontend`, `decode`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// The series filter by role: `Some(role)` when only that role's series
    /// count (`Some(None)`: the unlabelled ones).
    #[serde(skip)]
    pub role_filter: Option<Option<String>>,
    /// A secondary rate (external / KV transfer): reported, never the headline.
    #[serde(skip)]
    pub secondary: bool,
    /// The formula and the numerator and denominator families it used.
    #[serde(skip)]
    pub source: Option<(&'static CacheFormula, &'static str, &'static str)>,
}

/// Sum of a family's phase amounts over the series that pass `keep`.
pub fn sum_family(
    families: &Families,
    name: &str,
    keep: &dyn Fn(&server_metrics::Series) -> bool,
    endpoints: &mut Vec<String>,
) -> Option<f64> {
    let (_, fam) = lookup(families, name)?;
    let mut total = None;
    for s in fam.series.iter().filter(|s| keep(s)) {
        if let Some(v) = s.amount(fam.kind) {
            *total.get_or_insert(0.0) += v;
            if let Some(e) = &s.endpoint_url {
                if !endpoints.contains(e) {
                    endpoints.push(e.clone());
                }
            }
        }
    }
    total
}

/// Endpoint roles (`RunModel::endpoint_roles`).
pub type Roles = BTreeMap<String, String>;

/// The role of a series: a role label on it, else its endpoint's role.
pub fn series_role(
    endpoint: Option<&str>,
    labels: &BTreeMap<String, String>,
    roles: &Roles,
) -> Option<String> {
    role_of(labels)
        .map(normalise_role)
        .or_else(|| endpoint.and_then(|e| roles.get(e)).cloned())
}

/// Preference among roles: the one whose series count a request once.
fn rank(role: Option<&str>) -> u8 {
    match role {
        Some("prefill") => 0,
        Some("frontend") => 1,
        Some("decode") => 3,
        _ => 2,
    }
}

/// The role to keep when the series of `names` belong to several; `None`
/// when they all share one (every series counts).
pub fn chosen_role(families: &Families, names: &[&str], roles: &Roles) -> Option<Option<String>> {
    let mut seen: BTreeSet<Option<String>> = BTreeSet::new();
    for name in names {
        let Some((_, fam)) = lookup(families, name) else {
            continue;
        };
        for s in &fam.series {
            if s.amount(fam.kind).is_some_and(|a| a > 0.0) {
                seen.insert(series_role(s.endpoint_url.as_deref(), &s.labels, roles));
            }
        }
    }
    if seen.len() < 2 {
        return None;
    }
    seen.into_iter().min_by_key(|r| rank(r.as_deref()))
}

/// Whether a series (on `endpoint`, with `labels`) counts for one side of a
/// formula: its label filter, and the chosen role when there is one. Shared
/// by the export's series and the raw scrapes' samples.
pub fn counts_for(
    endpoint: Option<&str>,
    labels: &BTreeMap<String, String>,
    filter: LabelFilter,
    role: Option<&Option<String>>,
    roles: &Roles,
) -> bool {
    role.is_none_or(|r| &series_role(endpoint, labels, roles) == r)
        && filter.is_none_or(|(k, v)| labels.get(k).is_some_and(|x| v.contains(&x.as_str())))
}

/// The server's prompt tokens over a phase: the first counter of
/// [`PROMPT_TOKEN_COUNTERS`] that exists, over one role's series.
pub fn prompt_tokens(families: &Families, roles: &Roles) -> Option<f64> {
    PROMPT_TOKEN_COUNTERS.iter().find_map(|n| {
        let role = chosen_role(families, &[n], roles);
        let keep = |s: &server_metrics::Series| {
            counts_for(
                s.endpoint_url.as_deref(),
                &s.labels,
                None,
                role.as_ref(),
                roles,
            )
        };
        sum_family(families, n, &keep, &mut Vec::new())
    })
}

fn evaluate(
    families: &Families,
    f: &'static CacheFormula,
    secondary: bool,
    roles: &Roles,
) -> Option<ServerRate> {
    let num_name: &'static str = f.num.iter().find(|n| lookup(families, n).is_some())?;
    let den_name: &'static str = f.den.iter().find(|n| lookup(families, n).is_some())?;
    // In prefill/decode deployments, decode workers count KV received from
    // prefill as hits: one role's series, prefill first.
    let role = chosen_role(families, &[num_name, den_name], roles);
    let prefill_only = role
        .as_ref()
        .is_some_and(|r| r.as_deref() == Some("prefill"));
    let keep = |filter: LabelFilter| {
        let role = role.clone();
        move |s: &server_metrics::Series| {
            counts_for(
                s.endpoint_url.as_deref(),
                &s.labels,
                filter,
                role.as_ref(),
                roles,
            )
        }
    };
    let (num_keep, den_keep) = (keep(f.num_filter), keep(f.den_filter));
    let mut endpoints = Vec::new();
    let numerator = sum_family(families, num_name, &num_keep, &mut endpoints)?;
    let denominator = sum_family(families, den_name, &den_keep, &mut endpoints)?;
    if denominator <= 0.0 && f.num_filter.is_some() {
        return None;
    }
    let ratio = (denominator > 0.0).then(|| numerator / denominator);
    let untyped = [num_name, den_name]
        .iter()
        .any(|n| lookup(families, n).is_some_and(|(_, f)| f.kind == MetricType::Unknown));
    let mut formula = format!("{}: {}", f.framework, f.label);
    if untyped {
        formula.push_str(" (untyped families: max - min over the phase's scrapes, a lower bound)");
    }
    if let Some(r) = role.as_ref() {
        formula.push_str(&format!(
            " ({}-role series only)",
            r.as_deref().unwrap_or("unlabelled")
        ));
    }
    Some(ServerRate {
        framework: f.framework,
        formula,
        hit_rate: ratio.filter(|r| *r <= 1.0),
        numerator,
        denominator,
        endpoints,
        gauge: false,
        prefill_only,
        role: role.clone().flatten(),
        role_filter: role,
        secondary,
        source: Some((f, num_name, den_name)),
    })
}

fn gauge_rate(families: &Families) -> Option<ServerRate> {
    for (framework, name) in HIT_RATE_GAUGES {
        let Some((found, fam)) = lookup(families, name) else {
            continue;
        };
        let avgs: Vec<f64> = fam.series.iter().filter_map(|s| s.stats.avg).collect();
        let mean = stats::mean(&avgs)?;
        let rate = if mean > 1.5 { mean / 100.0 } else { mean };
        let endpoints: Vec<String> = fam
            .series
            .iter()
            .filter_map(|s| s.endpoint_url.clone())
            .collect();
        return Some(ServerRate {
            framework: *framework,
            formula: format!(
                "{framework}: unweighted mean over {} series of the {found} gauge's average \
                 (not token-weighted)",
                avgs.len()
            ),
            hit_rate: Some(rate).filter(|r| (0.0..=1.0).contains(r)),
            numerator: rate,
            denominator: 1.0,
            endpoints,
            gauge: true,
            prefill_only: false,
            role: None,
            role_filter: None,
            secondary: false,
            source: None,
        });
    }
    None
}

/// Every server rate available in `families`, headline first; `roles` are
/// the endpoints' roles.
pub fn server_rates(families: &Families, roles: &Roles) -> Vec<ServerRate> {
    // A formula with a label filter (vLLM's by-source one) overrides the
    // others only when it has data: evaluate() drops it otherwise.
    let mut out: Vec<ServerRate> = CACHE_FORMULAS
        .iter()
        .filter_map(|f| evaluate(families, f, false, roles))
        .collect();
    if out.is_empty() {
        out.extend(gauge_rate(families));
    }
    out.extend(
        SECONDARY_CACHE_FORMULAS
            .iter()
            .filter_map(|f| evaluate(families, f, true, roles))
            .map(|mut r| {
                r.formula = format!("{} [secondary]", r.formula);
                r
            }),
    );
    out
}

/// Rates whose counters contradict themselves, and gauges averaged across
/// endpoints.
pub fn sanity(rates: &[ServerRate], findings: &mut Vec<Finding>) {
    for r in rates {
        if !r.gauge && r.denominator > 0.0 && r.numerator > r.denominator {
            findings.push(
                Finding::new(
                    PREFIX_CACHE_INCONSISTENT,
                    format!(
                        "{}: numerator {} exceeds denominator {} (a ratio above 1): the hit and \
                         query counters' windows do not line up, or series are double-counted; \
                         the rate is reported as null",
                        r.formula, r.numerator, r.denominator
                    ),
                )
                .file(server_metrics::FILE)
                .expected_found(format!("<= {}", r.denominator), r.numerator)
                .effect("excess", r.numerator - r.denominator, Unit::Tokens),
            );
        }
        if r.gauge && r.endpoints.len() > 1 {
            findings.push(
                Finding::new(
                    PREFIX_CACHE_GAUGE_ONLY,
                    format!(
                        "{} averages a gauge across {} endpoints without weighting by traffic",
                        r.formula,
                        r.endpoints.len()
                    ),
                )
                .file(server_metrics::FILE),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn families(json: &str) -> Families {
        serde_json::from_str(json).expect("test JSON parses")
    }

    #[test]
    fn vllm_sums_endpoints_and_label_sets() {
        let f = families(
            r#"{"vllm:prefix_cache_hits":{"type":"counter","series":[
                {"endpoint_url":"a","labels":{"engine":"0"},"stats":{"total":30}},
                {"endpoint_url":"a","labels":{"engine":"1"},"stats":{"total":10}},
                {"endpoint_url":"b","stats":{"total":20}}]},
              "vllm:prefix_cache_queries":{"type":"counter","series":[
                {"endpoint_url":"a","labels":{"engine":"0"},"stats":{"total":50}},
                {"endpoint_url":"a","labels":{"engine":"1"},"stats":{"total":50}},
                {"endpoint_url":"b","stats":{"total":100}}]}}"#,
        );
        let r = &server_rates(&f, &Roles::new())[0];
        assert_eq!((r.numerator, r.denominator), (60.0, 200.0));
        assert_eq!(r.hit_rate, Some(0.3));
        assert_eq!(r.endpoints, vec!["a".to_string(), "b".to_string()]);
    }

    #[test]
    fn vllm_by_source_overrides_hits_over_queries_when_present() {
        let f = families(
            r#"{"vllm:prompt_tokens_by_source":{"type":"counter","series":[
                {"labels":{"source":"local_cache_hit"},"stats":{"total":60}},
                {"labels":{"source":"external_kv_transfer"},"stats":{"total":20}},
                {"labels":{"source":"local_compute"},"stats":{"total":20}}]},
              "vllm:prefix_cache_hits":{"type":"counter","series":[{"stats":{"total":1}}]},
              "vllm:prefix_cache_queries":{"type":"counter","series":[{"stats":{"total":2}}]}}"#,
        );
        let rates = server_rates(&f, &Roles::new());
        assert_eq!(rates[0].hit_rate, Some(0.6));
        assert!(rates[0].formula.contains("local_cache_hit"));
        let ext = rates
            .iter()
            .find(|r| r.formula.contains("external_kv_transfer"))
            .expect("ext");
        assert_eq!(ext.hit_rate, Some(0.2));
    }

    #[test]
    fn sglang_uses_prompt_tokens_and_prefill_roles_only() {
        let f = families(
            r#"{"sglang:cached_tokens":{"type":"counter","series":[
                {"labels":{"cache_source":"device","disaggregation_mode":"prefill"},"stats":{"total":80}},
                {"labels":{"cache_source":"host","disaggregation_mode":"prefill"},"stats":{"total":10}},
                {"labels":{"cache_source":"device","disaggregation_mode":"decode"},"stats":{"total":100}}]},
              "sglang:prompt_tokens":{"type":"counter","series":[
                {"labels":{"disaggregation_mode":"prefill"},"stats":{"total":100}},
                {"labels":{"disaggregation_mode":"decode"},"stats":{"total":100}}]}}"#,
        );
        let rates = server_rates(&f, &Roles::new());
        assert_eq!(rates[0].hit_rate, Some(0.9));
        assert!(rates[0].prefill_only);
        let device = rates
            .iter()
            .find(|r| r.formula.contains("device"))
            .expect("device");
        assert_eq!(device.hit_rate, Some(0.8));
    }

    #[test]
    fn trtllm_prefers_token_counters_and_falls_back_to_the_gauge() {
        let counters = families(
            r#"{"trtllm_prompt_cached_tokens":{"type":"counter","series":[{"stats":{"total":3}}]},
              "trtllm_prompt_tokens":{"type":"counter","series":[{"stats":{"total":4}}]},
              "trtllm_kv_cache_hit_rate":{"type":"gauge","series":[{"stats":{"avg":0.1}}]}}"#,
        );
        assert_eq!(
            server_rates(&counters, &Roles::new())[0].hit_rate,
            Some(0.75)
        );
        let gauge = families(
            r#"{"trtllm_kv_cache_hit_rate":{"type":"gauge","series":[
                {"endpoint_url":"a","stats":{"avg":50.0}},{"endpoint_url":"b","stats":{"avg":70.0}}]}}"#,
        );
        let r = &server_rates(&gauge, &Roles::new())[0];
        assert!(r.gauge);
        assert_eq!(r.hit_rate, Some(0.6));
    }

    #[test]
    fn ratio_above_one_is_null_and_untyped_families_are_labelled() {
        let f = families(
            r#"{"atom:prefix_cache_cached_tokens":{"type":"unknown","series":[{"stats":{"min":10,"max":130,"avg":50}}]},
              "atom:prefix_cache_full_tokens":{"type":"unknown","series":[{"stats":{"min":0,"max":100,"avg":50}}]}}"#,
        );
        let r = &server_rates(&f, &Roles::new())[0];
        assert_eq!((r.numerator, r.denominator), (120.0, 100.0));
        assert_eq!(r.hit_rate, None);
        assert!(r.formula.contains("untyped"));
    }

    #[test]
    fn disaggregated_workers_on_their_own_endpoints_count_once_prefill_first() {
        let f = families(
            r#"{"vllm:prefix_cache_hits":{"type":"counter","series":[
                {"endpoint_url":"p","labels":{"engine":"0"},"stats":{"total":30}},
                {"endpoint_url":"d","labels":{"engine":"0"},"stats":{"total":0}}]},
              "vllm:prefix_cache_queries":{"type":"counter","series":[
                {"endpoint_url":"p","labels":{"engine":"0"},"stats":{"total":100}},
                {"endpoint_url":"d","labels":{"engine":"0"},"stats":{"total":100}}]},
              "vllm:prompt_tokens":{"type":"counter","series":[
                {"endpoint_url":"p","stats":{"total":100}},{"endpoint_url":"d","stats":{"total":100}}]}}"#,
        );
        let roles: Roles = [("p", "prefill"), ("d", "decode")]
            .into_iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        let r = &server_rates(&f, &roles)[0];
        assert_eq!((r.numerator, r.denominator), (30.0, 100.0));
        assert_eq!(r.role.as_deref(), Some("prefill"));
        assert_eq!(prompt_tokens(&f, &roles), Some(100.0));
        assert_eq!(
            prompt_tokens(&f, &Roles::new()),
            Some(200.0),
            "no roles: all count"
        );
    }

    #[test]
    fn dynamo_frontend_uses_histogram_sums() {
        let f = families(
            r#"{"dynamo_frontend_cached_tokens":{"type":"counter","series":[{"stats":{"total":50}}]},
              "dynamo_frontend_input_sequence_tokens":{"type":"histogram","series":[{"stats":{"count":2,"sum":200}}]}}"#,
        );
        assert_eq!(server_rates(&f, &Roles::new())[0].hit_rate, Some(0.25));
    }
}
