"""A per-request trace -> a profile: each batch of the selected columns is validated (workload, language, tokens,
weight, timestamps) and added to the streaming accumulators; `volume` turns them into the profile."""

from __future__ import annotations

import numpy as np

from profiles.traffic.columns import FileInfo
from profiles.traffic.errors import fail
from profiles.traffic.language import LanguageSample
from profiles.traffic.limits import MAX_BUCKET_REQUESTS, MAX_PROBLEMS, MAX_ROWS, MAX_TOKENS_PER_REQUEST, MAX_WEIGHT
from profiles.traffic.options import ParseOptions
from profiles.traffic.profile import TrafficProfile
from profiles.traffic.reading import read_batches, read_lookahead
from profiles.traffic.sources.base import Source
from profiles.traffic.times import TimeState, read_timestamps
from profiles.traffic.validate import Problems, category_codes, check_cell_lengths, numeric_column
from profiles.traffic.volume import RequestAccumulator, finish_requests
from profiles.traffic.workload import WorkloadState, rule_columns, workload_codes


def requests_profile(name: str, src: Source, info: FileInfo, catalog, options: ParseOptions) -> TrafficProfile:
    roles = info.roles
    rule = options.workload
    valid_wl = list(catalog.workloads.keys())
    valid_lang = list(catalog.languages.keys())
    text_cols = [roles[r] for r in ("workload", "language", "prompt_text", "model", "endpoint") if r in roles]
    rule_cols = rule_columns(rule, info)
    use = [roles["timestamp"], roles["prompt_tokens"], roles["output_tokens"]]
    if rule.mode == "auto" and "workload" in roles:
        use.append(roles["workload"])
    use += [roles[r] for r in ("language", "weight") if r in roles]
    totals = info.totals
    if totals and "end_time" in roles:
        use.append(roles["end_time"])
    use += rule_cols
    detect = options.detect_language and "prompt_text" in roles and "language" not in roles
    if detect:
        use.append(roles["prompt_text"])
    use = list(dict.fromkeys(use))
    probs = Problems(src)
    L = len(valid_lang)
    acc = RequestAccumulator(len(valid_wl) * L)
    tstate = TimeState(options.timestamp_unit)
    estate = TimeState(options.timestamp_unit)
    wstate = WorkloadState()
    english = valid_lang.index("english") if "english" in valid_lang else 0
    langs = LanguageSample(valid_lang) if detect else None
    tok_high = MAX_TOKENS_PER_REQUEST * (MAX_BUCKET_REQUESTS if totals else 1)
    what = "tokens (total over the row's requests)" if totals else "tokens"
    row0 = 0
    for tbl, last in read_lookahead(read_batches(src, use, text_cols + rule_cols)):
        n = tbl.num_rows
        probs.offset = row0
        row0 += n
        if row0 > MAX_ROWS:
            raise fail(f"at most {MAX_ROWS:,} rows (this file has more)")
        check_cell_lengths(tbl, probs)
        wl_codes = workload_codes(tbl, info, rule, name, valid_wl, probs, wstate)
        lang_codes = (category_codes(tbl.column(roles["language"]), roles["language"], valid_lang, probs, "language",
                             default="english") if "language" in roles else np.full(n, english))
        prompt = numeric_column(tbl.column(roles["prompt_tokens"]), roles["prompt_tokens"], probs, integer=True, low=0,
                          high=tok_high, what="prompt " + what, decimal=src.decimal)
        output = numeric_column(tbl.column(roles["output_tokens"]), roles["output_tokens"], probs, integer=True, low=0,
                          high=tok_high, what="output " + what, decimal=src.decimal)
        if "weight" in roles:
            wcol = roles["weight"]
            weight = (numeric_column(tbl.column(wcol), wcol, probs, integer=True, low=0, high=MAX_BUCKET_REQUESTS,
                               what="requests in the row", decimal=src.decimal) if totals else
                      numeric_column(tbl.column(wcol), wcol, probs, integer=False, low=0, high=MAX_WEIGHT,
                               what="a request weight", low_inclusive=False, decimal=src.decimal))
        else:
            weight = np.ones(n)
        secs = read_timestamps(tbl.column(roles["timestamp"]), roles["timestamp"], probs, tstate)
        end_secs = None
        if totals:
            # tokens per request in a bucket must be plausible; a bucket with tokens but no requests is an error
            per_req_p = prompt / np.maximum(weight, 1)
            per_req_o = output / np.maximum(weight, 1)
            if "weight" in roles:
                probs.add_mask((weight == 0) & ((prompt > 0) | (output > 0)), roles["weight"],
                               "at least one request in a row that has tokens", tbl.column(roles["weight"]))
            probs.add_mask(per_req_o > MAX_TOKENS_PER_REQUEST, roles["output_tokens"],
                           f"at most {MAX_TOKENS_PER_REQUEST:,} output tokens per request in the row",
                           tbl.column(roles["output_tokens"]))
            probs.add_mask(per_req_p > MAX_TOKENS_PER_REQUEST, roles["prompt_tokens"],
                           f"at most {MAX_TOKENS_PER_REQUEST:,} prompt tokens per request in the row",
                           tbl.column(roles["prompt_tokens"]))
            if "end_time" in roles:
                end_secs = read_timestamps(tbl.column(roles["end_time"]), roles["end_time"], probs, estate)
        if probs.items:
            if len(probs.items) >= MAX_PROBLEMS and not last:
                probs.raise_if_any(at_least=True)  # a page of problems: do not decode the rest of the file
            continue
        if totals:
            w, wp, wo = weight, prompt, output
            keep = w > 0
            # compound Poisson: a bucket of n requests of mean o tokens, Var = n o^2
            var = np.where(keep, wo ** 2 / np.maximum(w, 1), 0.0)
            if end_secs is not None:
                acc.end_widths.append((end_secs - secs)[keep])
        else:
            w, wp, wo = weight, weight * prompt, weight * output
            keep = w > 0
            var = wo ** 2  # a row of weight w: w requests of o tokens, sampled together: Var = (w o)^2
        acc.add(wl_codes * L + lang_codes, secs, w, wp, wo, keep, var)
        if langs is not None:
            langs.add(tbl.column(roles["prompt_text"]), wl_codes, w, wp, wo)
    probs.raise_if_any()
    if acc.rows == 0:
        raise fail("at least one data row below the header")
    if langs is not None:
        acc.seg = langs.split(acc.seg, english)
    return finish_requests(name, src, info, acc, valid_wl, valid_lang, totals, tstate, wstate, use, roles,
                            rule_cols, language_note=langs.note() if langs is not None else "")

