//! Per-framework server metric names, as data.
//!
//! The server metrics that get exactly one observation per request
//! ([`REQUEST_SCOPED`]); the prefix-cache hit-rate formulas of each
//! framework ([`CACHE_FORMULAS`], [`SECONDARY_CACHE_FORMULAS`],
//! [`HIT_RATE_GAUGES`]) and its prompt-token counters
//! ([`PROMPT_TOKEN_COUNTERS`]); the labels that name a prefill/decode role
//! ([`ROLE_LABELS`]). Checks look names up here and never spell a
//! framework's metric themselves. Names are as AIPerf exports them:
//! histogram base names, counters without `_total` (lookups accept both;
//! [`canonical`] is the one spelling rule).

use serde::Serialize;

closed_set! {
    /// When a server publishes a request-scoped observation. It decides which
    /// record timestamp places the observation in time.
    pub enum ObservedAt {
        /// When the request arrives (`request_start_ns`).
        Arrival => "arrival",
        /// When the engine schedules it: after its queue time, between its
        /// arrival and its first token.
        Scheduled => "scheduled",
        /// When the first token is produced (`request_start_ns` + TTFT).
        FirstToken => "first_token",
        /// When the request finishes (`request_end_ns`).
        Completion => "completion",
    }
}

closed_set! {
    /// A serving framework (or the user, for metrics named on the command line).
    pub enum Framework {
        /// vLLM.
        Vllm => "vllm",
        /// SGLang.
        Sglang => "sglang",
        /// TensorRT-LLM.
        Trtllm => "trtllm",
        /// Dynamo.
        Dynamo => "dynamo",
        /// ATOM.
        Atom => "atom",
        /// tabbyAPI (llama.cpp-style exporter).
        Tabbyapi => "tabbyapi",
        /// Named by the user (`--request-scoped-metric`).
        User => "user",
    }
}

/// A server metric that gets one observation per request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RequestScoped {
    /// Exported name (built-in names are borrowed, user-supplied ones owned).
    pub name: std::borrow::Cow<'static, str>,
    /// Serving framework.
    pub framework: Framework,
    /// When it is observed.
    pub observed_at: ObservedAt,
}

impl RequestScoped {
    /// Whether it is a time-to-first-token histogram (the preferred control:
    /// every streaming request has one).
    pub fn is_ttft(&self) -> bool {
        self.name.contains("time_to_first_token")
    }
}

macro_rules! scoped {
    ($( $fw:ident: [ $( $name:literal => $at:ident ),* $(,)? ] )*) => {
        /// Built-in request-scoped metrics, per framework.
        pub const REQUEST_SCOPED: &[RequestScoped] = &[
            $( $( RequestScoped {
                name: std::borrow::Cow::Borrowed($name),
                framework: Framework::$fw,
                observed_at: ObservedAt::$at,
            }, )* )*
        ];
    };
}

