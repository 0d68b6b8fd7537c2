"""The language of requests from their prompt text, for an export that has text and no language column.

A detector (py3langid: langid.py's naive Bayes model over byte n-grams, 142 languages, BSD-3-Clause, numpy only;
requirements.txt) reads a capped sample: at most DETECT_ROWS rows of each batch of rows read (evenly spaced), the
last DETECT_CHARS characters of each text (the user's turn ends a prompt; a JSON messages list is reduced to its
"content" strings first). Its language codes map onto the catalogue's languages (LANGUAGE_OF; Chinese -> Mandarin,
Cantonese -> Cantonese, any other language but English -> the catalogue's language without a dedicated head).

Each workload's requests, prompt tokens and output tokens are then split between the languages in the proportions
the sampled rows of that workload show (a ratio estimate: each sampled row stands for the rows of its batch
it was drawn from); a file no larger than the sample is classified row by row. Rows whose text is too short to
tell (fewer than MIN_LETTERS letters, no Chinese characters) are left out of the proportions."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from profiles.traffic.validate import as_text

DETECT_ROWS = 2_000  # rows per batch (reading.BATCH_ROWS = 262,144) whose text the detector reads
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


@dataclass
class LanguageSample:
    """Sampled rows of each batch: workload code, language code (-1: too short to tell), requests x sampling
    factor, prompt and output tokens x sampling factor."""

    valid: list[str]
    rows: int = 0
    detected: int = 0
    short: int = 0
    sampled: bool = False  # some batch had more rows than DETECT_ROWS: not every row was read
    counts: dict[str, int] = field(default_factory=dict)
    parts: list[np.ndarray] = field(default_factory=list)  # (5, m) per batch: wl, lang, w, wp, wo

    def _code(self, name: str) -> int:
        if name in self.valid:
            return self.valid.index(name)
        return self.valid.index(OTHER) if OTHER in self.valid else self.valid.index(ENGLISH)

    def add(self, text: pa.ChunkedArray, wl: np.ndarray, w: np.ndarray, wp: np.ndarray, wo: np.ndarray) -> None:
        n = len(text)
        m = min(n, DETECT_ROWS)
        idx = np.unique(np.linspace(0, n - 1, m).round().astype(np.int64))
        factor = n / len(idx)
        self.sampled |= len(idx) < n
        cells = as_text(text.take(pa.array(idx)).combine_chunks()).to_pylist()
        lang = np.full(len(idx), -1, dtype=np.int64)
        for i, cell in enumerate(cells):
            name = detect_language(detection_text(cell)) if cell else None
            if name is None:
                self.short += 1
                continue
            self.counts[name] = self.counts.get(name, 0) + 1
            lang[i] = self._code(name)
        self.rows += len(idx)
        self.detected += int((lang >= 0).sum())
        self.parts.append(np.stack([wl[idx].astype(float), lang.astype(float), w[idx] * factor, wp[idx] * factor,
                                    wo[idx] * factor]))

    def split(self, seg: np.ndarray, english: int) -> np.ndarray:
        """seg (3, workloads x languages: requests, prompt tokens, output tokens), every row counted under
        `english`, with each workload's totals split between languages in its sampled rows' proportions."""
        L = len(self.valid)
        out = seg.copy()
        if not self.parts:
            return out
        s = np.concatenate(self.parts, axis=1)
        s = s[:, s[1] >= 0]
        for k in range(seg.shape[1] // L):
            mine = s[:, s[0] == k]
            if mine.shape[1] == 0:
                continue
            lang = mine[1].astype(np.int64)
            base = seg[:, k * L + english].copy()
            for i in range(3):
                by_lang = np.bincount(lang, weights=mine[2 + i], minlength=L)
                tot = by_lang.sum()
                if tot > 0:
                    out[i, k * L: (k + 1) * L] = base[i] * by_lang / tot
        return out

    def note(self) -> str:
        if not self.rows:
            return ""
        shares = ", ".join(f"{name} {n / max(self.detected, 1) * 100:.0f} %"
                           for name, n in sorted(self.counts.items(), key=lambda x: -x[1]))
        how = f"a sample of {self.rows:,} rows'" if self.sampled else "every row's"
        text = (f"languages detected from {how} prompt text ({DETECTOR}; the last {DETECT_CHARS} characters of "
                f"each): {shares or 'none'}")
        if self.short:
            text += (f"; {self.short:,} sampled row{'s' if self.short != 1 else ''} too short to tell, counted in "
                     "the same proportions")
        return text

