"""The one switch for the Hugging Face libraries' output (``paramsym.quiet.quiet_loading``)."""

from __future__ import annotations

import pytest

from paramsym.quiet import QUIET_ENVIRONMENT, quiet_loading


def test_environment_set_for_the_block_and_restored() -> None:
    env = {"HF_HUB_DISABLE_PROGRESS_BARS": "0", "OTHER": "x"}
    with quiet_loading(True, env=env):
        assert env == {**QUIET_ENVIRONMENT, "OTHER": "x"}
    assert env == {"HF_HUB_DISABLE_PROGRESS_BARS": "0", "OTHER": "x"}  # the old value back, the absent one absent
    with quiet_loading(False, env=env):
        assert env == {"HF_HUB_DISABLE_PROGRESS_BARS": "0", "OTHER": "x"}


def test_transformers_logging_switched_and_restored() -> None:
    hf_logging = pytest.importorskip("transformers.utils.logging")
    hf_logging.set_verbosity_warning()
    hf_logging.enable_progress_bar()
    with quiet_loading():
        assert not hf_logging.is_progress_bar_enabled()
        assert hf_logging.get_verbosity() == hf_logging.ERROR
    assert hf_logging.is_progress_bar_enabled() and hf_logging.get_verbosity() == hf_logging.WARNING
    with pytest.raises(RuntimeError), quiet_loading(env={}):  # restored when the block raises, too
        raise RuntimeError
    assert hf_logging.is_progress_bar_enabled() and hf_logging.get_verbosity() == hf_logging.WARNING
