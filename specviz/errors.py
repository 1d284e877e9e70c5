"""User-facing errors.

Every problem a user can cause (bad settings, a model that cannot be loaded, an incompatible
pair, a damaged file) is raised as a `SpecVizError` whose message says what is wrong and what
to do. The CLI prints it on one line and exits 2; the app shows it in an error box.
"""


class SpecVizError(Exception):
    """A problem with the user's input, explained in plain words."""


class ConfigError(SpecVizError, ValueError):
    """A setting is out of range."""


class ModelLoadError(SpecVizError):
    """A model or tokenizer could not be found or loaded."""


class IncompatiblePairError(SpecVizError):
    """Draft and target cannot be used together (different vocabulary or special tokens)."""


# Out of GPU memory is not a SpecVizError (torch raises it mid-run); the CLI and the app both catch
# it and show this, each adding what its own controls can change.
OUT_OF_MEMORY = "the GPU ran out of memory; pick a smaller target or draft, lower max new tokens"
