"""Shared-memory regions: naming rule, growth, reuse and retirement, the server's cache, the probe."""

from __future__ import annotations

import os
from types import SimpleNamespace

import numpy as np
import pytest

from saintpipe.core.errors import InvalidArgument
from saintpipe.services.feature_shard import shm
from saintpipe.services.feature_shard.half import copy_float16_rows


@pytest.mark.parametrize(
    "name",
    [
        "",
        "psm_1",
        "saintpipe-features-",
        "saintpipe-features-a/b",
        "../x",
        "saintpipe-features-" + "a" * 201,
        "saintpipe-features-ä",
    ],
)
def test_names_outside_the_prefix_are_refused(name):
    with pytest.raises(InvalidArgument, match="X.region .* is not a saintpipe shared-memory region"):
        shm.check_region_name(name, "X.region")


def test_region_grows_in_place_and_is_unlinked_on_close():
    region = shm.Region(1000)
    try:
        assert region.name.startswith(shm.region_prefix()) and region.path.exists()
        assert region.size == shm.HEADER_BYTES + 4096 and region.capacity == 4096
        assert os.stat(region.path).st_mode & 0o777 == 0o600
        region.write(0, b"abc")
        region.ensure(10_000)
        assert region.size == shm.HEADER_BYTES + 16384 and os.stat(region.path).st_size == region.size
        assert region.read(0, 3) == b"abc"  # same file, same name: a server re-maps it
        secret = region.read(shm.SECRET_AT, shm.SECRET_BYTES)
        assert secret == region.secret and len(set(secret)) > 1  # written at creation, kept on growth
        rows = region.rows(3, 4, np.dtype(np.float32))
        rows[...] = 1.5
        del rows
        assert region.read(shm.HEADER_BYTES, 4) == np.float32(1.5).tobytes()  # rows go after the header
        assert region.read(shm.SECRET_AT, shm.SECRET_BYTES) == secret
    finally:
        region.close()
    assert not region.path.exists() and region.closed
    region.close()  # idempotent


def test_pool_reuses_regions_and_retires_tainted_ones():
    pool = shm.RegionPool()
    a = pool.acquire(100)
    b = pool.acquire(100)  # a is leased: a second region
    assert a is not b and len(pool.names()) == 2
    pool.release(a)
    assert pool.acquire(50_000) is a and a.capacity == 65536  # reused, grown
    a.tainted = True
    pool.release(a)
    assert not a.path.exists() and pool.names() == [b.name]
    pool.close()
    assert not b.path.exists() and pool.names() == []
    with pytest.raises(InvalidArgument, match="closed"):
        pool.acquire(1)


def test_server_cache_follows_growth_and_drops_unlinked_regions(tmp_path):
    regions = shm.MappedRegions(max_regions=2, sweep_seconds=0.0)
    owned = [shm.Region(4096) for _ in range(3)]
    rows_at = shm.HEADER_BYTES

    def view(region, offset, nbytes):
        return regions.view(region.name, offset, nbytes, "T", region.secret)

    try:
        v = view(owned[0], rows_at + 8, 4)
        v[:] = b"wxyz"
        del v
        assert owned[0].read(rows_at + 8, 4) == b"wxyz"
        with pytest.raises(InvalidArgument, match="holds 8192 bytes: too small for 5000 bytes at T.offset 4096"):
            view(owned[0], rows_at, 5000)
        owned[0].ensure(8192)
        view(owned[0], rows_at, 5000)  # the grown file is mapped again
        view(owned[1], rows_at, 1)
        view(owned[2], rows_at, 1)
        assert len(regions) == 2  # bounded: the least recently used went
        owned[1].close()
        view(owned[2], rows_at, 1)  # the sweep notices region 1 was unlinked
        assert len(regions) == 1
        with pytest.raises(InvalidArgument, match=f"T.region '{owned[1].name}': cannot open"):
            view(owned[1], rows_at, 1)
    finally:
        regions.close()
        for region in owned:
            region.close()
    assert len(regions) == 0


def test_probe_round_trip_and_failures(tmp_path):
    seen = shm.MappedRegions()
    blind = shm.MappedRegions(tmp_path)  # another host's /dev/shm

    def ask_with(regions, forge: bool = False):
        def ask(name, length, secret):
            readable, token, detail = regions.probe(name, length, bytes(32) if forge else secret)
            return SimpleNamespace(readable=readable, token=token, detail=detail)

        return ask

    assert shm.probe(ask_with(seen)) == (True, "")
    ok, why = shm.probe(ask_with(blind))
    assert not ok and "cannot open" in why
    ok, why = shm.probe(ask_with(seen, forge=True))  # not the region's secret: not readable
    assert not ok and "SharedMemoryProbe.secret does not match region" in why
    liar = SimpleNamespace(readable=True, token=b"x" * shm.PROBE_TOKEN_BYTES, detail="")
    ok, why = shm.probe(lambda name, length, secret: liar)
    assert not ok and "same /dev/shm" in why
    with pytest.raises(InvalidArgument, match="length 65"):
        seen.probe(shm.PREFIX + "x", 65, b"")
    assert not [n for n in os.listdir(shm.SHM_DIR) if n.startswith(shm.region_prefix())]


def test_copy_float16_rows_matches_numpy():
    rng = np.random.default_rng(0)
    src = rng.standard_normal((50, 7)).astype(np.float16)
    src_rows = rng.integers(0, 50, 80)
    out_rows = rng.permutation(100)[:80]
    out = np.zeros((100, 7), np.float32)
    copy_float16_rows(src, src_rows, out, out_rows)
    expected = np.zeros_like(out)
    expected[out_rows] = src[src_rows].astype(np.float32)
    np.testing.assert_array_equal(out, expected)


def test_owner_is_dead_only_for_a_dead_pid_of_this_namespace():
    import subprocess

    gone = subprocess.Popen(["true"])
    gone.wait()
    assert shm.owner_is_dead(shm.region_prefix(gone.pid) + "ab12")
    assert not shm.owner_is_dead(shm.region_name())  # this process lives
    other_namespace = shm.region_prefix(gone.pid).replace(shm.PREFIX, shm.PREFIX + "1")
    assert not shm.owner_is_dead(other_namespace + "ab12")
    assert not shm.owner_is_dead(shm.PREFIX + "handmade") and not shm.owner_is_dead("psm_1")
