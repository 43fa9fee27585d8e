"""The documentation site builds with --strict (mkdocs.yml): every link and anchor resolves, every page is in
the nav, the generated reference pages and the mkdocstrings API pages render.

Not serial (tests/conftest.py's SERIAL_FOLDERS): ./scripts/test.sh runs it in its parallel phase, as
./scripts/docs.sh would build the site (the test extra carries the docs extra's packages)."""

from __future__ import annotations

from pathlib import Path


def test_the_site_builds_strict_with_the_generated_reference(built_site: Path) -> None:
    site = built_site  # conftest.py builds it with --strict and fails on any warning

    def page(path: str) -> str:
        return (site / path / "index.html").read_text()

    assert "saintpipe serve feature-shard" in page("reference/cli/serve")
    assert "SAINTPIPE_POOL__CAPACITY" in page("reference/configuration")
    assert "saintpipe_trainer_steps_total" in page("reference/metric-list")
    assert "SaintpipePoolEmptyTrainersWaiting" in page("reference/alert-rules")
    for api, name in (("loader", "SubgraphLoader"), ("pool", "SubgraphPool"), ("feature-client", "FeatureClient"),
                      ("dataset-store", "open_dataset")):
        assert 'id="saintpipe.' in page(f"reference/api/{api}") and name in page(f"reference/api/{api}"), api
    # The home page is the landing page (docs/index.md), with the Get-started pages beside it; the generator's
    # code is not published.
    assert "Where to go next" in page("") and 'href="get-started/install/"' in page("")
    assert "Reading the summary" in page("get-started/first-run")
    assert not (site / "hooks").exists()