scoped! {
    // vLLM V1 records every per-request histogram when the request finishes,
    // except TTFT, observed when the first token is produced.
    Vllm: [
        "vllm:time_to_first_token_seconds" => FirstToken,
        "vllm:e2e_request_latency_seconds" => Completion,
        "vllm:request_queue_time_seconds" => Completion,
        "vllm:request_prefill_time_seconds" => Completion,
        "vllm:request_decode_time_seconds" => Completion,
        "vllm:request_inference_time_seconds" => Completion,
        "vllm:request_prompt_tokens" => Completion,
        "vllm:request_generation_tokens" => Completion,
        "vllm:request_params_n" => Completion,
        "vllm:request_params_max_tokens" => Completion,
        "vllm:request_max_num_generation_tokens" => Completion,
        "vllm:request_time_per_output_token_seconds" => Completion,
        "vllm:request_success" => Completion,
    ]
    // SGLang: the tokenizer manager observes TTFT at the first token and
    // the rest when the request finishes; each scheduler (one per TP rank)
    // observes the queue time when it schedules the request.
    Sglang: [
        "sglang:time_to_first_token_seconds" => FirstToken,
        "sglang:e2e_request_latency_seconds" => Completion,
        "sglang:queue_time_seconds" => Scheduled,
        "sglang:num_requests" => Completion,
    ]
    // trtllm-serve's MetricsCollector logs every request histogram when the
    // request finishes (log_request_metrics), TTFT included. Its families
    // are `trtllm_*`; Dynamo's TensorRT-LLM workers name theirs `trtllm:*`.
    Trtllm: [
        "trtllm_time_to_first_token_seconds" => Completion,
        "trtllm_e2e_request_latency_seconds" => Completion,
        "trtllm_request_queue_time_seconds" => Completion,
        "trtllm_time_per_output_token_seconds" => Completion,
        "trtllm_request_prefill_time_seconds" => Completion,
        "trtllm_request_decode_time_seconds" => Completion,
        "trtllm_request_inference_time_seconds" => Completion,
        "trtllm_request_success" => Completion,
        "trtllm:time_to_first_token_seconds" => Completion,
        "trtllm:e2e_request_latency_seconds" => Completion,
        "trtllm:request_queue_time_seconds" => Completion,
        "trtllm:time_per_output_token_seconds" => Completion,
        "trtllm:request_success" => Completion,
    ]
    // Dynamo's frontend observes TTFT and the input sequence length when
    // the first token comes back, the rest when the response completes.
    Dynamo: [
        "dynamo_frontend_time_to_first_token_seconds" => FirstToken,
        "dynamo_frontend_request_duration_seconds" => Completion,
        "dynamo_frontend_input_sequence_tokens" => FirstToken,
        "dynamo_frontend_output_sequence_tokens" => Completion,
        "dynamo_frontend_requests" => Completion,
    ]
    // The llama.cpp-style exporter of tabbyAPI's metrics PR: every histogram,
    // TTFT included, is recorded in handle_finish_chunk, at completion.
    Tabbyapi: [
        "tabbyapi:time_to_first_token_seconds" => Completion,
        "tabbyapi:e2e_request_latency_seconds" => Completion,
        "tabbyapi:request_queue_time_seconds" => Completion,
        "tabbyapi:request_prefill_time_seconds" => Completion,
        "tabbyapi:request_decode_time_seconds" => Completion,
        "tabbyapi:request_prompt_tokens" => Completion,
        "tabbyapi:request_generation_tokens" => Completion,
    ]
}

// --- Prefix-cache hit rates ----------------------------------------------------------

/// A label filter: the series whose label `.0` has one of the values `.1`.
pub type LabelFilter = Option<(&'static str, &'static [&'static str])>;

/// A server-side prefix-cache hit rate: a (numerator, denominator) formula
/// over token counters.
#[derive(Debug)]
pub struct CacheFormula {
    /// The framework whose counters these are.
    pub framework: Framework,
    /// The formula, in words.
    pub label: &'static str,
    /// Numerator family names, alternatives: the first that exists is used.
    pub num: &'static [&'static str],
    /// Which numerator series count.
    pub num_filter: LabelFilter,
    /// Denominator family names, alternatives.
    pub den: &'static [&'static str],
    /// Which denominator series count.
    pub den_filter: LabelFilter,
}

