"""The nightly acceptance regression rule (`python -m calibration regress`): a run's acceptance against the recent
level of its series, kept in the store's history."""

from __future__ import annotations

import math

from calibration.storage.store import Store


def regress(store: Store, run_id: str, *, series_prefix: str, window: int = 7) -> tuple[list[str], list[str]]:
    """Append the acceptance of `run_id` to the history; return (regressions, notes).

    A workload regresses when its recent level (median of the last `window` history points of the same
    series) lies above the upper end of today's 95 % interval of tau: the drop exceeds the interval.
    Only a succeeded run is read; checking the same run again reports its stored verdict and adds nothing.
    """
    import statistics

    from calibration.analysis.fit import fit_acceptance

    row = store.get_run(run_id)
    if row.status != "succeeded":
        raise ValueError(f"run_id={run_id!r} not allowed: it ended {row.status} ({row.message or 'no message'}); "
                         "only a succeeded run is checked for regressions")
    fits = fit_acceptance(store.groups([run_id]))
    if not fits:
        raise ValueError(f"run_id={run_id!r} not allowed: it has no speculative groups to check")
    regressions, notes = [], []
    for a in fits:
        series = f"{series_prefix}/{a.config_label}"
        points = [h for h in store.history(series) if h["workload"] == a.workload]
        done = [h for h in points if h["run_id"] == run_id]
        if done:  # checked before: the same verdict, no second history point
            msg, bad = done[0]["message"], bool(done[0]["regression"])
        else:
            past = [h["acceptance_length"] for h in points][-window:]
            level = statistics.median(past) if past else math.nan
            bad = bool(past) and level > a.acceptance_length_high
            msg = (f"{series} {a.workload}: acceptance length {a.acceptance_length:.3f} "
                   f"[95% {a.acceptance_length_low:.3f}, {a.acceptance_length_high:.3f}] vs recent level "
                   f"{level:.3f} over {len(past)} runs")
            if bad:
                msg = "REGRESSION " + msg + f": dropped {level - a.acceptance_length:.3f} (> interval)"
            store.add_history(series=series, workload=a.workload, run_id=run_id,
                              acceptance_length=a.acceptance_length, low=a.acceptance_length_low,
                              high=a.acceptance_length_high, regression=bad, message=msg)
        if bad:
            regressions.append(msg)
        else:
            notes.append("ok " + msg)
    return regressions, notes
