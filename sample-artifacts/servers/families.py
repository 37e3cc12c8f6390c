"""The metric families of real serving frameworks, and what a request
observes in them.

Names, types, help texts, label names and bucket boundaries are taken from
the frameworks' own source, read for this file:

- vLLM v1, ``vllm/v1/metrics/loggers.py`` (``PrometheusStatLogger``): label
  names ``model_name``, ``engine``; ``request_success`` adds
  ``finished_reason`` (a child per reason, created up front); the deprecated
  ``gpu_cache_usage_perc`` and ``gpu_prefix_cache_*`` beside their
  replacements; histograms recorded when a request finishes, except TTFT
  (first token) and the per-token / per-step ones.
- SGLang, ``python/sglang/srt/metrics/collector.py``: the tokenizer
  manager's counters and histograms (``cached_tokens_total`` incremented only
  when a request had cached tokens, so its series appears with the first
  hit), the schedulers' gauges and ``queue_time_seconds``, every scheduler
  labelled ``engine_type``, ``model_name``, ``moe_ep_rank``, ``pp_rank``,
  ``tp_rank`` and, under DP attention, ``dp_rank``; rendered by
  prometheus_client's multiprocess collector.
- TensorRT-LLM, ``tensorrt_llm/metrics/collector.py`` (``MetricsCollector``,
  prefix ``trtllm_``): labels ``model_name``, ``engine_type``; per-request
  histograms and counters logged when the request finishes; the prompt
  cached-tokens counter only when a request had cached tokens.
- Dynamo, ``lib/runtime/src/metrics/prometheus_names.rs`` and the frontend's
  ``lib/llm/src/http/service/metrics.rs``: ``dynamo_frontend_*`` (TTFT and
  the input-length histogram observed at the first token, duration, the
  output-length histogram and ``requests_total`` at completion; log-spaced
  buckets rounded to two significant figures, from 0), and the workers'
  ``dynamo_component_*`` labelled ``dynamo_namespace``, ``dynamo_component``,
  ``dynamo_endpoint``.
"""

import math

from exposition import Registry, python_process_families

# --- vLLM --------------------------------------------------------------------------------

VLLM_TTFT = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0,
             7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0]
VLLM_TPOT = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
             10.0, 20.0, 40.0, 80.0]
VLLM_REQUEST_LATENCY = [0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0,
                        50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0]
VLLM_ITERATION_TOKENS = [1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384]
VLLM_PARAMS_N = [1, 2, 5, 10, 20]


def build_1_2_5_buckets(max_value):
    out, exponent = [], 0
    while True:
        for m in (1, 2, 5):
            v = m * 10 ** exponent
            if v > max_value:
                return out
            out.append(v)
        exponent += 1


