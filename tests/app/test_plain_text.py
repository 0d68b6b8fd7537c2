"""What a visitor writes is shown as text: a Markdown link, image or HTML tag in a URL value, an uploaded file's name,
its column names and its cell values reaches the page escaped (views.parts.text.plain), so Streamlit's Markdown shows
the characters instead of a link or an image. The expected strings are written out by hand; the CommonMark check
renders with markdown-it-py (an independent CommonMark implementation); tests/app/test_browser.py checks the DOM
of a real Chromium."""

from __future__ import annotations

import html
import re

import pytest

from tests.app.test_browser import server  # noqa: F401 - the running app for the browser test
from views.parts.text import plain, plain_in

WJ = "\u2060"  # word joiner: breaks `scheme://`, `:emoji:` and `www.` shapes without showing
LINK = "[Session expired](https://evil.example/login)"
LINK_SHOWN = "\\[Session expired\\](https:" + WJ + "//evil.example/login)"
IMAGE = "![x](http://attacker/b.png)"
IMAGE_SHOWN = "!\\[x\\](http:" + WJ + "//attacker/b.png)"
TAG = "<img src=http://attacker/c.png>"
TAG_SHOWN = "\\<img src=http:" + WJ + "//attacker/c.png>"


@pytest.mark.parametrize(("value", "shown"), [
    (LINK, LINK_SHOWN),
    (IMAGE, IMAGE_SHOWN),
    (TAG, TAG_SHOWN),
    ("**bold** _it_ `code` ~~gone~~", "\\*\\*bold\\*\\* \\_it\\_ \\`code\\` \\~\\~gone\\~\\~"),
    ("$x^2$ &amp; a|b \\", "\\$x^2\\$ \\&amp; a\\|b \\\\"),
    (":red[x] :smile: :material/home:", "\\:red\\[x\\] \\:" + WJ + "smile: \\:" + WJ + "material/home:"),
    ("www.evil.example evil@example.com", "www" + WJ + ".evil.example evil@" + WJ + "example.com"),
    ("# heading", "\\# heading"), ("- item", "\\- item"), ("1. item", "1\\. item"), ("> quote", "\\> quote"),
    ("line\nbreak\r\n\n# two", "line break # two"),
    # left as written: nothing here can start a construct
    ("output_tokens: 1e-320 >= -5 (ok!) 'a.b'", "output_tokens: 1e-320 >= -5 (ok!) 'a.b'"),
])
def test_plain_escapes_what_markdown_would_render(value, shown):
    assert plain(value) == shown


def test_plain_in_escapes_only_the_visitor_value():
    text = f"traffic profile '{IMAGE}', whose mix and hourly shape are kept"
    assert plain_in(text, IMAGE) == f"traffic profile '{IMAGE_SHOWN}', whose mix and hourly shape are kept"
    assert plain_in("no name here: **kept**", IMAGE, None, "") == "no name here: **kept**"


@pytest.mark.parametrize("value", [LINK, IMAGE, TAG, "*a* _b_ `c` [d][e] <https://evil.example/> &lt; \\* |x|",
                                   "# h", "- li", "2) li", "> q"])
def test_commonmark_renders_the_escaped_value_as_its_own_characters(value):
    from markdown_it import MarkdownIt

    for sentence in (f"File '{plain(value)}' was loaded.", plain(value)):
        rendered = MarkdownIt("commonmark").render(sentence)
        assert not re.search(r"<(a|img|em|strong|code|h\d|ul|ol|li|blockquote)\b", rendered), rendered
        text = html.unescape(re.sub(r"<[^>]+>", "", rendered)).replace(WJ, "").strip()
        assert value in text, (value, text)


# ---------------------------------------------------------------------------------------------------------------
# The app: URL values, an uploaded file's name, columns and values, through the real pages
# ---------------------------------------------------------------------------------------------------------------

def _values(elements) -> list[str]:
    return [e.value for e in elements]


