"""The command-line reference is walked from the real parser: every command is on it with its flags, and a
flag added to the code is on it at the next build."""

from __future__ import annotations

from saintpipe.cli import build_parser
from saintpipe.core.argtypes import integer


def test_every_command_is_on_the_page(reference) -> None:
    pages = reference.pages()
    page = "\n".join(text for name, text in pages.items() if name.startswith("reference/cli/"))
    parser = build_parser()
    for sub, _, _ in reference.commands(parser):
        if sub is not parser:
            assert f"# {sub.prog} {{#" in page, sub.prog
    top = {"data", "run", "sweep", "warmup", "predict", "embed", "serve", "bench", "doctor", "certs"}
    # one page per command, titled with it, its subcommands on it
    assert all(pages[f"reference/cli/{name}.md"].startswith(f"# saintpipe {name} {{#") for name in top)
    assert "## saintpipe data import {#" in pages["reference/cli/data.md"]
    assert "Also: `saintpipe bench sampler`" in page  # an alias


def test_a_flag_with_its_type_range_and_default(reference, table_row) -> None:
    page = reference.cli_page(build_parser())
    assert table_row(page, "saintpipe-data-import-graphsaint", "`--shards`").startswith(
        "| `--shards` | integer from 1 to 4096 | `1` | number of feature shard files")
    # a flag made from a config field: its range and default come from the model
    port = table_row(page, "saintpipe-serve-feature-shard", "`--port`")
    assert "integer from 0 to 65535" in port and "default 50051" in port
    assert "| `--no-bulk` | switch |" in page
    # the options every command takes are listed once, at the top
    assert page.count("| `-v`, `--verbose` | count |") == 1


def test_a_flag_added_to_the_code_is_on_the_page(reference, table_row, monkeypatch) -> None:
    from saintpipe.cli import run

    register = run.register

    def with_a_new_flag(groups):
        register(groups)
        groups.choices["run"].add_argument("--frobs", type=integer(1, 9), default=3, help="frobs per <widget>")

    monkeypatch.setattr(run, "register", with_a_new_flag)
    page = reference.pages()["reference/cli/run.md"]
    assert table_row(page, "saintpipe-run", "`--frobs`") == \
        "| `--frobs` | integer from 1 to 9 | `3` | frobs per &lt;widget&gt; |"
