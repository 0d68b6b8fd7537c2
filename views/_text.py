"""Visitor-supplied text shown as text.

Streamlit renders the body of st.markdown, st.caption, st.title/header/subheader, st.info/success/warning/error,
every widget label and every help tooltip as GitHub-flavoured Markdown (links, images, autolinked bare URLs and
e-mail addresses, tables, lists, headings), plus its own additions: `:red[...]` style directives, `:material/icon:`
and `:emoji:` shortcodes, and `$...$` / `$$...$$` LaTeX (streamlit/static/.../StreamlitMarkdown.*.js; without
unsafe_allow_html raw HTML is shown as text, but `<` is escaped here all the same).

plain() makes a value render as its own characters in those places: every ASCII punctuation character gets a
backslash (CommonMark: a backslash escape turns any ASCII punctuation into a literal character, so no link, image,
emphasis, list, table, autolink, directive or math can start), line breaks become spaces (a value is one line of a
message), and a word joiner (U+2060, invisible, no line break) goes after a colon that a word character, `+`, `-` or
`/` follows, after every `@` and before the dot of `www.`, because Streamlit (remark-emoji, its `:material/` icons,
remark-gfm's autolink literals) looks for `:emoji:`, `:material/...:`, `scheme://`, `www.` and e-mail addresses in
the text after the escapes are gone. Apply it where a file name, a column name or value, a URL value, a model name or an error that
quotes one is put into such a string, and only there: the page's own Markdown stays Markdown. Tables
(st.dataframe), selectbox options and st.code / st.text show text as is and need nothing.
"""

from __future__ import annotations

import re

MARKDOWN_PUNCTUATION = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
WORD_JOINER = "\u2060"
_LINE_BREAKS = re.compile(r"[\r\n\x0b\x0c\x1c-\x1e\x85\u2028\u2029]+")
_AFTER_COLON = re.compile(r"[A-Za-z0-9_+\-/]")


def plain(value: object) -> str:
    """`value` (any object, shown as str(value)) escaped so Streamlit's Markdown renders its characters literally."""
    text = _LINE_BREAKS.sub(" ", str(value))
    out: list[str] = []
    for i, ch in enumerate(text):
        if ch in MARKDOWN_PUNCTUATION:
            if ch == "." and text[max(0, i - 3):i].lower() == "www":
                out.append(WORD_JOINER)
            out.append("\\" + ch)
            if ch == "@" or (ch == ":" and i + 1 < len(text) and _AFTER_COLON.match(text[i + 1])):
                out.append(WORD_JOINER)
        else:
            out.append(ch)
    return "".join(out)


def quoted(value: object) -> str:
    """plain(value) between single quotes, the way the pages quote a name inside a sentence."""
    return f"'{plain(value)}'"
