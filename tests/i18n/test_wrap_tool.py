"""tools/i18n_wrap.py: the texts a Streamlit call is handed become tr() keys whose English, filled, reads exactly as
the original f-string did; a logger's call and text without letters are left alone."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("i18n_wrap", ROOT / "tools" / "i18n_wrap.py")
wrap_tool = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(wrap_tool)

SOURCE = '''
st.caption(f"{label}: {n:,} GPUs at the peak, "
           f"{len(rows)} rows {{literal}}", help="Plain help.")
log.error("server only %s", x)
st.markdown(f"{x}")
'''


def test_an_f_string_becomes_a_key_with_named_fields_that_reads_the_same():
    out, n = wrap_tool.wrap(SOURCE)
    assert n == 2
    assert 'tr("{label}: {n} GPUs at the peak, "\n           "{n2} rows {{literal}}", label=label, n=f"{n:,}", ' \
           'n2=len(rows))' in out
    assert 'help=tr("Plain help.")' in out
    assert 'log.error("server only %s", x)' in out and 'st.markdown(f"{x}")' in out
    seen = {}
    env = {"label": "EAGLE-3", "n": 1234, "rows": [1, 2], "x": 0,
           "tr": lambda key, **kw: key.format(**kw) if kw else key,
           "st": type("St", (), {"caption": staticmethod(lambda text, help=None: seen.update(text=text)),
                                 "markdown": staticmethod(lambda text: None)}),
           "log": type("Log", (), {"error": staticmethod(lambda *a: None)})}
    exec(out, env)
    assert seen["text"] == "EAGLE-3: 1,234 GPUs at the peak, 2 rows {literal}"
