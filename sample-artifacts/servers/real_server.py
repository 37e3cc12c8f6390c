#!/usr/bin/env python3
"""Mock inference servers that expose what real vLLM, SGLang, TensorRT-LLM and
Dynamo deployments expose, for artifact-check's fixtures of issue 15.

Standard library only; binds 127.0.0.1 only. An OpenAI-compatible streaming
chat endpoint, and per framework the metric families, types, label sets,
bucket boundaries and rendering of the framework's own source
(`families.py`, `exposition.py`):

  vllm     one /metrics (prometheus_client rendering, `_created` samples, the
           process collector), `--engines N` data-parallel engine cores
           (series `engine="0"`..), requests alternating between them
  sglang   one /metrics in multiprocess rendering; `--dp D --tp-per-dp T`:
           DP attention, D groups of T tensor-parallel ranks; every rank of a
           group observes the group's requests in its scheduler metrics
  trtllm   /metrics answers TensorRT-LLM's iteration-stats JSON, and
           /prometheus/metrics the Prometheus text (AIPerf's fallback)
  dynamo   a frontend (the chat endpoint and dynamo_frontend_* on its
           /metrics) in front of a prefill and a decode worker, each its own
           /metrics (`--prefill-port`, `--decode-port`): dynamo_component_*
           and the worker engine's vllm:* families; every worker observes
           every request once

Faults, each recorded in the ledger:
  --late METRIC:ORDINAL:SECONDS[:ROLE]  publish request ORDINAL's observation
           of METRIC (on ROLE's endpoint: frontend, prefill, decode) late
  --restart-after K   after request K the engine process restarts: every
           counter and histogram starts from zero again, new `_created`
           samples and a new process_start_time_seconds
  --slow-scrape EVERY:MS  every EVERY-th /metrics answer is computed when the
           request arrives and sent MS ms later, so a scrape sent after it is
           answered first (out of order)
  --prefix-cache      a block prefix cache (16-word blocks): usage reports
           prompt_tokens_details.cached_tokens, the cache counters count it

The client's side of the connection (the samples' cold-connection and
seed-reproducer runs, the version fixtures):
  --tls-cert/--tls-key   HTTPS; --handshake-delay S delays each TLS handshake
           (paid by the connecting client only)
  --close-every N        every N-th response of a connection carries
           "Connection: close", so the client opens (and pays for) a new one
  --http10               HTTP/1.0: every request on a new connection
  --fail-every N         every N-th chat request answered 502 before the
           engine sees it (a proxy's error in front of a real server: no
           observation)
  --metrics-jitter-ms MS  each /metrics answer delayed by a random 0..MS ms
           (a busy server: two scrapes sent close together can complete in
           either order)
  --cache-flush-every N  (with --prefix-cache) the whole cache evicted before
           every N-th request, as under memory pressure
A client that disconnects (AIPerf's --request-cancellation-rate, or the
end of a duration run's grace period) is seen at the next prefill step or
token: the request is aborted there, as vLLM v1 aborts it
(output_processor.abort_requests): what was observed stays (prefix-cache
queries at scheduling, TTFT and prompt tokens at the first token,
generation tokens on the way), an abort during prefill drops the step's
output (no first token), and no finished-request statistics are made. The
ledger's request line says `aborted` (prefill or decode).
A request with "stream": false is answered with one JSON body, as the
OpenAI-compatible servers do; its engine observations are the same.

The engine's start and load (the steady-state fixtures):
  --cold-start N:SECONDS  the first N requests the server sees pass, one at a
           time, a cold stage of SECONDS each before their prefill (graph
           capture, JIT, cache allocation on first use): an opening wave
  --prefill-batch     prefill is batched: a request's prefill takes as long
           as the prompt tokens of every request in prefill when it enters
  --itl-per-inflight S  decode slows with load: each inter-token gap is
           --itl-s + S x (requests in flight - 1)

The ledger (--ledger, JSON lines) has a line per connection, per request
(with the X-Request-ID AIPerf sent, its engine / DP group, its tokens and
every observation with its metric, series labels, endpoint role, value and
publication time), per restart and per delayed scrape.
"""

import argparse
import json
import random
import select
import socket
import ssl
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from exposition import LOCK
from families import DynamoFrontend, DynamoWorker, Sglang, Trtllm, Vllm

