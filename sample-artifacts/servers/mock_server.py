#!/usr/bin/env python3
"""Mock OpenAI-compatible inference server for artifact-check's sample runs.

Standard library only; binds 127.0.0.1 only. Each --scenario reproduces one
way AIPerf's published numbers go wrong, and every scenario writes a ground
truth ledger (--ledger, JSON lines) of what really happened on the server:
one line per TCP connection accepted and one per request served, with the
X-Request-ID AIPerf sent, the connection it arrived on, its token counts and
the wall-clock time (ns) at which each server metric observation was
published. artifact-check's integration tests compare its report against
this ledger.

Scenarios
  clean         streaming chat over HTTP/1.1 keep-alive; every histogram and
                counter is published before the response finishes, so each
                observation belongs to the phase of its request. Series carry
                an engine label alternating "0"/"1" (two label sets to sum).
  late-warmup   the reproducer of AIPerf issue "Warmup server histogram
                observations can leak into profiling metrics": HTTP/1.0,
                non-streaming; the first (warmup) request's prefill
                observation is published 1.5 s after its response, while the
                five 0.5 s profiling requests keep profiling open.
  cold-tls      streaming chat over HTTPS; the TLS handshake of every new
                connection is delayed (--handshake-delay), and every
                --close-every'th response carries "Connection: close", so the
                client must open (and pay for) a new connection.
  prefix-cache  streaming chat with a block prefix cache: cached tokens are
                the longest previously seen prefix of the prompt (in blocks
                of 16 words). Reports usage.prompt_tokens_details.cached_tokens
                and vLLM- and SGLang-style cumulative cache counters. Time to
                first token grows with the uncached tokens only.
  idle-metrics  serves /metrics only (the same families, all zero): a second
                scrape endpoint that sees no traffic.
"""

import argparse
import json
import random
import socket
import ssl
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOCK = threading.Lock()
BLOCK = 16

TTFT_BUCKETS = ["0.001", "0.005", "0.01", "0.02", "0.04", "0.06", "0.08", "0.1", "0.25", "0.5",
                "1.0", "2.5", "5.0", "10.0"]
TOKEN_BUCKETS = ["1", "2", "5", "10", "20", "50", "100", "200", "500", "1000", "2000", "5000"]


class Histogram:
    def __init__(self, name, help_text, buckets):
        self.name, self.help, self.le = name, help_text, buckets
        self.series = {}  # label string -> [bucket counts..., sum, count]

    def observe(self, labels, value):
        s = self.series.setdefault(labels, [0] * len(self.le) + [0.0, 0])
        for i, le in enumerate(self.le):
            if value <= float(le):
                s[i] += 1
        s[-2] += value
        s[-1] += 1

    def render(self, labelsets):
        out = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} histogram"]
        for labels in labelsets:
            s = self.series.get(labels, [0] * len(self.le) + [0.0, 0])
            sep = "," if labels else ""
            for i, le in enumerate(self.le):
                out.append(f'{self.name}_bucket{{{labels}{sep}le="{le}"}} {s[i]}')
            out.append(f'{self.name}_bucket{{{labels}{sep}le="+Inf"}} {s[-1]}')
            out.append(f"{self.name}_sum{{{labels}}} {s[-2]}")
            out.append(f"{self.name}_count{{{labels}}} {s[-1]}")
        return out


class Counter:
    def __init__(self, name, help_text):
        self.name, self.help, self.series = name, help_text, {}

    def inc(self, labels, value):
        self.series[labels] = self.series.get(labels, 0) + value

    def render(self, labelsets):
        # Exposed as vLLM does: the family is named with its _total suffix,
        # which prometheus_client (and so AIPerf) strips from counters.
        out = [f"# HELP {self.name}_total {self.help}", f"# TYPE {self.name}_total counter"]
        for labels in labelsets:
            out.append(f"{self.name}_total{{{labels}}} {float(self.series.get(labels, 0))}")
        return out


