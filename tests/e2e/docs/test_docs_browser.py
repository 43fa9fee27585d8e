"""The built site in a real browser (issue 45, item 7): headless Chromium loads the home page, the tutorial (the
page after it in the nav's "Get started") and the first reference page from the built files, and each renders
its title and Material's navigation; a screenshot of the home page is a PNG with the page on it.

scripts/docs_browser.py finds the pages from mkdocs.yml's nav and runs Chromium (PATH, else what
./scripts/tools.sh fetched without root); without it the tests skip and say why and what to run. Not serial:
a few Chromium runs of a second or two each, on the site conftest.py builds once per session."""

from __future__ import annotations

import importlib.util
import re
import struct
from html.parser import HTMLParser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
_spec = importlib.util.spec_from_file_location("saintpipe_docs_browser", ROOT / "scripts" / "docs_browser.py")
browser = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(browser)

CONFIG = browser.load_config(ROOT / "mkdocs.yml")
PAGES = browser.pages(CONFIG)  # home, tutorial, reference: their Markdown paths under docs/


@pytest.fixture(scope="session")  # session-scoped as built_site is, and set up before it: no build to skip
def chromium() -> str:
    path = browser.find_chromium()
    if path is None:
        pytest.skip(browser.missing_reason())
    return path


def markdown_title(markdown: str) -> str:
    """The text of the page's level-1 heading, as the reader sees it (no attribute list, no code marks)."""
    heading = next(line[2:] for line in markdown.splitlines() if line.startswith("# "))
    heading = re.sub(r"\s*\{[^}]*\}\s*$", "", heading).replace("`", "")
    return " ".join(heading.split())


class RenderedPage(HTMLParser):
    """What a reader sees of the page: the first <h1>'s text (its permalink mark left out), the nav tabs' names,
    the active tab's name and the text of the primary navigation (Material's ``md-nav--primary``)."""

    def __init__(self, dom: str) -> None:
        super().__init__()
        self.title = ""
        self.tabs: list[str] = []
        self.active_tab = ""
        self.primary_nav = ""
        self._in: list[str] = []  # what the text goes to: "h1", "headerlink", "tab"
        self._h1_seen = False
        self._tab_active = False
        self._nav_depth = 0  # nav elements open inside the primary one
        self.feed(dom)
        self.close()
        self.title = " ".join(self.title.split())
        self.primary_nav = " ".join(self.primary_nav.split())

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        classes = (dict(attrs).get("class") or "").split()
        if tag == "h1" and not self._h1_seen:
            self._in.append("h1")
        elif tag == "a" and "headerlink" in classes and self._in[-1:] == ["h1"]:
            self._in.append("headerlink")
        elif tag == "li" and "md-tabs__item" in classes:
            self._tab_active = "md-tabs__item--active" in classes
        elif tag == "a" and "md-tabs__link" in classes:
            self._in.append("tab")
            self.tabs.append("")
        if tag == "nav" and (self._nav_depth or "md-nav--primary" in classes):
            self._nav_depth += 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "h1" and self._in[-1:] == ["h1"]:
            self._in.pop()
            self._h1_seen = True
        elif tag == "a" and self._in[-1:] in (["headerlink"], ["tab"]):
            if self._in.pop() == "tab":
                self.tabs[-1] = " ".join(self.tabs[-1].split())
                if self._tab_active:
                    self.active_tab = self.tabs[-1]
        elif tag == "nav" and self._nav_depth:
            self._nav_depth -= 1

    def handle_data(self, data: str) -> None:
        if self._in[-1:] == ["h1"]:
            self.title += data
        elif self._in[-1:] == ["tab"]:
            self.tabs[-1] += data
        if self._nav_depth:
            self.primary_nav += f" {data}"


@pytest.fixture(scope="module")
def markdown(reference):
    """A page's Markdown: its file under docs/, else the generator's (the reference pages are made at build)."""
    generated: dict[str, str] = {}

    def source(page: str) -> str:
        path = ROOT / "docs" / page
        if path.is_file():
            return path.read_text()
        if not generated:
            generated.update(reference.pages())
        return generated[page]

    return source


@pytest.mark.parametrize("role", list(PAGES))
def test_the_page_renders_its_title_and_the_navigation(chromium, built_site, markdown, role, tmp_path):
    page = PAGES[role]
    dom = browser.dump_dom(chromium, browser.built_file(built_site, page).as_uri(), tmp_path / "profile")
    rendered = RenderedPage(dom)
    assert rendered.title == markdown_title(markdown(page)), page
    sections = browser.sections(CONFIG)
    assert len(sections) == 5, sections
    assert rendered.tabs == sections
    assert rendered.active_tab == browser.section_of(CONFIG, page)
    assert all(name in rendered.primary_nav for name in sections), rendered.primary_nav[:500]


def test_a_screenshot_of_the_home_page(chromium, built_site, tmp_path):
    png = browser.screenshot(chromium, browser.built_file(built_site, PAGES["home"]).as_uri(),
                             tmp_path / "home.png", tmp_path / "profile")
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    assert struct.unpack(">II", data[16:24]) == browser.WINDOW
    # A blank page of this size compresses to a few kB; the home page's text and header make far more.
    assert len(data) > 30_000, len(data)