BLOCK = 16
MODEL = "mock-model"


class Ledger:
    def __init__(self, path):
        self.f = open(path, "a", buffering=1) if path else None
        self.lock = threading.Lock()

    def write(self, **event):
        if self.f:
            with self.lock:
                self.f.write(json.dumps(event, sort_keys=True) + "\n")


class PrefixCache:
    def __init__(self):
        self.blocks = set()
        self.lock = threading.Lock()

    def flush(self):
        with self.lock:
            self.blocks.clear()

    def lookup_and_fill(self, words):
        with self.lock:
            n = len(words) // BLOCK
            cached = 0
            for k in range(n, 0, -1):
                if hash(tuple(words[: k * BLOCK])) in self.blocks:
                    cached = k * BLOCK
                    break
            for k in range(1, n + 1):
                self.blocks.add(hash(tuple(words[: k * BLOCK])))
            return cached


class Request:
    """One request in flight: its tokens, its series and its ledger record."""

    def __init__(self, server, ordinal, x_request_id, prompt, cached, completion):
        self.server, self.ordinal = server, ordinal
        self.prompt, self.cached, self.completion = prompt, cached, completion
        self.t0 = time.time()
        self.rec = {"event": "request", "ordinal": ordinal, "x_request_id": x_request_id,
                    "t_start_ns": time.time_ns(), "prompt_tokens": prompt,
                    "cached_tokens": cached, "completion_tokens": completion,
                    "observations": []}

    def observe(self, family, labels, value, role="server", how="observe"):
        """Publish one observation now, or later when a --late fault names it."""
        late = self.server.late_delay(family.name, self.ordinal, role)

        def publish():
            getattr(family, how)(labels, value)
            self.rec["observations"].append({
                "metric": family.name, "series": {k: str(v) for k, v in labels.items()},
                "endpoint": role, "t_ns": time.time_ns(), "value": value, "late": late > 0})
            if late:
                self.server.ledger.write(event="late_observation", ordinal=self.ordinal,
                                         metric=family.name, endpoint=role,
                                         x_request_id=self.rec["x_request_id"],
                                         t_ns=time.time_ns(), value=value)

        if late > 0:
            t = threading.Timer(late, publish)
            t.daemon = True
            t.start()
        else:
            publish()

    def count(self, family, labels, amount, role="server"):
        self.observe(family, labels, amount, role, how="inc")


class Deployment:
    """Base: timings and gauges; subclasses say what each stage observes."""

    def __init__(self, args):
        self.args = args
        self.in_flight = 0
        self.lock = threading.Lock()

    def on_abort(self, req):
        """An aborted request: no finished-request statistics (vLLM's
        behaviour; the other frameworks' is not modelled)."""

    def started(self, delta):
        with self.lock:
            self.in_flight += delta
            return self.in_flight