/// Token-weighted formulas, headline first. Names are alternatives (the
/// first that exists is used); `_total` spellings are accepted by lookup.
pub const CACHE_FORMULAS: &[CacheFormula] = &[
    CacheFormula {
        framework: Framework::Vllm,
        label: "local_cache_hit / sum(prompt_tokens_by_source)",
        num: &["vllm:prompt_tokens_by_source"],
        num_filter: Some(("source", &["local_cache_hit"])),
        den: &["vllm:prompt_tokens_by_source"],
        den_filter: None,
    },
    CacheFormula {
        framework: Framework::Vllm,
        label: "prefix_cache_hits / prefix_cache_queries",
        num: &["vllm:prefix_cache_hits"],
        num_filter: None,
        den: &["vllm:prefix_cache_queries"],
        den_filter: None,
    },
    CacheFormula {
        framework: Framework::Sglang,
        label: "cached_tokens (all cache_source) / prompt_tokens",
        num: &["sglang:cached_tokens"],
        num_filter: None,
        den: &["sglang:prompt_tokens"],
        den_filter: None,
    },
    CacheFormula {
        framework: Framework::Trtllm,
        label: "prompt_cached_tokens / prompt_tokens",
        num: &["trtllm_prompt_cached_tokens", "trtllm:prompt_cached_tokens"],
        num_filter: None,
        den: &["trtllm_prompt_tokens", "trtllm:prompt_tokens"],
        den_filter: None,
    },
    CacheFormula {
        framework: Framework::Atom,
        label: "prefix_cache_cached_tokens / prefix_cache_full_tokens",
        num: &[
            "atom:prefix_cache_cached_tokens",
            "atom_prefix_cache_cached_tokens",
        ],
        num_filter: None,
        den: &[
            "atom:prefix_cache_full_tokens",
            "atom_prefix_cache_full_tokens",
        ],
        den_filter: None,
    },
    CacheFormula {
        framework: Framework::Dynamo,
        label: "frontend cached_tokens / input_sequence_tokens",
        num: &["dynamo_frontend_cached_tokens"],
        num_filter: None,
        den: &["dynamo_frontend_input_sequence_tokens"],
        den_filter: None,
    },
];

/// Secondary (external / KV-transfer) rates, reported but never the headline.
pub const SECONDARY_CACHE_FORMULAS: &[CacheFormula] = &[
    CacheFormula {
        framework: Framework::Vllm,
        label: "external_kv_transfer / sum(prompt_tokens_by_source)",
        num: &["vllm:prompt_tokens_by_source"],
        num_filter: Some(("source", &["external_kv_transfer"])),
        den: &["vllm:prompt_tokens_by_source"],
        den_filter: None,
    },
    CacheFormula {
        framework: Framework::Vllm,
        label: "external_prefix_cache_hits / external_prefix_cache_queries",
        num: &["vllm:external_prefix_cache_hits"],
        num_filter: None,
        den: &["vllm:external_prefix_cache_queries"],
        den_filter: None,
    },
    CacheFormula {
        framework: Framework::Sglang,
        label: "cached_tokens{cache_source=device} / prompt_tokens",
        num: &["sglang:cached_tokens"],
        num_filter: Some(("cache_source", &["device"])),
        den: &["sglang:prompt_tokens"],
        den_filter: None,
    },
];

/// Hit-rate gauges: averages of a rolling ratio, used only when no token
/// counters exist.
pub const HIT_RATE_GAUGES: &[(Framework, &str)] = &[
    (Framework::Trtllm, "trtllm_kv_cache_hit_rate"),
    (Framework::Trtllm, "trtllm:kv_cache_hit_rate"),
    (Framework::Sglang, "sglang:cache_hit_rate"),
    (
        Framework::Dynamo,
        "dynamo_component_kvstats_gpu_prefix_cache_hit_rate",
    ),
    (Framework::Vllm, "vllm:gpu_prefix_cache_hit_rate"),
];

/// The gauge a process restart changes (prometheus_client's process
/// collector, and every exporter that follows it).
pub const PROCESS_START: &str = "process_start_time_seconds";

/// Server prompt-token counters, most specific first.
pub const PROMPT_TOKEN_COUNTERS: &[&str] = &[
    "vllm:prompt_tokens",
    "sglang:prompt_tokens",
    "trtllm_prompt_tokens",
    "dynamo_frontend_input_sequence_tokens",
];

// --- Labels -----------------------------------------------------------------------------

