"""Every command and code block of the Get-started pages runs (docs/get-started/**/*.md).

The pages run in the order of mkdocs.yml's nav, each page's fenced blocks in the order they stand, in a fresh
working directory of the page's own, with $SAINTPIPE_HOME a directory all the pages share (so the demo dataset
is generated once), this environment's bin first on PATH and no other SAINTPIPE_* variable of the caller's:

- ```bash: a script for `bash -euo pipefail`; it must exit 0;
- ```python: a script for this environment's python; it must exit 0;
- a block with a title (```toml title="short.toml"): a file the page's next blocks use, written into the
  working directory under that name, not run;
- ```text (what a command prints) and any other language: shown, not run;
- a block right after `<!-- not run: REASON -->` is not run; REASON says why (it installs, it downloads).

So a page shows a command's output as a separate ```text block, and keeps its graphs small and its runs short.
A page that starts a pipeline (`saintpipe run`, `serve`, `bench`, an embedded loader) is serial
(tests/conftest.py): its run needs the cores to itself. The others (imports of small files, `data info`) run
in the parallel phase: there, they are some 17 s that the serial phase no longer waits for.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
PAGES_DIR = ROOT / "docs" / "get-started"


def _in_nav_order(pages: list[Path]) -> list[Path]:
    """The pages in the order of mkdocs.yml's nav (Install first: it compiles the kernels the runs use)."""
    nav = re.findall(r"get-started/[\w./-]+\.md", (ROOT / "mkdocs.yml").read_text())

    def place(page: Path) -> tuple[int, Path]:
        name = page.relative_to(ROOT / "docs").as_posix()
        return (nav.index(name) if name in nav else len(nav), page)

    return sorted(pages, key=place)


PAGES = _in_nav_order(list(PAGES_DIR.rglob("*.md")))
RUN = ("bash", "python")
BLOCK_TIMEOUT_S = 240

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
_TITLE = re.compile(r"""\btitle=(?:"([^"]*)"|'([^']*)')""")
_NOT_RUN = re.compile(r"^\s*<!--\s*not run:(?P<reason>.*?)-->\s*$")
_STARTS_A_PIPELINE = re.compile(r"\bsaintpipe (run|serve|bench)\b|\.embedded\(")


@dataclass
class Block:
    line: int  # of the opening fence, 1-based
    lang: str
    title: str  # a file's name, or ""
    code: str
    not_run: str  # the reason of a <!-- not run: ... --> marker, or ""


def blocks(markdown: str, where: str = "page") -> list[Block]:
    """The fenced code blocks of a Markdown page, in order, with the marker that may precede each."""
    found: list[Block] = []
    lines = markdown.splitlines()
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        indent, fence, info = opening["indent"], opening["fence"], opening["info"].strip()
        body: list[str] = []
        j = i + 1
        while j < len(lines):
            closing = _FENCE.match(lines[j])
            if closing and closing["fence"][0] == fence[0] and len(closing["fence"]) >= len(fence) \
                    and not closing["info"].strip():
                break
            body.append(lines[j][len(indent):] if lines[j].startswith(indent) else lines[j].lstrip())
            j += 1
        else:
            raise AssertionError(f"{where}:{i + 1}: a code fence that is never closed")
        title = _TITLE.search(info)
        previous = next((lines[k] for k in range(i - 1, -1, -1) if lines[k].strip()), "")
        marker = _NOT_RUN.match(previous)
        found.append(Block(line=i + 1, lang=(info.split() or [""])[0].lstrip("{.").rstrip("}"),
                           title=(title[1] or title[2]) if title else "", code="\n".join(body) + "\n",
                           not_run=marker["reason"].strip() if marker else ""))
        i = j + 1
    return found


def _page_id(page: Path) -> str:
    return page.relative_to(PAGES_DIR).as_posix()


def _starts_a_pipeline(page: Path) -> bool:
    return any(_STARTS_A_PIPELINE.search(b.code) for b in blocks(page.read_text(), str(page))
               if b.lang in RUN and not b.not_run)


