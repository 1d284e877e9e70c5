"""Speculative decoding measured on a serving engine (vLLM), with SpecViz's own definitions.

`client` talks to an OpenAI-compatible vLLM server over HTTP (httpx, streaming for the time to first
token); `metrics` reads its Prometheus counters (prometheus_client's parser) and turns their
differences into the figures SpecViz records for its own runs; `bench` runs the prompts at several
concurrency levels and writes one record per server and level; `results` loads those records, and
lab `bench` records, for the Serving page.

Names as everywhere in SpecViz: α (acceptance rate) = accepted ÷ drafted; mean accepted tokens per
round = tokens per target forward (accepted drafts plus the resampled or bonus token); γ = draft length.
"""