class Vllm:
    """vLLM's PrometheusStatLogger for `engines` engine cores (data parallel)."""

    def __init__(self, model, engines=1, max_model_len=2048, start_time=0.0, registry=None,
                 process=True):
        self.model, self.engines = model, engines
        r = self.registry = registry or Registry()
        self.process = python_process_families(r, start_time) if process else None
        ln = ["model_name", "engine"]
        self.running = r.add("vllm:num_requests_running", "gauge",
                             "Number of requests in model execution batches.", ln)
        self.waiting = r.add("vllm:num_requests_waiting", "gauge",
                             "Number of requests waiting to be processed.", ln)
        self.gpu_cache_usage = r.add(
            "vllm:gpu_cache_usage_perc", "gauge",
            "GPU KV-cache usage. 1 means 100 percent usage.DEPRECATED: Use "
            "vllm:kv_cache_usage_perc instead.", ln)
        self.gpu_queries = r.add(
            "vllm:gpu_prefix_cache_queries", "counter",
            "GPU prefix cache queries, in terms of number of queriedtokens. DEPRECATED: Use "
            "vllm:prefix_cache_queries instead.", ln)
        self.gpu_hits = r.add(
            "vllm:gpu_prefix_cache_hits", "counter",
            "GPU prefix cache hits, in terms of number of cached tokens. DEPRECATED: Use "
            "vllm:prefix_cache_hits instead.", ln)
        self.kv_usage = r.add("vllm:kv_cache_usage_perc", "gauge",
                              "KV-cache usage. 1 means 100 percent usage.", ln)
        self.queries = r.add("vllm:prefix_cache_queries", "counter",
                             "Prefix cache queries, in terms of number of queried tokens.", ln)
        self.hits = r.add("vllm:prefix_cache_hits", "counter",
                          "Prefix cache hits, in terms of number of cached tokens.", ln)
        self.preemptions = r.add("vllm:num_preemptions", "counter",
                                 "Cumulative number of preemption from the engine.", ln)
        self.prompt_tokens = r.add("vllm:prompt_tokens", "counter",
                                   "Number of prefill tokens processed.", ln)
        self.generation_tokens = r.add("vllm:generation_tokens", "counter",
                                       "Number of generation tokens processed.", ln)
        self.success = r.add("vllm:request_success", "counter",
                             "Count of successfully processed requests.",
                             ln + ["finished_reason"])
        b125 = build_1_2_5_buckets(max_model_len)
        self.h_prompt = r.add("vllm:request_prompt_tokens", "histogram",
                              "Number of prefill tokens processed.", ln, b125)
        self.h_generation = r.add("vllm:request_generation_tokens", "histogram",
                                  "Number of generation tokens processed.", ln, b125)
        self.h_iteration = r.add("vllm:iteration_tokens_total", "histogram",
                                 "Histogram of number of tokens per engine_step.", ln,
                                 VLLM_ITERATION_TOKENS)
        self.h_max_gen = r.add("vllm:request_max_num_generation_tokens", "histogram",
                               "Histogram of maximum number of requested generation tokens.",
                               ln, b125)
        self.h_n = r.add("vllm:request_params_n", "histogram",
                         "Histogram of the n request parameter.", ln, VLLM_PARAMS_N)
        self.h_max_tokens = r.add("vllm:request_params_max_tokens", "histogram",
                                  "Histogram of the max_tokens request parameter.", ln, b125)
        self.h_ttft = r.add("vllm:time_to_first_token_seconds", "histogram",
                            "Histogram of time to first token in seconds.", ln, VLLM_TTFT)
        self.h_tpot = r.add("vllm:time_per_output_token_seconds", "histogram",
                            "Histogram of time per output token in seconds.", ln, VLLM_TPOT)
        self.h_e2e = r.add("vllm:e2e_request_latency_seconds", "histogram",
                           "Histogram of e2e request latency in seconds.", ln,
                           VLLM_REQUEST_LATENCY)
        self.h_queue = r.add("vllm:request_queue_time_seconds", "histogram",
                             "Histogram of time spent in WAITING phase for request.", ln,
                             VLLM_REQUEST_LATENCY)
        self.h_inference = r.add("vllm:request_inference_time_seconds", "histogram",
                                 "Histogram of time spent in RUNNING phase for request.", ln,
                                 VLLM_REQUEST_LATENCY)
        self.h_prefill = r.add("vllm:request_prefill_time_seconds", "histogram",
                               "Histogram of time spent in PREFILL phase for request.", ln,
                               VLLM_REQUEST_LATENCY)
        self.h_decode = r.add("vllm:request_decode_time_seconds", "histogram",
                              "Histogram of time spent in DECODE phase for request.", ln,
                              VLLM_REQUEST_LATENCY)
        self.cache_config = r.add("vllm:cache_config_info", "gauge",
                                  "Information of the LLMEngine CacheConfig",
                                  ["block_size", "cache_dtype", "enable_prefix_caching",
                                   "engine", "gpu_memory_utilization", "num_gpu_blocks"])
        self.start()

    def start(self):
        """What the logger creates up front: the per-engine children."""
        for e in range(self.engines):
            labels = self.labels(e)
            for f in (self.running, self.waiting, self.gpu_cache_usage, self.kv_usage):
                f.set(labels, 0.0)
            for f in (self.gpu_queries, self.gpu_hits, self.queries, self.hits,
                      self.preemptions, self.prompt_tokens, self.generation_tokens):
                f.inc(labels, 0.0)
            for reason in ("stop", "length", "abort"):
                self.success.inc(dict(labels, finished_reason=reason), 0.0)
            for f in (self.h_prompt, self.h_generation, self.h_iteration, self.h_max_gen,
                      self.h_n, self.h_max_tokens, self.h_ttft, self.h_tpot, self.h_e2e,
                      self.h_queue, self.h_inference, self.h_prefill, self.h_decode):
                f.child(labels)
            self.cache_config.set({"block_size": "16", "cache_dtype": "auto",
                                   "enable_prefix_caching": "True", "engine": str(e),
                                   "gpu_memory_utilization": "0.9",
                                   "num_gpu_blocks": "27000"}, 1.0)

    def labels(self, engine):
        return {"model_name": self.model, "engine": str(engine)}

    def request_metrics(self):
        """The request-scoped histograms and when each is observed."""
        return {
            "vllm:time_to_first_token_seconds": "first_token",
            "vllm:e2e_request_latency_seconds": "completion",
            "vllm:request_queue_time_seconds": "completion",
            "vllm:request_inference_time_seconds": "completion",
            "vllm:request_prefill_time_seconds": "completion",
            "vllm:request_decode_time_seconds": "completion",
            "vllm:request_prompt_tokens": "completion",
            "vllm:request_generation_tokens": "completion",
            "vllm:request_max_num_generation_tokens": "completion",
            "vllm:request_params_n": "completion",
            "vllm:request_params_max_tokens": "completion",
            "vllm:request_success": "completion",
        }


