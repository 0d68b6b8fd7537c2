"""A running engine job's progress in a reader's words, from what the job already writes.

The job records every measurement (one group: a workload at a batch size) in the store the moment it is
measured (calibration.measure.engine make_lane), and announces each configuration before its engine starts
("PROGRESS i/n label" on stdout, calibration.run.jobs, and "configuration i/n: label" in the run's message). This
module turns those records into a fraction and a sentence ("configuration 2 of 5: EAGLE-3 K=3, measurement 4 of
12"), and tells the job's own log lines from the engine's (vLLM's log, NUMA and other warnings).

Measurements planned per configuration: `min_rounds` rounds over every workload and batch size
(calibration.harness.protocol). A drafting configuration can measure more (until its acceptance interval is narrow
enough or its engine-time budget is spent), so a configuration's own fraction is the larger of its measurements
over the planned ones and its engine time over its budget, held below 1 until the next configuration starts.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

# The planner's names of the engine methods (calibration.targets.registry.METHODS), for sentences a reader sees.
METHOD_NAMES = {"none": "baseline", "ngram": "n-gram", "draft_model": "draft model", "eagle3": "EAGLE-3",
                "p_eagle": "P-EAGLE", "eagle": "EAGLE", "medusa": "Medusa", "mtp": "MTP"}
# Below 1 while a configuration still measures: it may go on past its planned measurements (module docstring).
RUNNING_CAP = 0.99
# Lines the job process writes itself (calibration.run.jobs, calibration.run.runners); "[label] ..." lines come from the
# measuring child (calibration.measure.engine, calibration.harness.protocol).
JOB_LINE_PREFIXES = ("configuration ", "deadline:", "the run is no longer active", "refused before any engine",
                     "could not record the outcome", "stopped by the runner")
_LINE_LABEL = re.compile(r"^\[([^\]]+)\] ")
_MESSAGE_CONFIG = re.compile(r"^configuration (\d+)/(\d+)")
_MESSAGE_PROGRESS = re.compile(r"^PROGRESS (\d+)/(\d+)")  # a Ray job's relayed line (calibration.run.runners)


@dataclass(frozen=True)
class RunProgress:
    fraction: float  # 0..1 of the run
    text: str  # "configuration 2 of 5: EAGLE-3 K=3, measurement 4 of 12"


def config_name(config: dict[str, Any]) -> str:
    """A configuration as a reader names it: "baseline", "EAGLE-3 K=3", "draft model smollm2-135m-2l K=2"."""
    method = str(config.get("method", "none"))
    if method == "none":
        return "baseline"
    name = METHOD_NAMES.get(method, method)
    if method == "draft_model" and config.get("draft"):
        name += f" {config['draft']}"
    name += f" K={int(config.get('k', 0))}"
    if config.get("synthetic_alpha"):
        name += " (synthetic acceptance)"
    return name


def config_label(config: dict[str, Any]) -> str:
    """The label the job records its groups under (calibration.measure.spec.EngineConfig.label)."""
    from calibration.measure.spec import EngineConfig

    alpha = config.get("synthetic_alpha")
    return EngineConfig(method=config.get("method", "none"), k=int(config.get("k", 0)), draft=config.get("draft"),
                        synthetic_alpha=tuple(alpha) if alpha else None).label


def planned_measurements(spec: dict[str, Any]) -> int:
    """Measurements one configuration makes at the least: `min_rounds` rounds of every workload at every batch size
    (the warm-up not counted). Uploaded prompt sets count as workloads (the stored spec keeps only their names)."""
    from calibration.harness.protocol import DEFAULT_BATCH_SIZES, DEFAULT_MIN_ROUNDS

    workloads = dict.fromkeys([*spec.get("workloads", ()), *spec.get("custom_prompts", {}),
                               *spec.get("custom_prompt_sets", {})])
    batches = spec.get("batch_sizes") or DEFAULT_BATCH_SIZES
    return max(1, int(spec.get("min_rounds", DEFAULT_MIN_ROUNDS)) * max(len(workloads), 1) * len(batches))


def started_config(message: str, progress: float, n: int) -> int:
    """The index of the configuration the job last announced: from its run message ("configuration i/n: ...", 1-based)
    or a relayed "PROGRESS i/n label" (0-based), else from a runner's PROGRESS fraction (i/n)."""
    m = _MESSAGE_CONFIG.match(message or "")
    if m and int(m.group(2)) == n:
        return min(int(m.group(1)) - 1, n - 1)
    m = _MESSAGE_PROGRESS.match(message or "")
    if m and int(m.group(2)) == n:
        return min(int(m.group(1)), n - 1)
    return min(max(int(round(progress * n)), 0), n - 1)


