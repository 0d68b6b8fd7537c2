"""The message keys the code uses (every `tr("...")` call with a literal key in app.py, views/, report/, i18n/ and
cli/) against the catalogues i18n/en.yaml and i18n/zh-CN.yaml.

    python tools/i18n_keys.py             # prints the keys each catalogue lacks and the keys no code uses
    python tools/i18n_keys.py --sync-en   # adds the missing English entries (key = text) to i18n/en.yaml

tests/i18n/test_catalogues.py runs the same scan (`used_keys`) and fails on a missing key.
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
SCANNED = ("app.py", "views", "report", "i18n", "cli")
CALLS = {"tr", "N_"}  # i18n.tr and the table marker i18n.N_; tr_known takes the planner's text and is not scanned


def scanned_files(root: Path = ROOT) -> list[Path]:
    out: list[Path] = []
    for name in SCANNED:
        p = root / name
        out += [p] if p.is_file() else sorted(p.rglob("*.py"))
    return out


def keys_in(path: Path) -> dict[str, int]:
    """Literal first arguments of tr(...) calls in `path`, with the line of their first use."""
    found: dict[str, int] = {}
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        f = node.func
        name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
        if name in CALLS and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            found.setdefault(node.args[0].value, node.lineno)
    return found


def used_keys(root: Path = ROOT) -> dict[str, str]:
    """Every literal key the code translates -> 'file:line' of a use."""
    out: dict[str, str] = {}
    for f in scanned_files(root):
        for k, line in keys_in(f).items():
            out.setdefault(k, f"{f.relative_to(root).as_posix()}:{line}")
    return out


def load(lang: str) -> dict[str, str]:
    path = ROOT / "i18n" / f"{lang}.yaml"
    return (yaml.safe_load(path.read_text(encoding="utf-8")) or {}) if path.exists() else {}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sync-en", action="store_true", help="add the missing English entries to i18n/en.yaml")
    args = ap.parse_args(argv)
    used = used_keys()
    missing = 0
    for lang in ("en", "zh-CN"):
        cat = load(lang)
        lacks = [k for k in used if k not in cat]
        if lang == "en" and args.sync_en and lacks:
            with (ROOT / "i18n" / "en.yaml").open("a", encoding="utf-8") as fh:
                for k in lacks:
                    fh.write(yaml.safe_dump({k: k}, allow_unicode=True, width=10_000, sort_keys=False))
            print(f"en: {len(lacks)} entries added")
            continue
        missing += len(lacks)
        for k in lacks:
            print(f"{lang}: missing {k!r} ({used[k]})")
        unused = [k for k in cat if k not in used and not k.startswith("field:") and not k.startswith("known:")]
        for k in unused:
            print(f"{lang}: not used by the code {k!r}")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