class Metrics:
    """Cumulative Prometheus state. Every mutation is logged to the ledger."""

    def __init__(self, labelsets):
        self.labelsets = labelsets
        self.h = {
            "ttft": Histogram("vllm:time_to_first_token_seconds",
                              "Histogram of time to first token in seconds.", TTFT_BUCKETS),
            "e2e": Histogram("vllm:e2e_request_latency_seconds",
                             "Histogram of e2e request latency in seconds.", TTFT_BUCKETS),
            "prefill": Histogram("vllm:request_prefill_time_seconds",
                                 "Histogram of time spent in PREFILL phase for request.",
                                 TTFT_BUCKETS),
            "prompt": Histogram("vllm:request_prompt_tokens",
                                "Number of prefill tokens processed.", TOKEN_BUCKETS),
            "generation": Histogram("vllm:request_generation_tokens",
                                    "Number of generation tokens processed.", TOKEN_BUCKETS),
        }
        self.c = {
            "success": Counter("vllm:request_success", "Count of successfully processed requests."),
            "prompt_tokens": Counter("vllm:prompt_tokens", "Number of prefill tokens processed."),
            "generation_tokens": Counter("vllm:generation_tokens",
                                         "Number of generation tokens processed."),
            "queries": Counter("vllm:prefix_cache_queries",
                               "Prefix cache queries, in terms of number of queried tokens."),
            "hits": Counter("vllm:prefix_cache_hits",
                            "Prefix cache hits, in terms of number of cached tokens."),
            "sg_prompt": Counter("sglang:prompt_tokens", "Number of prefill tokens processed."),
        }
        # SGLang labels its cached-token counter by cache tier.
        self.sg_cached = Counter("sglang:cached_tokens", "Number of cached prompt tokens.")

    def render(self, with_cache, only=None):
        lines = []
        for key, h in self.h.items():
            if only is None or key in only:
                lines += h.render(self.labelsets)
        if only is not None:
            return "\n".join(lines) + "\n"
        for key, c in self.c.items():
            if key in ("queries", "hits", "sg_prompt") and not with_cache:
                continue
            lines += c.render(self.labelsets)
        if with_cache:
            tiers = [f'{ls},cache_source="device"' if ls else 'cache_source="device"'
                     for ls in self.labelsets]
            lines += self.sg_cached.render(tiers)
        return "\n".join(lines) + "\n"


class Ledger:
    def __init__(self, path):
        self.f = open(path, "a", buffering=1) if path else None

    def write(self, **event):
        if self.f:
            with LOCK:
                self.f.write(json.dumps(event, sort_keys=True) + "\n")


class State:
    def __init__(self, args):
        self.args = args
        engines = ['engine="0"', 'engine="1"'] if args.scenario == "clean" else [""]
        self.metrics = Metrics(engines)
        self.ledger = Ledger(args.ledger)
        self.requests = 0
        self.connections = 0
        self.cache = set()
        self.engine_labels = engines


def words_of(request):
    text = []
    for m in request.get("messages", []):
        content = m.get("content", "")
        if isinstance(content, list):
            content = " ".join(p.get("text", "") for p in content if isinstance(p, dict))
        text.append(str(content))
    return " ".join(text).split()


