"""SpecViz: see and measure speculative decoding.

Names used everywhere in this package:
  p      the target model's distribution over the next token
  q      the draft's distribution over the next token
  gamma  γ, the number of tokens drafted per round
  alpha  α, the acceptance rate: accepted drafted tokens / drafted tokens
  c      the cost ratio: draft time per token / target time per decoding step

The library computes and records (`Run`, `Round`); the app and the CLI only render records.
"""

from .comparison import Comparison
from .config import Decoding, Sampling, Verification
from .decode import generate
from .drafters import DRAFTERS, build_drafter
from .errors import SpecVizError
from .models import LoadedModel, load_model
from .records import Round, Run

__all__ = [
    "Comparison", "DRAFTERS", "Decoding", "LoadedModel", "Round", "Run", "Sampling", "SpecVizError",
    "Verification", "build_drafter", "generate", "load_model",
]