class VllmDeployment(Deployment):
    def __init__(self, args, start_time):
        super().__init__(args)
        self.vllm = Vllm(MODEL, engines=args.engines, start_time=start_time)
        self.per_engine = [0] * args.engines

    def routes(self):
        return {"/metrics": lambda: ("text/plain; version=0.0.4; charset=utf-8",
                                     self.vllm.registry.render_python())}

    def tick(self):
        self.vllm.process["cpu"].inc({}, 0.01)

    def restart(self):
        self.vllm.registry.reset()
        self.vllm.start()
        self.vllm.process["start"].set({}, time.time())
        self.vllm.process["cpu"].inc({}, 0.5)

    def assign(self, req):
        req.engine = (req.ordinal - 1) % self.args.engines
        req.rec["engine"] = str(req.engine)

    def gauges(self, req, delta):
        v = self.vllm
        labels = v.labels(req.engine)
        with LOCK:
            self.per_engine[req.engine] += delta
            n = self.per_engine[req.engine]
        v.running.set(labels, n)
        v.waiting.set(labels, 0)
        v.kv_usage.set(labels, min(1.0, 0.012 * n))
        v.gpu_cache_usage.set(labels, min(1.0, 0.012 * n))

    def on_arrival(self, req):
        self.gauges(req, +1)

    def on_scheduled(self, req):
        v, labels = self.vllm, self.vllm.labels(req.engine)
        for f, amount in ((v.queries, req.prompt), (v.hits, req.cached),
                          (v.gpu_queries, req.prompt), (v.gpu_hits, req.cached)):
            req.count(f, labels, amount)

    def on_first_token(self, req, ttft):
        v, labels = self.vllm, self.vllm.labels(req.engine)
        req.count(v.prompt_tokens, labels, req.prompt)
        req.observe(v.h_ttft, labels, ttft)
        v.h_iteration.observe(labels, req.prompt - req.cached)

    def on_token(self, req, itl):
        v, labels = self.vllm, self.vllm.labels(req.engine)
        v.generation_tokens.inc(labels, 1)
        v.h_tpot.observe(labels, itl)
        v.h_iteration.observe(labels, 1)

    def on_abort(self, req):
        # vLLM v1: no finished-request statistics for an aborted request.
        self.gauges(req, -1)

    def on_finish(self, req, times):
        v, labels = self.vllm, self.vllm.labels(req.engine)
        req.count(v.success, dict(labels, finished_reason="length"), 1)
        for f, value in ((v.h_e2e, times["e2e"]), (v.h_queue, times["queue"]),
                         (v.h_prefill, times["prefill"]), (v.h_decode, times["decode"]),
                         (v.h_inference, times["inference"]), (v.h_prompt, req.prompt),
                         (v.h_generation, req.completion), (v.h_max_tokens, req.completion),
                         (v.h_n, 1), (v.h_max_gen, req.completion)):
            req.observe(f, labels, value)
        self.gauges(req, -1)


class SglangDeployment(Deployment):
    def __init__(self, args, start_time):
        super().__init__(args)
        self.sg = Sglang(MODEL, dp=args.dp, tp_per_dp=args.tp_per_dp)
        self.per_group = [0] * args.dp

    def routes(self):
        return {"/metrics": lambda: ("text/plain; version=0.0.4; charset=utf-8",
                                     self.sg.registry.render_python(multiprocess=True))}

    def tick(self):
        pass

    def restart(self):
        self.sg.registry.reset()
        self.sg.start()

    def assign(self, req):
        req.group = (req.ordinal - 1) % self.args.dp
        req.rec["dp_rank"] = str(req.group)

    def gauges(self, req, delta):
        with LOCK:
            self.per_group[req.group] += delta
            n = self.per_group[req.group]
        for labels in self.sg.ranks(req.group):
            self.sg.running.set(labels, n)
            self.sg.token_usage.set(labels, min(1.0, 0.001 * n * req.prompt))
            self.sg.used_tokens.set(labels, n * req.prompt)
            self.sg.cache_hit_rate.set(labels, req.cached / max(1, req.prompt))

    def on_arrival(self, req):
        self.gauges(req, +1)

    def on_scheduled(self, req):
        queue = time.time() - req.t0
        for labels in self.sg.ranks(req.group):
            req.observe(self.sg.h_queue, labels, queue)
            self.sg.realtime_tokens.inc(dict(labels, mode="prefill_compute"),
                                        req.prompt - req.cached)
            self.sg.realtime_tokens.inc(dict(labels, mode="prefill_cache"), req.cached)

    def on_first_token(self, req, ttft):
        req.observe(self.sg.h_ttft, self.sg.tok(), ttft)

    def on_token(self, req, itl):
        self.sg.h_itl.observe(self.sg.tok(), itl)
        for labels in self.sg.ranks(req.group):
            self.sg.realtime_tokens.inc(dict(labels, mode="decode"), 1)
            self.sg.gen_throughput.set(labels, 1.0 / max(itl, 1e-6))

    def on_finish(self, req, times):
        sg, tok = self.sg, self.sg.tok()
        req.count(sg.prompt_tokens, tok, req.prompt)
        req.count(sg.generation_tokens, tok, req.completion)
        if req.cached > 0:
            req.count(sg.cached_tokens, tok, req.cached)
        req.count(sg.num_requests, tok, 1)
        req.observe(sg.h_e2e, tok, times["e2e"])
        sg.h_retractions.observe(tok, 0)
        self.gauges(req, -1)


