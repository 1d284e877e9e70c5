"""Memory over many runs in one process: what a Streamlit server does all day.

Every run builds a fresh drafter and KV caches; nothing may keep them once the run is over. On
the tiny models of conftest.py RSS stays within 0.1 MB over 200 runs once warm (measured on this
CPU, torch 2 on Linux), so the bound below (4 MB over 45 runs) leaves room for allocator noise
while still catching a leak of about 90 kB a run: the tiny target's KV cache for one 32-token run
(37 kB) or one run's record with its alternatives (tens of kB) kept by mistake would show. For the
real pair see scripts/memory_check.py.
"""

import gc
import weakref

import pytest

from specviz.config import Decoding, Sampling
from specviz.decode import generate
from specviz.lab.measure import rss_mb

pytestmark = pytest.mark.usefixtures("one_thread")

WARM_UP, RUNS, BOUND_MB = 5, 50, 4.0


def one_run(target, make_drafter, i: int):
    """Alternate a model draft and n-gram lookup, greedy and sampled, as a workshop would."""
    spec = "tiny-draft" if i % 2 == 0 else "ngram"
    sampling = Sampling(temperature=1.0) if i % 4 >= 2 else Sampling()
    drafter = make_drafter(spec)
    generate(target, drafter, "w1 w2 w3 w4 w5", Decoding(gamma=4, max_new_tokens=32, seed=i, sampling=sampling))
    return weakref.ref(drafter)


def test_fifty_runs_keep_memory_flat(target, make_drafter):
    for i in range(WARM_UP):
        one_run(target, make_drafter, i)
    gc.collect()
    warm = rss_mb()
    drafters = [one_run(target, make_drafter, i) for i in range(WARM_UP, RUNS)]
    gc.collect()
    after = rss_mb()
    assert all(d() is None for d in drafters), "a finished run's drafter (and its KV cache) is still referenced"
    assert after - warm < BOUND_MB, (
        f"RSS grew {after - warm:.1f} MB over {RUNS - WARM_UP} runs ({warm:.0f} → {after:.0f} MB)"
    )