def run_progress(spec: dict[str, Any], groups: Sequence[Any], *, started: int = 0,
                 finished: bool = False) -> RunProgress:
    """The run's progress from its stored spec and the groups recorded so far (each with config_label, status,
    wall_time_s); `started`: the configuration the job last announced (0-based); `finished`: the job ended."""
    from calibration.harness.protocol import DEFAULT_BUDGET_S

    configs = list(spec.get("configs") or [{"method": "none"}])
    n = len(configs)
    labels = [config_label(c) for c in configs]
    planned = planned_measurements(spec)
    budget_s = float(spec.get("budget_s", DEFAULT_BUDGET_S))
    count = dict.fromkeys(labels, 0)
    elapsed = dict.fromkeys(labels, 0.0)
    warmed: set[str] = set()
    last = -1
    for g in groups:
        if g.config_label not in count:
            continue
        last = max(last, labels.index(g.config_label))
        if g.status == "warmup":
            warmed.add(g.config_label)
            continue
        count[g.config_label] += 1
        elapsed[g.config_label] += float(g.wall_time_s)
    if finished:
        return RunProgress(1.0, f"all {n} configuration{'s' if n > 1 else ''} ended: "
                                f"{sum(count.values())} measurements")

    def own(label: str) -> float:
        return min(max(count[label] / planned, elapsed[label] / budget_s), RUNNING_CAP)

    def measured(label: str) -> str:
        m = count[label]
        if m == 0:
            return ("warm-up measured, measuring" if label in warmed
                    else "starting its engine (30-60 s on a CPU), then a warm-up measurement")
        if m <= planned:
            return f"measurement {m} of {planned}"
        return (f"measurement {m} ({planned} planned; more until the acceptance interval is narrow enough or the "
                f"{budget_s:.0f} s budget is spent)")

    if spec.get("interleave") and n > 1:
        done = sum(count.values())
        now = config_name(configs[max(last, 0)])
        step = (f"measurement {done} of {planned * n}" if done <= planned * n
                else f"measurement {done} ({planned * n} planned)")
        return RunProgress(sum(own(lb) for lb in labels) / n,
                           f"{n} configurations measured in turn, {step}; now {now}")
    i = min(max(started, last, 0), n - 1)
    return RunProgress((i + own(labels[i])) / n,
                       f"configuration {i + 1} of {n}: {config_name(configs[i])}, {measured(labels[i])}")


def split_log(lines: Sequence[str], labels: Sequence[str]) -> tuple[list[str], list[str]]:
    """The job's own lines (its measurements, stops and failures) and the engine's (vLLM's log, NUMA and other
    warnings, anything else the engine printed); PROGRESS lines are in neither (the progress bar shows them)."""
    known = {*labels, "interleaved"}
    own: list[str] = []
    engine: list[str] = []
    for line in lines:
        if line.startswith("PROGRESS "):
            continue
        m = _LINE_LABEL.match(line)
        if (m and m.group(1) in known) or line.startswith(JOB_LINE_PREFIXES):
            own.append(line)
        else:
            engine.append(line)
    return own, engine
