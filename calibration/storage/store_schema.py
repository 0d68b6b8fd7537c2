"""The store's tables (calibration.storage.store reads and writes them): runs and their records, fits, nightly history,
and the files kept for shared links (uploaded traffic files, model configs).

Tables gain columns over versions: ADDED_COLUMNS lists each column added after its table first shipped and how
existing rows are filled; Store adds them (ALTER TABLE ... ADD COLUMN) before its first write to an older store.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    Float,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
)

metadata = MetaData()
runs = Table(
    "runs",
    metadata,
    Column("run_id", String(64), primary_key=True),
    Column("kind", String(32), nullable=False),  # engine | serve | import | microbench | regress
    Column("status", String(16), nullable=False),
    Column("message", Text, nullable=False, default=""),
    Column("spec_json", Text, nullable=False, default="{}"),
    Column("created_at", Float, nullable=False),
    Column("heartbeat_at", Float, nullable=False),
    Column("finished_at", Float),
)
group_records = Table(
    "group_records",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_id", String(64), nullable=False, index=True),
    Column("schema_version", Integer, nullable=False),
    Column("config_label", String(128), nullable=False),
    Column("workload", String(64), nullable=False),
    Column("method", String(32), nullable=False),
    Column("k", Integer, nullable=False),
    Column("record_json", Text, nullable=False),
    Column("created_at", Float, nullable=False),
)
step_samples = Table(
    "step_samples",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_id", String(64), nullable=False, index=True),
    Column("sample_json", Text, nullable=False),
)
fits = Table(
    "fits",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("name", String(128), nullable=False, index=True),
    Column("kind", String(32), nullable=False),  # acceptance | step_time | profile
    Column("result_json", Text, nullable=False),
    Column("created_at", Float, nullable=False),
)
history = Table(
    "history",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("series", String(128), nullable=False, index=True),  # e.g. "smollm2-135m/ngram-k4"
    Column("workload", String(64), nullable=False),
    Column("run_id", String(64), nullable=False),
    Column("acceptance_length", Float, nullable=False),
    Column("low", Float, nullable=False),
    Column("high", Float, nullable=False),
    Column("regression", Integer, nullable=False, default=0),
    Column("message", Text, nullable=False, default=""),
    Column("created_at", Float, nullable=False),
)


# Uploaded traffic files, one row per file (the SHA-256 of its bytes alone), and the links that read one: a link's
# digest is the SHA-256 of the bytes and the reading options (profiles.traffic.options.upload_digest), which a shared
# link carries (`profile=`, views/sidebar/state.py). Another reading of a kept file adds only a small link row. Both
# carry the time they were last used: when the files pass the store's quota, the least recently used ones go first.
traffic_files = Table(
    "traffic_files",
    metadata,
    Column("file_digest", String(64), primary_key=True),
    Column("data", LargeBinary, nullable=False),
    Column("size_bytes", BigInteger, nullable=False),
    Column("created_at", Float, nullable=False),
    Column("last_used_at", Float, nullable=False, index=True),
    # The visitor who kept the file first (calibration.storage.kept_quota.owner_of: a hash of the client key, never the
    # address itself); "" for files kept before visitors had shares. Added in a later version: nullable.
    Column("owner", String(64)),
    # Sizes and last uses read from indexes alone: a row's later columns sit behind its bytes (SQLite's overflow
    # pages), so summing sizes from the table reads every kept file.
    Index("ix_traffic_files_lru_size", "last_used_at", "size_bytes", "file_digest"),
    Index("ix_traffic_files_owner_lru_size", "owner", "last_used_at", "size_bytes", "file_digest"),
)
traffic_links = Table(
    "traffic_links",
    metadata,
    Column("digest", String(64), primary_key=True),
    Column("file_digest", String(64), nullable=False, index=True),
    Column("name", String(255), nullable=False),
    Column("options_json", Text, nullable=False),
    Column("created_at", Float, nullable=False),
    Column("last_used_at", Float, nullable=False),
)
# The one-table layout of earlier versions (a full copy of the bytes per link): read, and moved into the two tables
# above by the first traffic write (calibration.storage.kept_traffic); not part of `metadata`, so it is never created.
legacy_traffic_profiles = Table(
    "traffic_profiles",
    MetaData(),
    Column("digest", String(64), primary_key=True),
    Column("name", String(255), nullable=False),
    Column("data", LargeBinary, nullable=False),
    Column("options_json", Text, nullable=False),
    Column("created_at", Float, nullable=False),
)
history_once = Index("ux_history_series_workload_run", history.c.series, history.c.workload, history.c.run_id,
                     unique=True)


# Uploaded model configs (a Hugging Face config.json), by the first 16 hex of the SHA-256 of their bytes: a link that
# names the model `config:<digest>` reopens it (calibration/storage/kept_models.py). Under a byte quota with the same
# least-recently-used eviction and visitor shares as the traffic files (calibration.storage.kept_quota).
kept_models = Table(
    "kept_models",
    metadata,
    Column("digest", String(64), primary_key=True),
    Column("data", LargeBinary, nullable=False),
    Column("created_at", Float, nullable=False),
    # Added in a later version (nullable: ADDED_COLUMNS fills the rows an earlier version kept).
    Column("size_bytes", BigInteger),
    Column("last_used_at", Float),
    Column("owner", String(64)),
    Index("ix_kept_models_lru_size", "last_used_at", "size_bytes", "digest"),  # as traffic_files'
    Index("ix_kept_models_owner_lru_size", "owner", "last_used_at", "size_bytes", "digest"),
)

# Columns added after their table first shipped: (table, column, SQL expression that fills the rows kept before).
ADDED_COLUMNS: tuple[tuple[Table, str, str], ...] = (
    (traffic_files, "owner", "''"),
    (kept_models, "size_bytes", "length(data)"),
    (kept_models, "last_used_at", "created_at"),
    (kept_models, "owner", "''"),
)
