"""The project's exceptions, named for what the caller should do.

CompanionError
├── ConfigurationError     fix a setting and start again
├── LLMUnavailable         the model could not answer: apologise, keep the message
│   └── LLMBadOutput       the model answered, but not in the shape asked for
│       └── LLMTruncated   the answer stopped at max_tokens: ask again with more room
├── DeliveryFailed         a message could not be delivered to a person
├── NotFound               no such thing for this person
└── InvalidInput           the person's input cannot be used as given
"""

from __future__ import annotations


class CompanionError(Exception):
    """Base of every error the project raises on purpose."""


class ConfigurationError(CompanionError):
    """A setting is missing or invalid; the message names it."""


class LLMUnavailable(CompanionError):
    """The language model could not be reached or refused after retries."""


class LLMBadOutput(LLMUnavailable):
    """The language model answered in a shape we cannot use."""


class LLMTruncated(LLMBadOutput):
    """The model stopped at `max_tokens`: its answer is incomplete and must not be used."""


class DeliveryFailed(CompanionError):
    """A message could not be delivered; `reason` says why (e.g. 'blocked')."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


class NotFound(CompanionError):
    """The thing asked for does not exist for this person."""


class InvalidInput(CompanionError):
    """The input cannot be used; the message is safe to show to the person."""