def make_handler(state):
    args = state.args

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0" if args.scenario == "late-warmup" else "HTTP/1.1"

        def setup(self):
            super().setup()
            with LOCK:
                state.connections += 1
                self.conn_id = state.connections
            self.requests_on_conn = 0
            state.ledger.write(event="connection", conn_id=self.conn_id, t_ns=time.time_ns())

        def log_message(self, format, *a):
            return

        def do_GET(self):
            if self.path != "/metrics":
                self.send_error(404)
                return
            if args.metrics_jitter_ms:
                # A busy server answers scrapes with variable latency, so two
                # scrapes sent close together can complete in either order.
                time.sleep(random.uniform(0, args.metrics_jitter_ms) / 1000)
            with LOCK:
                # The seed reproducer exposes exactly two histograms.
                only = ("ttft", "prefill") if args.scenario == "late-warmup" else None
                body = state.metrics.render(args.scenario == "prefix-cache", only).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def observe(self, rec, key, labels, value, t_ns=None):
            with LOCK:
                state.metrics.h[key].observe(labels, value)
            rec["observations"].append({"metric": state.metrics.h[key].name,
                                        "t_ns": t_ns or time.time_ns(), "value": value})

        def count(self, rec, key, labels, value):
            with LOCK:
                state.metrics.c[key].inc(labels, value)
            rec["observations"].append({"metric": state.metrics.c[key].name,
                                        "t_ns": time.time_ns(), "value": value})

        def do_POST(self):
            if args.scenario == "idle-metrics" or self.path != "/v1/chat/completions":
                self.send_error(404)
                return
            t0 = time.time_ns()
            length = int(self.headers.get("Content-Length", "0"))
            request = json.loads(self.rfile.read(length) or b"{}")
            self.requests_on_conn += 1
            with LOCK:
                state.requests += 1
                ordinal = state.requests
            labels = state.engine_labels[ordinal % len(state.engine_labels)]
            if args.fail_every and ordinal % args.fail_every == 0:
                # A gateway error before the engine saw the request: no
                # observation, as a proxy's 502 in front of a real server.
                body = json.dumps({"error": {"message": "upstream unavailable",
                                             "type": "bad_gateway", "code": 502}}).encode()
                self.send_response(502)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                state.ledger.write(event="error", ordinal=ordinal, conn_id=self.conn_id,
                                   x_request_id=self.headers.get("X-Request-ID"), status=502,
                                   t_ns=t0)
                return
            words = words_of(request)
            prompt_tokens = max(1, len(words))
            cached = 0
            if args.scenario == "prefix-cache":
                with LOCK:
                    if args.cache_flush_every and ordinal % args.cache_flush_every == 0:
                        state.cache.clear()  # evicted under memory pressure
                    blocks = len(words) // BLOCK
                    for k in range(blocks, 0, -1):
                        if hash(tuple(words[: k * BLOCK])) in state.cache:
                            cached = k * BLOCK
                            break
                    for k in range(1, blocks + 1):
                        state.cache.add(hash(tuple(words[: k * BLOCK])))
            max_tokens = request.get("max_completion_tokens") or request.get("max_tokens") or 8
            completion_tokens = int(min(max_tokens, 64))
            close = args.close_every and self.requests_on_conn % args.close_every == 0
            rec = {"event": "request", "ordinal": ordinal, "conn_id": self.conn_id,
                   "request_on_connection": self.requests_on_conn,
                   "x_request_id": self.headers.get("X-Request-ID"),
                   "t_start_ns": t0, "prompt_tokens": prompt_tokens, "cached_tokens": cached,
                   "completion_tokens": completion_tokens, "closes_connection": bool(close),
                   "labels": labels, "observations": []}
            if args.scenario == "late-warmup":
                self.late_warmup(rec, ordinal, request)
            else:
                self.stream(rec, request, labels, prompt_tokens, cached, completion_tokens,
                            close)
            rec["t_end_ns"] = time.time_ns()
            state.ledger.write(**rec)

        def late_warmup(self, rec, ordinal, request):
            # Verbatim behaviour of the seed reproducer, plus the ledger.
            self.observe(rec, "ttft", "", 0.01)
            if ordinal == 1:
                def late():
                    self.observe(rec, "prefill", "", 0.05)
                    state.ledger.write(event="late_observation", ordinal=1, value=0.05,
                                       x_request_id=rec["x_request_id"],
                                       metric="vllm:request_prefill_time_seconds",
                                       t_ns=time.time_ns())
                timer = threading.Timer(1.5, late)
                timer.daemon = True
                timer.start()
            else:
                time.sleep(0.5)
                self.observe(rec, "prefill", "", 0.02)
            body = json.dumps({
                "id": f"chatcmpl-{ordinal}", "object": "chat.completion",
                "created": int(time.time()), "model": request.get("model", "mock-model"),
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"},
                             "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 8, "completion_tokens": 1, "total_tokens": 9},
            }).encode()
            rec["prompt_tokens"], rec["completion_tokens"] = 8, 1
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def chunk(self, payload):
            data = b"data: " + payload + b"\n\n"
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()

        def stream(self, rec, request, labels, prompt_tokens, cached, completion_tokens,
                   close):
            model = request.get("model", "mock-model")
            uncached = prompt_tokens - cached
            queue_s = 0.001
            prefill_s = 0.004 + uncached * args.prefill_s_per_token
            time.sleep(queue_s + prefill_s)
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            if close:
                self.send_header("Connection", "close")
                self.close_connection = True
            self.end_headers()
            base = {"id": f"chatcmpl-{rec['ordinal']}", "object": "chat.completion.chunk",
                    "created": int(time.time()), "model": model}
            first = dict(base, choices=[{"index": 0, "delta": {"role": "assistant",
                                                               "content": "tok "},
                                         "finish_reason": None}])
            self.chunk(json.dumps(first).encode())
            t_first = time.time_ns()
            rec["t_first_token_ns"] = t_first
            ttft_s = (t_first - rec["t_start_ns"]) / 1e9
            self.observe(rec, "ttft", labels, ttft_s, t_first)
            for _ in range(completion_tokens - 1):
                time.sleep(args.itl_s)
                c = dict(base, choices=[{"index": 0, "delta": {"content": "tok "},
                                         "finish_reason": None}])
                self.chunk(json.dumps(c).encode())
            usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                     "total_tokens": prompt_tokens + completion_tokens}
            if args.scenario == "prefix-cache":
                usage["prompt_tokens_details"] = {"cached_tokens": cached}
            e2e_s = (time.time_ns() - rec["t_start_ns"]) / 1e9
            # Completion-time observations are published before the last
            # bytes go out, so none of them can cross a phase boundary late.
            self.observe(rec, "e2e", labels, e2e_s)
            self.observe(rec, "prefill", labels, prefill_s)
            self.observe(rec, "prompt", labels, prompt_tokens)
            self.observe(rec, "generation", labels, completion_tokens)
            self.count(rec, "success", labels, 1)
            self.count(rec, "prompt_tokens", labels, prompt_tokens)
            self.count(rec, "generation_tokens", labels, completion_tokens)
            if args.scenario == "prefix-cache":
                self.count(rec, "queries", labels, prompt_tokens)
                self.count(rec, "hits", labels, cached)
                self.count(rec, "sg_prompt", labels, prompt_tokens)
                tier = f'{labels},cache_source="device"' if labels else 'cache_source="device"'
                with LOCK:
                    state.metrics.sg_cached.inc(tier, cached)
            last = dict(base, choices=[{"index": 0, "delta": {}, "finish_reason": "stop"}],
                        usage=usage)
            self.chunk(json.dumps(last).encode())
            self.chunk(b"[DONE]")
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

    return Handler


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, addr, handler, tls_context, handshake_delay):
        super().__init__(addr, handler)
        self.tls_context = tls_context
        self.handshake_delay = handshake_delay

    def get_request(self):
        sock, addr = super().get_request()
        # As real inference servers do: without it, Nagle's algorithm holds
        # the first SSE chunk behind the headers until the client's delayed
        # ACK, and every streamed response arrives at once.
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.tls_context is not None:
            sock = self.tls_context.wrap_socket(sock, server_side=True,
                                                do_handshake_on_connect=False)
        return sock, addr

    def finish_request(self, request, client_address):
        # Runs in the connection's own thread: the delayed handshake is paid
        # by the connecting client only, never by other connections.
        if self.tls_context is not None:
            time.sleep(self.handshake_delay)
            try:
                request.do_handshake()
            except (ssl.SSLError, OSError):
                return
        super().finish_request(request, client_address)


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scenario", required=True,
                   choices=["clean", "late-warmup", "cold-tls", "prefix-cache", "idle-metrics"])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--ledger", help="append ground-truth events here (JSON lines)")
    p.add_argument("--tls-cert")
    p.add_argument("--tls-key")
    p.add_argument("--handshake-delay", type=float, default=0.0, help="seconds")
    p.add_argument("--close-every", type=int, default=0,
                   help="send Connection: close on every Nth response of a connection")
    p.add_argument("--prefill-s-per-token", type=float, default=0.00005)
    p.add_argument("--itl-s", type=float, default=0.002)
    p.add_argument("--cache-flush-every", type=int, default=0,
                   help="prefix-cache: evict the whole cache before every Nth request")
    p.add_argument("--fail-every", type=int, default=0,
                   help="answer every Nth chat request with HTTP 502 (no observation)")
    p.add_argument("--metrics-jitter-ms", type=float, default=0.0,
                   help="delay each /metrics answer by a random 0..N ms")
    args = p.parse_args()
    tls = None
    if args.tls_cert:
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls.load_cert_chain(args.tls_cert, args.tls_key)
    state = State(args)
    server = Server(("127.0.0.1", args.port), make_handler(state), tls, args.handshake_delay)
    server.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.serve_forever()


if __name__ == "__main__":
    main()
