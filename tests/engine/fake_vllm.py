"""FakeVLLM: a FAKE vLLM server for tests. No model runs here; nothing it serves is a measurement.

It answers like vLLM 0.32's OpenAI-compatible server does (the formats were checked against a real
vLLM 0.32.0 CPU server, whose /metrics is captured in tests/engine/data/): GET /v1/models, GET /version,
GET /metrics in Prometheus text with the vllm:spec_decode_* counters, and streamed POST
/v1/chat/completions and /v1/completions (server-sent events; a last chunk with `usage` and, when
configured, `metrics.speculative_decoding`).

Its speculation is simulated: each step a draft of γ tokens is proposed (or, with probability
`no_match`, none, as an n-gram drafter that finds nothing) and each draft token is accepted with
probability `alpha` until the first rejection; the counters advance exactly as vLLM's would for
those steps. Its latency grows with load like a GPU's: a step costs `step_s` plus `token_s` for every
token the whole batch feeds the model (1 + γ per speculative request), so speculation pays at low
concurrency and stops paying at high concurrency — the lesson engine-bench exists to show.
"""

from __future__ import annotations

import json
import random
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class _Server(ThreadingHTTPServer):
    request_queue_size = 128  # the default 5 resets connections when 16 clients connect at once
    daemon_threads = True


@dataclass
class FakeConfig:
    model: str = "fake-smollm2"
    gamma: int = 0  # 0 = a baseline server: no speculation, no spec_decode counters
    alpha: float = 0.7  # chance a tested draft token is accepted
    no_match: float = 0.1  # chance a step has nothing to draft (n-gram lookup found no match)
    step_s: float = 0.02  # fixed cost of one step (weights read once per step)
    token_s: float = 0.002  # cost per token fed to the model in a step, over the whole batch
    per_request: str = "detailed"  # none | summary | detailed, as vLLM's --per-request-spec-decode-metrics
    seed: int = 0


@dataclass
class FakeState:
    drafts: int = 0
    draft_tokens: int = 0
    accepted: int = 0
    per_position: list[int] = field(default_factory=list)
    generation_tokens: int = 0
    in_flight: int = 0
    bodies: list[dict] = field(default_factory=list)  # every completion request received, for assertions
    lock: threading.Lock = field(default_factory=threading.Lock)


def metrics_text(config: FakeConfig, state: FakeState) -> str:
    """Prometheus text in vLLM's layout: HELP/TYPE, _total counters, _created gauges, engine/model labels."""
    labels = f'engine="0",model_name="{config.model}"'
    lines = [
        "# HELP python_info Python platform information",
        "# TYPE python_info gauge",
        'python_info{implementation="CPython",major="3",minor="11",patchlevel="7",version="3.11.7"} 1.0',
        "# HELP vllm:num_requests_running Number of requests in model execution batches.",
        "# TYPE vllm:num_requests_running gauge",
        f"vllm:num_requests_running{{{labels}}} {float(state.in_flight)}",
        "# HELP vllm:generation_tokens_total Number of generation tokens processed.",
        "# TYPE vllm:generation_tokens_total counter",
        f"vllm:generation_tokens_total{{{labels}}} {float(state.generation_tokens)}",
    ]
    if config.gamma:
        for name, help_text, value in (
            ("num_drafts", "Number of spec decoding drafts.", state.drafts),
            ("num_draft_tokens", "Number of draft tokens.", state.draft_tokens),
            ("num_accepted_tokens", "Number of accepted tokens.", state.accepted),
        ):
            lines += [
                f"# HELP vllm:spec_decode_{name}_total {help_text}",
                f"# TYPE vllm:spec_decode_{name}_total counter",
                f"vllm:spec_decode_{name}_total{{{labels}}} {float(value)}",
                f"# HELP vllm:spec_decode_{name}_created {help_text}",
                f"# TYPE vllm:spec_decode_{name}_created gauge",
                f"vllm:spec_decode_{name}_created{{{labels}}} 1.7e+09",
            ]
        lines += [
            "# HELP vllm:spec_decode_num_accepted_tokens_per_pos_total Accepted tokens per draft position.",
            "# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter",
        ]
        lines += [
            f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{labels},position="{i}"}} {float(v)}'
            for i, v in enumerate(state.per_position)
        ]
    return "\n".join(lines) + "\n"


