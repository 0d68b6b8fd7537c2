"""Wrap the English texts handed to Streamlit calls in a file in tr(...), for the catalogues (i18n/): each string
piece stays on its own source line; an f-string becomes a message with named fields (`f"{n:,} GPUs"` ->
`tr("{n} GPUs", n=f"{n:,}")`). For a page that gained new texts, or one whose merge took another branch's version:

    python tools/i18n_wrap.py views/PAGE.py                       # the file imports `tr` from i18n
    python tools/i18n_wrap.py --call=i18n.tr views/traffic.py     # a file where `tr` names something else
    python tools/i18n_keys.py --sync-en                           # then the Chinese of each new key, by hand

Add the import (`from i18n import tr`) where the file lacks it, and read the diff: a logger's .error() or an example
text (a placeholder) is wrapped too and should be unwrapped.
"""

from __future__ import annotations

import argparse
import ast
import io
import re
import tokenize

UI = {"title", "header", "subheader", "caption", "markdown", "error", "warning", "info", "success", "button",
      "download_button", "selectbox", "radio", "checkbox", "number_input", "text_input", "text_area", "file_uploader",
      "expander", "toggle", "slider", "select_slider", "multiselect", "metric", "spinner", "form_submit_button",
      "popover", "write", "tabs", "page_header"}
KEYWORDS = {"help", "label", "placeholder"}
SEE_THROUGH = {"plain", "quoted", "plain_in", "fmt_usd", "fmt_cpm", "fmt_pct", "fmt_months", "float", "int", "str",
               "round", "abs"}  # a field named after these calls' first argument


def field_name(expr: ast.expr) -> str:
    if isinstance(expr, ast.Name):
        base = expr.id
    elif isinstance(expr, ast.Attribute):
        base = expr.attr
    elif isinstance(expr, ast.Call) and isinstance(expr.func, (ast.Name, ast.Attribute)):
        base = expr.func.id if isinstance(expr.func, ast.Name) else expr.func.attr
        if base == "len":
            base = "n"
        elif base in SEE_THROUGH and expr.args:
            base = field_name(expr.args[0])
    elif isinstance(expr, ast.Subscript) and isinstance(expr.slice, ast.Constant) and isinstance(expr.slice.value, str):
        base = expr.slice.value
    else:
        base = "v"
    base = re.sub(r"\W", "_", base).strip("_") or "v"
    return "v" + base if base[0].isdigit() else base


def literal(text: str) -> str:
    r = repr(text)
    return '"' + r[1:-1].replace("\\'", "'") + '"' if r.startswith("'") and '"' not in text else r


class Message:
    """One tr() call's key, built piece by piece, and the named fields its f-string pieces fill."""

    def __init__(self) -> None:
        self.fields: list[str] = []
        self.seen: dict[tuple, str] = {}

    def piece(self, node: ast.expr, formatted: bool) -> str:
        if isinstance(node, ast.Constant):
            return node.value.replace("{", "{{").replace("}", "}}") if formatted else node.value
        out = []
        for v in node.values:
            if isinstance(v, ast.Constant):
                out.append(v.value.replace("{", "{{").replace("}", "}}"))
                continue
            if v.format_spec is not None and any(not isinstance(x, ast.Constant) for x in v.format_spec.values):
                raise ValueError("a format spec with a field in it")
            spec = "".join(x.value for x in v.format_spec.values) if v.format_spec is not None else ""
            conv = {115: "str", 114: "repr", 97: "ascii"}.get(v.conversion)
            src = ast.unparse(v.value)
            key = (src, spec, conv)
            if key not in self.seen:
                base = field_name(v.value)
                name, i = base, 2
                while name in self.seen.values():
                    name, i = f"{base}{i}", i + 1
                self.seen[key] = name
                val = f"{conv}({src})" if conv else src
                if spec:
                    val = f'f"{{{val}:{spec}}}"' if '"' not in val else f"f'{{{val}:{spec}}}'"
                self.fields.append(f"{name}={val}")
            out.append("{" + self.seen[key] + "}")
        return "".join(out)


def _targets(node: ast.Call) -> list[ast.expr]:
    f = node.func
    name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
    if name not in UI:
        return []
    if isinstance(f, ast.Attribute):
        if name == "write" and not (isinstance(f.value, ast.Name) and f.value.id == "st"):
            return []
        if not isinstance(f.value, (ast.Name, ast.Attribute, ast.Subscript)):
            return []
        if isinstance(f.value, ast.Name) and f.value.id in ("log", "logger", "logging"):  # the server's log
            return []
    elif name != "page_header":
        return []
    if name == "tabs" and node.args and isinstance(node.args[0], (ast.List, ast.Tuple)):
        return list(node.args[0].elts)
    return ([node.args[0]] if node.args else []) + [k.value for k in node.keywords if k.arg in KEYWORDS]


def wrap(src: str, call: str = "tr") -> tuple[str, int]:
    """`src` with its Streamlit texts wrapped in `call`(...), and how many were."""
    lines = src.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def pos(line: int, col: int) -> int:  # ast columns count UTF-8 bytes
        return starts[line - 1] + len(lines[line - 1].encode("utf-8")[:col].decode("utf-8"))

    strings = [(starts[t.start[0] - 1] + t.start[1], starts[t.end[0] - 1] + t.end[1], t.string)
               for t in tokenize.generate_tokens(io.StringIO(src).readline) if t.type == tokenize.STRING]
    edits = []
    for node in ast.walk(ast.parse(src)):
        if not isinstance(node, ast.Call):
            continue
        for t in _targets(node):
            if isinstance(t, ast.JoinedStr):
                text = "".join(v.value for v in t.values if isinstance(v, ast.Constant))
            elif isinstance(t, ast.Constant) and isinstance(t.value, str):
                text = t.value
            else:
                continue
            if not re.search(r"[A-Za-z]{2}", text):
                continue
            s, e = pos(t.lineno, t.col_offset), pos(t.end_lineno, t.end_col_offset)
            pieces = [(a, b, txt) for a, b, txt in strings if a >= s and b <= e]
            formatted = isinstance(t, ast.JoinedStr) and any(not isinstance(v, ast.Constant) for v in t.values)
            msg = Message()
            try:
                keys = [msg.piece(ast.parse(txt, mode="eval").body, formatted) for _a, _b, txt in pieces]
            except ValueError:
                continue
            out, prev = [], None
            for (a, b, _txt), key in zip(pieces, keys):
                if prev is not None:
                    out.append(src[prev:a])
                out.append(literal(key))
                prev = b
            edits.append((s, e, f"{call}(" + "".join(out) + "".join(", " + f for f in msg.fields) + ")"))
    for s, e, rep in sorted(edits, reverse=True):
        src = src[:s] + rep + src[e:]
    return src, len(edits)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--call", default="tr", help="the translation call to write (default tr)")
    ap.add_argument("files", nargs="+")
    args = ap.parse_args()
    for path in args.files:
        with open(path, encoding="utf-8") as fh:
            out, n = wrap(fh.read(), args.call)
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(out)
        print(f"{path}: {n} texts wrapped")


if __name__ == "__main__":
    main()
