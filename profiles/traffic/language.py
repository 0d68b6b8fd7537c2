"""The language of requests from their prompt text, for an export that has text and no language column.

A detector (py3langid: langid.py's naive Bayes model over byte n-grams, 142 languages, BSD-3-Clause, numpy only;
requirements.txt) reads a capped sample: at most DETECT_ROWS rows spread over the whole file (LanguageSample), the
last DETECT_CHARS characters of each text (the user's turn ends a prompt; a JSON messages list is reduced to its
"content" strings first). Its language codes map onto the catalogue's languages (LANGUAGE_OF; Chinese -> Mandarin,
Cantonese -> Cantonese, any other language but English -> the catalogue's language without a dedicated head).

Each workload's requests, prompt tokens and output tokens are then split between the languages in the proportions
the sampled rows of that workload show (a ratio estimate over a uniform sample; a workload the sample missed takes
the file's proportions); a file no larger than the sample is classified row by row. Rows whose text is too short
to tell (fewer than MIN_LETTERS letters, no Chinese characters) are left out of the proportions."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from profiles.traffic.validate import as_text

DETECT_ROWS = 2_000  # rows of a file whose text the detector reads (~0.3-0.8 s on one core, measured)
DETECT_CHARS = 400  # characters of a text the detector reads (its end)
SCAN_CHARS = 8 * DETECT_CHARS  # characters of a cell searched for JSON "content" strings (its end)
MIN_LETTERS = 8  # a shorter text ("hi", "ok", "yes") is not told apart reliably
# Chinese characters (CJK Unified Ideographs and Extension A) at least this share of a text's letters make it Chinese
# whatever the detector says of the rest (a Chinese question about English code or an English API).
HAN_SHARE = 0.10
MIN_HAN = 2
DETECTOR = "py3langid"

# Detector codes -> catalogue languages (profiles/data/languages.yaml); any other code -> OTHER.
LANGUAGE_OF = {"en": "english", "zh": "mandarin", "yue": "cantonese"}
OTHER = "other_no_head"
ENGLISH = "english"

_CONTENT = re.compile(r'"(?:content|text|prompt|input)"\s*:\s*"((?:[^"\\]|\\.)*)"')
_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")
_KANA_HANGUL = re.compile(r"[\u3040-\u30ff\uac00-\ud7af]")


def detection_text(raw: str) -> str:
    """The part of a prompt cell the detector reads: its last DETECT_CHARS characters; a JSON messages list (LiteLLM's
    `messages`, an OpenAI request body) contributes its "content" / "text" strings, decoded, not its keys."""
    tail = raw[-SCAN_CHARS:]
    if raw.lstrip()[:1] in ("[", "{"):
        parts = []
        for m in _CONTENT.findall(tail):
            try:
                parts.append(json.loads(f'"{m}"'))
            except ValueError:
                parts.append(m)
        if parts:
            return " ".join(parts)[-DETECT_CHARS:]
    return tail[-DETECT_CHARS:]


def _classify():
    """py3langid's classify (imported here: only an upload with prompt text and no language column pays for it)."""
    import py3langid

    return py3langid.classify


def warm() -> None:
    """Load the detector's model (~1-2 s, ~120 MB): done once in the sandbox's fork server, shared by its workers."""
    _classify()("warm up the language model")


def detect_language(text: str) -> str | None:
    """The catalogue language of one text, or None when it is too short to tell."""
    han = len(_HAN.findall(text))
    letters = sum(ch.isalpha() for ch in text)
    if han < MIN_HAN and letters < MIN_LETTERS:
        return None
    code = _classify()(text)[0]
    if code not in ("zh", "yue", "wuu", "ko"):  # "ja" too: short Chinese without kana is read as Japanese at times
        if han >= MIN_HAN and han >= HAN_SHARE * letters and not _KANA_HANGUL.search(text):
            code = "zh"
    return LANGUAGE_OF.get(code, OTHER)


def row_priority(pos: np.ndarray) -> np.ndarray:
    """A row's rank for the sample, in [0, 1): the fractional part of position x the golden ratio (Fibonacci
    hashing in 64-bit integers). The sequence is equidistributed, and so is each of its residue classes: a file whose
    rows alternate (workloads, languages, gateways) is sampled evenly in every class, where a fixed stride aliases."""
    u = pos.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)  # 2^64 / golden ratio; wraps modulo 2^64
    return (u >> np.uint64(11)).astype(np.float64) / float(1 << 53)