# --- SGLang ------------------------------------------------------------------------------

SGLANG_TTFT = [0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400]
SGLANG_E2E = [0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400, 600,
              1200, 1800, 2400]
SGLANG_ITL = [0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040,
              0.060, 0.080, 0.100, 0.200, 0.400, 0.600, 0.800, 1.000, 2.000, 4.000, 6.000,
              8.000]
SGLANG_QUEUE = [0.0, 0.1, 0.2, 0.5, 1, 2, 3, 4, 5, 10, 15, 20, 30, 40, 50, 60, 70, 80, 90, 100,
                200, 300, 400, 500, 600, 700, 800, 900, 1000, 1200, 1400, 1600, 1800, 2000,
                2500, 3000]
SGLANG_RETRACTIONS = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 75, 100]


class Sglang:
    """SGLang's tokenizer manager and schedulers, under DP attention with
    `dp` data-parallel groups of `tp_per_dp` tensor-parallel ranks (every
    scheduler exports its metrics: each TP rank of a group sees every
    request of the group)."""

    def __init__(self, model, dp=1, tp_per_dp=1):
        self.model, self.dp, self.tp_per_dp = model, dp, tp_per_dp
        r = self.registry = Registry()
        tok = ["model_name"]
        self.prompt_tokens = r.add("sglang:prompt_tokens_total", "counter",
                                   "Number of prefill tokens processed.", tok)
        self.generation_tokens = r.add("sglang:generation_tokens_total", "counter",
                                       "Number of generation tokens processed.", tok)
        self.cached_tokens = r.add("sglang:cached_tokens_total", "counter",
                                   "Number of cached prompt tokens.", tok)
        self.num_requests = r.add("sglang:num_requests_total", "counter",
                                  "Number of requests processed.", tok)
        self.num_aborted = r.add("sglang:num_aborted_requests_total", "counter",
                                 "Number of requests aborted.", tok)
        self.h_ttft = r.add("sglang:time_to_first_token_seconds", "histogram",
                            "Histogram of time to first token in seconds.", tok, SGLANG_TTFT)
        self.h_itl = r.add("sglang:inter_token_latency_seconds", "histogram",
                           "Histogram of inter-token latency in seconds.", tok, SGLANG_ITL)
        self.h_e2e = r.add("sglang:e2e_request_latency_seconds", "histogram",
                           "Histogram of End-to-end request latency in seconds", tok, SGLANG_E2E)
        self.h_retractions = r.add("sglang:num_retractions", "histogram",
                                   "Histogram of retraction counts per request.", tok,
                                   SGLANG_RETRACTIONS)
        sch = ["engine_type", "model_name", "moe_ep_rank", "pp_rank", "tp_rank", "dp_rank"]
        mr = "mostrecent"
        self.running = r.add("sglang:num_running_reqs", "gauge",
                             "The number of running requests.", sch, multiprocess_mode=mr)
        self.used_tokens = r.add("sglang:num_used_tokens", "gauge",
                                 "The number of used tokens.", sch, multiprocess_mode=mr)
        self.token_usage = r.add("sglang:token_usage", "gauge", "The token usage.", sch,
                                 multiprocess_mode=mr)
        self.gen_throughput = r.add("sglang:gen_throughput", "gauge",
                                    "The generation throughput (token/s).", sch,
                                    multiprocess_mode=mr)
        self.queue_reqs = r.add("sglang:num_queue_reqs", "gauge",
                                "The number of requests in the waiting queue.", sch,
                                multiprocess_mode=mr)
        self.cache_hit_rate = r.add("sglang:cache_hit_rate", "gauge",
                                    "The prefix cache hit rate.", sch, multiprocess_mode=mr)
        self.max_tokens = r.add("sglang:max_total_num_tokens", "gauge",
                                "Maximum total number of tokens in the KV cache pool.", sch,
                                multiprocess_mode=mr)
        # No multiprocess_mode: mode "all", one series per process (pid label).
        self.retracted = r.add("sglang:num_retracted_reqs", "gauge",
                               "The number of retracted requests.", sch)
        self.h_queue = r.add("sglang:queue_time_seconds", "histogram",
                             "Histogram of queueing time in seconds.", sch, SGLANG_QUEUE)
        self.realtime_tokens = r.add(
            "sglang:realtime_tokens_total", "counter",
            "Total number of tokens processed (updated on each log interval). mode: "
            "prefill_compute, prefill_cache, decode.", sch + ["mode"])
        self.start()

    def tok(self):
        return {"model_name": self.model}

    def ranks(self, group):
        """The scheduler labels of every TP rank of DP group `group`."""
        return [{"engine_type": "unified", "model_name": self.model, "moe_ep_rank": "0",
                 "pp_rank": "0", "tp_rank": str(group * self.tp_per_dp + t),
                 "dp_rank": str(group)} for t in range(self.tp_per_dp)]

    def start(self):
        for f in (self.prompt_tokens, self.generation_tokens, self.num_requests,
                  self.num_aborted):
            f.inc(self.tok(), 0.0)
        for f in (self.h_ttft, self.h_itl, self.h_e2e, self.h_retractions):
            f.child(self.tok())
        for g in range(self.dp):
            for labels in self.ranks(g):
                for f in (self.running, self.used_tokens, self.token_usage,
                          self.gen_throughput, self.queue_reqs, self.cache_hit_rate,
                          self.retracted):
                    f.set(labels, 0.0)
                self.max_tokens.set(labels, 262144.0)
                self.h_queue.child(labels)
                for mode in ("prefill_compute", "prefill_cache", "decode"):
                    self.realtime_tokens.inc(dict(labels, mode=mode), 0.0)


