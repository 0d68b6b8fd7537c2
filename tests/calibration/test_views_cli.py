"""The Calibrate and History pages (headless, streamlit.testing.v1.AppTest), the CLI without an engine, and
the prompt upload reader."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from calibration.storage.store import Store
from calibration.targets.traffic_prompts import prompts_from_upload
from tests.calibration.conftest import DATA, make_record

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def app_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Store:
    import streamlit as st

    url = f"sqlite:///{tmp_path / 'app.db'}"
    monkeypatch.setenv("SPECPLAN_STORE_URL", url)
    monkeypatch.delenv("SPECPLAN_CALIBRATE_TOKEN", raising=False)
    monkeypatch.delenv("SPECPLAN_RAY_ADDRESSES", raising=False)
    monkeypatch.delenv("SPECPLAN_RAY_ADDRESSES_FILE", raising=False)
    st.cache_resource.clear()  # wrong-token counts live in a process-wide cache: start each test clean
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
    assert [m for m in at.metric if "Held-out error" in m.label]


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


def test_wrong_tokens_are_rate_limited_across_sessions(app_store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("SPECPLAN_CALIBRATE_TOKEN", "s3cret")
    at = AppTest.from_file(str(REPO / "views" / "calibrate.py"), default_timeout=60).run()
    for guess in ("guess1", "guess2", "guess3"):
        at.text_input(key="cal_token").set_value(guess).run()
    # locked out: even the right token is not checked now, in this session or a new one
    at.text_input(key="cal_token").set_value("s3cret").run()
    assert any("Too many wrong access tokens" in e.value for e in at.error)
    assert not [b for b in at.button if b.key == "cal_submit"]
    fresh = AppTest.from_file(str(REPO / "views" / "calibrate.py"), default_timeout=60).run()
    fresh.text_input(key="cal_token").set_value("s3cret").run()
    assert any("try again in" in e.value for e in fresh.error)
    assert not [b for b in fresh.button if b.key == "cal_submit"]


def test_a_repeated_rerun_does_not_count_as_more_wrong_tokens(app_store: Store,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("SPECPLAN_CALIBRATE_TOKEN", "s3cret")
    at = AppTest.from_file(str(REPO / "views" / "calibrate.py"), default_timeout=60).run()
    at.text_input(key="cal_token").set_value("typo").run()
    for _ in range(4):  # reruns (widgets, fragments) with the same wrong entry
        at.run()
    at.text_input(key="cal_token").set_value("s3cret").run()
    assert [b for b in at.button if b.key == "cal_submit"]


def test_ray_clusters_come_from_the_admin_list_on_the_page(app_store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("SPECPLAN_CALIBRATE_TOKEN", "s3cret")
    at = AppTest.from_file(str(REPO / "views" / "calibrate.py"), default_timeout=60).run()
    at.text_input(key="cal_token").set_value("s3cret").run()
    assert not [t for t in at.text_input if t.key == "cal_ray_address"]  # never free text
    assert at.radio(key="cal_runner").options == ["local"]  # no cluster listed: no Ray
    monkeypatch.setenv("SPECPLAN_RAY_ADDRESSES", "127.0.0.1:6379,ray://gpu-head.internal:10001")
    at = AppTest.from_file(str(REPO / "views" / "calibrate.py"), default_timeout=60).run()
    at.text_input(key="cal_token").set_value("s3cret").run()
    at.radio(key="cal_runner").set_value("ray").run()
    assert not at.exception
    assert not [t for t in at.text_input if t.key == "cal_ray_address"]
    assert at.selectbox(key="cal_ray_address").options == ["127.0.0.1:6379", "ray://gpu-head.internal:10001"]


@pytest.mark.parametrize("page", ["calibrate.py", "history.py"])
def test_pages_show_a_damaged_store_as_one_clear_error(page: str, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from streamlit.testing.v1 import AppTest

    bad = tmp_path / "garbage.db"
    bad.write_bytes(b"not a database at all\n" * 100)
    monkeypatch.setenv("SPECPLAN_STORE_URL", f"sqlite:///{bad}")
    monkeypatch.delenv("SPECPLAN_CALIBRATE_TOKEN", raising=False)
    at = AppTest.from_file(str(REPO / "views" / page), default_timeout=60).run()
    assert not at.exception
    [err] = [e.value for e in at.error]
    if page == "calibrate.py":  # the Calibrate page names no store URL or file: the detail is in the server log
        assert err.startswith("The results store could not be reached") and str(bad) not in err
    else:
        assert "file is not a database" in err and str(bad) in err


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
    # this server run sampled at temperature 1.0: 0 of 144 accepted, and the CLI says why that can be
    assert rec["counts"]["num_drafts"] > 0 and rec["counts"]["num_accepted_tokens"] == 0
    assert "--temperature 0" in out.stderr
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


def _seed_ngram_run(store: Store, status: str = "succeeded") -> str:
    rid = store.create_run("engine", {}, status="running")
    store.add_group(make_record(method="ngram", k=4, per_pos=(60, 40, 30, 20), drafts=100, run_id=rid,
                                config_label="ngram-k4"))
    store.set_status(rid, status, "configuration ngram-k4 failed (exit 1)" if status == "failed" else "")
    return rid


def test_cli_regress_refuses_a_failed_run(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'n.db'}"
    store = Store(url)
    rid = _seed_ngram_run(store, status="failed")
    out = _cli("regress", "--from-run", rid, url=url)
    assert out.returncode == 2
    assert f"run_id='{rid}' not allowed: it ended failed" in out.stderr
    assert store.history() == []
    out = _cli("regress", "--from-run", "no-such-run", url=url)
    assert out.returncode == 2 and "no-such-run" in out.stderr and out.stderr.count("\n") == 1


def test_cli_regress_is_idempotent(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'n.db'}"
    store = Store(url)
    rid = _seed_ngram_run(store)
    first = _cli("--json", "regress", "--from-run", rid, url=url)
    again = _cli("--json", "regress", "--from-run", rid, url=url)
    assert (first.returncode, again.returncode) == (0, 0), first.stderr + again.stderr
    assert json.loads(first.stdout) == json.loads(again.stdout)
    assert [h["run_id"] for h in store.history()] == [rid]  # one point, not two


def test_cli_fit_refuses_a_bad_profile_name_before_writing_anything(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'f.db'}"
    store = Store(url)
    _seed_run(store)
    calibrated = tmp_path / "calibrated"
    for name, why in (("../../x", "profile name='../../x' not allowed"), ("taken", "exists")):
        if name == "taken":
            calibrated.mkdir(exist_ok=True)
            (calibrated / "taken.yaml").write_text("name: taken\n")
        out = _cli("fit", "--save-profile", name, url=url)
        assert out.returncode == 2 and why in out.stderr, out.stderr
        assert store.fits() == []  # a refused input leaves no trace in the store
    assert not (tmp_path.parent / "x.yaml").exists()
    out = _cli("--json", "fit", "--save-profile", "mine", url=url)
    assert out.returncode == 0, out.stderr
    assert [f["name"] for f in store.fits()] == ["mine"]


def test_cli_import_of_a_refused_file_leaves_no_run(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'i.db'}"
    bad = tmp_path / "bench.json"
    bad.write_text("{not json")
    for path in (str(tmp_path / "missing.json"), str(bad)):
        out = _cli("import", "--bench-json", path, "--workload", "code", url=url)
        assert out.returncode != 0
    assert Store(url).list_runs() == []


def _seed_protocol_run(store: Store) -> str:
    """A run as the measurement protocol writes it: a warm-up group, then two rounds with per-request counts."""
    import dataclasses

    rid = store.create_run("engine", {}, status="running")
    warm = make_record(method="ngram", k=3, per_pos=(6, 3, 1), drafts=10, num_prompts=1, output_tokens=32,
                       run_id=rid, wall_time_s=3.0)
    store.add_group(dataclasses.replace(warm, status="warmup",
                                        extra={"request_drafts": [10], "request_accepted": [10]}))
    for rnd in (1, 2):
        for b in (1, 4):
            g = make_record(method="ngram", k=3, per_pos=(5 * b, 3 * b, 2 * b), drafts=10 * b, num_prompts=b,
                            output_tokens=32 * b, run_id=rid, wall_time_s=1.0 + 0.3 * b)
            store.add_group(dataclasses.replace(g, prompt_set_hash=f"{rnd}-{b}", extra={
                "round": rnd, "request_drafts": [10] * b, "request_accepted": [8 + (i + rnd) % 5 for i in range(b)]}))
    store.set_status(rid, "succeeded")
    return rid


def test_calibrate_page_shows_the_interval_narrowing_and_the_warm_up(app_store: Store) -> None:
    from streamlit.testing.v1 import AppTest

    _seed_protocol_run(app_store)
    at = AppTest.from_file(str(REPO / "views" / "calibrate.py"), default_timeout=60).run()
    assert not at.exception
    assert any("interval narrowing" in m.value for m in at.markdown)
    frames = [d.value for d in at.dataframe]
    table = next(f for f in frames if "half-width" in f.columns)
    assert list(table["rounds"]) == [2] and list(table["requests"]) == [10]  # warm-up request left out
    groups = next(f for f in frames if "status" in f.columns)
    assert list(groups["status"]).count("warmup") == 1


def test_cli_refuses_bad_batch_sizes_and_protocol_settings(tmp_path: Path) -> None:
    out = _cli("run", "--configs", "baseline", "--batch-sizes", "1,x", url=f"sqlite:///{tmp_path / 's.db'}")
    assert out.returncode == 2 and "--batch-sizes" in out.stderr
    out = _cli("run", "--configs", "baseline", "--budget-s", "0", url=f"sqlite:///{tmp_path / 's.db'}")
    assert out.returncode == 2 and "budget_s" in out.stderr
    assert not (tmp_path / "s.db").exists() or not Store(f"sqlite:///{tmp_path / 's.db'}").list_runs()


def test_cpu_sampling_path_rejects_ngram_drafts_evidence(app_store: Store) -> None:
    """The serving path's 0 accepted n-gram drafts, explained (data/ngram_temperature.py, offline engine, same
    prompts): greedy accepts most draft tokens; temperature 0.001, a near-greedy distribution on the sampling
    path, accepts nearly none, where a correct rejection sampler would accept about as many as greedy. The
    Calibrate page says so in one line, with these figures."""
    from streamlit.testing.v1 import AppTest

    runs = json.loads((DATA / "ngram_temperature_cpu.json").read_text())["runs"]
    rate = {r["temperature"]: r["accepted"] / r["draft_tokens"] for r in runs}
    assert rate[0.0] > 0.5
    assert rate[0.001] < 0.1
    greedy = next(r for r in runs if r["temperature"] == 0.0)
    near = next(r for r in runs if r["temperature"] == 0.001)
    at = AppTest.from_file(str(REPO / "views" / "calibrate.py"), default_timeout=60).run()
    assert not at.exception
    line = next(c.value for c in at.caption if c.value.startswith("Server path:"))
    assert f"{greedy['accepted']} of {greedy['draft_tokens']}" in line
    assert f"{near['accepted']} of {near['draft_tokens']}" in line
    assert "temperature 0" in line and "--temperature 0" in line
