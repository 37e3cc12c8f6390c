//! One core, the same lines, three ways to get the fields the checks read.

use std::borrow::Cow;
use std::time::Instant;

use serde::Deserialize;

#[derive(Deserialize)]
struct V {
    value: Option<f64>,
}

#[derive(Deserialize)]
#[allow(dead_code)]
struct Meta<'a> {
    request_start_ns: u64,
    request_end_ns: u64,
    #[serde(borrow)]
    benchmark_phase: Cow<'a, str>,
    #[serde(default, borrow)]
    x_request_id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    conversation_id: Option<Cow<'a, str>>,
    #[serde(default)]
    turn_index: Option<u32>,
    #[serde(default)]
    was_cancelled: bool,
}

macro_rules! metrics {
    ($($f:ident),*) => {
        #[derive(Deserialize, Default)]
        struct M { $( $f: Option<V>, )* }
        const KEYS: &[&str] = &[$( stringify!($f), )*];
    };
}
metrics!(
    time_to_first_token,
    request_latency,
    inter_token_latency,
    output_token_throughput_per_user,
    prefill_throughput_per_user,
    e2e_output_token_throughput,
    input_sequence_length,
    output_sequence_length,
    usage_prompt_tokens,
    usage_completion_tokens,
    usage_prompt_cache_read_tokens,
    http_req_dns_lookup,
    http_req_connecting,
    http_req_connection_reused,
    http_req_connection_overhead
);

#[derive(Deserialize)]
struct Rec<'a> {
    #[serde(borrow)]
    metadata: Meta<'a>,
    #[serde(default)]
    metrics: Option<M>,
}

fn ttft(r: Rec) -> f64 {
    r.metrics
        .and_then(|m| m.time_to_first_token)
        .and_then(|v| v.value)
        .unwrap_or(0.0)
        + r.metadata.request_start_ns as f64 * 0.0
}

fn timed(name: &str, bytes: f64, f: impl Fn() -> f64) {
    let t = Instant::now();
    let check = f();
    let s = t.elapsed().as_secs_f64();
    println!(
        "{name:28} {:.3} GB/s (checksum {check:.3})",
        bytes / s / 1e9
    );
}

fn main() {
    let path = std::env::args()
        .nth(1)
        .expect("usage: parser-compare FILE.jsonl");
    let text = std::fs::read_to_string(path).expect("readable UTF-8 file");
    let lines: Vec<&str> = text.lines().collect();
    let bytes = text.len() as f64;
    for _ in 0..3 {
        timed("serde_json typed", bytes, || {
            lines
                .iter()
                .map(|l| ttft(serde_json::from_str(l).expect("valid")))
                .sum()
        });
        timed("sonic-rs typed", bytes, || {
            lines
                .iter()
                .map(|l| ttft(sonic_rs::from_str(l).expect("valid")))
                .sum()
        });
        timed("sonic-rs lazy (metrics)", bytes, || {
            let mut acc = 0.0;
            for l in &lines {
                for item in sonic_rs::to_object_iter(*l) {
                    let (k, v) = item.expect("valid");
                    if &*k == "metadata" {
                        let m: Meta = sonic_rs::from_str(v.as_raw_str()).expect("valid");
                        acc += m.request_start_ns as f64 * 0.0;
                    } else if &*k == "metrics" {
                        for it in sonic_rs::to_object_iter(v.as_raw_str()) {
                            let (k2, v2) = it.expect("valid");
                            if KEYS.contains(&&*k2) {
                                let x: V = sonic_rs::from_str(v2.as_raw_str()).expect("valid");
                                if &*k2 == "time_to_first_token" {
                                    acc += x.value.unwrap_or(0.0);
                                }
                            }
                        }
                    }
                }
            }
            acc
        });
    }
}
