#!/usr/bin/env python3
"""Writes the Prometheus exposition fixtures tst_prometheus_text and
tst_metrics_poller read, with the real client library vLLM and SGLang use
(prometheus_client, pinned in scripts/fetch_publishers.py's venv):

    ~/.cache/kvscope/publishers/venv/bin/python \
        tests/profiler/data/metrics/make_fixtures.py tests/profiler/data/metrics

The names, types and labels are vLLM's (vllm/v1/metrics/loggers.py: counters
are declared without the _total suffix the client adds; cache_config_info is
a gauge set to 1 whose labels are the cache config) and SGLang's
(sglang/srt/metrics/collector.py). The values are fixed so the tests can
check them; only the client's own *_created timestamps differ between runs.
"""

import sys
from pathlib import Path

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest


def vllm(engines: int) -> bytes:
    registry = CollectorRegistry()
    labels = ["model_name", "engine"]
    usage = Gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.",
                  labels, registry=registry)
    queries = Counter("vllm:prefix_cache_queries",
                      "Prefix cache queries, in terms of number of queried tokens.",
                      labels, registry=registry)
    hits = Counter("vllm:prefix_cache_hits",
                   "Prefix cache hits, in terms of number of cached tokens.", labels,
                   registry=registry)
    preemptions = Counter("vllm:num_preemptions", "Cumulative number of preemption from the engine.",
                          labels, registry=registry)
    running = Gauge("vllm:num_requests_running", "Number of requests in model execution batches.",
                    labels, registry=registry)
    ttft = Histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
                     labels, buckets=[0.01, 0.1, 1.0], registry=registry)
    config = {"block_size": "16", "cache_dtype": "auto", "enable_prefix_caching": "True",
              "gpu_memory_utilization": "0.9", "num_cpu_blocks": "None",
              "num_gpu_blocks": "27215", "num_gpu_blocks_override": "None",
              "prefix_caching_hash_algo": "sha256", "sliding_window": "None"}
    info = Gauge("vllm:cache_config_info", "Information of the LLMEngine CacheConfig",
                 list(config), registry=registry)
    info.labels(**config).set(1)
    for engine in range(engines):
        at = {"model_name": 'Qwen/Qwen3-0.6B "chat"\\v1', "engine": str(engine)}
        usage.labels(**at).set(0.25 + 0.25 * engine)
        queries.labels(**at).inc(1000 * (engine + 1))
        hits.labels(**at).inc(400 * (engine + 1))
        preemptions.labels(**at).inc(3 * engine)
        running.labels(**at).set(5)
        ttft.labels(**at).observe(0.05)
    return generate_latest(registry)


def sglang() -> bytes:
    registry = CollectorRegistry()
    labels = ["model_name", "engine_type", "tp_rank", "pp_rank"]
    at = {"model_name": "meta-llama/Llama-3.1-8B-Instruct", "engine_type": "unified",
          "tp_rank": "0", "pp_rank": "0"}
    Gauge("sglang:token_usage", "The token usage.", labels, registry=registry).labels(**at).set(0.125)
    Gauge("sglang:cache_hit_rate", "The prefix cache hit rate.", labels,
          registry=registry).labels(**at).set(0.5)
    Gauge("sglang:num_running_reqs", "The number of running requests.", labels,
          registry=registry).labels(**at).set(float("nan"))
    Gauge("sglang:gen_throughput", "The generation throughput (token/s).", labels,
          registry=registry).labels(**at).set(float("inf"))
    return generate_latest(registry)


def main() -> None:
    out = Path(sys.argv[1])
    (out / "vllm.prom").write_bytes(vllm(1))
    (out / "vllm_two_engines.prom").write_bytes(vllm(2))
    (out / "sglang.prom").write_bytes(sglang())


if __name__ == "__main__":
    main()
