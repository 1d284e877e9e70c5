"""engine-bench end to end against FakeVLLM, a FAKE vLLM server on 127.0.0.1 (tests/engine/fake_vllm.py): what it
sends, what it reads back, the records it writes, and its one-line refusals of bad input."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from fake_vllm import FakeConfig, FakeVLLM

from specviz.cli import main
from specviz.engine import results

ROOT = Path(__file__).resolve().parents[2]
PROMPTS = [
    {"id": "p1", "prompt": "Write a haiku about the sea."},
    {"id": "p2", "prompt": "List three prime numbers and explain why each is prime."},
    {"id": "p3", "prompt": "Translate 'good morning' into French, German and Spanish."},
]
TOKENS = 24


@pytest.fixture
def prompts_file(tmp_path):
    path = tmp_path / "prompts.jsonl"
    path.write_text("".join(json.dumps(p) + "\n" for p in PROMPTS))
    return path


@pytest.fixture
def servers():
    with FakeVLLM(FakeConfig(gamma=4, alpha=0.7)) as spec, FakeVLLM(FakeConfig(gamma=0)) as base:
        yield spec, base


def engine_bench(*args) -> int:
    return main(["engine-bench", *map(str, args)])


def test_end_to_end_against_the_fake_server(servers, prompts_file, tmp_path, capsys):
    spec, base = servers
    out = tmp_path / "engine.jsonl"
    assert engine_bench("--url", spec.url, "--baseline-url", base.url, "--prompts", prompts_file,
                        "--concurrency", "16,1,4", "--max-new-tokens", TOKENS, "--draft", "ngram", "--out", out) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["role"], r["concurrency"]) for r in rows] == [
        ("speculative", 1), ("baseline", 1), ("speculative", 4), ("baseline", 4), ("speculative", 16), ("baseline", 16)]

    # Every request: temperature 0, exactly TOKENS tokens (min = max, EOS ignored), streamed with usage.
    sent = spec.state.bodies + base.state.bodies
    measured = [b for b in sent if b["max_tokens"] == TOKENS]
    assert len(measured) == 2 * (3 + 4 + 16)
    for body in measured:
        assert body["temperature"] == 0 and body["min_tokens"] == TOKENS and body["ignore_eos"] is True
        assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
        assert body["messages"][0]["role"] == "user"
    assert all(r["fixed_length"] and r["new_tokens"] == r["requests"] * TOKENS for r in rows)

    # Acceptance at concurrency 1 is the counters' advance for exactly those three requests.
    one = rows[0]
    expected = spec.expected([p["prompt"] for p in PROMPTS], TOKENS)
    assert (one["drafts"], one["draft_tokens"], one["accepted"]) == (expected["drafts"], expected["draft_tokens"],
                                                                    expected["accepted"])
    assert one["accepted_per_position"] == expected["per_position"]
    assert one["acceptance_rate"] == pytest.approx(expected["accepted"] / expected["draft_tokens"])
    assert one["mean_accepted_tokens"] == pytest.approx(3 * TOKENS / (3 * TOKENS - expected["accepted"]))
    assert one["acceptance_by_position"] == pytest.approx([a / expected["drafts"] for a in expected["per_position"]])
    # Per-request step arrays give SpecViz's exact P(accepted | drafted): drafts cut short near the last token
    # reach fewer positions, so it is higher than the counters' accepted ÷ all drafts at the later positions.
    assert one["position_reached"] == expected["reached"] and one["position_accepted"] == expected["per_position"]
    assert one["acceptance_by_position_reached"] == pytest.approx(
        [a / n for a, n in zip(expected["per_position"], expected["reached"])])
    assert expected["reached"][-1] < expected["drafts"], "the fake should cut some drafts short near max_tokens"
    assert one["per_request_spec"] is True and one["gamma"] == 4 and one["draft"] == "ngram"

    # Timings: first token before the end, per-token latency positive; baselines carry no acceptance.
    for r in rows:
        assert 0 < r["ttft_s"] < r["e2e_s"] and r["itl_s"] > 0 and r["throughput"] > 0
    assert all("accepted" not in r and "speedup" not in r for r in rows if r["role"] == "baseline")

    # The lesson: speculation helps alone and helps less and less as the batch fills.
    speedups = [r["speedup"] for r in rows if r["role"] == "speculative"]
    assert speedups[0] > 1.2, speedups
    assert speedups[0] > speedups[1] > speedups[2], speedups

    printed = capsys.readouterr().out
    assert "6 records written" in printed and "speedup" in printed
    assert f"{speedups[0]:.2f}x" in printed

    # The Serving page's loader reads the file back and pools it with the same definitions.
    loaded = results.load_engine(out.read_bytes())
    pooled = results.engine_acceptance(loaded)
    spec_rows = [r for r in loaded if r["role"] == "speculative"]
    assert pooled.alpha == pytest.approx(
        sum(r["accepted"] for r in spec_rows) / sum(r["draft_tokens"] for r in spec_rows)
    )
    assert list(results.speedup_frame(loaded)["concurrency"]) == [1, 4, 16]


def test_raw_prompts_use_the_completions_endpoint(prompts_file, tmp_path):
    with FakeVLLM(FakeConfig(gamma=3, per_request="none")) as spec:
        assert (
            engine_bench(
                "--url",
                spec.url + "/v1/",
                "--prompts",
                prompts_file,
                "--concurrency",
                "2",
                "--max-new-tokens",
                8,
                "--raw",
                "--out",
                tmp_path / "e.jsonl",
            )
            == 0
        )
        assert all("prompt" in b and "messages" not in b for b in spec.state.bodies)
    row = json.loads((tmp_path / "e.jsonl").read_text().splitlines()[0])
    assert row["per_request_spec"] is False and "acceptance_by_position_reached" not in row
    assert len(row["acceptance_by_position"]) == 3


class _NotVllm(BaseHTTPRequestHandler):
    """Some other web server: models listed (OpenAI-compatible), but /metrics without any vllm: metric."""

    def log_message(self, *args):
        pass

    def do_GET(self):
        body = (
            b'{"data": [{"id": "other"}]}'
            if self.path == "/v1/models"
            else b"# TYPE http_requests_total counter\nhttp_requests_total 3\n"
            if self.path == "/metrics"
            else b"no"
        )
        self.send_response(200 if self.path in ("/v1/models", "/metrics") else 404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def not_vllm():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _NotVllm)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def refused(capsys, *args) -> str:
    """Run engine-bench; it must exit 2 with one error line, last on stderr (after any progress), no traceback."""
    with pytest.raises(SystemExit) as exit_info:
        code = engine_bench(*args)
        raise SystemExit(code)
    assert exit_info.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    errors = [line for line in lines if line.startswith("specviz: error:")]
    assert len(errors) == 1 and lines[-1] == errors[0] and "Traceback" not in "\n".join(lines), lines
    return errors[0]


def test_bad_input_gets_one_line(servers, not_vllm, prompts_file, tmp_path, capsys):
    spec, base = servers
    out = tmp_path / "e.jsonl"
    common = ("--prompts", prompts_file, "--out", out, "--concurrency", "1", "--max-new-tokens", 4)
    assert "cannot reach" in refused(capsys, "--url", f"http://127.0.0.1:{_free_port()}", *common)
    assert "is not a vLLM server" in refused(capsys, "--url", not_vllm, *common)
    assert "without speculative decoding metrics" in refused(capsys, "--url", base.url, *common)
    assert "runs speculative decoding" in refused(capsys, "--url", spec.url, "--baseline-url", spec.url, *common)
    assert "not an http(s) URL" in refused(capsys, "--url", "localhost:8000", *common)
    for bad in ("0", "1,,4", "four", "4,4"):
        assert "--concurrency" in refused(
            capsys, "--url", spec.url, "--prompts", prompts_file, "--out", out, "--concurrency", bad
        )
    err = refused(capsys, "--url", spec.url, "--prompts", prompts_file, "--out", out, "--max-new-tokens", 5000)
    assert "refused a request (HTTP 400" in err and "max_model_len" in err
    assert "does not exist" in refused(
        capsys, "--url", spec.url, "--prompts", prompts_file, "--out", tmp_path / "no" / "e.jsonl"
    )


def test_unreachable_server_from_a_shell(prompts_file, tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "specviz",
            "engine-bench",
            "--url",
            f"http://127.0.0.1:{_free_port()}",
            "--prompts",
            str(prompts_file),
            "--out",
            str(tmp_path / "e.jsonl"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr.startswith("specviz: error: cannot reach") and len(done.stderr.strip().splitlines()) == 1


def test_damaged_files_are_refused_by_the_loaders():
    from specviz.errors import SpecVizError

    with pytest.raises(SpecVizError, match="not JSON"):
        results.load_engine(b'{"schema": "specviz.engine/1"\n')
    with pytest.raises(SpecVizError, match="not an engine-bench result"):
        results.load_engine(b'{"id": "p1", "draft": "ngram"}\n')
    with pytest.raises(SpecVizError, match="damaged"):
        results.load_engine(b'{"schema": "specviz.engine/1", "role": "speculative"}\n')
    with pytest.raises(SpecVizError, match="engine-bench result"):
        results.load_lab(results.EXAMPLE_ENGINE.read_bytes())
    with pytest.raises(SpecVizError, match="empty"):
        results.load_lab(b"\n")