@dataclass
class LanguageSample:
    """A sample of at most DETECT_ROWS rows spread over the whole file, taken as batches stream by: the rows of
    lowest `row_priority` (a bottom-k sample: uniform without replacement, reproducible); a batch's text is read only
    for rows that enter the sample (at most DETECT_ROWS a batch), and the detector runs once per kept row, at the
    end (`detect`). Per kept row: its priority, workload code, requests, prompt and output tokens, and the end of
    its text (detection_text)."""

    valid: list[str]
    pos: int = 0  # rows seen
    detected: int = 0
    short: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    rows: np.ndarray = field(default_factory=lambda: np.zeros((5, 0)))  # priority, wl, w, wp, wo
    texts: list[str] = field(default_factory=list)
    lang: np.ndarray | None = None  # catalogue language code per kept row (-1: too short), once detected

    def add(self, text: pa.ChunkedArray, wl: np.ndarray, w: np.ndarray, wp: np.ndarray, wo: np.ndarray) -> None:
        n = len(text)
        pri = row_priority(self.pos + np.arange(n, dtype=np.int64))
        self.pos += n
        full = len(self.texts) >= DETECT_ROWS
        idx = np.flatnonzero(pri < self.rows[0].max()) if full else np.arange(n)
        if idx.size > DETECT_ROWS:
            idx = np.sort(idx[np.argpartition(pri[idx], DETECT_ROWS - 1)[:DETECT_ROWS]])
        if not idx.size:
            return
        cells = as_text(text.take(pa.array(idx)).combine_chunks()).to_pylist()
        texts = self.texts + [detection_text(c) if c else "" for c in cells]
        rows = np.concatenate([self.rows, np.stack([pri[idx], wl[idx].astype(float), w[idx], wp[idx], wo[idx]])],
                              axis=1)
        if len(texts) > DETECT_ROWS:
            keep = np.sort(np.argpartition(rows[0], DETECT_ROWS - 1)[:DETECT_ROWS])
            rows, texts = rows[:, keep], [texts[i] for i in keep]
        self.rows, self.texts = rows, texts

    def detect(self) -> None:
        """Run the detector on each kept row's text (at most DETECT_ROWS texts of at most DETECT_CHARS)."""
        codes = np.full(len(self.texts), -1, dtype=np.int64)
        for i, text in enumerate(self.texts):
            name = detect_language(text) if text else None
            if name is None:
                self.short += 1
                continue
            self.counts[name] = self.counts.get(name, 0) + 1
            codes[i] = self._code(name)
        self.detected = int((codes >= 0).sum())
        self.lang = codes

    def _code(self, name: str) -> int:
        if name in self.valid:
            return self.valid.index(name)
        return self.valid.index(OTHER) if OTHER in self.valid else self.valid.index(ENGLISH)

    def split(self, seg: np.ndarray, english: int) -> np.ndarray:
        """seg (3, workloads x languages: requests, prompt tokens, output tokens), every row counted under
        `english`, with each workload's totals split between languages in its sampled rows' proportions (a uniform
        sample: each kept row stands for as many rows)."""
        if self.lang is None:
            self.detect()
        assert self.lang is not None
        L = len(self.valid)
        out = seg.copy()
        told = self.lang >= 0
        rows, lang_all = self.rows[:, told], self.lang[told]
        if not told.any():
            return out
        for k in range(seg.shape[1] // L):
            # a workload the sample missed (a few rows of a large file) takes the file's proportions
            mine = rows[1] == k
            if not mine.any():
                mine = np.ones(rows.shape[1], bool)
            lang = lang_all[mine]
            base = seg[:, k * L + english].copy()
            for i in range(3):
                by_lang = np.bincount(lang, weights=rows[2 + i][mine], minlength=L)
                tot = by_lang.sum()
                if tot > 0:
                    out[i, k * L: (k + 1) * L] = base[i] * by_lang / tot
        return out

    def note(self) -> str:
        if not self.texts:
            return ""
        shares = ", ".join(f"{name} {n / max(self.detected, 1) * 100:.0f} %"
                           for name, n in sorted(self.counts.items(), key=lambda x: -x[1]))
        how = (f"a sample of {len(self.texts):,} of its {self.pos:,} rows, spread over the file"
               if len(self.texts) < self.pos else "every row")
        text = (f"languages detected from the prompt text of {how} ({DETECTOR}; the last {DETECT_CHARS} "
                f"characters of each): {shares or 'none'}")
        if self.short:
            text += (f"; {self.short:,} sampled row{'s' if self.short != 1 else ''} too short to tell, counted in "
                     "the same proportions")
        return text