# --- TensorRT-LLM ------------------------------------------------------------------------

TRT_E2E = VLLM_REQUEST_LATENCY
TRT_TTFT = VLLM_TTFT
TRT_TPOT = VLLM_TPOT
TRT_PREFILL = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0,
               80.0, 160.0, 640.0, 2560.0]


class Trtllm:
    def __init__(self, model, start_time=0.0):
        self.model = model
        r = self.registry = Registry()
        self.process = python_process_families(r, start_time)
        ln = ["engine_type", "model_name"]
        self.success = r.add("trtllm_request_success_total", "counter",
                             "Count of successfully processed requests.",
                             ln + ["finished_reason"])
        self.h_e2e = r.add("trtllm_e2e_request_latency_seconds", "histogram",
                           "Histogram of end to end request latency in seconds.", ln, TRT_E2E)
        self.h_ttft = r.add("trtllm_time_to_first_token_seconds", "histogram",
                            "Histogram of time to first token in seconds.", ln, TRT_TTFT)
        self.h_tpot = r.add("trtllm_time_per_output_token_seconds", "histogram",
                            "Histogram of time per output token in seconds.", ln, TRT_TPOT)
        self.h_queue = r.add("trtllm_request_queue_time_seconds", "histogram",
                             "Histogram of time spent in WAITING phase for request.", ln,
                             VLLM_REQUEST_LATENCY)
        self.h_prefill = r.add("trtllm_request_prefill_time_seconds", "histogram",
                               "Histogram of prefill (context) phase duration in seconds "
                               "(first_token_time - first_scheduled_time).", ln, TRT_PREFILL)
        self.h_decode = r.add("trtllm_request_decode_time_seconds", "histogram",
                              "Histogram of decode (generation) phase duration in seconds "
                              "(last_token_time - first_token_time).", ln, VLLM_REQUEST_LATENCY)
        self.h_inference = r.add("trtllm_request_inference_time_seconds", "histogram",
                                 "Histogram of total inference duration in seconds "
                                 "(last_token_time - first_scheduled_time).", ln,
                                 VLLM_REQUEST_LATENCY)
        self.prompt_tokens = r.add("trtllm_prompt_tokens_total", "counter",
                                   "Cumulative number of prompt (input) tokens processed.", ln)
        self.generation_tokens = r.add("trtllm_generation_tokens_total", "counter",
                                       "Cumulative number of generation (output) tokens "
                                       "produced.", ln)
        self.cached_tokens = r.add("trtllm_prompt_cached_tokens_total", "counter",
                                   "Cumulative number of prompt tokens served from the KV "
                                   "cache.", ln)
        self.hit_rate = r.add("trtllm_kv_cache_hit_rate", "gauge", "KV cache hit rate", ln)
        self.reused_blocks = r.add("trtllm_kv_cache_reused_blocks", "counter",
                                   "Cumulative number of KV cache blocks reused (cache hits)",
                                   ln)
        self.missed_blocks = r.add("trtllm_kv_cache_missed_blocks", "counter",
                                   "Cumulative number of KV cache blocks missed (cache misses)",
                                   ln)
        self.kv_utilization = r.add("trtllm_kv_cache_utilization", "gauge",
                                    "KV cache utilization", ln)
        self.running = r.add("trtllm_num_requests_running", "gauge", "Number of active requests",
                             ln)
        self.waiting = r.add("trtllm_num_requests_waiting", "gauge", "Number of queued requests",
                             ln)
        self.completed = r.add("trtllm_num_requests_completed_total", "counter",
                               "Total number of completed requests across iterations", ln)

    def labels(self):
        return {"engine_type": "trtllm", "model_name": self.model}


