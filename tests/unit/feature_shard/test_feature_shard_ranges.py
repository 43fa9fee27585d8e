"""Pure routing: shard boundaries, per-shard slices, request pieces, id checks, address lists."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from saintpipe.core.errors import ConfigError, InvalidArgument
from saintpipe.services.feature_shard import ranges
from saintpipe.services.feature_shard.addresses import parse_shard_addresses, resolve_shards, write_address_manifest


def test_shard_starts_accepts_contiguous_ranges():
    assert ranges.shard_starts([(0, 3), (3, 7), (7, 8)]).tolist() == [0, 3, 7, 8]


@pytest.mark.parametrize(
    "bad, message",
    [
        ([], "no shard ranges"),
        ([(1, 4)], "starts at node 1, expected 0"),
        ([(0, 3), (4, 6)], "gap"),
        ([(0, 3), (2, 6)], "overlap"),
        ([(0, 3), (3, 3)], "empty"),
    ],
)
def test_shard_starts_rejects_gaps_overlaps_and_empties(bad, message):
    with pytest.raises(InvalidArgument, match=message):
        ranges.shard_starts(bad)


@settings(max_examples=60, deadline=None)
@given(sizes=st.lists(st.integers(1, 50), min_size=1, max_size=6), data=st.data())
def test_split_sorted_routes_every_id_to_its_owner(sizes, data):
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    starts = ranges.shard_starts(list(zip(bounds[:-1], bounds[1:])))
    ids = np.unique(
        np.array(data.draw(st.lists(st.integers(0, int(bounds[-1]) - 1), max_size=80)), dtype=np.int64)
    )
    covered = []
    for k, lo, hi in ranges.split_sorted(ids, starts):
        assert hi > lo
        part = ids[lo:hi]
        assert (part >= starts[k]).all() and (part < starts[k + 1]).all()
        covered.extend(range(lo, hi))
    assert covered == list(range(ids.size))


def test_pieces_cover_in_order():
    assert ranges.pieces(3, 10, 3) == [(3, 6), (6, 9), (9, 10)]
    assert ranges.pieces(5, 5, 3) == []
    assert ranges.pieces(0, 2, 0) == [(0, 1), (1, 2)]


def test_check_ids_names_first_bad_id_and_position():
    assert ranges.check_ids(np.array([0, 9], dtype=np.int32), 10).dtype == np.int64
    with pytest.raises(InvalidArgument, match=r"node id 10 \(position 1\) is outside .* \[0, 10\)"):
        ranges.check_ids(np.array([3, 10, -1]), 10)
    with pytest.raises(InvalidArgument, match="integers"):
        ranges.check_ids(np.array([0.0]), 10)
    assert ranges.check_ids(np.array([]), 10).size == 0  # an empty float array is fine (np.array([]))


def test_first_occurrences():
    ids = np.array([5, 2, 5, 9, 2, 2])
    unique, first, inverse = ranges.first_occurrences(ids)
    assert unique.tolist() == [2, 5, 9] and first.tolist() == [1, 0, 3]
    assert (unique[inverse] == ids).all()


@pytest.mark.parametrize("size, high", [(0, 1), (1, 1), (8000, 50_000), (8000, 3000), (5000, 7)])
def test_first_occurrences_is_numpys_unique(size, high):
    ids = np.random.default_rng(size + high).integers(0, high, size)
    got = ranges.first_occurrences(ids)
    expected = np.unique(ids, return_index=True, return_inverse=True)
    for a, b in zip(got, expected):
        np.testing.assert_array_equal(a, b.reshape(-1))


def test_address_strings_and_manifests(tmp_path):
    assert parse_shard_addresses("a:1,b:2;c:3") == [["a:1", "b:2"], ["c:3"]]
    assert parse_shard_addresses(" a:1 ; [::1]:5 ;") == [["a:1"], ["[::1]:5"]]
    for bad, message in [
        ("a:1;;b:2", "shard 1 has no address"),
        ("a:1,b", "'b' is not a host:port"),
        ("a:0", "not a host:port"),
        ("", "shard 0 has no address"),
    ]:
        with pytest.raises(ConfigError, match=message):
            parse_shard_addresses(bad)
    path = write_address_manifest(tmp_path / "shards.json", [["h:1", "h:2"], ["h:3"]])
    assert json.loads(path.read_text()) == {"shards": [["h:1", "h:2"], ["h:3"]]}
    assert resolve_shards(path) == resolve_shards(str(path)) == [["h:1", "h:2"], ["h:3"]]
    assert resolve_shards([["h:1"], "h:2"]) == [["h:1"], ["h:2"]]
    (tmp_path / "bad.json").write_text('{"shard": []}')
    with pytest.raises(ConfigError, match='bad.json: expected an object with a "shards" field'):
        resolve_shards(tmp_path / "bad.json")
