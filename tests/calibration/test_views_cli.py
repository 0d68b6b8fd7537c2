"""The Calibrate and History pages (headless, streamlit.testing.v1.AppTest), the CLI without an engine, and
the prompt upload reader."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from calibration.store import Store
from calibration.traffic_prompts import prompts_from_upload
from tests.calibration.conftest import DATA, make_record

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def app_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Store:
    url = f"sqlite:///{tmp_path / 'app.db'}"
    monkeypatch.setenv("SPECPLAN_STORE_URL", url)
    monkeypatch.delenv("SPECPLAN_CALIBRATE_TOKEN", raising=False)
    return Store(url)


def _seed_run(store: Store) -> str:
    rid = store.create_run("engine", {}, status="running")
    for w, plen in (("code", 340), ("chat", 160)):
        store.add_group(make_record(method="none", workload=w, run_id=rid, wall_time_s=1.8, prompt_tokens=plen))
        store.add_group(make_record(method="ngram", k=2, per_pos=(25, 19), drafts=35, workload=w, run_id=rid,
                                    wall_time_s=2.0, prompt_tokens=plen, config_label="ngram-k2"))
        store.add_group(make_record(method="ngram", k=4, per_pos=(20, 15, 10, 5), drafts=30, workload=w,
                                    run_id=rid, wall_time_s=2.1, prompt_tokens=plen, config_label="ngram-k4"))
    store.set_status(rid, "succeeded")
    return rid


def test_calibrate_page_is_read_only_without_a_configured_token(app_store: Store) -> None:
    from streamlit.testing.v1 import AppTest

    _seed_run(app_store)
    at = AppTest.from_file(str(REPO / "views" / "calibrate.py"), default_timeout=60).run()
    assert not at.exception
    assert any("Read-only" in i.value for i in at.info)
    assert not [b for b in at.button if b.key == "cal_submit"]
    assert at.selectbox(key="cal_result_run").value is not None
    assert [m for m in at.metric if "MAPE" in m.label]


def test_calibrate_page_needs_the_right_token(app_store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("SPECPLAN_CALIBRATE_TOKEN", "s3cret")
    at = AppTest.from_file(str(REPO / "views" / "calibrate.py"), default_timeout=60).run()
    at.text_input(key="cal_token").set_value("wrong").run()
    assert any("Wrong access token" in e.value for e in at.error)
    assert not [b for b in at.button if b.key == "cal_submit"]
    at.text_input(key="cal_token").set_value("s3cret").run()
    assert not at.exception
    assert [b for b in at.button if b.key == "cal_submit"]
    assert at.selectbox(key="cal_draft").options == ["smollm2-135m-2l", "smollm2-135m-8l"]


def test_history_page_marks_regressions(app_store: Store) -> None:
    from streamlit.testing.v1 import AppTest

    for i, (tau, bad) in enumerate(((2.5, False), (2.45, False), (1.6, True))):
        app_store.add_history(series="smollm2-135m/ngram-k4", workload="code", run_id=f"r{i}", acceptance_length=tau,
                              low=tau - 0.2, high=tau + 0.2, regression=bad, message=f"msg {i}",
                              created_at=1.7e9 + i * 86400)
    at = AppTest.from_file(str(REPO / "views" / "history.py"), default_timeout=60).run()
    assert not at.exception
    assert any("1 regression" in e.value for e in at.error)


def test_history_page_empty_says_how_to_fill_it(app_store: Store) -> None:
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(REPO / "views" / "history.py"), default_timeout=60).run()
    assert any("python -m calibration regress" in i.value for i in at.info)


def test_prompts_from_upload_groups_by_workload() -> None:
    csv = b"prompt_text,workload\nhello there,Chat\nwrite code,code\n,code\nmore chat,chat\n"
    got = prompts_from_upload("t.csv", csv, per_workload=8)
    assert got == {"chat": ["hello there", "more chat"], "code": ["write code"]}
    with pytest.raises(ValueError, match="no 'prompt_text' column"):
        prompts_from_upload("t.csv", b"a,b\n1,2\n")
    with pytest.raises(ValueError, match="file='x.exe' not allowed"):
        prompts_from_upload("x.exe", b"")


def _cli(*args: str, url: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "calibration", "--store", url, *args], capture_output=True,
                          text=True, env=env, cwd=REPO, timeout=120)


def test_cli_import_bench_json_and_list(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    out = _cli("--json", "import", "--bench-json", str(DATA / "bench_ngram_k3.json"), "--workload", "code",
               "--method", "ngram", url=url)
    assert out.returncode == 0, out.stderr
    rec = json.loads(out.stdout)["group"]
    assert rec["source"] == "bench_json" and rec["k"] == 3
    runs = json.loads(_cli("--json", "list", "runs", url=url).stdout)
    assert [r["status"] for r in runs] == ["succeeded"]


def test_cli_rejects_a_free_text_draft(tmp_path: Path) -> None:
    out = _cli("run", "--configs", "draft_model:/etc/passwd:2", url=f"sqlite:///{tmp_path / 'x.db'}")
    assert out.returncode == 2
    assert "draft='/etc/passwd' not allowed" in out.stderr


def test_cli_regress_from_a_stored_run(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'n.db'}"
    store = Store(url)
    ids = []
    for per_pos in ((60, 40, 30, 20), (62, 41, 29, 21), (58, 39, 31, 19), (20, 5, 1, 0)):
        rid = store.create_run("engine", {}, status="succeeded")
        store.add_group(make_record(method="ngram", k=4, per_pos=per_pos, drafts=100, run_id=rid,
                                    config_label="ngram-k4"))
        ids.append(rid)
    codes = [_cli("regress", "--from-run", rid, url=url) for rid in ids]
    assert [c.returncode for c in codes] == [0, 0, 0, 1]
    assert "REGRESSION smollm2-135m/ngram-k4 code" in codes[-1].stdout
