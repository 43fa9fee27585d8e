"""Resharding features: round trip, dtype change, and safety when it fails."""

from __future__ import annotations

import numpy as np
import pytest

from saintpipe.core.errors import DatasetError
from saintpipe.services.dataset import reshard
from saintpipe.services.dataset.reshard import reshard_dataset
from saintpipe.services.dataset.store import open_dataset
from saintpipe.services.dataset.verify import verify_dataset


@pytest.mark.parametrize("shards", [1, 3, 7])
def test_reshard_in_place_round_trip(tiny_dataset, tiny, shards):
    m = reshard_dataset(tiny_dataset, shards)
    assert m.num_shards == shards and m.shards[0][0] == 0 and m.shards[-1][1] == 40
    ds = open_dataset(tiny_dataset, verify=True)
    assert np.array_equal(ds.features(), tiny["features"])
    assert np.array_equal(ds.indices, tiny["indices"]) and np.array_equal(ds.labels, tiny["labels"])
    on_disk = sorted(p.name for p in (tiny_dataset / "features").iterdir())
    assert on_disk == [f"shard-{k:05d}.npy" for k in range(shards)]  # no stale shard files
    ids = np.array([39, 0, 17, 17, 5])
    assert np.array_equal(ds.gather_features(ids), tiny["features"][ids])


def test_reshard_into_out_with_float16(tmp_path, tiny_dataset, tiny):
    out = tmp_path / "half"
    reshard_dataset(tiny_dataset, 4, out=out, feature_dtype="float16")
    assert open_dataset(out, verify=True).features().dtype == np.float16
    assert open_dataset(tiny_dataset, verify=True).manifest.num_shards == 2  # source untouched
    with pytest.raises(DatasetError, match="already exists"):
        reshard_dataset(tiny_dataset, 3, out=out)
    reshard_dataset(tiny_dataset, 3, out=out, overwrite=True)
    assert open_dataset(out).manifest.num_shards == 3


def test_failed_reshard_keeps_the_old_dataset(tiny_dataset, tiny, monkeypatch):
    real = reshard._write_shard
    written = []

    def fail_on_second(dataset, dst, start, stop, dtype, bar):
        if written:
            raise OSError("disk full")
        written.append(dst)
        real(dataset, dst, start, stop, dtype, bar)

    monkeypatch.setattr(reshard, "_write_shard", fail_on_second)
    with pytest.raises(DatasetError, match=r"tiny: cannot write: disk full$"):
        reshard_dataset(tiny_dataset, 5)
    assert written  # it got midway
    m = verify_dataset(tiny_dataset)
    assert m.num_shards == 2
    assert np.array_equal(open_dataset(tiny_dataset).features(), tiny["features"])
    assert [p.name for p in tiny_dataset.parent.iterdir() if p.name.startswith(".")] == []


def test_reshard_refuses_a_corrupted_source_and_impossible_counts(tiny_dataset):
    with pytest.raises(DatasetError, match="cannot split 40 nodes into 41 shards"):
        reshard_dataset(tiny_dataset, 41)
    with pytest.raises(DatasetError, match="number of shards must be >= 1"):
        reshard_dataset(tiny_dataset, 0)
    shard = tiny_dataset / "features" / "shard-00000.npy"
    shard.write_bytes(shard.read_bytes()[:-4] + b"\0\0\0\0")
    with pytest.raises(DatasetError, match="checksum mismatch"):
        reshard_dataset(tiny_dataset, 3)
