from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

import pytest
from sqlalchemy import text

from calibration.records import SCHEMA_VERSION, GroupRecord, SpecCounts
from calibration.store import STALE_AFTER_S, Store
from tests.calibration.conftest import make_record


def test_record_round_trips_through_dict_and_json() -> None:
    rec = make_record(per_pos=(5, 3, 1), drafts=9)
    back = GroupRecord.from_dict(json.loads(json.dumps(rec.to_dict())))
    assert back == rec
    assert back.schema_version == SCHEMA_VERSION


def test_unknown_schema_version_is_rejected() -> None:
    d = make_record().to_dict()
    d["schema_version"] = SCHEMA_VERSION + 1
    with pytest.raises(ValueError, match=f"schema_version={SCHEMA_VERSION + 1}"):
        GroupRecord.from_dict(d)


def test_record_validation_names_field_and_value() -> None:
    with pytest.raises(ValueError, match="method='eagle9'"):
        make_record(method="eagle9")
    with pytest.raises(ValueError, match="wall_time_s=nan"):
        dataclasses.replace(make_record(), wall_time_s=float("nan"))
    with pytest.raises(ValueError, match="num_drafts=-1"):
        SpecCounts(num_drafts=-1)


def test_acceptance_conventions_on_a_record() -> None:
    # 10 drafts, K=3, 14 accepted: tau = 1 + 14/10, vLLM draft acceptance rate = 14/30
    rec = make_record(per_pos=(8, 4, 2), drafts=10, output_tokens=40, num_prompts=1)
    assert rec.acceptance_length == pytest.approx(2.4)
    assert rec.counts.draft_acceptance_rate == pytest.approx(14 / 30)
    # 39 decode tokens (first from prefill), 14 came from accepted drafts -> 25 sequence steps
    assert rec.sequence_steps == 25
    assert rec.tokens_per_sequence_step == pytest.approx(39 / 25)
    assert rec.draft_coverage == pytest.approx(10 / 25)


def test_sqlite_store_uses_wal(store: Store) -> None:
    with store.engine.connect() as c:
        assert c.execute(text("PRAGMA journal_mode")).scalar() == "wal"


def test_groups_are_visible_to_another_process_view_at_once(store: Store) -> None:
    rid = store.create_run("engine", {"x": 1}, status="running")
    store.add_group(make_record(run_id=rid))
    other = Store(store.url)  # a second engine on the same file, like the app reading a running job
    assert [g.workload for g in other.groups([rid])] == ["code"]
    assert other.get_run(rid).status == "running"


def test_silent_running_run_reads_as_crashed(store: Store) -> None:
    rid = store.create_run("engine", {}, status="running")
    assert store.get_run(rid).status == "running"
    assert store.get_run(rid, now=time.time() + STALE_AFTER_S + 1).status == "crashed"
    store.set_status(rid, "timed_out", "stopped")
    assert store.get_run(rid, now=time.time() + 10 * STALE_AFTER_S).status == "timed_out"


def test_unknown_status_is_rejected(store: Store) -> None:
    rid = store.create_run("engine", {})
    with pytest.raises(ValueError, match="status='done'"):
        store.set_status(rid, "done")


def test_unknown_run_names_the_id(store: Store) -> None:
    with pytest.raises(KeyError, match="nope"):
        store.get_run("nope")


def test_fits_and_history_persist(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'h.db'}"
    s = Store(url)
    s.save_fit("p1", "report", {"a": 1})
    s.add_history(series="m/ngram-k4", workload="code", run_id="r", acceptance_length=2.5, low=2.2, high=2.8,
                  regression=False, created_at=1.0)
    s.add_history(series="m/ngram-k4", workload="code", run_id="r2", acceptance_length=2.0, low=1.8, high=2.1,
                  regression=True, created_at=2.0)
    again = Store(url)
    assert again.fits()[0]["result"] == {"a": 1}
    h = again.history("m/ngram-k4")
    assert [x["acceptance_length"] for x in h] == [2.5, 2.0]
    assert [x["regression"] for x in h] == [0, 1]


def test_store_url_from_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path / 'env.db'}"
    monkeypatch.setenv("SPECPLAN_STORE_URL", url)
    assert Store().url == url
    assert (tmp_path / "env.db").exists()
