"""The report in a real headless browser: Debian's Chromium driven by Playwright.

The page must load offline with no console error, render the token viewer, switch responses,
show a token's details on hover and move the focus from the keyboard. Playwright's own browser
download cannot work here, so the test drives the system Chromium (`/usr/bin/chromium`, or
`$DIVSCOPE_CHROMIUM`); `.ci/run` installs it with apt when it is missing. Without Chromium (or
Playwright) the tests skip, saying why, except under CI (`CI=true`), where they fail. Starting a
browser takes seconds: end-to-end tests (marker `e2e`), run once in CI with `-m e2e`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import polars as pl
import pytest

from divscope.testing import synthetic_tokens

try:
    from playwright.sync_api import sync_playwright
except ImportError:  # pragma: no cover - depends on the environment
    sync_playwright = None

# Tokens the page must show as text, never as markup: a closing script tag, HTML, quotes,
# newlines, emoji and CJK.
TRICKY = ["</script><b>bold</b>", "\"quoted\" & 'single'", "\n\n", "😀 emoji", "漢字", "  "]


def chromium() -> str | None:
    """The system Chromium's path: `$DIVSCOPE_CHROMIUM`, else `chromium` on PATH."""
    candidates = [
        os.environ.get("DIVSCOPE_CHROMIUM"),
        shutil.which("chromium"),
        shutil.which("chromium-browser"),
        "/usr/bin/chromium",
    ]
    return next((c for c in candidates if c and Path(c).is_file()), None)


CHROMIUM = chromium()
pytestmark = [
    pytest.mark.e2e,
    # The figures draw the emoji and CJK tokens with fonts that lack them.
    pytest.mark.filterwarnings("ignore:Glyph .* missing from font"),
]


def _missing(reason: str) -> None:
    """Skip for want of `reason`, or fail under CI, which must have installed it."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (CI=true: the browser tests must run in CI)", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def report_path(tmp_path_factory) -> Path:
    """A report of a small synthetic table (6 responses), some tokens replaced by `TRICKY`."""
    from divscope.params import Recovery
    from divscope.reporting.report import report

    tokens = synthetic_tokens(n_prompts=3, n_samples=2, length=40, seed=3)
    row = pl.int_range(pl.len())
    text = pl.col("token")
    for i, tricky in enumerate(TRICKY):
        text = pl.when(row == 3 + 7 * i).then(pl.lit(tricky)).otherwise(text)
    tokens = tokens.with_columns(text.alias("token"))
    folder = tmp_path_factory.mktemp("report")
    tokens.write_parquet(folder / "tokens.parquet")
    report(folder / "tokens.parquet", folder / "report.html", recovery=Recovery(n_boot=20),
           progress=False)  # fmt: skip
    return folder / "report.html"


@pytest.fixture(scope="module")
def browser():
    if sync_playwright is None:
        _missing("playwright is not installed: pip install -e '.[dev]' -c constraints.txt")
    if CHROMIUM is None:
        _missing(
            "no Chromium found (/usr/bin/chromium or $DIVSCOPE_CHROMIUM): apt-get install "
            "chromium (Playwright's own browser download is not used)"
        )
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
        yield browser
        browser.close()


@pytest.fixture
def loaded(browser, report_path):
    """The report open in a fresh page; yields (page, errors, requests, document)."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors: list[str] = []
    requests: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("request", lambda r: requests.append(r.url))
    page.goto(report_path.as_uri())
    page.wait_for_selector("#viewer .tok")
    document = json.loads(page.locator("#divscope-data").text_content())
    yield page, errors, requests, document
    page.close()


def _texts(page) -> list[str]:
    return page.eval_on_selector_all("#dv-tokens .tok", "nodes => nodes.map(n => n.textContent)")


def _response(page, document) -> dict:
    """The response the viewer shows, found by its heading."""
    heading = page.locator("#dv-heading").text_content()
    prompt, sample = re.match(r"Prompt (\S+), sample (\d+)", heading).groups()
    return next(
        r for r in document["responses"]
        if r["prompt_id"] == prompt and r["sample_id"] == int(sample)
    )  # fmt: skip


def _active_index(page) -> int:
    script = "(a => a.classList.contains('tok') ? +a.dataset.i : -1)(document.activeElement)"
    return page.evaluate(script)


def test_loads_offline_without_errors(loaded):
    page, errors, requests, document = loaded
    assert errors == []
    assert all(url == page.url or url.startswith("data:") for url in requests), requests
    assert page.locator("html").get_attribute("lang") == "en"
    html = page.content()
    assert not re.search(r"(src|href)\s*=\s*[\"']?(https?:)?//", html)
    assert len(document["responses"]) == 6


def test_renders_tokens_and_switches_response(loaded):
    page, _, _, document = loaded
    first = _response(page, document)
    assert first["max_js"] == max(r["max_js"] for r in document["responses"])
    assert _texts(page) == [document["strings"][i] for i in first["token"]]
    # Every token's text, tricky ones included, is text: no element came from the data.
    assert page.locator("#dv-tokens b").count() == 0
    white_space = page.locator("#dv-tokens").evaluate("n => getComputedStyle(n).whiteSpace")
    assert white_space == "pre-wrap"
    rows = page.locator("#dv-responses tbody tr")
    assert rows.nth(0).get_attribute("aria-selected") == "true"
    rows.nth(2).click()
    second = _response(page, document)
    assert second is not first
    assert rows.nth(2).get_attribute("aria-selected") == "true"
    assert _texts(page) == [document["strings"][i] for i in second["token"]]
    # From the keyboard: ArrowDown then Enter selects the next row.
    page.keyboard.press("ArrowDown")
    page.keyboard.press("Enter")
    assert _response(page, document) is not second


