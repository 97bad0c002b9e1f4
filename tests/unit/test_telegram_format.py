"""An answer as Telegram HTML: markdown kept as markup, the answer's own text escaped, one message long."""

from __future__ import annotations

from metnos.adapters.channels.telegram_format import (
    MAX_TEXT,
    fitted_html,
    shown_length,
    to_html,
)
from tests.support.fake_telegram import html_text


def test_the_answers_own_markup_characters_are_escaped() -> None:
    assert to_html("a <script> & b > c") == "a &lt;script&gt; &amp; b &gt; c"


def test_light_markdown_becomes_telegram_tags_and_code_is_left_as_written() -> None:
    formatted = to_html("**sent** to `a**b**<c>`:\n```python\nif x < 1:\n    **y**\n```\nend")
    assert formatted == "<b>sent</b> to <code>a**b**&lt;c&gt;</code>:\n<pre>if x &lt; 1:\n    **y**</pre>\nend"
    assert html_text(formatted) == "sent to a**b**<c>:\nif x < 1:\n    **y**\nend"


def test_a_long_answer_is_cut_to_one_message_without_breaking_the_markup() -> None:
    formatted = fitted_html("**start** " + "<&>" * 3000 + " `tail`")
    assert MAX_TEXT - 4 <= shown_length(formatted) <= MAX_TEXT and formatted.endswith("…")  # "**" twice is gone
    assert html_text(formatted).startswith("start <&><&>")
    # An opening fence the cut leaves unclosed stays as characters, never an unbalanced tag.
    assert html_text(fitted_html("x" * 4090 + " ```code that goes on")).endswith(" ```c…")
