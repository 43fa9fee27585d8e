"""Region names state the client process that made them; a client that starts removes dead clients' regions."""

from __future__ import annotations

import subprocess

import pytest
from saintpipe.services.feature_shard import shm

from saintpipe.core import shm_owners
from saintpipe.core.shm_owners import Owner


def dead_owner() -> Owner:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return Owner(shm_owners.pid_namespace(), proc.pid, 4242)


def test_a_region_name_states_this_process_with_its_start_time(tmp_path):
    name = shm.region_name()
    assert name.startswith(shm.region_prefix()) and shm.check_region_name(name, "X.region") == name
    assert shm.owner_of(name) == shm_owners.current() and shm.owner_of(name).start is not None
    region = shm.Region(4096, tmp_path)
    assert shm.owner_of(region.name) == shm_owners.current()
    region.close()


@pytest.mark.parametrize(
    "name, owner",
    [
        ("saintpipe-features-11-22-33-0123456789abcdef", Owner(11, 22, 33)),
        ("saintpipe-features-11-22-0123456789abcdef", Owner(11, 22, None)),  # an older saintpipe's: no start
        ("saintpipe-features-11-22-0-0123456789abcdef", Owner(11, 22, None)),  # start time unknown
        ("saintpipe-features-handmade", None),
        ("saintpipe-features-11-22", None),
        ("saintpipe-features-11-22-33-XYZ", None),
        ("psm_1234", None),
    ],
)
def test_owner_of_reads_new_and_older_names(name, owner):
    assert shm.owner_of(name) == owner


def test_a_reused_pid_does_not_keep_a_dead_clients_region():
    me = shm_owners.current()
    assert shm.owner_is_dead(f"{shm.PREFIX}{Owner(me.namespace, me.pid, me.start + 1).tag}-ab12")
    assert not shm.owner_is_dead(f"{shm.region_prefix()}ab12")  # no start time: the live pid decides


def test_a_starting_client_removes_only_dead_clients_regions(tmp_path):
    gone = dead_owner()
    dead = tmp_path / f"{shm.PREFIX}{gone.tag}-0123456789abcdef"
    older = tmp_path / f"{shm.region_prefix(gone.pid)}0123456789abcdef"  # an older saintpipe's name
    live = tmp_path / shm.region_name()
    elsewhere = tmp_path / f"{shm.PREFIX}{Owner(gone.namespace + 1, gone.pid, 1).tag}-0123456789abcdef"
    handmade = tmp_path / f"{shm.PREFIX}handmade"
    slot = tmp_path / "saintpipe-pool-namespace"
    for path in (dead, older, live, elsewhere, handmade, slot):
        path.write_bytes(b"x" * 8192)
    pool = shm.RegionPool(tmp_path)
    assert not dead.exists() and not older.exists()
    assert live.exists() and elsewhere.exists() and handmade.exists() and slot.exists()
    pool.close()