def test_tricky_tokens_render_as_text(loaded):
    page, _, _, document = loaded
    strings = document["strings"]
    holder = next(
        r for r in document["responses"] if strings.index(TRICKY[0]) in r["token"]
    )  # fmt: skip
    page.locator("#dv-filter").fill(holder["prompt_id"])
    rows = page.locator("#dv-responses tbody tr")
    for n in range(rows.count()):
        rows.nth(n).click()
        if _response(page, document) is holder:
            break
    assert TRICKY[0] in _texts(page)
    assert page.locator("#dv-tokens b, #dv-tokens script").count() == 0


def test_filter_and_sort(loaded):
    page, _, _, document = loaded
    rows = page.locator("#dv-responses tbody tr")
    page.locator("#dv-filter").fill("p1")
    assert rows.count() == sum(r["prompt_id"] == "p1" for r in document["responses"])
    page.locator("#dv-filter").fill("")
    page.get_by_role("button", name="length").click()
    lengths = [int(rows.nth(n).locator("td").nth(3).text_content()) for n in range(rows.count())]
    assert lengths == sorted(lengths, reverse=True)
    page.get_by_role("button", name="length").press("Enter")
    lengths = [int(rows.nth(n).locator("td").nth(3).text_content()) for n in range(rows.count())]
    assert lengths == sorted(lengths)


def test_hover_shows_details(loaded):
    page, _, _, document = loaded
    response = _response(page, document)
    tooltip = page.get_by_role("tooltip")
    assert tooltip.is_hidden()
    page.locator("#dv-tokens .tok").nth(4).hover()
    assert tooltip.is_visible()
    text = tooltip.text_content()
    strings = document["strings"]
    for name in ("top1_base", "top1_rl"):
        assert strings[response[name][4]].strip() in text
    assert "Position 4" in text and "rank" in text and "entropy" in text
    page.keyboard.press("Escape")
    assert tooltip.is_hidden()


def test_keyboard_moves_focus(loaded):
    page, _, _, document = loaded
    response = _response(page, document)
    threshold = document["thresholds"]["js"]
    above = [i for i, v in enumerate(response["js"]) if v is not None and v > threshold]
    assert above, "the most divergent response has a token above the threshold"
    tokens = page.locator("#dv-tokens .tok")
    tokens.nth(0).focus()
    assert _active_index(page) == 0
    tooltip = page.get_by_role("tooltip")
    assert tooltip.is_visible()
    assert tokens.nth(0).get_attribute("aria-describedby") == tooltip.get_attribute("id")
    page.keyboard.press("ArrowRight")
    assert _active_index(page) == 1
    page.keyboard.press("ArrowLeft")
    assert _active_index(page) == 0
    first = above[0] if above[0] > 0 else above[1] if len(above) > 1 else None
    page.keyboard.press("n")
    assert _active_index(page) == (first if first is not None else 0)
    if len(above) > 1 and first == above[0]:
        page.keyboard.press("j")
        assert _active_index(page) == above[1]
        page.keyboard.press("p")
        assert _active_index(page) == above[0]
    page.keyboard.press("End")
    assert _active_index(page) == len(response["token"]) - 1


def test_column_choice_recolours(loaded):
    page, _, _, _ = loaded
    token = page.locator("#dv-tokens .tok")
    before = [token.nth(n).evaluate("n => n.style.backgroundColor") for n in range(8)]
    legend = page.locator(".dv-legend").text_content()
    page.locator("#dv-column").select_option("entropy_base")
    after = [token.nth(n).evaluate("n => n.style.backgroundColor") for n in range(8)]
    assert after != before
    assert page.locator(".dv-legend").text_content() != legend
    assert "entropy_base" in page.locator(".dv-legend").text_content()


def test_notebook_viewers_each_show_their_tooltips(browser, tmp_path):
    """Two `divscope.view` outputs in one page, as a notebook shows them: each viewer works,
    and a token's tooltip is its own viewer's."""
    from divscope.reporting.notebook import view

    tokens = synthetic_tokens(n_prompts=2, n_samples=1, length=20, seed=5)
    views = [view(tokens, ("p0", 0)), view(tokens, ("p1", 0))]
    body = "".join(f'<div class="output">{v._repr_html_()}</div>' for v in views)
    path = tmp_path / "notebook.html"
    path.write_text(f'<!DOCTYPE html><html lang="en"><body>{body}</body></html>', "utf-8")
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(path.as_uri())
    outputs = page.locator(".output")
    for n, shown in enumerate(views):
        output = outputs.nth(n)
        output.locator(".dv-tokens .tok").first.wait_for()
        response = shown.document["responses"][0]
        strings = shown.document["strings"]
        texts = output.locator(".dv-tokens .tok").all_text_contents()
        assert texts == [strings[i] for i in response["token"]]
        output.locator(".dv-tokens .tok").nth(3).hover()
        tooltips = page.get_by_role("tooltip")
        visible = [t for t in tooltips.all() if t.is_visible()]
        assert len(visible) == 1
        assert "Position 3" in visible[0].text_content()
        assert strings[response["top1_rl"][3]].strip() in visible[0].text_content()
    ids = page.eval_on_selector_all(".dv-tooltip", "nodes => nodes.map(n => n.id)")
    assert len(set(ids)) == 2  # one tooltip per viewer, each with its own id
    assert errors == []
    page.close()
