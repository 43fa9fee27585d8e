"""The pool's Redis-side logic: Lua scripts, each one atomic round trip.

The scripts are the ``*.lua`` files beside this module, read once, at import.
``ack_one.lua`` and ``put_entry.lua`` define functions that several scripts
call; a script's text is those it uses followed by its own file.

Keys of a job share one hash tag, so a Redis Cluster keeps them on one shard:

* ``saintpipe:pool:{JOB}:stream`` (``KEYS[1]``): one small entry per subgraph,
  field ``k`` naming the key that holds its bytes; consumed by the group
  ``ARGV[1]``.
* ``saintpipe:pool:{JOB}:counters`` (``KEYS[2]``): a hash of produced,
  acknowledged, redelivered and dead_lettered (the last three per group: a
  group other than the default one has its own, ``acknowledged@<group>`` ...),
  and a mark ``removed:<group>`` per group REMOVE_GROUP removed (so that a
  removal sent again is no error; ADD_GROUP clears it).
* ``saintpipe:pool:{JOB}:at`` (``KEYS[3]``, but for STATS and TOUCH; ``KEYS[1]``
  of DISCARD): a hash from the id of each delivered entry to the key that now
  holds its bytes (GET renames them to a key the consumer named, so that it can
  fetch them in the same round trip); and from the upload key of each recent
  put to its entry id, until its producer has read the answer (what makes a put
  sent again after a lost answer add nothing).
* ``saintpipe:pool:{JOB}:dead`` (``KEYS[4]`` of DEAD): the dead-letter stream,
  one record per entry removed without being trained on (undecodable, bytes
  gone, or delivered too often), capped.
* ``saintpipe:pool:{JOB}:groups`` (``KEYS[5]`` of PUT and PUT_REFERENCE, ``KEYS[3]`` of STATS and
  ADD_GROUP, ``KEYS[4]`` of REMOVE_GROUP): the job's registered consumer groups (``add_group``: a sweep's
  trials), each with the job's produced count when it joined. Absent while the job has its one default
  group, which is then the only live one.
* ``saintpipe:pool:{JOB}:sg:<random>``: the encoded subgraph, a plain string.
  The bytes live in a string rather than in the stream entry because Redis
  stores a string argument as is, while appending it to a stream copies it
  into the stream's node (a large share of the cost for ~1 MB subgraphs).

Entries and the ``at`` hash are data, not trusted: ``job_keys.lua``, put
first in every script but DISCARD, checks the key an entry names before a
script renames, reads or deletes it (it must be one of the job's own subgraph
keys, holding a string; the consumer dead-letters the entry otherwise), and the
type of each fixed key of the job a script uses (a key changed outside
saintpipe is answered with ``SAINTPIPE-WRONGTYPE``, which
``connection.translate_error`` turns into ``StateCorrupted``). A consumer group
the job's stream does not have (removed, or never added) stops a script at its
first stream command, before it changes anything, with Redis's ``NOGROUP`` (or
``SAINTPIPE-NOGROUP`` from ACK and STATS, which would otherwise answer 0), which
``translate_error`` turns into ``InvalidArgument`` naming the job and the group.

An acknowledged (or dead-lettered) entry is deleted from the stream, with its
bytes, at once, so the stream's length is exactly the number of unacknowledged
entries: those waiting for a trainer plus those delivered and pending. That is
what the capacity bounds.

Fan-out: with n > 1 groups registered, a put also records in the ``at`` hash
(field ``n:<id>``) how many groups are still to be done with the entry. GET
COPYs the bytes instead of RENAMEing them while that count is above 1 (the
other groups read them too), and records each group's copy under ``<id>@group``
(the default group's under ``<id>``, as before). A group's acknowledgement or
dead letter, or its removal (REMOVE_GROUP), deletes only its copy and lowers
the count; the last one deletes the entry and its bytes (``release`` in
``job_keys.lua``). The stream then holds every entry some live group still
needs, so the capacity follows the slowest group. An entry with no count (put
while at most one group was registered) is released by its first
acknowledgement, as before; so the one-group path costs one HGET in GET and in
ACK, and one HLEN in PUT, inside the same scripts.
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