closed_set! {
    /// What a label says about the requests a series sees. It decides how
    /// the series of one family on one endpoint add up to "every request
    /// once" ([`crate::model::observers`]).
    pub enum LabelRole {
        /// Splits the observations of one observer by their kind
        /// (`finished_reason`, `mode`): summed.
        Kind => "kind",
        /// Splits the requests between engines (vLLM's `engine` under data
        /// parallelism, SGLang's `dp_rank`): the series add up to the
        /// request count; a finding names the series.
        Partition => "partition",
        /// Ranks that each see every request of their partition (tensor,
        /// pipeline, expert parallel ranks): never summed.
        Replica => "replica",
        /// Names the model, the engine type or the worker: each value is an
        /// observer of its own.
        Identity => "identity",
    }
}

/// The labels of the frameworks' request-scoped and cache families and what
/// they mean, per framework (`None`: the same for every framework). A label
/// in none of these is read both ways (summed, or per replica) and the
/// reading that fits the request counts is kept.
pub const LABEL_ROLES: &[(Option<Framework>, &str, LabelRole)] = &[
    // vLLM: `engine` is the engine core index (data parallelism), `model_name`
    // the served model; `finished_reason` on request_success.
    (Some(Framework::Vllm), "engine", LabelRole::Partition),
    (None, "finished_reason", LabelRole::Kind),
    (None, "source", LabelRole::Kind),
    (None, "cache_source", LabelRole::Kind),
    (None, "cache_level", LabelRole::Kind),
    (None, "cache_tier", LabelRole::Kind),
    (None, "mode", LabelRole::Kind),
    (None, "stage", LabelRole::Kind),
    (None, "status", LabelRole::Kind),
    (None, "request_type", LabelRole::Kind),
    (None, "error_type", LabelRole::Kind),
    // Dynamo's frontend `endpoint` is the API route a request came in on.
    (Some(Framework::Dynamo), "endpoint", LabelRole::Kind),
    // SGLang schedulers: one per (dp_rank, tp_rank) under DP attention.
    (None, "dp_rank", LabelRole::Partition),
    (None, "tp_rank", LabelRole::Replica),
    (None, "pp_rank", LabelRole::Replica),
    (None, "moe_ep_rank", LabelRole::Replica),
    (None, "attn_tp_rank", LabelRole::Replica),
    (None, "model_name", LabelRole::Identity),
    (None, "model", LabelRole::Identity),
    (None, "engine_type", LabelRole::Identity),
    (None, "dynamo_namespace", LabelRole::Identity),
    (None, "dynamo_component", LabelRole::Identity),
    (None, "dynamo_endpoint", LabelRole::Identity),
    (None, "worker_type", LabelRole::Identity),
    (None, "disaggregation_mode", LabelRole::Identity),
    (None, "role", LabelRole::Identity),
    (None, "component", LabelRole::Identity),
    (None, "engine_id", LabelRole::Identity),
];

/// The role of label `name` on a family of `framework`: the framework's own
/// entry first, then the shared one.
pub fn label_role(framework: Option<Framework>, name: &str) -> Option<LabelRole> {
    let of = |fw: Option<Framework>| {
        LABEL_ROLES
            .iter()
            .find(|(f, l, _)| *f == fw && *l == name)
            .map(|x| x.2)
    };
    framework.and_then(|fw| of(Some(fw))).or_else(|| of(None))
}

/// The framework a family belongs to, from its name's prefix.
pub fn framework_of(family: &str) -> Option<Framework> {
    let prefixes = [
        ("vllm:", Framework::Vllm),
        ("sglang:", Framework::Sglang),
        ("trtllm_", Framework::Trtllm),
        ("trtllm:", Framework::Trtllm),
        ("dynamo_", Framework::Dynamo),
        ("atom", Framework::Atom),
        ("tabbyapi:", Framework::Tabbyapi),
    ];
    prefixes
        .iter()
        .find(|(p, _)| family.starts_with(p))
        .map(|x| x.1)
}

// --- Roles ------------------------------------------------------------------------------

/// Labels that name the role of a series in a disaggregated (prefill/decode)
/// deployment. One request is observed once per role.
pub const ROLE_LABELS: &[&str] = &[
    "dynamo_component",
    "disaggregation_mode",
    "worker_type",
    "role",
    "component",
];

