"""``log_level``: -v/-vv win over SAINTPIPE_LOG_LEVEL, which wins over the WARNING default."""

from __future__ import annotations

import logging

import pytest

from saintpipe.cli import LOG_LEVEL_ENV, log_level, main
from saintpipe.core.errors import ConfigError


def test_default_is_warning():
    assert log_level(0, {}) == logging.WARNING
    assert log_level(0, {LOG_LEVEL_ENV: ""}) == logging.WARNING
    assert log_level(0, {LOG_LEVEL_ENV: "   "}) == logging.WARNING


@pytest.mark.parametrize("value, level", [
    ("INFO", logging.INFO), ("info", logging.INFO), (" Debug ", logging.DEBUG), ("warning", logging.WARNING),
    ("ERROR", logging.ERROR), ("critical", logging.CRITICAL),
])
def test_the_variable_names_a_level_in_any_case(value, level):
    assert log_level(0, {LOG_LEVEL_ENV: value}) == level


def test_flags_win_over_the_variable():
    for value in ("ERROR", "debug", "nonsense"):  # a bad value does not matter once a flag decides
        assert log_level(1, {LOG_LEVEL_ENV: value}) == logging.INFO
        assert log_level(2, {LOG_LEVEL_ENV: value}) == logging.DEBUG
        assert log_level(3, {LOG_LEVEL_ENV: value}) == logging.DEBUG


def test_a_bad_value_is_a_config_error_naming_the_variable():
    with pytest.raises(ConfigError, match=rf"{LOG_LEVEL_ENV}='loud': not a log level"):
        log_level(0, {LOG_LEVEL_ENV: "loud"})
    with pytest.raises(ConfigError, match=LOG_LEVEL_ENV):
        log_level(0, {LOG_LEVEL_ENV: "5"})


def test_reads_the_process_environment_by_default(monkeypatch):
    monkeypatch.setenv(LOG_LEVEL_ENV, "error")
    assert log_level(0) == logging.ERROR
    monkeypatch.delenv(LOG_LEVEL_ENV)
    assert log_level(0) == logging.WARNING


def test_the_command_line_reports_a_bad_value_as_one_error_line(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv(LOG_LEVEL_ENV, "loud")
    out = tmp_path / "ds"
    assert main(["data", "generate", "demo", "--nodes", "600", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("saintpipe: error: ") and LOG_LEVEL_ENV in err and "Traceback" not in err
    assert not out.exists(), "nothing runs before the logging is configured"
