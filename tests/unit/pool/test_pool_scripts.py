"""The pool's Lua scripts as loaded from their files, and the facade's exports (no server)."""

from __future__ import annotations

import hashlib
from importlib.resources import files

from saintpipe.services.pool import scripts

PACKAGE = files("saintpipe.services.pool")
USED = {
    "job_keys", "ack_one", "put_entry",
    "put", "put_reference", "get", "ack", "dead", "recover", "discard", "touch", "stats",
    "add_group", "remove_group",
}


def lua(name: str) -> str:
    return (PACKAGE / f"{name}.lua").read_text(encoding="utf-8")


def test_every_lua_file_is_a_script_or_a_shared_piece():
    # Beside the module, not in a subfolder: the package data pattern "*.lua" covers only the package's own.
    assert {p.name.removesuffix(".lua") for p in PACKAGE.iterdir() if p.name.endswith(".lua")} == USED


def test_the_comment_that_opens_a_file_does_not_reach_redis():
    for name in USED:
        assert lua(name).startswith("-- ")
    for name, script in scripts.SCRIPTS.items():
        assert not script.text.lstrip("\n").startswith("--"), name
        assert script.text.startswith("\n") and script.text.endswith("\n")


def text(name: str) -> str:
    return scripts.SCRIPTS[name].text


def test_shared_pieces_come_first_and_once():
    job_keys = scripts._code("job_keys")
    ack_one = scripts._code("ack_one")
    put_entry = scripts._code("put_entry")
    assert "local function ack_one(id, counter)" in ack_one
    assert "local function put_entry()" in put_entry
    for function in ("wrong_type(...)", "bytes_state(key)", "entry_bytes(fields)"):
        assert f"local function {function}" in job_keys
    for name in ("PUT", "PUT_REFERENCE"):
        assert text(name).startswith(job_keys + ack_one + put_entry)
    for name in ("GET", "ACK", "DEAD"):
        assert text(name).startswith(job_keys + ack_one)
        assert "put_entry" not in text(name)
    for name in ("TOUCH", "STATS", "RECOVER"):
        assert text(name).startswith(job_keys)
        assert "ack_one" not in text(name)
    assert "ack_one" not in text("DISCARD") and "wrong_type" not in text("DISCARD")
    for name in scripts.SCRIPTS:
        assert text(name).count("local function ack_one") <= 1
        assert text(name).count("local function wrong_type") <= 1


def test_no_script_takes_the_first_field_of_an_entry_for_its_bytes_key():
    # entry[2][2] was "whatever field comes first": an entry without k named any key it liked.
    for name in scripts.SCRIPTS:
        assert "[2][2]" not in text(name), name


def test_every_script_but_discard_checks_its_fixed_keys_before_its_first_command():
    for name in scripts.SCRIPTS:
        if name == "DISCARD":
            continue
        own = scripts._code(name.lower())
        check = own.index("local wrong = wrong_type(")
        assert own.index("if wrong then return wrong end") > check, name
        # Nothing before the check but comments, blank lines, and EXISTS of GET's destination key.
        before = [line for line in own[:check].splitlines() if line.strip() and not line.startswith("--")]
        assert before in ([], ["if redis.call('EXISTS', KEYS[4]) == 1 then return {false, 0, 0, 0} end"]), name


def test_scripts_are_called_by_the_sha_of_their_text():
    for script in scripts.SCRIPTS.values():
        assert script.sha == hashlib.sha1(script.text.encode()).hexdigest()
        sent = b"".join(script.command(["k1", "k2"], ["a", 1]))
        assert sent.startswith(b"*7\r\n$7\r\nEVALSHA\r\n$40\r\n" + script.sha.encode() + b"\r\n$1\r\n2\r\n")


def test_the_facade_exports_what_callers_import():
    from saintpipe.services.pool import pool, records

    assert pool.PoolEntry is records.PoolEntry and pool.PoolStats is records.PoolStats
    assert pool.DeadLetter is records.DeadLetter
    for name in ("SubgraphPool", "PreparedPut", "resolve_transport"):
        assert hasattr(pool, name)
