"""The pool's Redis-side logic: Lua scripts, each one atomic round trip.

The scripts are the ``*.lua`` files beside this module, read once, at import; each file's opening comment
says what it does and what its KEYS and ARGV are (``keys.JobKeys`` builds the KEYS lists).
``ack_one.lua`` and ``put_entry.lua`` define functions that several scripts call, and ``job_keys.lua``
(put first in every script but DISCARD) checks every key taken from an entry or from the ``at`` hash, and
the type of the job's own keys, before a script touches them: entries are data, not trusted.
A script's text is those it uses followed by its own file.

A subgraph's bytes live in a string key of their own rather than in its stream entry: Redis stores a
string argument as is, while appending it to a stream copies it (a large share of the cost for ~1 MB
subgraphs). The job's keys, the key checks and fan-out's copies and counts are described in
docs/explanation/pool.md ("How the pool uses Redis", "Several consumer groups").
"""

from __future__ import annotations

import hashlib
from importlib.resources import files

from saintpipe.services.pool.resp import pack


def _code(name: str) -> str:
    """The code of ``name.lua``, without the comment block that opens the file.

    Only the code goes to Redis, each piece starting on a new line, so a
    script's text (and SHA) does not change when its description does.
    """
    lines = (files(__package__) / f"{name}.lua").read_text(encoding="utf-8").splitlines(keepends=True)
    start = 0
    while start < len(lines) and (lines[start].startswith("--") or not lines[start].strip()):
        start += 1
    return "\n" + "".join(lines[start:])


class Script:
    """A Lua script called by its SHA (a restarted Redis that forgot it is sent ``text`` again)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.sha = hashlib.sha1(text.encode()).hexdigest()

    def command(self, keys: list, args: list) -> list:
        return pack("EVALSHA", self.sha, len(keys), *keys, *args)


_JOB_KEYS = _code("job_keys")
_ACK_ONE = _code("ack_one")
_PUT_ENTRY = _code("put_entry")

# One of each per process: every pool object calls the same scripts. DISCARD's keys are the at hash and an
# upload the producer named, none taken from an entry.
SCRIPTS: dict[str, Script] = {
    "PUT": Script(_JOB_KEYS + _ACK_ONE + _PUT_ENTRY + _code("put")),
    "PUT_REFERENCE": Script(_JOB_KEYS + _ACK_ONE + _PUT_ENTRY + _code("put_reference")),
    "GET": Script(_JOB_KEYS + _ACK_ONE + _code("get")),
    "ACK": Script(_JOB_KEYS + _ACK_ONE + _code("ack")),
    "DEAD": Script(_JOB_KEYS + _ACK_ONE + _code("dead")),
    "RECOVER": Script(_JOB_KEYS + _code("recover")),
    "DISCARD": Script(_code("discard")),
    "TOUCH": Script(_JOB_KEYS + _code("touch")),
    "STATS": Script(_JOB_KEYS + _code("stats")),
    "ADD_GROUP": Script(_JOB_KEYS + _code("add_group")),
    "REMOVE_GROUP": Script(_JOB_KEYS + _code("remove_group")),
}
