"""Serving under load: a discrete-event simulation of a runtime's continuous batching over a request stream.

The scheduling is the engine's own (`roofline.engine.core`: Scheduler, BlockManager, Sequence); each simulated step
is timed by the predictor (`roofline.perf.ops` / `timing`) for what it holds. Modules: policy (a runtime's limits as
data), workload (arrivals and lengths, traces), steptime (step timing tables), replica (one engine instance),
simulator (the event loop), metrics, deployment (replicas, routers, disaggregation), capacity (the SLO search).
"""
