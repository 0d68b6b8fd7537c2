"""Visitor-supplied text shown as text.

Streamlit renders the body of st.markdown, st.caption, st.title/header/subheader, st.info/success/warning/error,
every widget label and every help tooltip as GitHub-flavoured Markdown (links, images, autolinked bare URLs, `www.`
and e-mail addresses, emphasis, strikethrough, code, tables, lists, headings, entities), plus its own additions:
`:red[...]` style directives, `:material/icon:` and `:emoji:` shortcodes and `$...$` / `$$...$$` LaTeX
(streamlit/static/static/js/StreamlitMarkdown.*.js; without unsafe_allow_html raw HTML is shown as text, but `<` is
escaped here all the same).

plain() makes a value render as its own characters when it sits inside a line of a page's own text:
- a backslash before every character that can open or close an inline construct: \\ ` * [ ] < & $ ~ |, an
  underscore that is not between two letters or digits, and a colon that a letter follows (a `:name` directive)
  (CommonMark: a backslash escape turns ASCII punctuation into a literal character, so no link, image, emphasis,
  code, HTML, entity, math, table cell or directive can start or end inside the value);
- a backslash before a block marker at the value's start (`#`, `>`, a list bullet, `1.`), for a value that begins
  a line;
- line breaks become spaces (a value is one line of a message);
- a word joiner (U+2060, invisible, no line break) after a colon that `/`, `name:` or `material/` follows, after every
`@`
  and before the dot of `www.`: remark-emoji, Streamlit's `:material/` icons and remark-gfm's
  autolink literals look for `:name:`, `scheme://`, `www.` and `user@host` in the text after the escapes are gone.
Characters that only matter at the start of a line or next to one of the escaped ones (`-`, `+`, `.`, `>`, `(`,
`!`, quotes, `snake_case` underscores, `key: value` colons) are left as they are, so the text stays as written.

Apply it where a file name, a column name or value, a URL value, a model name or an error that quotes one is put
into such a string, and only there: the page's own Markdown stays Markdown. plain_in() does it for the visitor's
values inside a sentence another layer composed (a planner note that names the traffic profile). Tables
(st.dataframe), selectbox options and st.code / st.text show text as is and need nothing.
"""

from __future__ import annotations

import re

ALWAYS_ESCAPED = frozenset("\\`*[]<&$~|")
WORD_JOINER = "\u2060"
_LINE_BREAKS = re.compile(r"[\r\n\x0b\x0c\x1c-\x1e\x85\u2028\u2029]+")
_AFTER_COLON = re.compile(r"[\w+/-]*[/:]")  # `scheme://`, `:material/...:`, `:emoji_name:`
_BLOCK_START = re.compile(r"^(\s*)(#|>|[-+](?=\s|$|[-+\s]*$)|\d{1,9}[.)](?=\s|$))")


def plain(value: object) -> str:
    """`value` (any object, shown as str(value)) escaped so Streamlit's Markdown renders its characters literally."""
    text = _LINE_BREAKS.sub(" ", str(value))
    out: list[str] = []
    block = _BLOCK_START.match(text)
    marker = block.end(2) - 1 if block else -1  # the character that would open a heading, quote or list
    for i, ch in enumerate(text):
        if ch == "." and text[max(0, i - 3):i].lower() == "www":
            out.append(WORD_JOINER)
        if i == marker or ch in ALWAYS_ESCAPED or (ch == "_" and not _intraword(text, i)) or (
                ch == ":" and i + 1 < len(text) and text[i + 1].isascii() and text[i + 1].isalpha()):
            out.append("\\")
        out.append(ch)
        if ch == "@" or (ch == ":" and _AFTER_COLON.match(text, i + 1)):
            out.append(WORD_JOINER)
    return "".join(out)


def _intraword(text: str, i: int) -> bool:
    """An underscore between two letters or digits neither opens nor closes emphasis (CommonMark flanking rules)."""
    return 0 < i < len(text) - 1 and text[i - 1].isalnum() and text[i + 1].isalnum()


def quoted(value: object) -> str:
    """plain(value) between single quotes, the way the pages quote a name inside a sentence."""
    return f"'{plain(value)}'"


def plain_in(text: str, *values: object) -> str:
    """`text` (a sentence of the app's own, no Markdown in it) with each occurrence of the visitor-supplied `values`
    escaped by plain(), the longest first; the rest of the sentence is left as it is."""
    names = sorted({str(v) for v in values if v is not None and str(v)}, key=len, reverse=True)
    if not names:
        return text
    pattern = re.compile("|".join(re.escape(n) for n in names))
    return pattern.sub(lambda m: plain(m.group(0)), text)


def cut_value(raw: str, limit: int = 80) -> str:
    """A visitor's value (a link's) as a warning quotes it: repr() of at most `limit` characters, and its length when
    longer, so a 100,000-character value is not echoed back on the page."""
    return repr(raw) if len(raw) <= limit else f"{raw[:limit]!r}... ({len(raw):,} characters)"
