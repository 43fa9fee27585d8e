"""The configuration reference is read from the config models: every section and field is on it with its
type, default, range, environment variable and flag, and a field added to the code is on it at the next
build."""

from __future__ import annotations

import importlib
from pathlib import Path

from pydantic import Field

from saintpipe.core.config import StrictModel

ROOT = Path(__file__).resolve().parents[3]


def test_a_field_with_its_type_default_range_variable_and_flag(reference, table_row) -> None:
    page = reference.pages()["reference/configuration.md"]
    capacity = table_row(page, "saintpipe-run-pool", "`capacity`")
    assert capacity.startswith("| `capacity` | integer | `256` (saintpipe run: `32`) | from 1 to 1000000 | Most ")
    assert capacity.endswith("| `SAINTPIPE_POOL__CAPACITY` |")
    # the same model in serve samplers' section: its own variable and the flag model_flags made from the field
    assert table_row(page, "saintpipe-serve-samplers-samplers-pool", "`capacity`").endswith(
        "| `SAINTPIPE_SAMPLERS__POOL__CAPACITY`<br>`--pool-capacity` |")
    assert table_row(page, "saintpipe-run-trainer-model", "`dropout`").startswith(
        "| `dropout` | number | `0.1` | at least 0, less than 1 | Dropout on the input")  # a docstring's text
    assert "`SAINTPIPE_SAMPLERS__SAMPLER__WALK_LENGTH`" in table_row(
        page, "saintpipe-run-samplers-sampler-random-walk", "`walk_length`")
    # what saintpipe run sets itself is not set in its [samplers]
    assert "**Not set here:** the local run sets these itself" in table_row(
        page, "saintpipe-run-samplers", "`ray_address`")


def test_every_section_and_config_model_is_on_the_page(reference) -> None:
    from saintpipe.pipeline.config import PipelineConfig

    page = reference.pages()["reference/configuration.md"]
    for section in PipelineConfig.model_fields:
        assert f"### `[{section}]`" in page, section
    for section in ("[samplers.sampler] kind = frontier", "[samplers.sampler] kind = node", "[trainer.model]",
                    "[feature_shard]", "[samplers.pool]"):
        assert f"`{section}`" in page, section
    # Every config model of saintpipe: the modules named config.py, and the models they use.
    for path in [*ROOT.glob("saintpipe/**/config.py"), *ROOT.glob("services/**/config.py"),
                 *ROOT.glob("trainer/**/config.py")]:
        parts = path.relative_to(ROOT).with_suffix("").parts
        importlib.import_module(".".join(parts if parts[0] == "saintpipe" else ("saintpipe", *parts)))
    models, stack = set(), [StrictModel]
    while stack:
        for sub in stack.pop().__subclasses__():
            stack.append(sub)
            if sub.__module__.startswith("saintpipe.") and sub.__name__.endswith("Config"):
                models.add(f"{sub.__module__}.{sub.__qualname__}")
    assert len(models) >= 12
    assert [m for m in sorted(models) if f"`{m}`" not in page] == []


class Widget(StrictModel):
    """A part added on the fly."""

    frobs: int = Field(3, ge=1, le=9, description="frobs per <widget>")


def test_a_section_field_and_flag_added_to_the_code_are_on_the_page(reference, table_row, monkeypatch) -> None:
    from saintpipe.cli import run
    from saintpipe.core.model_flags import add_model_flags
    from saintpipe.pipeline import config
    from saintpipe.pipeline.config import RunConfig

    class Widened(config.PipelineConfig):
        widget: Widget = Field(default_factory=Widget)

    register = run.register

    def with_a_model_flag(groups):
        register(groups)
        add_model_flags(groups.choices["run"], RunConfig, ("trainers",))

    monkeypatch.setattr(config, "PipelineConfig", Widened)
    monkeypatch.setattr(run, "register", with_a_model_flag)
    page = reference.pages()["reference/configuration.md"]
    assert table_row(page, "saintpipe-run-widget", "`frobs`") == \
        "| `frobs` | integer | `3` | from 1 to 9 | frobs per &lt;widget&gt; | `SAINTPIPE_WIDGET__FROBS` |"
    assert table_row(page, "saintpipe-run-run", "`trainers`").endswith(
        "| `SAINTPIPE_RUN__TRAINERS`<br>`--trainers` |")