def test_url_values_with_markdown_are_shown_escaped(app):
    at = app({"model": LINK, "hardware": IMAGE, "workload": TAG})
    warnings = _values(at.warning)
    text = "\n".join(warnings)
    assert f"URL parameter model='{LINK_SHOWN}' is out of range or unknown; using 'llama-3.3-70b'" in warnings
    assert f"URL parameter hardware='{IMAGE_SHOWN}' is out of range or unknown; using 'h100-sxm'" in warnings
    assert f"URL parameter workload='{TAG_SHOWN}' is out of range or unknown; using 'chat'" in warnings
    for raw in (LINK, IMAGE, "](https://evil", "](http://attacker"):
        assert raw not in text
    assert not re.search(r"(?<!\\)<img", text)  # the tag's `<` always carries its backslash
    assert at.selectbox(key="model").value == "llama-3.3-70b"


NAME = f"{IMAGE} {LINK}.csv"  # a name the browser's uploader would send as it is
NAME_SHOWN = f"{IMAGE_SHOWN} {LINK_SHOWN}.csv"
GOOD = (b"timestamp,workload,prompt_tokens,output_tokens\n"
        b"2026-11-01T00:00:00Z,chat,100,10\n2026-11-01T01:00:00Z,code,200,20\n")


def _traffic(app):
    at = app()
    at.switch_page("views/traffic.py").run()
    assert not at.exception
    return at


def _upload(at, name: str, data: bytes):
    at.file_uploader(key="traffic_upload").set_value((name, data, "text/csv")).run()
    assert not at.exception, at.exception
    return at


def _nothing_raw(at, *raws: str) -> None:
    every = [e.value for kind in ("markdown", "caption", "warning", "error", "info", "success", "subheader")
             for e in getattr(at, kind)]
    for raw in raws:
        assert not [v for v in every if raw in v], raw


def test_an_uploaded_file_name_is_shown_escaped_on_every_page(app):
    at = _upload(_traffic(app), NAME, GOOD)
    assert not at.error, _values(at.error)
    assert at.session_state["traffic_profile"].name == NAME  # the profile keeps the real name
    success = _values(at.success)
    assert len(success) == 1 and success[0].startswith(f"Loaded '{NAME_SHOWN}': 2 rows,"), success
    assert f"Profile in use: {NAME_SHOWN}" in _values(at.subheader)
    assert f"Origin: upload:{NAME_SHOWN}." in " ".join(_values(at.caption))
    _nothing_raw(at, IMAGE, LINK)
    at.switch_page("views/plan.py").run()
    assert not at.exception
    captions = " ".join(_values(at.caption))
    assert f"Traffic profile '{NAME_SHOWN}' drives the workload and language mix" in captions
    assert f"(traffic profile '{NAME_SHOWN}')." in captions  # the scenario line: the trace's own volume
    assert f"output tokens/month ('{NAME_SHOWN}'); pick" in captions  # the sidebar
    _nothing_raw(at, IMAGE, LINK)
    at.switch_page("views/report.py").run()
    assert not at.exception
    _nothing_raw(at, IMAGE, LINK)


def test_cell_values_column_names_and_problems_are_shown_escaped(app):
    at = _traffic(app)
    bad = GOOD.replace(b"code,200", LINK.encode() + b",200")
    _upload(at, "w.csv", bad)
    errors = "\n".join(_values(at.error))
    assert (f"- row 2 (line 3), column 'workload': value '{LINK_SHOWN}': expected a known workload: one of "
            in errors), errors
    _nothing_raw(at, LINK)
    odd = ("when," + IMAGE.replace(",", " ") + ",in_tok,out_tok\n"
           "2026-11-01T00:00:00Z," + LINK + ",100,10\n2026-11-01T00:30:00Z,chat,300,30\n").encode()
    _upload(at, "cols.csv", odd)
    warnings = "\n".join(_values(at.warning))
    assert f"(the file's columns: when, {IMAGE_SHOWN}, in_tok, out_tok)." in warnings, warnings
    at.radio(key="traffic_wl_mode").set_value("map").run()
    at.selectbox(key="traffic_wl_column").set_value(IMAGE).run()
    assert not at.exception
    captions = " ".join(_values(at.caption))
    assert f"'{LINK_SHOWN}' (1)" in captions, captions
    _nothing_raw(at, IMAGE, LINK)


