"""An answer as Telegram HTML: the model's light markdown kept, everything else escaped.

Telegram refuses a whole message whose HTML does not parse, so nothing of
the answer's own text may reach it as markup: ``&``, ``<`` and ``>`` are
escaped first, then only the markdown the model commonly writes becomes
tags (fenced code to ``<pre>``, inline code to ``<code>``, ``**bold**`` to
``<b>``). Text inside code is left as written (escaped, never bolded).
The result fits one message (4096 characters once parsed), cut on the
plain text so no entity or tag is ever cut in half.
"""

from __future__ import annotations

import html
import re

PARSE_MODE = "HTML"
MAX_TEXT = 4096  # Telegram's limit for one message, counted on the text once parsed

_FENCE = re.compile(r"```[^\n`]*\n?(.*?)```", re.DOTALL)
_INLINE = re.compile(r"`([^`\n]+)`")
_BOLD = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*", re.DOTALL)


def _inline(text: str) -> str:
    out: list[str] = []
    at = 0
    for match in _INLINE.finditer(text):
        out.append(_BOLD.sub(r"<b>\1</b>", html.escape(text[at:match.start()], quote=False)))
        out.append(f"<code>{html.escape(match.group(1), quote=False)}</code>")
        at = match.end()
    out.append(_BOLD.sub(r"<b>\1</b>", html.escape(text[at:], quote=False)))
    return "".join(out)


def to_html(text: str) -> str:
    """``text`` as Telegram HTML (``parse_mode="HTML"``)."""
    out: list[str] = []
    at = 0
    for match in _FENCE.finditer(text):
        out.append(_inline(text[at:match.start()]))
        out.append(f"<pre>{html.escape(match.group(1).rstrip(chr(10)), quote=False)}</pre>")
        at = match.end()
    out.append(_inline(text[at:]))
    return "".join(out)


def shown_length(formatted: str) -> int:
    """How long Telegram counts ``formatted``: its text once tags are gone and entities read."""
    return len(html.unescape(re.sub(r"</?(?:b|code|pre)>", "", formatted)))


def fitted_html(text: str) -> str:
    """:func:`to_html` of ``text``, cut on the plain text so it fits one message.

    Markup only ever removes characters from what Telegram counts, so a cut
    of the plain text to the limit always fits; a fence or a bold the cut
    leaves open stays as written characters.
    """
    if len(text) > MAX_TEXT:
        text = text[: MAX_TEXT - 1] + "…"
    return to_html(text)