class TrtllmDeployment(Deployment):
    def __init__(self, args, start_time):
        super().__init__(args)
        self.trt = Trtllm(MODEL, start_time=start_time)
        self.iterations = 0

    def routes(self):
        return {
            "/metrics": lambda: ("application/json", json.dumps(self.iteration_stats())),
            "/prometheus/metrics": lambda: ("text/plain; version=0.0.4; charset=utf-8",
                                            self.trt.registry.render_python()),
        }

    def iteration_stats(self):
        with LOCK:
            self.iterations += 1
            return [{"iter": self.iterations, "numActiveRequests": self.in_flight,
                     "numQueuedRequests": 0, "numCompletedRequests": 0,
                     "maxNumActiveRequests": 256, "iterLatencyMS": 4.2,
                     "gpuMemUsage": 60129542144, "cpuMemUsage": 0, "pinnedMemUsage": 0,
                     "kvCacheStats": {"maxNumBlocks": 27000, "freeNumBlocks": 26000,
                                      "usedNumBlocks": 1000, "tokensPerBlock": 32}}]

    def tick(self):
        self.trt.process["cpu"].inc({}, 0.01)

    def restart(self):
        self.trt.registry.reset()
        self.trt.process["start"].set({}, time.time())

    def assign(self, req):
        pass

    def on_arrival(self, req):
        n = self.started(+1)
        self.trt.running.set(self.trt.labels(), n)
        self.trt.waiting.set(self.trt.labels(), 0)

    def on_scheduled(self, req):
        t, labels = self.trt, self.trt.labels()
        blocks = req.prompt // 32
        hit = req.cached // 32
        t.reused_blocks.inc(labels, hit)
        t.missed_blocks.inc(labels, blocks - hit)
        t.hit_rate.set(labels, hit / max(1, blocks))
        t.kv_utilization.set(labels, min(1.0, 0.02 * self.in_flight))

    def on_first_token(self, req, ttft):
        req.ttft = ttft

    def on_token(self, req, itl):
        pass

    def on_finish(self, req, times):
        t, labels = self.trt, self.trt.labels()
        # Logged together when the request finishes (MetricsCollector.log_request_metrics).
        req.count(t.success, dict(labels, finished_reason="length"), 1)
        for f, value in ((t.h_e2e, times["e2e"]), (t.h_ttft, req.ttft),
                         (t.h_tpot, times["tpot"]), (t.h_queue, times["queue"]),
                         (t.h_prefill, times["prefill"]), (t.h_decode, times["decode"]),
                         (t.h_inference, times["inference"])):
            req.observe(f, labels, value)
        req.count(t.prompt_tokens, labels, req.prompt)
        req.count(t.generation_tokens, labels, req.completion)
        if req.cached > 0:
            req.count(t.cached_tokens, labels, req.cached)
        t.completed.inc(labels, 1)
        n = self.started(-1)
        t.running.set(labels, n)


