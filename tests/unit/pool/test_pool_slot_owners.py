"""Slot names state the producer process that wrote them; a producer that starts removes dead producers' slots."""

from __future__ import annotations

import subprocess

import pytest
from saintpipe.services.pool import shared_memory
from saintpipe.services.pool.shared_memory import SlotReference, SlotWriter
from saintpipe.services.pool.slots import ProducerSlots

from saintpipe.core import shm_owners
from saintpipe.core.errors import DecodeError
from saintpipe.core.shm_owners import Owner

URL = "redis://127.0.0.1:6379/0"


def dead_owner() -> Owner:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return Owner(shm_owners.pid_namespace(), proc.pid, 4242)


def slot_name(job: str, owner: Owner, n: int = 0, url: str = URL) -> str:
    return f"{shared_memory.job_slots(url, job)}+{owner.tag}-0badcafe-{n}"


def write_one(writer: SlotWriter) -> bytes:
    def encode_into(allocate):
        allocate(3)[:3] = list(b"abc")
        return 3

    _, reference = writer.write(encode_into)
    return reference


def test_a_writers_slots_name_this_process_and_their_job(tmp_path):
    writer = SlotWriter(URL, "cora.gcn:1", directory=tmp_path)
    ref = SlotReference.parse(write_one(writer))
    assert ref.name.startswith(shared_memory.job_slots(URL, "cora.gcn:1") + "+")
    assert shm_owners.POOL_SLOTS.owner_of(ref.name) == shm_owners.current()
    assert not shm_owners.POOL_SLOTS.owner_is_dead(ref.name)
    assert shared_memory.read(SlotReference(writer.namespace, ref.name, 3).encode(), tmp_path) == b"abc"
    other = SlotWriter(URL, "cora.gcn:1", directory=tmp_path)  # two writers of one process never collide
    assert SlotReference.parse(write_one(other)).name != ref.name
    writer.close()
    other.close()


def test_a_reference_to_an_owned_slot_round_trips():
    ref = SlotReference("ab" * 16, slot_name("cora.gcn:1", Owner(4026531836, 4242, 123456), 7), 1234)
    assert SlotReference.parse(ref.encode()) == ref


@pytest.mark.parametrize(
    "name",
    [
        "saintpipe-pool-0123abcd-j+0123456789abcdef-1",  # an older saintpipe's: no owner
        "saintpipe-pool-0123abcd-j+1-2-3-0badcafe",  # no slot number
        "saintpipe-pool-0123abcd-j+1-2-0badcafe-1",  # no start time
        "saintpipe-pool-0123abcd-j+1-2-3-0BADCAFE-1",  # upper-case writer
        "saintpipe-pool-0123abcd-j+1-2-3-0badcafe-1/../x",
        "saintpipe-pool-0123abcd-j+1-2-3-0badcafe-1\n",
        "saintpipe-pool-0123abcd-j+1-123456789012-3-0badcafe-1",  # pid of 12 digits
        "saintpipe-pool-namespace",
        "saintpipe-features-1-2-3-0123456789abcdef",
    ],
)
def test_names_that_no_producer_writes_are_refused(name):
    with pytest.raises(DecodeError, match="not a pool slot"):
        SlotReference.parse(shared_memory.MAGIC + f"ns {name} 5".encode())
    assert shm_owners.POOL_SLOTS.owner_of(name) is None and not shm_owners.POOL_SLOTS.owner_is_dead(name)


def test_owner_is_dead_only_for_a_dead_producer_of_this_namespace():
    gone = dead_owner()
    assert shm_owners.POOL_SLOTS.owner_is_dead(slot_name("j", gone))
    assert not shm_owners.POOL_SLOTS.owner_is_dead(slot_name("j", shm_owners.current()))
    elsewhere = Owner(gone.namespace + 1, gone.pid, gone.start)
    assert not shm_owners.POOL_SLOTS.owner_is_dead(slot_name("j", elsewhere))
    me = shm_owners.current()
    assert shm_owners.POOL_SLOTS.owner_is_dead(slot_name("j", Owner(me.namespace, me.pid, me.start + 1)))  # pid reused


def test_sweep_still_removes_exactly_one_jobs_owned_slots(tmp_path):
    mine = [tmp_path / slot_name("j", dead_owner(), n) for n in range(2)]
    others = [tmp_path / slot_name("j2", dead_owner()), tmp_path / slot_name("j", dead_owner(), url=URL + "1")]
    for path in mine + others:
        path.write_bytes(b"x")
    assert shared_memory.sweep(URL, "j", tmp_path) == 2
    assert all(p.exists() for p in others)


