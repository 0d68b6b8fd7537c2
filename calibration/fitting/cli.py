"""The command line every fit shares (tools/fit_*.py): fit, print the report, write the shipped YAML; or --check
the shipped YAML against a refit on this machine (exit 1 naming each mismatch)."""

from __future__ import annotations

import argparse
import datetime as dt
from collections.abc import Callable, Mapping
from pathlib import Path

import yaml


def run_cli(argv: list[str] | None, *, description: str, out_yaml: Path, refit: Callable[[bool], object],
            report: Callable[[object], None], to_doc: Callable[[object, str], dict],
            check: Callable[[object, Mapping], list[str]]) -> int:
    """refit(checking) -> the fit; report(fit) prints it; to_doc(fit, date) -> the YAML document; check(fit, shipped)
    -> why the shipped document is not reproduced (empty: it is)."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--check", action="store_true", help="compare with the shipped YAML instead of writing")
    ap.add_argument("--out", type=Path, default=out_yaml)
    args = ap.parse_args(argv)
    fit = refit(args.check)
    report(fit)
    if args.check:
        bad = check(fit, yaml.safe_load(args.out.read_text()))
        print("shipped parameters reproduced" if not bad else "mismatch:\n  " + "\n  ".join(bad))
        return 1 if bad else 0
    args.out.write_text(yaml.safe_dump(to_doc(fit, dt.date.today().isoformat()), sort_keys=False, width=120))
    print(f"wrote {args.out}")
    return 0