class DynamoDeployment(Deployment):
    """A frontend in front of a prefill and a decode worker (disaggregated)."""

    def __init__(self, args, start_time):
        super().__init__(args)
        self.frontend = DynamoFrontend(MODEL)
        self.prefill = DynamoWorker("prefill", MODEL,
                                    Vllm(MODEL, engines=1, start_time=start_time))
        self.decode = DynamoWorker("backend", MODEL,
                                   Vllm(MODEL, engines=1, start_time=start_time + 0.5))

    def routes(self):
        return {"/metrics": lambda: ("text/plain; version=0.0.4; charset=utf-8",
                                     self.frontend.registry.render_rust())}

    def worker_routes(self, worker):
        return {"/metrics": lambda: ("text/plain; version=0.0.4; charset=utf-8",
                                     worker.render())}

    def tick(self):
        for w in (self.prefill, self.decode):
            w.engine.process["cpu"].inc({}, 0.01)

    def restart(self):
        e = self.decode.engine
        e.registry.reset()
        e.start()
        e.process["start"].set({}, time.time())

    def assign(self, req):
        pass

    def on_arrival(self, req):
        f, m = self.frontend, {"model": MODEL}
        n = self.started(+1)
        f.inflight.set(m, n)
        f.queued.set(m, n)
        for w in (self.prefill, self.decode):
            req.count(w.requests, w.labels(), 1, role=self.role(w))
            w.inflight.set(w.labels(), n)

    def role(self, worker):
        return "prefill" if worker is self.prefill else "decode"

    def on_scheduled(self, req):
        # The prefill worker schedules and computes the prompt (its cache
        # hits are real).
        p, pl = self.prefill.engine, self.prefill.engine.labels(0)
        req.count(p.queries, pl, req.prompt, role="prefill")
        req.count(p.hits, pl, req.cached, role="prefill")
        # vLLM increments the deprecated gpu_prefix_cache_* beside them.
        p.gpu_queries.inc(pl, req.prompt)
        p.gpu_hits.inc(pl, req.cached)

    def on_prefilled(self, req, times):
        # The decode worker schedules the request once the prefill worker's
        # KV has arrived: it queries its cache then, without local hits.
        d, dl = self.decode.engine, self.decode.engine.labels(0)
        req.count(d.queries, dl, req.prompt, role="decode")
        req.count(d.hits, dl, 0, role="decode")
        d.gpu_queries.inc(dl, req.prompt)
        p, labels = self.prefill.engine, self.prefill.engine.labels(0)
        req.count(p.prompt_tokens, labels, req.prompt, role="prefill")
        req.observe(p.h_ttft, labels, times["prefill_done"], role="prefill")
        req.count(p.generation_tokens, labels, 1, role="prefill")
        req.count(p.success, dict(labels, finished_reason="length"), 1, role="prefill")
        for f, value in ((p.h_e2e, times["prefill_done"]), (p.h_queue, times["queue"]),
                         (p.h_prefill, times["prefill"]), (p.h_decode, 0.0),
                         (p.h_inference, times["prefill"]), (p.h_prompt, req.prompt),
                         (p.h_generation, 1), (p.h_max_tokens, 1), (p.h_n, 1),
                         (p.h_max_gen, 1)):
            req.observe(f, labels, value, role="prefill")
        w = self.prefill
        w.h_duration.observe(w.labels(), times["prefill_done"])
        w.inflight.set(w.labels(), max(0, self.in_flight - 1))

    def on_first_token(self, req, ttft):
        f, m = self.frontend, {"model": MODEL}
        d, dl = self.decode.engine, self.decode.engine.labels(0)
        req.count(d.prompt_tokens, dl, req.prompt, role="decode")
        req.observe(d.h_ttft, dl, ttft, role="decode")
        req.observe(f.h_ttft, m, ttft, role="frontend")
        req.observe(f.h_isl, m, req.prompt, role="frontend")
        f.queued.set(m, max(0, self.in_flight - 1))
        f.output_tokens.inc(m, 1)

    def on_token(self, req, itl):
        f, m = self.frontend, {"model": MODEL}
        f.output_tokens.inc(m, 1)
        f.h_itl.observe(m, itl)
        d, dl = self.decode.engine, self.decode.engine.labels(0)
        req.count(d.generation_tokens, dl, 1, role="decode")
        d.h_tpot.observe(dl, itl)

    def on_finish(self, req, times):
        f, m = self.frontend, {"model": MODEL}
        d, dl = self.decode.engine, self.decode.engine.labels(0)
        req.count(d.success, dict(dl, finished_reason="length"), 1, role="decode")
        for fam, value in ((d.h_e2e, times["e2e"]), (d.h_queue, times["queue"]),
                           (d.h_prefill, times["prefill"]), (d.h_decode, times["decode"]),
                           (d.h_inference, times["inference"]), (d.h_prompt, req.prompt),
                           (d.h_generation, req.completion), (d.h_max_tokens, req.completion),
                           (d.h_n, 1), (d.h_max_gen, req.completion)):
            req.observe(fam, dl, value, role="decode")
        w = self.decode
        w.h_duration.observe(w.labels(), times["e2e"])
        req.count(f.requests, {"model": MODEL, "endpoint": "chat_completions",
                               "request_type": "stream", "status": "success"}, 1,
                  role="frontend")
        req.observe(f.h_duration, m, times["e2e"], role="frontend")
        req.observe(f.h_osl, m, req.completion, role="frontend")
        n = self.started(-1)
        f.inflight.set(m, n)
        w.inflight.set(w.labels(), n)


DEPLOYMENTS = {"vllm": VllmDeployment, "sglang": SglangDeployment,
               "trtllm": TrtllmDeployment, "dynamo": DynamoDeployment}


