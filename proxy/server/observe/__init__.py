"""Observe: what one request did (`Trace`), told to the observers after it is answered.

    trace         the `Trace` and the `Observer` protocol; `notify` tells each observer
    events        the request's and its compaction's events (written with the session record)
    stage_tokens  estimated prompt tokens before and after each stage, for the event
    metrics       Prometheus metrics per app, a tenant's series, the `/metrics` endpoint
    series        counters, histograms and gauges by plain arithmetic, one collector
    worker_metrics  `/metrics` of several workers: each one's series with a `worker` label

Never content, a key or a client-chosen label. May import the foundation, the engine's results
(`proxy.engine.prepared`), prometheus_client and aiohttp (a worker asks the others).
"""
