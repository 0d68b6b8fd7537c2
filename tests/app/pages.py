"""What the page tests share: the plan they check the pages against, and how they read a page's figures, its
downloads and its charts, and the CLI's plan JSON."""

from __future__ import annotations

import json
import re
import subprocess
import sys

from planner import plan as P

PAGES = ["views/plan.py", "views/methods.py", "views/levers.py", "views/sensitivity.py", "views/traffic.py",
         "views/claims.py", "views/report.py"]
DEFAULT = dict(model="llama-3.3-70b", hardware="h100-sxm", tp=4, tpot_slo_ms=50.0, monthly_output_tokens=1e10,
               volume_source="entered in the sidebar")


def money(text: str) -> float:
    return float(re.search(r"(-?)\$?([\d,]+\.?\d*)", text).group(0).replace("$", "").replace(",", ""))


def metric(at, prefix: str):
    return next(m for m in at.metric if m.label.startswith(prefix))


def planned(cat, **kw) -> P.Plan:
    base = dict(DEFAULT)
    base.update(kw)
    return P.plan(P.PlanRequest(**base), cat)


def downloaded(at, media: dict[str, bytes], key: str) -> bytes:
    """The bytes the download button `key` on the page gives."""
    url = next(b.proto.url for b in at.get("download_button") if b.proto.id.endswith(key))
    return media[url.rsplit("/", 1)[1].split(".", 1)[0]]


def chart(at, key: str) -> dict:
    return json.loads(next(c.proto.spec for c in at.get("plotly_chart") if c.proto.id.endswith(key)))


def cli_plan(*flags: str) -> dict:
    out = subprocess.run([sys.executable, "-m", "planner", "plan", *flags], capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)
