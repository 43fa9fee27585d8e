"""Hostile numbers and config files through the real console script: one line, no traceback (issue 19, finding 4).

Before the fix each of these printed a Python traceback (numpy refusing a
negative size or seed, a UnicodeDecodeError from the config reader) or tried
to allocate hundreds of GiB.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli import run_cli


def _one_line_error(proc, *needles: str) -> str:
    err = proc.stderr.strip()
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr and "\n" not in err, err
    for needle in needles:
        assert needle in err, err
    return err


@pytest.mark.parametrize("args,flag,message", [
    (["demo", "--nodes", "-5"], "--nodes", "must be an integer from 1 to 2147483647, got -5"),
    (["demo", "--nodes", "100000000000"], "--nodes", "must be an integer from 1 to 2147483647, got 100000000000"),
    (["demo", "--seed", "-1"], "--seed", "must be an integer from 0 to 9223372036854775807, got -1"),
    (["kronecker", "--scale", "4", "--degree", "2", "--seed", "-1"], "--seed",
     "must be an integer from 0 to 9223372036854775807, got -1"),
])
def test_issue_numbers_are_one_line_naming_the_flag(tmp_path: Path, args, flag, message):
    out = tmp_path / "ds"
    proc = run_cli("data", "generate", *args, "--out", str(out), check=False, timeout=120)
    err = _one_line_error(proc, f"argument {flag}: {message}")
    assert err.startswith(f"saintpipe data generate {args[0]}: error: ")
    assert not out.exists()


@pytest.fixture
def not_utf8(tmp_path: Path) -> Path:
    path = tmp_path / "bad.toml"
    path.write_bytes(b"[run]\ntrainers = 1\n# caf\xe9 in Latin-1\n")
    return path


NOT_UTF8 = "not UTF-8 text: byte 0xe9 at offset 24 (line 3) cannot be decoded"

COMMANDS = {
    "run": ["run"],
    "feature-shard": ["serve", "feature-shard", "--data", "nowhere", "--shard", "0"],
    "samplers": ["serve", "samplers", "--data", "nowhere"],
    "trainer": ["serve", "trainer"],
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_config_not_utf8_is_one_line_naming_the_file_and_offset(not_utf8: Path, command):
    proc = run_cli(*COMMANDS[command], "--config", str(not_utf8), check=False, timeout=120)
    _one_line_error(proc, f"saintpipe: error: {not_utf8}: {NOT_UTF8}")


def test_config_directory_and_bad_yaml_name_the_file(tmp_path: Path):
    proc = run_cli("run", "--config", str(tmp_path), check=False, timeout=120)
    _one_line_error(proc, f"{tmp_path}: is a directory, not a config file")
    bad = tmp_path / "c.yaml"
    bad.write_text("run:\n  trainers: [1, 2\n")
    proc = run_cli("serve", "feature-shard", "--config", str(bad), check=False, timeout=120)
    _one_line_error(proc, f"{bad}: not valid YAML at line 3, column 1")


def test_bad_number_in_environment_names_the_variable():
    proc = run_cli("run", check=False, timeout=120, env={"SAINTPIPE_POOL__CAPACITY": "-5"})
    _one_line_error(proc, "pool.capacity: Input should be greater than or equal to 1, got -5 "
                          "(from environment variable SAINTPIPE_POOL__CAPACITY)")
    proc = run_cli("serve", "samplers", "--data", "nowhere", check=False, timeout=120,
                   env={"SAINTPIPE_SAMPLERS__WORKERS": "abc"})
    _one_line_error(proc, "samplers.workers: Input should be a valid integer", "got 'abc'",
                    "(from environment variable SAINTPIPE_SAMPLERS__WORKERS)")


def test_sampler_config_file_errors_are_one_line(tmp_path: Path, not_utf8: Path):
    proc = run_cli("serve", "samplers", "--data", "nowhere", "--sampler-config", str(not_utf8), check=False,
                   timeout=120)
    _one_line_error(proc, f"{not_utf8}: {NOT_UTF8}")
    scalar = tmp_path / "s.toml"
    scalar.write_text("sampler = 5\n")
    proc = run_cli("serve", "samplers", "--data", "nowhere", "--sampler-config", str(scalar), check=False,
                   timeout=120)
    _one_line_error(proc, f"{scalar}: 'sampler' must be a table/mapping, got int")


def test_a_reader_that_goes_away_stops_the_command_quietly(tmp_path) -> None:
    """`saintpipe data info DIR | head -1`: the pipe closes before the output is written; the command ends
    with 141 (128 + SIGPIPE, as a shell reports it) and no traceback."""
    import subprocess

    from tests.support.cli import run_cli, saintpipe_command

    run_cli("data", "generate", "demo", "--nodes", "200", "--out", str(tmp_path / "demo"))
    proc = subprocess.Popen([*saintpipe_command(), "data", "info", str(tmp_path / "demo")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # before the interpreter has started: its first write meets a closed pipe
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 141, err
    assert err == "", err