class Server:
    def __init__(self, args):
        self.args = args
        self.ledger = Ledger(args.ledger)
        self.dep = DEPLOYMENTS[args.framework](args, time.time() - 3600.0)
        self.cache = PrefixCache() if args.prefix_cache else None
        self.lock = threading.Lock()
        self.cold_lock = threading.Lock()
        self.inflight = 0
        self.in_prefill = 0
        self.requests = 0
        self.connections = 0
        self.scrapes = 0
        self.late = []
        for spec in args.late:
            # Metric names hold colons (vllm:...): read from the right.
            parts = spec.split(":")
            role = None
            if parts[-1] in ("frontend", "prefill", "decode", "server"):
                role = parts.pop()
            metric = ":".join(parts[:-2])
            self.late.append((metric, int(parts[-2]), float(parts[-1]), role))

    def late_delay(self, metric, ordinal, role):
        for name, o, delay, r in self.late:
            if name == metric and o == ordinal and (r is None or r == role):
                return delay
        return 0.0

    def slow(self):
        """Whether this /metrics answer is the delayed one (and its number)."""
        if not self.args.slow_scrape:
            return None
        every, ms = (int(x) for x in self.args.slow_scrape.split(":"))
        with self.lock:
            self.scrapes += 1
            n = self.scrapes
        return (n, ms) if n % every == 0 else None


def words_of(request):
    text = []
    for m in request.get("messages", []):
        content = m.get("content", "")
        if isinstance(content, list):
            content = " ".join(p.get("text", "") for p in content if isinstance(p, dict))
        text.append(str(content))
    return " ".join(text).split()