# --- Dynamo ------------------------------------------------------------------------------


def round_sig(value, sig=2):
    if value == 0:
        return 0.0
    magnitude = math.floor(math.log10(abs(value)))
    scale = 10 ** (sig - 1 - magnitude)
    return round(value * scale) / scale


def dynamo_log_buckets(lo, hi, count):
    """lib/llm/src/http/service/metrics.rs generate_log_buckets."""
    out = [0.0]
    for i in range(1, count):
        v = math.exp(math.log(lo) + (math.log(hi) - math.log(lo)) * i / (count - 1))
        out.append(round_sig(v, 2))
    dedup = []
    for b in out:
        if not dedup or dedup[-1] != b:
            dedup.append(b)
    return dedup


class DynamoFrontend:
    def __init__(self, model):
        self.model = model
        r = self.registry = Registry()
        m = ["model"]
        self.requests = r.add("dynamo_frontend_requests_total", "counter",
                              "Total number of LLM requests processed",
                              ["model", "endpoint", "request_type", "status"])
        self.inflight = r.add("dynamo_frontend_inflight_requests", "gauge",
                              "Number of inflight requests", m)
        self.queued = r.add("dynamo_frontend_queued_requests", "gauge",
                            "Number of requests in HTTP processing queue", m)
        self.disconnected = r.add("dynamo_frontend_disconnected_clients", "gauge",
                                  "Number of disconnected clients")
        self.h_duration = r.add("dynamo_frontend_request_duration_seconds", "histogram",
                                "Duration of LLM requests", m, dynamo_log_buckets(1.0, 256.0, 10))
        self.h_isl = r.add("dynamo_frontend_input_sequence_tokens", "histogram",
                           "Input sequence length in tokens", m,
                           dynamo_log_buckets(50.0, 128000.0, 12))
        self.h_osl = r.add("dynamo_frontend_output_sequence_tokens", "histogram",
                           "Output sequence length in tokens", m,
                           dynamo_log_buckets(50.0, 32000.0, 10))
        self.output_tokens = r.add("dynamo_frontend_output_tokens_total", "counter",
                                   "Total number of output tokens generated (updates in "
                                   "real-time)", m)
        self.h_ttft = r.add("dynamo_frontend_time_to_first_token_seconds", "histogram",
                            "Time to first token in seconds", m,
                            dynamo_log_buckets(0.001, 480.0, 18))
        self.h_itl = r.add("dynamo_frontend_inter_token_latency_seconds", "histogram",
                           "Inter-token latency in seconds", m, dynamo_log_buckets(0.001, 2.0, 13))
        self.context_length = r.add("dynamo_frontend_model_context_length", "gauge",
                                    "Maximum context length in tokens for a worker serving "
                                    "the model", m)
        self.kv_block_size = r.add("dynamo_frontend_model_kv_cache_block_size", "gauge",
                                   "KV cache block size in tokens for a worker serving the "
                                   "model", m)
        labels = {"model": model}
        self.inflight.set(labels, 0)
        self.queued.set(labels, 0)
        self.context_length.set(labels, 2048)
        self.kv_block_size.set(labels, 16)


