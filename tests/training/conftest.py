"""Fixtures shared by the training tests."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture
def bf16_heads(monkeypatch):
    """Heads load in bf16 whatever this CPU measures (the choice of fast_path.draft_dtype, forced)."""
    import specviz.drafters.registry as registry

    monkeypatch.setattr(registry, "draft_dtype", lambda device, dtype: torch.bfloat16)


@pytest.fixture
def fp32_heads(monkeypatch):
    """Heads keep the target's dtype whatever this CPU measures (for comparisons at fp32 tolerances)."""
    import specviz.drafters.registry as registry

    monkeypatch.setattr(registry, "draft_dtype", lambda device, dtype: dtype)