def _page_param(page: Path):
    """The page as a test parameter: serial when it starts a pipeline."""
    return pytest.param(page, id=_page_id(page), marks=[pytest.mark.serial] if _starts_a_pipeline(page) else [])


def test_the_extractor_reads_languages_titles_and_markers() -> None:
    page = "\n".join([
        "Text.", "", "```bash", "echo one", "```", "", "```text", "one", "```", "",
        "<!-- not run: it installs -->", "```bash", "./scripts/run.sh", "```", "",
        '```toml title="short.toml"', "[trainer]", "epochs = 1", "```", "",
        "1. A step:", "", "    ```python", "    print(2)", "    ```", "",
        "````markdown", "```bash", "not a block of its own", "```", "````",
    ])
    found = blocks(page)
    assert [(b.lang, b.title, b.not_run) for b in found] == [
        ("bash", "", ""), ("text", "", ""), ("bash", "", "it installs"), ("toml", "short.toml", ""),
        ("python", "", ""), ("markdown", "", "")]
    assert found[0].code == "echo one\n" and found[4].code == "print(2)\n"
    assert found[3].code == "[trainer]\nepochs = 1\n"
    assert found[5].code == "```bash\nnot a block of its own\n```\n"
    assert found[2].line == 12


def test_every_page_is_tested_and_every_block_is_accounted_for() -> None:
    """Each page runs something; every block has a language; each marker has a reason and a runnable block."""
    assert PAGES, f"no pages under {PAGES_DIR}"
    for page in PAGES:
        text = page.read_text()
        page_blocks = blocks(text, str(page))
        assert any(b.lang in RUN and not b.not_run for b in page_blocks), f"{page}: nothing runs"
        for block in page_blocks:
            assert block.lang, f"{page}:{block.line}: a code block without a language (```bash, ```text, ...)"
        markers = sum(1 for line in text.splitlines() if "<!-- not run" in line)
        marked = [b for b in page_blocks if b.not_run]
        assert markers == len(marked), f"{page}: a <!-- not run: REASON --> marker that no code block follows"
        for block in marked:
            assert block.lang in RUN, f"{page}:{block.line}: only bash and python blocks run; no marker here"


@pytest.fixture(scope="module")
def shared_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("saintpipe-home")


def _environment(home: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("SAINTPIPE_")}
    env["SAINTPIPE_HOME"] = str(home)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env["PYTHONUNBUFFERED"] = "1"
    return env


@pytest.mark.parametrize("page", [_page_param(page) for page in PAGES])
def test_the_page_runs(page: Path, tmp_path: Path, shared_home: Path) -> None:
    env = _environment(shared_home)
    work = tmp_path / "work"
    work.mkdir()
    started = time.monotonic()
    ran = 0
    for number, block in enumerate(blocks(page.read_text(), str(page)), 1):
        where = f"{page.relative_to(ROOT)}:{block.line}"
        if block.title:
            (work / block.title).parent.mkdir(parents=True, exist_ok=True)
            (work / block.title).write_text(block.code)
            continue
        if block.lang not in RUN or block.not_run:
            continue
        script = tmp_path / f"block-{number}.{'sh' if block.lang == 'bash' else 'py'}"
        script.write_text(block.code)
        command = ["bash", "-euo", "pipefail", str(script)] if block.lang == "bash" \
            else [sys.executable, str(script)]
        block_started = time.monotonic()
        try:
            result = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True,
                                    timeout=BLOCK_TIMEOUT_S, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired as exc:
            pytest.fail(f"{where}: the {block.lang} block ran past {BLOCK_TIMEOUT_S} s\n{block.code}\n"
                        f"--- output so far ---\n{exc.stdout or ''}\n{exc.stderr or ''}")
        assert result.returncode == 0, (
            f"{where}: the {block.lang} block exited {result.returncode}\n{block.code}\n"
            f"--- stdout ---\n{result.stdout[-6000:]}\n--- stderr ---\n{result.stderr[-6000:]}")
        ran += 1
        print(f"{where}: {block.lang} block ran in {time.monotonic() - block_started:.1f} s")
    print(f"{page.relative_to(ROOT)}: {ran} block(s) in {time.monotonic() - started:.1f} s")
