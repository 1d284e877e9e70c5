"""HTTP side of engine-bench: an OpenAI-compatible vLLM server, read with httpx.

Requests are streamed (server-sent events) so the time to first token is measured where the user
sees it. Every request asks for a fixed number of tokens at temperature 0: `max_tokens` and
`min_tokens` set to N and `ignore_eos` true (vLLM's extra sampling parameters), so a speculative and
a baseline server produce the same amount of work. `stream_options.include_usage` makes vLLM send a
last chunk with the token count, and, when the server runs with `--per-request-spec-decode-metrics
summary|detailed` (vLLM ≥ 0.32), that chunk carries `metrics.speculative_decoding` as well.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import time
from dataclasses import dataclass, field

import httpx

from ..errors import SpecVizError
from . import metrics

TIMEOUT = httpx.Timeout(600.0, connect=10.0)  # a long generation under load; a dead host fails fast


@dataclass
class ServerInfo:
    url: str
    model: str
    version: str  # from GET /version ("" when the server has none)
    snapshot: metrics.Snapshot


@dataclass
class RequestResult:
    prompt_id: str
    ttft_s: float  # request sent -> first streamed token
    e2e_s: float  # request sent -> stream finished
    tokens: int  # completion tokens, as the server counted them
    chunk_times: list[float] = field(default_factory=list)  # arrival of each chunk with text, from the start
    spec: dict | None = None  # vLLM's per-request speculative metrics, when the server sends them

    @property
    def itl_s(self) -> float:
        """Inter-token latency: (end-to-end − first token) ÷ (tokens − 1), the wait per token after the first."""
        return (self.e2e_s - self.ttft_s) / (self.tokens - 1) if self.tokens > 1 else 0.0

    @property
    def chunk_gap_s(self) -> float:
        """Mean gap between streamed chunks: with speculation one chunk carries every token of a step."""
        gaps = [b - a for a, b in zip(self.chunk_times, self.chunk_times[1:])]
        return sum(gaps) / len(gaps) if gaps else 0.0


def base_url(url: str) -> str:
    """The server root: scheme and host required; a trailing / or /v1 is dropped."""
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError) as exc:
        raise SpecVizError(f"{url!r} is not a URL ({exc})") from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise SpecVizError(f"{url!r} is not an http(s) URL with a host, e.g. http://127.0.0.1:8000")
    root = str(parsed).rstrip("/")
    return root[: -len("/v1")] if root.endswith("/v1") else root


def _reason(exc: httpx.HTTPError) -> str:
    text = str(exc) or exc.__class__.__name__
    return text.splitlines()[0][:160]


def read_metrics(client: httpx.Client, url: str) -> metrics.Snapshot:
    try:
        response = client.get(f"{url}/metrics")
    except httpx.HTTPError as exc:
        raise SpecVizError(f"cannot read {url}/metrics ({_reason(exc)})") from None
    if response.status_code != 200:
        raise SpecVizError(f"{url} is not a vLLM server: GET /metrics answered HTTP {response.status_code}")
    snapshot = metrics.parse(response.text)
    if not snapshot.is_vllm:
        raise SpecVizError(f"{url} is not a vLLM server: its /metrics has no vllm: metrics")
    return snapshot


def inspect(client: httpx.Client, url: str) -> ServerInfo:
    """The served model, version and current counters; SpecVizError if unreachable or not vLLM."""
    try:
        response = client.get(f"{url}/v1/models")
    except httpx.ConnectError as exc:
        raise SpecVizError(f"cannot reach {url} ({_reason(exc)}); is the server running?") from None
    except httpx.HTTPError as exc:
        raise SpecVizError(f"cannot reach {url} ({_reason(exc)})") from None
    try:
        models = [m["id"] for m in response.json()["data"]] if response.status_code == 200 else []
    except (ValueError, KeyError, TypeError):
        models = []
    if not models:
        raise SpecVizError(f"{url} is not an OpenAI-compatible server: GET /v1/models answered HTTP "
                           f"{response.status_code} without a model list")
    snapshot = read_metrics(client, url)
    version = ""
    try:
        answer = client.get(f"{url}/version")
        version = str(answer.json().get("version", "")) if answer.status_code == 200 else ""
    except (httpx.HTTPError, ValueError, AttributeError):
        pass
    return ServerInfo(url, models[0], version, snapshot)


def request_body(model: str, prompt: str, max_tokens: int, chat: bool) -> dict:
    body = {
        "model": model,
        "max_tokens": max_tokens,
        "min_tokens": max_tokens,  # vLLM: no stop before N tokens ...
        "ignore_eos": True,  # ... and none at EOS: every request yields exactly N tokens
        "temperature": 0.0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if chat:
        body["messages"] = [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt
    return body


def _chunk_text(chunk: dict, chat: bool) -> str:
    out = []
    for choice in chunk.get("choices") or []:
        out.append((choice.get("delta") or {}).get("content") or "" if chat else choice.get("text") or "")
    return "".join(out)


async def stream_one(client: httpx.AsyncClient, url: str, model: str, item: dict, max_tokens: int,
                     chat: bool) -> RequestResult:
    """One streamed request, timed on this side; SpecVizError with the server's message if refused."""
    path = "/v1/chat/completions" if chat else "/v1/completions"
    start = time.perf_counter()
    ttft, tokens, spec, times = None, None, None, []
    try:
        body = request_body(model, item["prompt"], max_tokens, chat)
        async with client.stream("POST", f"{url}{path}", json=body) as r:
            if r.status_code != 200:
                detail = (await r.aread()).decode("utf-8", "replace")
                raise SpecVizError(f"{url} refused a request (HTTP {r.status_code}: {_server_message(detail)})")
            async for line in r.aiter_lines():
                if not line.startswith("data:"):
                    continue
                data = line[len("data:") :].strip()
                if data == "[DONE]":
                    break
                chunk = json.loads(data)
                if _chunk_text(chunk, chat):
                    now = time.perf_counter() - start
                    times.append(now)
                    ttft = now if ttft is None else ttft
                if chunk.get("usage"):
                    tokens = chunk["usage"].get("completion_tokens")
                spec = ((chunk.get("metrics") or {}).get("speculative_decoding")) or spec
    except httpx.HTTPError as exc:
        raise SpecVizError(f"a request to {url} failed ({_reason(exc)})") from None
    except json.JSONDecodeError:
        raise SpecVizError(f"{url} streamed something that is not JSON; is it an OpenAI-compatible server?") from None
    e2e = time.perf_counter() - start
    if tokens is None:
        raise SpecVizError(f"{url} sent no token count (usage) at the end of the stream; is it a vLLM server?")
    return RequestResult(item["id"], ttft if ttft is not None else e2e, e2e, int(tokens), times, spec)


def _server_message(body: str) -> str:
    try:
        data = json.loads(body)
        message = data.get("message") or (data.get("error") or {}).get("message") or body
    except (ValueError, AttributeError):
        message = body
    return " ".join(str(message).split())[:200]


async def _level(
    url: str, model: str, items: list[dict], concurrency: int, max_tokens: int, chat: bool
) -> list[RequestResult]:
    gate = asyncio.Semaphore(concurrency)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(timeout=TIMEOUT, limits=limits) as client:

        async def one(item):
            async with gate:
                return await stream_one(client, url, model, item, max_tokens, chat)

        return list(await asyncio.gather(*(one(item) for item in items)))


def run_level(
    url: str, model: str, items: list[dict], concurrency: int, max_tokens: int, chat: bool
) -> tuple[list[RequestResult], float]:
    """All items with at most `concurrency` in flight; the results and the wall time of the level."""
    start = time.perf_counter()
    results = _run(_level(url, model, items, concurrency, max_tokens, chat))
    return results, time.perf_counter() - start


def _run(coroutine):
    """asyncio.run, also from a thread whose event loop is already running (a notebook, Playwright's sync API):
    then the requests get a loop of their own in a worker thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()