def make_handler(server, routes, chat=True):
    args = server.args

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0" if args.http10 else "HTTP/1.1"

        def setup(self):
            super().setup()
            with server.lock:
                server.connections += 1
                self.conn_id = server.connections
            self.requests_on_conn = 0
            server.ledger.write(event="connection", conn_id=self.conn_id, t_ns=time.time_ns(),
                                port=self.server.server_address[1])

        def log_message(self, format, *a):
            return

        def do_GET(self):
            route = routes.get(self.path)
            if route is None:
                self.send_error(404)
                return
            if args.metrics_jitter_ms:
                time.sleep(random.uniform(0, args.metrics_jitter_ms) / 1000)
            server.dep.tick()
            slow = server.slow()
            with LOCK:
                content_type, body = route()
            t_snapshot = time.time_ns()
            if slow:
                time.sleep(slow[1] / 1000)
                server.ledger.write(event="delayed_scrape", n=slow[0], path=self.path,
                                    port=self.server.server_address[1],
                                    t_snapshot_ns=t_snapshot, t_sent_ns=time.time_ns())
            data = body.encode()
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self):
            if not chat or self.path != "/v1/chat/completions":
                self.send_error(404)
                return
            t0 = time.time_ns()
            length = int(self.headers.get("Content-Length", "0"))
            request = json.loads(self.rfile.read(length) or b"{}")
            words = words_of(request)
            self.requests_on_conn += 1
            with server.lock:
                server.requests += 1
                ordinal = server.requests
            if args.fail_every and ordinal % args.fail_every == 0:
                self.bad_gateway(ordinal, t0)
                return
            prompt = max(1, len(words))
            if server.cache and args.cache_flush_every and ordinal % args.cache_flush_every == 0:
                server.cache.flush()
            cached = server.cache.lookup_and_fill(words) if server.cache else 0
            max_tokens = request.get("max_completion_tokens") or request.get("max_tokens") or 8
            req = Request(server, ordinal, self.headers.get("X-Request-ID"), prompt, cached,
                          int(min(max_tokens, 64)))
            req.rec["conn_id"] = self.conn_id
            req.rec["request_on_connection"] = self.requests_on_conn
            self.close = bool(args.close_every and self.requests_on_conn % args.close_every == 0)
            req.rec["closes_connection"] = self.close
            self.streaming = request.get("stream", False) is not False
            self.stream(req, request.get("model", MODEL))
            req.rec["t_end_ns"] = time.time_ns()
            server.ledger.write(**req.rec)
            if args.restart_after and ordinal == args.restart_after:
                server.dep.restart()
                server.ledger.write(event="restart", after_ordinal=ordinal, t_ns=time.time_ns())

        def bad_gateway(self, ordinal, t0):
            """A gateway error before the engine saw the request: no
            observation, as a proxy's 502 in front of a real server."""
            body = json.dumps({"error": {"message": "upstream unavailable",
                                         "type": "bad_gateway", "code": 502}}).encode()
            self.send_response(502)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            server.ledger.write(event="error", ordinal=ordinal, conn_id=self.conn_id,
                                x_request_id=self.headers.get("X-Request-ID"), status=502,
                                t_ns=t0)

        def start_response(self):
            self.send_response(200)
            if self.streaming:
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
            if self.close:
                self.send_header("Connection", "close")
                self.close_connection = True
            if self.streaming:
                self.end_headers()

        def send_json(self, body):
            data = json.dumps(body).encode()
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def chunk(self, payload):
            if not self.streaming:
                return
            data = b"data: " + payload + b"\n\n"
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()

        def stream(self, req, model):
            dep = server.dep
            dep.assign(req)
            dep.on_arrival(req)
            with server.lock:
                server.inflight += 1
                req.rec["inflight_at_arrival"] = server.inflight
            try:
                self.engine(req, model)
            finally:
                with server.lock:
                    server.inflight -= 1

        def gone(self):
            """Whether the client closed its side (AIPerf cancels a request by
            closing the connection): readable with no data."""
            try:
                ready, _, _ = select.select([self.connection], [], [], 0)
                return bool(ready) and self.connection.recv(1, socket.MSG_PEEK) == b""
            except (OSError, ValueError):
                return True

        def abort(self, req, stage):
            req.rec["aborted"] = stage
            server.dep.on_abort(req)
            self.close_connection = True

        def cold_stage(self, req):
            """--cold-start: the first N requests pass one at a time."""
            if not args.cold_start:
                return 0.0
            n, seconds = args.cold_start.split(":")
            if req.ordinal > int(n):
                return 0.0
            t = time.time()
            with server.cold_lock:
                time.sleep(float(seconds))
            req.rec["cold_stage_s"] = time.time() - t
            return req.rec["cold_stage_s"]

        def prefill_time(self, req):
            tokens = req.prompt - req.cached
            if args.prefill_batch:
                with server.lock:
                    server.in_prefill += 1
                    batch = server.in_prefill
                req.rec["prefill_batch"] = batch
                tokens *= batch
            return 0.004 + tokens * args.prefill_s_per_token

        def itl(self):
            if not args.itl_per_inflight:
                return args.itl_s
            with server.lock:
                n = server.inflight
            return args.itl_s + args.itl_per_inflight * max(0, n - 1)

        def engine(self, req, model):
            dep = server.dep
            queue_s = 0.001 + self.cold_stage(req)
            time.sleep(0.001)
            dep.on_scheduled(req)
            prefill_s = self.prefill_time(req)
            deadline = time.time() + prefill_s
            while time.time() < deadline:
                time.sleep(min(0.005, max(0.0, deadline - time.time())))
                if self.gone():
                    break
            if args.prefill_batch:
                with server.lock:
                    server.in_prefill -= 1
            if self.gone():
                self.abort(req, "prefill")
                return
            if hasattr(dep, "on_prefilled"):
                dep.on_prefilled(req, {"queue": queue_s, "prefill": prefill_s,
                                       "prefill_done": time.time() - req.t0})
                time.sleep(args.kv_transfer_s)
            try:
                self.start_response()
            except OSError:
                self.abort(req, "prefill")
                return
            base = {"id": f"chatcmpl-{req.ordinal}", "object": "chat.completion.chunk",
                    "created": int(time.time()), "model": model}
            first = dict(base, choices=[{"index": 0, "delta": {"role": "assistant",
                                                               "content": "tok "},
                                         "finish_reason": None}])
            try:
                self.chunk(json.dumps(first).encode())
            except OSError:
                self.abort(req, "prefill")
                return
            t_first = time.time()
            req.rec["t_first_token_ns"] = int(t_first * 1e9)
            dep.on_first_token(req, t_first - req.t0)
            for _ in range(req.completion - 1):
                itl = self.itl()
                time.sleep(itl)
                if self.gone():
                    self.abort(req, "decode")
                    return
                c = dict(base, choices=[{"index": 0, "delta": {"content": "tok "},
                                         "finish_reason": None}])
                try:
                    self.chunk(json.dumps(c).encode())
                except OSError:
                    self.abort(req, "decode")
                    return
                dep.on_token(req, itl)
            e2e = time.time() - req.t0
            decode = time.time() - t_first
            times = {"e2e": e2e, "queue": queue_s, "prefill": prefill_s, "decode": decode,
                     "inference": e2e - queue_s,
                     "tpot": decode / max(1, req.completion - 1)}
            # Published before the last bytes go out: only a --late fault
            # can make an observation cross a phase boundary.
            dep.on_finish(req, times)
            usage = {"prompt_tokens": req.prompt, "completion_tokens": req.completion,
                     "total_tokens": req.prompt + req.completion}
            if server.cache:
                usage["prompt_tokens_details"] = {"cached_tokens": req.cached}
            if not self.streaming:
                self.send_json(dict(base, object="chat.completion", usage=usage, choices=[
                    {"index": 0, "finish_reason": "length",
                     "message": {"role": "assistant", "content": "tok " * req.completion}}]))
                return
            last = dict(base, choices=[{"index": 0, "delta": {}, "finish_reason": "length"}],
                        usage=usage)
            self.chunk(json.dumps(last).encode())
            self.chunk(b"[DONE]")
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

    return Handler