/// Role values that mean "prefill".
pub const PREFILL_ROLES: &[&str] = &["prefill", "context", "ctx"];

/// Role values that mean "decode" (Dynamo's decode worker is often the
/// component `backend`).
pub const DECODE_ROLES: &[&str] = &["decode", "backend", "generation", "gen"];

/// Family prefixes that only a frontend (router, HTTP server) exports.
pub const FRONTEND_PREFIXES: &[&str] = &["dynamo_frontend_"];

/// A family's name as AIPerf exports it: prometheus_client strips `_total`
/// from counter families, so `x_total` and `x` name the same family.
pub fn canonical(name: &str) -> &str {
    name.strip_suffix("_total").unwrap_or(name)
}

/// The role of a series, from its labels.
pub fn role_of(labels: &std::collections::BTreeMap<String, String>) -> Option<&str> {
    ROLE_LABELS
        .iter()
        .find_map(|l| labels.get(*l))
        .map(String::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn table_has_no_duplicates_and_every_framework_has_ttft_or_latency() {
        let mut names = HashSet::new();
        for m in REQUEST_SCOPED {
            assert!(names.insert(&m.name), "duplicate {}", m.name);
            assert!(
                !m.name.ends_with("_total"),
                "store counters without _total: {}",
                m.name
            );
        }
        for fw in [
            Framework::Vllm,
            Framework::Sglang,
            Framework::Trtllm,
            Framework::Dynamo,
            Framework::Tabbyapi,
        ] {
            assert!(REQUEST_SCOPED.iter().any(|m| m.framework == fw));
        }
    }
}

closed_set! {
    /// Whether a server observed a request the records do not hold as a
    /// success (cancelled, failed, or cut at the end of a duration run)
    /// at one observation point.
    pub enum Observes {
        /// Certainly: the request reached that point before it ended.
        Yes => "yes",
        /// Certainly not: the framework makes no such observation for it.
        No => "no",
        /// Cannot tell (it may have ended before or after the point, or the
        /// framework's behaviour is not known).
        Maybe => "maybe",
    }
}

/// What `framework` observes at `at` for a request that ended without
/// success: `first_token` says whether the client received a first token
/// (the server made it, so it had scheduled the request and observed its
/// first token), `cancelled` whether the client gave up on it (a
/// disconnect, which the server sees as an abort).
///
/// vLLM v1 (`v1/engine/output_processor.py` `abort_requests`, vllm issues
/// #31503 and #55634): observations already made stay (prefix-cache
/// queries and hits at scheduling, TTFT and prompt tokens at the first
/// token, generation tokens and ITL on the way), an abort during prefill
/// drops that step's output, and no finished-request statistics are made
/// (e2e, queue, prefill, decode and inference time, request prompt and
/// generation tokens, `request_success`). The Dynamo workers' `vllm:*`
/// families are vLLM's own. Other frameworks: what an abort leaves is not
/// in this table, so a completion-time observation may or may not exist.
pub fn observes_unsuccessful(
    framework: Framework,
    at: ObservedAt,
    first_token: bool,
    cancelled: bool,
) -> Observes {
    match at {
        ObservedAt::Completion if framework == Framework::Vllm && cancelled => Observes::No,
        ObservedAt::Completion => Observes::Maybe,
        _ if first_token => Observes::Yes,
        _ => Observes::Maybe,
    }
}

/// When an endpoint of `role` makes an observation the table places at
/// `at`: a disaggregated deployment's prefill worker finishes its request
/// when it hands the KV cache to the decode worker, at about the client's
/// first token, so its completion-time observations (e2e, queue, prefill
/// and inference time, request_success ...) are made then, not when the
/// client's request completes. Every other endpoint observes as the table
/// says.
pub fn observed_on(at: ObservedAt, role: Option<&str>) -> ObservedAt {
    match (at, role) {
        (ObservedAt::Completion, Some("prefill")) => ObservedAt::FirstToken,
        _ => at,
    }
}
