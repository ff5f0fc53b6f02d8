"""Cleaning what people type before it is stored or sent to the model."""

from __future__ import annotations

import re
import unicodedata

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def clean_text(raw: str) -> str:
    """Text safe to store and send: valid UTF-8, no control characters, NFC, trimmed.

    Lone surrogates (from broken clients) become U+FFFD rather than failing later.
    """
    # Through UTF-16, a valid surrogate pair becomes its character, a lone one U+FFFD.
    valid = raw.encode("utf-16-le", errors="surrogatepass").decode("utf-16-le", errors="replace")
    without_controls = _CONTROL.sub("", valid.replace("\r\n", "\n").replace("\r", "\n"))
    return unicodedata.normalize("NFC", without_controls).strip()
