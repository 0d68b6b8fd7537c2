"""Shared fixtures: a store per test (SQLite, and a real PostgreSQL database where a server is given), the
converted model (cached across sessions) and ONE real engine calibration run per session that every
engine-marked test reads instead of starting engines again."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from calibration.measure.spec import EngineConfig, JobSpec
from calibration.storage.records import GroupRecord, SpecCounts
from calibration.storage.store import Store

DATA = Path(__file__).parent / "data"
# The session calibration, as small as still tests the real path: the baseline, n-gram at two K (the larger K
# is the held-out split of the fit), one truncated-layer draft (the draft-model path and the slowdown
# case) and a cost-only EAGLE-3 head at two K (a head method's own draft cost), each its own engine start; one
# shipped workload plus an "uploaded" set (calibration.targets.traffic_prompts)
# whose pool runs out before the largest batch size. Engine time is mostly the six engine starts.
E2E_CONFIGS = (
    EngineConfig("none"),
    EngineConfig("ngram", 2),
    EngineConfig("ngram", 4),
    EngineConfig("draft_model", 2, "smollm2-135m-2l"),
    # a cost-only EAGLE-3 head (random weights built from the target's config, calibration.targets.heads): what drafting
    # with a head costs on this engine, fitted at K=1 and predicted at K=3
    EngineConfig("eagle3", 1, "cost-only"),
    EngineConfig("eagle3", 3, "cost-only"),
)
E2E_WORKLOADS = ("code",)
E2E_UPLOADED = {"uploaded": ["Repeat exactly: the quick brown fox jumps over the lazy dog. The quick brown fox",
                             "List the numbers from one to twenty, separated by commas."]}
# The measurement protocol at its smallest: three batch sizes (the step-time terms are identifiable), one
# round; the warm-up group comes on top.
E2E_BATCH_SIZES = (1, 2, 4)
E2E_MAX_TOKENS = 32


# A PostgreSQL server for the store tests: .ci/run starts a throwaway one and sets both variables; locally,
# point SPECPLAN_TEST_PG_URL at a server whose user may create databases (each test gets its own).
PG_URL_ENV = "SPECPLAN_TEST_PG_URL"
REQUIRE_PG_ENV = "SPECPLAN_REQUIRE_PG"


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(f"sqlite:///{tmp_path / 'cal.db'}")


def pg_base_url() -> str:
    base = os.environ.get(PG_URL_ENV)
    if not base:
        msg = f"${PG_URL_ENV} is not set: no PostgreSQL server for the store tests (.ci/run starts one)"
        if os.environ.get(REQUIRE_PG_ENV):
            pytest.fail(msg)
        pytest.skip(msg)
    return base


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A fresh database on the test PostgreSQL server, dropped afterwards (its URL holds the password)."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    base = pg_base_url()
    name = f"specplan_t_{uuid.uuid4().hex[:12]}"
    admin = create_engine(base, isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(base).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as c:
            c.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def any_store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The same test on a SQLite file and on a real PostgreSQL database."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'cal.db'}"
    return request.getfixturevalue("pg_url")


@pytest.fixture
def any_store(any_store_url: str) -> Store:
    return Store(any_store_url)


@pytest.fixture(autouse=True)
def _isolated_profiles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Calibrated profiles written by tests go to a temp dir, never to the user's folder."""
    monkeypatch.setenv("SPECPLAN_CALIBRATED_DIR", str(tmp_path / "calibrated"))


def make_record(
    *, method: str = "ngram", k: int = 3, workload: str = "code", per_pos: tuple[int, ...] = (8, 4, 2),
    drafts: int = 10, run_id: str = "r1", config_label: str | None = None, output_tokens: int = 128,
    num_prompts: int = 4, wall_time_s: float = 2.0, draft: str | None = None, prompt_tokens: int = 200,
) -> GroupRecord:
    counts = SpecCounts() if method == "none" else SpecCounts(drafts, drafts * k, sum(per_pos), per_pos)
    return GroupRecord(
        run_id=run_id, config_label=config_label or (f"{method}-k{k}" if method != "none" else "baseline"),
        workload=workload, model="smollm2-135m", method=method, k=0 if method == "none" else k, draft=draft,
        prompt_set_hash="h", num_prompts=num_prompts, prompt_tokens=prompt_tokens, output_tokens=output_tokens,
        max_output_tokens=output_tokens // num_prompts, counts=counts, wall_time_s=wall_time_s,
    )


@pytest.fixture(scope="session")
def model_cache() -> dict:
    """Converts the GGUF once into ~/.cache/specplan/models (or $SPECPLAN_MODEL_CACHE) and reuses it."""
    from calibration.targets import model_assets

    return model_assets.ensure_all()


@dataclass(frozen=True)
class E2E:
    store_url: str
    run_id: str
    microbench_run_id: str
    metrics_dir: Path
    job_lines: tuple[str, ...]
    engine_s: float


@pytest.fixture(scope="session")
def e2e(model_cache: dict, tmp_path_factory: pytest.TempPathFactory) -> E2E:
    """The real calibration: microbenchmark + one engine job through the local runner (a subprocess holding every
    configuration's engine, measured in turn), persisted in a session store file that later tests read."""
    from calibration.measure.spec import MicrobenchSpec
    from calibration.run.runners import LocalRunner

    root = tmp_path_factory.mktemp("e2e")
    url = f"sqlite:///{root / 'calibration.db'}"
    runner = LocalRunner(url)
    # the kernel fit only starts the engine fit (which refits both efficiencies): a small grid will do
    mb = runner.submit("microbench", MicrobenchSpec(batches=(1, 4, 16), repeats=3).to_dict(), timeout_s=300)
    assert mb.wait(320) == "succeeded", mb.lines()
    # interleaved, as the CLI runs a CPU calibration whose engines fit in memory (--interleave auto): every engine in
    # one child, each group measured for every configuration in turn
    spec = JobSpec(configs=E2E_CONFIGS, workloads=E2E_WORKLOADS, batch_sizes=E2E_BATCH_SIZES, min_rounds=1,
                   max_rounds=1, budget_s=60.0, max_output_tokens=E2E_MAX_TOKENS,
                   metrics_text_dir=str(root / "metrics"), custom_prompts=E2E_UPLOADED, interleave=True)
    t0 = time.perf_counter()
    job = runner.submit("engine", spec.to_dict(), timeout_s=1500)  # 6 engine starts, then 6 rounds of groups
    try:
        state = job.wait(1560)
    except BaseException:  # an interrupted run (Ctrl-C) takes its six engines down; a local job outlives its runner
        job.cancel()
        raise
    engine_s = time.perf_counter() - t0
    assert state == "succeeded", "\n".join(job.lines()[-30:])
    if os.environ.get("SPECPLAN_KEEP_E2E"):
        print(f"e2e store: {url}")
    return E2E(url, job.run_id, mb.run_id, root / "metrics", tuple(job.lines()), engine_s)
