"""The companion's replies as Telegram HTML: the little Markdown a language model writes
(**bold**, *italic* or _italic_, `code`, fenced code blocks, [links](https://…) and
# headings) becomes the matching tags; everything else is escaped and shown as written.

Only balanced, well-formed markers are converted, so unbalanced or stray ones ("5 * 3",
snake_case, a lone "**") stay as text, and the tags produced always nest properly. Code
keeps its content as written (nothing inside it is formatted). Links are made only for
http(s) addresses.
"""

from __future__ import annotations

import html
import re

_CODE = re.compile(r"```[A-Za-z0-9_+-]*\n?(?P<block>.+?)\n?```|`(?P<inline>[^`\n]+)`", re.DOTALL)
# Applied to escaped text, where "<" and ">" appear only in the tags made here: content
# that must not contain a tag excludes them, so no tag can straddle another.
_HEADING = re.compile(r"^#{1,6}[ \t]+(?P<text>[^<>\n]+?)[ \t]*#*$", re.MULTILINE)
_BOLD = re.compile(r"\*\*(?=\S)(?P<text>[^<>]+?)(?<=\S)\*\*")
_ITALIC = re.compile(
    r"(?<![\w*])\*(?=[^\s*])(?P<star>[^<>*\n]+?)(?<=[^\s*])\*(?![\w*])"
    r"|(?<![\w_])_(?=[^\s_])(?P<under>[^<>_\n]+?)(?<=[^\s_])_(?![\w_])"
)
_LINK = re.compile(r"\[(?P<text>[^\[\]<>\n]+)\]\((?P<url>https?://[^\s()<>\"]+)\)")


def to_html(text: str) -> str:
    """`text` (plain, with or without Markdown) for Telegram's HTML parse mode."""
    parts: list[str] = []
    position = 0
    for match in _CODE.finditer(text):
        parts.append(_prose(text[position : match.start()]))
        if match["block"] is not None:
            parts.append(f"<pre>{_escape(match['block'])}</pre>")
        else:
            parts.append(f"<code>{_escape(match['inline'])}</code>")
        position = match.end()
    parts.append(_prose(text[position:]))
    return "".join(parts)


def _escape(text: str) -> str:
    return html.escape(text, quote=False)


def _prose(text: str) -> str:
    """Escaped text outside code, with its Markdown turned into tags."""
    out = _HEADING.sub(r"<b>\g<text></b>", _escape(text))
    out = _BOLD.sub(r"<b>\g<text></b>", out)
    out = _ITALIC.sub(lambda m: f"<i>{m['star'] or m['under']}</i>", out)
    return _LINK.sub(lambda m: f'<a href="{m["url"]}">{m["text"]}</a>', out)