class DynamoWorker:
    """A Dynamo worker's system endpoint: the runtime's dynamo_component_*
    families (Rust rendering) and, after them, the engine's own metrics."""

    def __init__(self, component, model, engine):
        self.component = component
        r = self.registry = Registry()
        ln = ["dynamo_component", "dynamo_endpoint", "dynamo_namespace"]
        self.requests = r.add("dynamo_component_requests_total", "counter",
                              "Total number of requests processed by work handler", ln)
        self.h_duration = r.add("dynamo_component_request_duration_seconds", "histogram",
                                "Time spent processing requests by work handler",
                                ln, [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10])
        self.inflight = r.add("dynamo_component_inflight_requests", "gauge",
                              "Number of requests currently being processed by work handler", ln)
        self.request_bytes = r.add("dynamo_component_request_bytes_total", "counter",
                                   "Total number of bytes received in requests by work handler",
                                   ln)
        self.response_bytes = r.add("dynamo_component_response_bytes_total", "counter",
                                    "Total number of bytes sent in responses by work handler",
                                    ln)
        self.engine = engine
        self.inflight.set(self.labels(), 0)
        self.requests.inc(self.labels(), 0)

    def labels(self):
        return {"dynamo_component": self.component, "dynamo_endpoint": "generate",
                "dynamo_namespace": "dynamo"}

    def render(self):
        return self.registry.render_rust() + self.engine.registry.render_python()