class HttpServer(ThreadingHTTPServer):
    daemon_threads = True
    tls_context = None
    handshake_delay = 0.0

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


def serve(port, handler, background, tls=None, handshake_delay=0.0):
    httpd = HttpServer(("127.0.0.1", port), handler)
    httpd.tls_context, httpd.handshake_delay = tls, handshake_delay
    httpd.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if background:
        t = threading.Thread(target=httpd.serve_forever, daemon=True)
        t.start()
    else:
        httpd.serve_forever()


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--framework", required=True, choices=sorted(DEPLOYMENTS))
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--prefill-port", type=int, help="dynamo: the prefill worker's /metrics")
    p.add_argument("--decode-port", type=int, help="dynamo: the decode worker's /metrics")
    p.add_argument("--ledger")
    p.add_argument("--engines", type=int, default=1, help="vllm: data-parallel engine cores")
    p.add_argument("--dp", type=int, default=1, help="sglang: DP-attention groups")
    p.add_argument("--tp-per-dp", type=int, default=1, help="sglang: TP ranks per DP group")
    p.add_argument("--prefix-cache", action="store_true")
    p.add_argument("--late", action="append", default=[], metavar="METRIC:ORDINAL:SECONDS[:ROLE]")
    p.add_argument("--restart-after", type=int, default=0)
    p.add_argument("--slow-scrape", metavar="EVERY:MS")
    p.add_argument("--prefill-s-per-token", type=float, default=0.00005)
    p.add_argument("--itl-s", type=float, default=0.002)
    p.add_argument("--kv-transfer-s", type=float, default=0.002)
    p.add_argument("--cold-start", metavar="N:SECONDS")
    p.add_argument("--prefill-batch", action="store_true")
    p.add_argument("--itl-per-inflight", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--tls-cert")
    p.add_argument("--tls-key")
    p.add_argument("--handshake-delay", type=float, default=0.0, help="seconds")
    p.add_argument("--close-every", type=int, default=0)
    p.add_argument("--http10", action="store_true")
    p.add_argument("--fail-every", type=int, default=0)
    p.add_argument("--metrics-jitter-ms", type=float, default=0.0)
    p.add_argument("--cache-flush-every", type=int, default=0)
    args = p.parse_args()
    random.seed(args.seed)
    server = Server(args)
    if args.framework == "dynamo":
        dep = server.dep
        serve(args.prefill_port, make_handler(server, dep.worker_routes(dep.prefill), False),
              True)
        serve(args.decode_port, make_handler(server, dep.worker_routes(dep.decode), False),
              True)
    tls = None
    if args.tls_cert:
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls.load_cert_chain(args.tls_cert, args.tls_key)
    serve(args.port, make_handler(server, server.dep.routes()), False, tls, args.handshake_delay)


if __name__ == "__main__":
    main()
