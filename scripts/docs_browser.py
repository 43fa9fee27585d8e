"""Headless Chromium on the built documentation site, for tests/e2e/docs/test_docs_browser.py and
``./scripts/docs.sh --screenshots``: which pages they look at (found from mkdocs.yml's nav), where Chromium
is, and how it is run.

The pages: the home page (the first page of the nav), the tutorial (the next page of the nav's first section,
"Get started") and the first page of the "Reference" section. Chromium: ``chromium`` on PATH, else Debian's
package as ./scripts/tools.sh unpacks it without root (``$SAINTPIPE_TOOLS_DIR``, default
``~/.cache/saintpipe/tools``: ``chromium/bin/chromium``, a launcher that puts the libraries fetched with it on
LD_LIBRARY_PATH). Each run is headless, sandbox and GPU off, with a profile, HOME and caches of its own, and
no network: the pages are the built files and nothing else (the theme's web fonts give way to local ones).

    python scripts/docs_browser.py SITE DIR    # a PNG of each of the three pages of the built SITE into DIR
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
WINDOW = (1280, 900)  # the screenshots' size in pixels
TIMEOUT = 60.0  # seconds for one Chromium run (one is a second or two)


def tools_dir(environ: Mapping[str, str] = os.environ) -> Path:
    """Where ./scripts/tools.sh puts the tools it fetches (the script's rule)."""
    if environ.get("SAINTPIPE_TOOLS_DIR"):
        return Path(environ["SAINTPIPE_TOOLS_DIR"])
    return Path(environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "saintpipe" / "tools"


def find_chromium(environ: Mapping[str, str] = os.environ) -> str | None:
    """``chromium`` on PATH, else the launcher ./scripts/tools.sh made; None when neither."""
    found = shutil.which("chromium", path=environ.get("PATH"))
    if found:
        return found
    launcher = tools_dir(environ) / "chromium" / "bin" / "chromium"
    return str(launcher) if os.access(launcher, os.X_OK) else None


def missing_reason(environ: Mapping[str, str] = os.environ) -> str:
    """One line: why Chromium is missing (as ./scripts/tools.sh found it) and what to run."""
    where = tools_dir(environ)
    try:
        said = next((line for line in (where / "missing.txt").read_text().splitlines()
                     if line.startswith("chromium:")), "")
    except OSError:
        said = ""
    return (f"chromium not found on PATH nor in {where / 'chromium/bin'}: "
            + (f"./scripts/tools.sh said: {said}" if said else
               "run ./scripts/tools.sh chromium (Debian/Ubuntu: it fetches Debian's chromium package and the "
               "libraries it needs with apt-get download and dpkg-deb -x, no root needed); elsewhere put "
               "Chromium on PATH as chromium"))


class _Loader(yaml.SafeLoader):
    """mkdocs.yml's own tags (``!relative``, ``!!python/...``) read as nothing: only the nav is wanted."""


_Loader.add_multi_constructor("!", lambda loader, suffix, node: None)
_Loader.add_multi_constructor("tag:yaml.org,2002:python/", lambda loader, suffix, node: None)


def load_config(path: Path = ROOT / "mkdocs.yml") -> dict[str, Any]:
    return yaml.load(path.read_text(), Loader=_Loader)  # a SafeLoader: no Python objects made


def sections(config: Mapping[str, Any]) -> list[str]:
    """The names of the nav's sections (its top-level entries), in order."""
    return [next(iter(entry)) for entry in config["nav"]]


def _pages(entries: Any) -> Iterator[str]:
    """The Markdown paths of a nav entry list, in order, nested sections flattened."""
    for entry in entries:
        if isinstance(entry, str):
            yield entry
        else:
            (value,) = entry.values()
            yield from ([value] if isinstance(value, str) else _pages(value))


def section_pages(config: Mapping[str, Any], name: str) -> list[str]:
    """The Markdown paths of the nav section ``name``."""
    return list(_pages(next(entry[name] for entry in config["nav"] if name in entry)))


def pages(config: Mapping[str, Any]) -> dict[str, str]:
    """``home``, ``tutorial`` and ``reference``: the Markdown path (under docs/) of each page looked at."""
    first = section_pages(config, sections(config)[0])
    return {"home": first[0], "tutorial": first[1], "reference": section_pages(config, "Reference")[0]}


def section_of(config: Mapping[str, Any], page: str) -> str:
    """The name of the nav section that holds ``page``."""
    return next(name for name in sections(config) if page in section_pages(config, name))


def built_file(site: Path, page: str) -> Path:
    """The HTML file MkDocs builds from ``page`` (a Markdown path), with its default directory URLs."""
    stem = page.removesuffix(".md")
    if stem == "index" or stem.endswith("/index"):
        return site / f"{stem}.html"
    return site / stem / "index.html"


def run(chromium: str, url: str, args: list[str], profile: Path) -> subprocess.CompletedProcess[str]:
    """One headless Chromium run on ``url``; ``profile`` (created) holds all it writes, HOME included."""
    profile.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "HOME": str(profile), "XDG_CONFIG_HOME": str(profile / "config"),
           "XDG_CACHE_HOME": str(profile / "cache")}
    command = [chromium, "--headless", "--disable-gpu", "--no-sandbox", "--no-first-run",
               "--disable-extensions", f"--user-data-dir={profile / 'chromium'}",
               "--host-resolver-rules=MAP * ~NOTFOUND", *args, url]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=TIMEOUT, check=False,
                            stdin=subprocess.DEVNULL)
    if result.returncode != 0:
        raise RuntimeError(f"chromium exited {result.returncode} on {url}: {result.stderr[-2000:]}")
    return result


def dump_dom(chromium: str, url: str, profile: Path) -> str:
    """The page's DOM once loaded, its scripts run, as HTML."""
    return run(chromium, url, ["--dump-dom"], profile).stdout


def screenshot(chromium: str, url: str, png: Path, profile: Path) -> Path:
    """A PNG of the page's first screen, ``WINDOW`` pixels, into ``png``."""
    png.parent.mkdir(parents=True, exist_ok=True)
    size = "--window-size={},{}".format(*WINDOW)
    run(chromium, url, [f"--screenshot={png}", size, "--hide-scrollbars"], profile)
    if not png.is_file() or png.stat().st_size == 0:
        raise RuntimeError(f"chromium wrote no screenshot of {url} to {png}")
    return png


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: docs_browser.py SITE DIR", file=sys.stderr)
        return 2
    site, out = Path(argv[0]).resolve(), Path(argv[1]).resolve()
    chromium = find_chromium()
    if chromium is None:
        print(missing_reason(), file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="saintpipe-chromium-") as profile:
        for role, page in pages(load_config()).items():
            print(screenshot(chromium, built_file(site, page).as_uri(), out / f"{role}.png", Path(profile)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
