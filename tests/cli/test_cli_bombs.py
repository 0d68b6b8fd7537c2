"""Every traffic bomb the running app refuses (tests/app/test_bombs_upload_browser.py) is refused by the CLI
too: `plan --traffic FILE` exits 2 with one `error:` line and no traceback, the file read in a child process under
the OS limits (profiles/sandbox.py), so the CLI process itself stays small."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from cli import main as cli
from tests.upload_bombs import every_upload_bomb


@pytest.fixture(scope="module")
def bombs(tmp_path_factory):
    return every_upload_bomb(tmp_path_factory)


def _hwm_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise KeyError("VmHWM")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="peak RSS from /proc (Linux)")
def test_every_bomb_is_one_error_line_through_the_cli(bombs, capsys):
    Path("/proc/self/clear_refs").write_text("5")  # the peak from here on, not the fixture's file writing
    before_kib = _hwm_kib()
    bad = []
    for label, path in bombs.items():
        code = cli.main(["plan", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--traffic", str(path)],
                        emit=lambda _: None)
        err = capsys.readouterr().err.strip()
        if code != 2 or len(err.splitlines()) != 1 or not err.startswith("error: ") or "Traceback" in err:
            bad.append((label, code, err[:300]))
    assert not bad, bad
    # the CLI process held none of the decoded data: the bombs' hundreds of MB to GB were the children's
    grown_mb = (_hwm_kib() - before_kib) / 1024
    assert grown_mb < 300, f"the CLI's peak RSS grew {grown_mb:.0f} MB over {len(bombs)} bombs"
