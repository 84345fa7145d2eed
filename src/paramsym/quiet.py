"""The one switch that silences the Hugging Face libraries (standard library only at import).

:func:`quiet_loading` turns off the transformers / huggingface_hub progress bars ("Loading
weights", "Writing model shards") and their info/warning logs within a block, and restores the
previous settings afterwards. The model loader (:mod:`paramsym.models.loading`) uses it for
``quiet=True``; the command line wraps every command in it for ``--json`` / ``--quiet``.

The libraries may not be imported yet when the block starts (the commands import them lazily);
they read ``HF_HUB_DISABLE_PROGRESS_BARS`` and ``TRANSFORMERS_VERBOSITY`` when imported. The
library never touches the process environment itself: a caller that owns it (the CLI) passes
the mapping as ``env`` and the two variables are set there for the block and restored.
"""

from __future__ import annotations

import contextlib
import sys
import warnings
from collections.abc import Iterator, MutableMapping

__all__ = ["QUIET_ENVIRONMENT", "quiet_loading"]

#: what the Hugging Face libraries read at import to start quiet
QUIET_ENVIRONMENT: dict[str, str] = {"HF_HUB_DISABLE_PROGRESS_BARS": "1", "TRANSFORMERS_VERBOSITY": "error"}


@contextlib.contextmanager
def quiet_loading(quiet: bool = True, *, env: MutableMapping[str, str] | None = None) -> Iterator[None]:
    """Within the block, no Hugging Face progress bars and only error-level logs when ``quiet``.

    Args:
        quiet: ``False`` leaves everything as it is.
        env: the process environment, from a caller that owns it (the CLI): :data:`QUIET_ENVIRONMENT`
            is set there for the block (for libraries first imported inside it) and restored after.
            ``None`` (a library caller about to use transformers): transformers is imported and
            switched through its logging utilities.
    """
    if not quiet:
        yield
        return
    saved = {k: env.get(k) for k in QUIET_ENVIRONMENT} if env is not None else {}
    before = None
    if env is None or "transformers" in sys.modules:
        from transformers.utils import logging as hf_logging

        before = (hf_logging.is_progress_bar_enabled(), hf_logging.get_verbosity())
        hf_logging.disable_progress_bar()
        hf_logging.set_verbosity_error()
    if env is not None:
        env.update(QUIET_ENVIRONMENT)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                env.pop(k, None)  # type: ignore[union-attr]
            else:
                env[k] = v  # type: ignore[index]
        if "transformers" in sys.modules:
            from transformers.utils import logging as hf_logging

            # imported inside the block: back to what the (restored) environment would have given
            enabled, verbosity = before if before is not None else (
                saved.get("HF_HUB_DISABLE_PROGRESS_BARS") is None, hf_logging.WARNING)
            if enabled:
                with warnings.catch_warnings():  # huggingface_hub keeps the variable read at its import
                    warnings.simplefilter("ignore")
                    hf_logging.enable_progress_bar()
            hf_logging.set_verbosity(verbosity)
