"""Language detection on traffic uploads (prints figures; no assertions): `python benchmarks/bench_language_detect.py
[rows]` (default 250,000 rows, ~85 MiB: near the upload limit).

1. The detector alone (profiles.traffic.language.detect_language on detection_text): model load, then texts per
   second on short prompts and on prompts of DETECT_CHARS characters.
2. A LiteLLM-style spend log (startTime, model_group, prompt/completion tokens, `messages` as the proxy stores it:
   a JSON list, a third of the prompts Chinese) parsed with detection on and off, in this process (median of 3):
   the seconds detection adds (target: < 1 s for a file at the upload limit; it reads at most DETECT_ROWS rows of
   each batch), and the Mandarin share found against the file's own.
3. The same upload through profiles.uploads.read_traffic (the sandbox's worker, forked from a server that loaded the
   model once), detection on and off.
"""

from __future__ import annotations

import csv
import io
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

ZH = ["请帮我把这段代码改成异步的版本，并解释一下为什么要这样改，最好给出测试用例。",
      "这个接口返回401是什么意思？我已经在请求头里带了token，还是不行。",
      "把下面的客户投诉整理成三条要点，语气要礼貌，最后给出一个解决方案。"]
EN = ["Write a function that merges two sorted lists in Python and add unit tests for the edge cases.",
      "Summarize this support ticket for the on-call engineer in two sentences and suggest a next step.",
      "Explain why this SQL query is slow and which index would help; the table has 40 million rows."]


def make_spend_log(n: int) -> tuple[bytes, float]:
    """(CSV bytes, the Mandarin share of output tokens) for n requests a second apart."""
    out = io.StringIO()
    w = csv.writer(out)
    w.writerow(["request_id", "startTime", "model", "model_group", "prompt_tokens", "completion_tokens", "messages"])
    zh_out = total = 0
    for i in range(n):
        chinese = i % 3 == 1
        text = (ZH if chinese else EN)[i % 3 if not chinese else (i // 3) % 3]
        o = 80 + (i * 7) % 300
        total += o
        zh_out += o if chinese else 0
        msgs = json.dumps([{"role": "system", "content": "You are a helpful assistant."},
                           {"role": "user", "content": text}], ensure_ascii=False)
        t = 1_793_523_600 + i
        w.writerow([f"chatcmpl-{i}", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t)), "gpt-4o",
                    "code-assistant" if i % 2 else "support-chat", 200 + i % 500, o, msgs])
    return out.getvalue().encode(), zh_out / total


def bench_detector() -> None:
    from profiles.traffic.language import DETECT_CHARS, detect_language, detection_text, warm

    t = time.perf_counter()
    warm()
    print(f"Detector: model load {time.perf_counter() - t:.2f} s")
    for label, texts in (("short prompts", (ZH + EN) * 500),
                         (f"{DETECT_CHARS}-character prompts", [(x * 10)[:DETECT_CHARS] for x in ZH + EN] * 200)):
        t = time.perf_counter()
        for x in texts:
            detect_language(detection_text(x))
        dt = time.perf_counter() - t
        print(f"  {label}: {len(texts):,} texts in {dt:.2f} s = {len(texts) / dt:,.0f} texts/s")


def bench_parse(n: int) -> None:
    from profiles import load_catalog
    from profiles.traffic import ParseOptions, parse_traffic
    from profiles.uploads import read_traffic

    data, zh_share = make_spend_log(n)
    cat = load_catalog()
    print(f"Spend log: {n:,} rows, {len(data) / 2**20:.1f} MiB, Mandarin {zh_share * 100:.1f} % of output tokens")
    seconds: dict[bool, list[float]] = {True: [], False: []}
    prof = None
    for _ in range(3):
        for detect in (False, True):
            t = time.perf_counter()
            p = parse_traffic("spend_logs.csv", data, cat, options=ParseOptions(detect_language=detect))
            seconds[detect].append(time.perf_counter() - t)
            prof = p if detect else prof
    on, off = statistics.median(seconds[True]), statistics.median(seconds[False])
    assert prof is not None
    print(f"  in process: detection off {off:.2f} s, on {on:.2f} s (median of 3): +{on - off:.2f} s")
    print(f"  Mandarin found {prof.language_shares.get('mandarin', 0) * 100:.1f} % (file {zh_share * 100:.1f} %); "
          f"{prof.language_note}")
    for detect in (False, True, True):
        t = time.perf_counter()
        read_traffic("spend_logs.csv", data, cat, options=ParseOptions(detect_language=detect))
        print(f"  sandbox (profiles.uploads.read_traffic), detection {'on ' if detect else 'off'}: "
              f"{time.perf_counter() - t:.2f} s")


if __name__ == "__main__":
    bench_detector()
    bench_parse(int(sys.argv[1]) if sys.argv[1:] else 250_000)
