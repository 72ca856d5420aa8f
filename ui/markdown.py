"""User text (file, column, category, scenario and map names; messages that quote them) in Markdown."""

from __future__ import annotations

import re

__all__ = ["md", "plain"]

# The ASCII punctuation Markdown (CommonMark, GitHub's tables and strikethrough, Streamlit's LaTeX, directives
# and shortcodes) reads, each backslash-escaped: none can then start an image, a link, emphasis, code, a
# heading, a list, a table, an entity or HTML, LaTeX ($), a directive (:red[…]) or a shortcode (:x:).
_SPECIAL = re.compile(r"([\\`*_{}\[\]()<>#+\-.!|~$:=&])")
# GitHub's literal autolinks (http://…, https://…, www.…, a@b.c) form from the text after its escapes are
# read, so a backslash cannot stop them: an invisible word joiner (U+2060) inside each does.
_AUTOLINK = re.compile(r"(?i)(?<=https:)|(?<=http:)|(?<=\bwww)(?=\.)|(?<=@)")
JOINER = "\u2060"


def md(text: object) -> str:
    """``text`` (any object, as ``str()`` shows it) for Markdown: every character Markdown reads is
    backslash-escaped and literal autolinks are broken by an invisible joiner, so Streamlit shows the text
    as it is and forms no image, link, emphasis or formula from it; line breaks become spaces."""
    flat = " ".join(str(text).splitlines())
    return _SPECIAL.sub(r"\\\1", _AUTOLINK.sub(JOINER, flat))


_ESCAPED = re.compile(r"\\([!-/:-@\[-`{-~])")


def plain(source: str) -> str:
    """What Markdown shows of ``source`` built with :func:`md`: its backslash escapes read, its joiners
    dropped (the project's own markup, such as ``**…**``, is left as it is). For tests and logs."""
    return _ESCAPED.sub(r"\1", source).replace(JOINER, "")
