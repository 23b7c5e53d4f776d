"""The LLM layer's failures, and how a bad answer is quoted in one line (``answers`` and every
backend raise them; ``base`` hands them on). Imports nothing of the project: the image's model
stage runs ``models.py`` with only this file beside it."""

from __future__ import annotations

from typing import Any


class LLMError(Exception):
    """Any failure of the LLM layer."""


class LLMUnavailable(LLMError):
    """The server is unreachable, timed out or the backend cannot load; retry later."""


class ModelMissing(LLMError):
    """The configured model is not there; the message says how to fix it."""


class LLMBadOutput(LLMError):
    """The answer was not parseable or not valid against the schema (after retries)."""


def _short(value: Any, limit: int = 160) -> str:
    """``value`` as one line (runs of whitespace, newlines included, are one space), cut at ``limit``."""
    text = " ".join((value if isinstance(value, str) else repr(value)).split())
    return text if len(text) <= limit else text[:limit] + "..."