class FakeVLLM:
    """Start with `with FakeVLLM(FakeConfig(...)) as fake:`; `fake.url` is http://127.0.0.1:PORT."""

    def __init__(self, config: FakeConfig):
        self.config, self.state = config, FakeState(per_position=[0] * config.gamma)
        self.server = _Server(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FakeVLLM:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _steps(self, prompt: str, max_tokens: int) -> list[tuple[int, int]]:
        """(drafted, accepted) per decoding step after the prefill token, until max_tokens (seeded by prompt)."""
        rng = random.Random(f"{self.config.seed}:{prompt}")
        steps, produced = [], 1  # the prefill yields the first token
        while produced < max_tokens:
            drafted = 0 if not self.config.gamma or rng.random() < self.config.no_match else self.config.gamma
            drafted = min(drafted, max_tokens - produced - 1)  # vLLM drafts nothing past max_tokens either
            accepted = 0
            while accepted < drafted and rng.random() < self.config.alpha:
                accepted += 1
            steps.append((drafted, accepted))
            produced += accepted + 1
        return steps

    def _record(self, drafted: int, accepted: int) -> None:
        s = self.state
        with s.lock:
            s.generation_tokens += accepted + 1
            if drafted:
                s.drafts += 1
                s.draft_tokens += drafted
                s.accepted += accepted
                for i in range(accepted):
                    s.per_position[i] += 1

    def _sleep_step(self, fed: int) -> None:
        with self.state.lock:
            batch = self.state.in_flight
        time.sleep(self.config.step_s + self.config.token_s * fed * max(batch, 1))

    def _handler(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"  # the body ends when the connection closes: simple streaming

            def log_message(self, *args):  # quiet in tests
                pass

            def _json(self, status: int, data: dict) -> None:
                body = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                if self.path == "/v1/models":
                    self._json(
                        200,
                        {
                            "object": "list",
                            "data": [
                                {"id": fake.config.model, "object": "model", "owned_by": "vllm", "max_model_len": 2048}
                            ],
                        },
                    )
                elif self.path == "/version":
                    self._json(200, {"version": "0.32.0-fake"})
                elif self.path == "/metrics":
                    body = metrics_text(fake.config, fake.state).encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                else:
                    self._json(404, {"detail": "Not Found"})

            def do_POST(self):
                if self.path not in ("/v1/chat/completions", "/v1/completions"):
                    return self._json(404, {"detail": "Not Found"})
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                with fake.state.lock:
                    fake.state.bodies.append(body)
                chat = self.path == "/v1/chat/completions"
                prompt = body["messages"][-1]["content"] if chat else body["prompt"]
                max_tokens = int(body.get("max_tokens") or 16)
                if max_tokens > 2000:
                    return self._json(
                        400,
                        {
                            "object": "error",
                            "message": f"max_tokens={max_tokens} is too large for max_model_len=2048",
                            "type": "BadRequestError",
                            "code": 400,
                        },
                    )
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream; charset=utf-8")
                self.end_headers()
                with fake.state.lock:
                    fake.state.in_flight += 1
                try:
                    self._stream(body, prompt, max_tokens, chat)
                finally:
                    with fake.state.lock:
                        fake.state.in_flight -= 1

            def _send(self, data: dict | str) -> None:
                text = data if isinstance(data, str) else json.dumps(data)
                self.wfile.write(f"data: {text}\n\n".encode())
                self.wfile.flush()

            def _chunk(self, text: str, chat: bool) -> dict:
                choice = {"index": 0, "delta": {"content": text}} if chat else {"index": 0, "text": text}
                return {
                    "id": "fake-1",
                    "object": "chat.completion.chunk" if chat else "text_completion",
                    "model": fake.config.model,
                    "choices": [choice],
                }

            def _stream(self, body: dict, prompt: str, max_tokens: int, chat: bool) -> None:
                fake._sleep_step(len(prompt.split()))  # prefill: the first token
                fake._record(0, 0)
                if chat:
                    self._send(
                        {
                            "id": "fake-1",
                            "object": "chat.completion.chunk",
                            "model": fake.config.model,
                            "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}],
                        }
                    )
                self._send(self._chunk(" t0", chat))
                produced, steps = 1, fake._steps(prompt, max_tokens)
                for drafted, accepted in steps:
                    fake._sleep_step(1 + drafted)
                    fake._record(drafted, accepted)
                    self._send(self._chunk("".join(f" t{produced + i}" for i in range(accepted + 1)), chat))
                    produced += accepted + 1
                final = {
                    "id": "fake-1",
                    "object": "chat.completion.chunk",
                    "model": fake.config.model,
                    "choices": [],
                    "usage": {
                        "prompt_tokens": len(prompt.split()),
                        "completion_tokens": produced,
                        "total_tokens": len(prompt.split()) + produced,
                    },
                }
                spec_steps = [(d, a) for d, a in steps if d]
                if fake.config.gamma and fake.config.per_request != "none":
                    histogram = [0] * (fake.config.gamma + 1)
                    for _, a in spec_steps:
                        histogram[a] += 1
                    n_acc, n_drafted = sum(a for _, a in spec_steps), sum(d for d, _ in spec_steps)
                    spec = {
                        "mean_acceptance_length": 1 + n_acc / len(spec_steps) if spec_steps else 1.0,
                        "draft_acceptance_rate": n_acc / n_drafted if n_drafted else 0.0,
                        "acceptance_histogram": histogram,
                        "num_spec_steps": len(spec_steps),
                        "num_accepted_draft_tokens": n_acc,
                        "num_draft_tokens": n_drafted,
                        "num_spec_tokens": fake.config.gamma,
                    }
                    if fake.config.per_request == "detailed":
                        spec["per_step_accepted"] = [a for _, a in spec_steps]
                        spec["per_step_drafted"] = [d for d, _ in spec_steps]
                    final["metrics"] = {"speculative_decoding": spec}
                self._send(final)
                self._send("[DONE]")

        return Handler

    def expected(self, prompts: list[str], max_tokens: int) -> dict:
        """What the counters must have advanced by for one request per prompt: the steps it simulates."""
        steps = [s for p in prompts for s in self._steps(p, max_tokens) if s[0]]
        per_position = [sum(a > i for _, a in steps) for i in range(self.config.gamma)]
        reached = [sum(d > i for d, _ in steps) for i in range(self.config.gamma)]
        return {
            "drafts": len(steps),
            "draft_tokens": sum(d for d, _ in steps),
            "accepted": sum(a for _, a in steps),
            "per_position": per_position,
            "reached": reached,
        }