# ---------------------------------------------------------------------------------------------------------------
# A real browser: the DOM holds no link or image a visitor wrote, and nothing fetches the attacker's host
# ---------------------------------------------------------------------------------------------------------------

_DOM_CHECK = """() => ({
    links: [...document.querySelectorAll('a[href]')].map(a => a.href).filter(h => /evil|attacker/.test(h)),
    images: [...document.querySelectorAll('img[src]')].map(i => i.src).filter(s => /evil|attacker/.test(s)),
    text: document.body.innerText.replaceAll('\\u2060', '')})"""


@pytest.mark.browser
def test_a_browser_shows_the_visitors_markdown_as_text(server):  # noqa: F811 - the fixture imported above
    from urllib.parse import urlencode

    from playwright.sync_api import sync_playwright

    from tests.app.live_app import ARGS, CHROMIUM, settled

    fetched: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        ctx = browser.new_context(viewport={"width": 1500, "height": 1100})
        ctx.on("request", lambda r: fetched.append(r.url) if re.search(r"evil|attacker", r.url.split("?")[0])
               else None)
        page = ctx.new_page()
        page.goto(server + "/?" + urlencode({"model": "[x](https://evil.example/)", "hardware": IMAGE}),
                  wait_until="domcontentloaded")
        page.get_by_text("URL parameter model=").first.wait_for(timeout=60_000)
        page.locator("[data-testid=stMetricValue]").first.wait_for(timeout=60_000)
        settled(page)
        dom = page.evaluate(_DOM_CHECK)
        assert dom["links"] == [] and dom["images"] == [], dom
        assert "model='[x](https://evil.example/)'" in dom["text"] and f"hardware='{IMAGE}'" in dom["text"]
        # an uploaded file named like an image, then its shared link opened in a fresh context
        page.goto(server + "/traffic", wait_until="domcontentloaded")
        page.get_by_text("Traffic profile", exact=True).first.wait_for(timeout=60_000)
        page.locator("[data-testid=stMain] input[type=file]").first.set_input_files(
            files=[{"name": f"{IMAGE}.csv", "mimeType": "text/csv", "buffer": GOOD}])
        page.get_by_text("Loaded '").first.wait_for(timeout=60_000)
        page.get_by_role("link", name="Plan").first.click()
        page.locator("[data-testid=stMetricValue]").first.wait_for(timeout=60_000)
        # the Plan page's link, written at the end of its run (the Traffic page's own URL carries profile= too)
        page.wait_for_url(lambda url: "profile=" in url and "/traffic" not in url, timeout=60_000)
        link = page.url
        other = browser.new_context(viewport={"width": 1500, "height": 1100})
        other.on("request", lambda r: fetched.append(r.url) if re.search(r"evil|attacker", r.url.split("?")[0])
                 else None)
        second = other.new_page()
        second.goto(link, wait_until="domcontentloaded")
        second.get_by_text("drives the workload and language mix").first.wait_for(timeout=60_000)
        second.wait_for_timeout(2000)
        dom = second.evaluate(_DOM_CHECK)
        assert dom["links"] == [] and dom["images"] == [], dom
        name = re.search(r"Traffic profile '(.*?)' drives", dom["text"])
        assert name is not None and name.group(1) in (f"{IMAGE}.csv", "b.png).csv"), dom["text"][:2000]
        browser.close()
    assert fetched == []


def test_a_long_url_value_is_cut_in_its_warning(app):
    """A 100,000-character link value is quoted by its first 80 characters and its length, not echoed whole."""
    at = app({"model": "m" * 100_000})
    warnings = [w for w in _values(at.warning) if w.startswith("URL parameter model=")]
    assert len(warnings) == 1
    assert "(100,000 characters)" in warnings[0]
    assert len(warnings[0]) < 300