class FakeLink:
    """Answers XLEN with the entries of each job's stream (0 unless told), or fails like an unreachable Redis."""

    def __init__(self, entries: dict[str, int] | None) -> None:
        self.entries, self.asked = entries, []

    def run(self, commands, what):
        (command,) = commands
        stream = command[0].split(b"\r\n")[-2].decode()
        self.asked.append(stream)
        if self.entries is None:
            raise ConnectionError("redis is away")
        return [self.entries.get(stream, 0)]


def stream(job: str) -> str:
    return f"saintpipe:pool:{{{job}}}:stream"


def start_producer(entries: dict[str, int] | None, job: str = "mine") -> FakeLink:
    link = FakeLink(entries)
    slots = ProducerSlots(URL, job, stream(job), link)
    slots._current()  # what its first put does
    slots.close()
    return link


@pytest.fixture
def leftovers(shm_dir):
    """Slots of dead producers (of this job, of other jobs, of a job with a live producer) and live ones."""
    gone, me = dead_owner(), shm_owners.current()
    files = {
        "own": slot_name("mine", gone),
        "own 2": slot_name("mine", gone, 1),
        "other job": slot_name("theirs", gone),
        "other server": slot_name("theirs", gone, url="unix:///run/other.sock"),
        "busy job, dead": slot_name("busy", gone),
        "busy job, live": slot_name("busy", me),  # another producer of that job runs: the job runs
        "live": slot_name("other", me, 5),
        "elsewhere": slot_name("far", Owner(gone.namespace + 1, gone.pid, gone.start)),
        "older saintpipe": f"{shared_memory.job_slots(URL, 'old')}+0123456789abcdef-3",
    }
    shared_memory.namespace_id(shm_dir)
    for name in files.values():
        (shm_dir / name).write_bytes(b"x" * 4096)
    return files


def left(shm_dir, files) -> set[str]:
    return {key for key, name in files.items() if (shm_dir / name).exists()}


ALWAYS = {"busy job, dead", "busy job, live", "live", "elsewhere", "older saintpipe"}


def test_a_starting_producer_removes_dead_producers_slots_where_no_entry_can_name_them(shm_dir, leftovers):
    link = start_producer(entries={})
    assert sorted(link.asked) == [stream("mine"), stream("theirs")]  # once per job of this server
    assert left(shm_dir, leftovers) == ALWAYS
    assert (shm_dir / "saintpipe-pool-namespace").exists()


@pytest.mark.parametrize("job, stay", [("mine", {"own", "own 2"}), ("theirs", {"other job"})])
def test_dead_slots_of_a_job_whose_stream_holds_entries_stay(shm_dir, leftovers, job, stay):
    start_producer(entries={stream(job): 3})  # "mine": its own job's entries (a restarted worker's predecessor)
    assert left(shm_dir, leftovers) == ALWAYS | stay


def test_without_an_answer_from_redis_this_servers_slots_stay(shm_dir, leftovers):
    link = start_producer(entries=None)
    assert len(link.asked) == 1  # not asked again after a failure
    assert left(shm_dir, leftovers) == ALWAYS | {"own", "own 2", "other job"}


def test_its_own_jobs_dead_slots_stay_while_another_producer_of_the_job_runs(shm_dir, leftovers):
    (shm_dir / slot_name("mine", shm_owners.current(), 9)).write_bytes(b"x")  # a sibling worker's slot
    link = start_producer(entries={})
    assert link.asked == [stream("theirs")] and {"own", "own 2"} <= left(shm_dir, leftovers)


def test_a_slot_removed_while_a_consumer_reads_it_still_reads_whole_and_one_removed_before_is_none(
        tmp_path, monkeypatch):
    writer = SlotWriter(URL, "j", directory=tmp_path)
    reference = write_one(writer)
    path = tmp_path / SlotReference.parse(reference).name
    real_preadv = shared_memory.os.preadv

    def removed_first(fd, buffers, offset):
        path.unlink()  # remove_leftovers between the consumer's open and its read
        return real_preadv(fd, buffers, offset)

    monkeypatch.setattr(shared_memory.os, "preadv", removed_first)
    assert shared_memory.read(reference, tmp_path) == b"abc"
    assert shared_memory.read(reference, tmp_path) is None  # gone before the open
    writer.close()
