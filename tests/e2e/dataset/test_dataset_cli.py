"""The data commands and bench generate through the real saintpipe console script."""

from __future__ import annotations

import json

import numpy as np


def test_import_verify_info_shard(cli, tmp_path, real_datasets):
    out = tmp_path / "cora"
    r = cli("data", "import", "npz", str(real_datasets / "cora.npz"), "--out", str(out), "--shards", "3")
    assert "2,708 nodes" in r.stdout and "3 feature shard(s)" in r.stdout
    assert "OK (2,708 nodes, 10,556 directed edges, 3 shard(s), 9 checksums match)" in cli("data", "verify", str(out)).stdout
    info = cli("data", "info", str(out)).stdout
    assert "140 / 500 / 1000" in info and "classes" in info
    r = cli("data", "shard", str(out), "--shards", "2", "--feature-dtype", "float16")
    assert "2 feature shard(s) [0, 1354), [1354, 2708)" in r.stdout
    assert "float16" in cli("data", "info", str(out)).stdout
    cli("data", "verify", str(out))


def test_bad_input_is_one_clear_line_and_writes_nothing(cli, tmp_path, real_datasets):
    src = dict(np.load(real_datasets / "cora.npz"))
    src["features"][11, 4] = np.nan
    np.savez(tmp_path / "nan.npz", **src)
    r = cli("data", "import", "npz", str(tmp_path / "nan.npz"), "--out", str(tmp_path / "ds"), check=False)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip() == f"saintpipe: error: {tmp_path / 'nan.npz'}[features]: feature of node 11, column 4 is nan (NaN or infinite)"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["nan.npz"]


def test_generate_kronecker_and_demo_need_force_to_replace(cli, tmp_path):
    out = tmp_path / "k"
    r = cli("data", "generate", "kronecker", "--scale", "10", "--degree", "8", "--out", str(out), "--shards", "2")
    assert "1,024 nodes, 8,192 directed edges, 2 feature shard(s)" in r.stdout
    r = cli("data", "generate", "demo", "--nodes", "3000", "--out", str(out), check=False)
    assert r.returncode == 2 and "already exists; choose another --out or pass --force" in r.stderr
    r = cli("data", "generate", "demo", "--nodes", "3000", "--out", str(out), "--force")
    assert "3,000 nodes" in r.stdout
    assert "demo" in cli("data", "info", str(out)).stdout


def test_import_edgelist_and_arrays(cli, tmp_path):
    (tmp_path / "g.tsv").write_text("from\tto\nx\ty\ny\tz\nz\tw\n")
    (tmp_path / "labels.csv").write_text("id,label\nx,0\ny,1\nz,0\nw,1\n")
    out = tmp_path / "el"
    cli("data", "import", "edgelist", str(tmp_path / "g.tsv"), "--labels", str(tmp_path / "labels.csv"),
        "--string-ids", "--out", str(out), "--name", "tiny-tsv")
    assert np.load(out / "node_ids.npy").tolist() == ["w", "x", "y", "z"]
    assert "OK (4 nodes, 6 directed edges" in cli("data", "verify", str(out)).stdout
    assert "tiny-tsv" in cli("data", "info", str(out)).stdout
    arrays = tmp_path / "arrays"
    arrays.mkdir()
    for name in ("indptr", "indices", "labels"):
        np.save(arrays / f"{name}.npy", np.load(out / f"{name}.npy"))
    np.save(arrays / "features.npy", np.load(out / "features" / "shard-00000.npy"))
    np.save(arrays / "split.npy", np.array([0, 0, 1, 2]))
    r = cli("data", "import", "arrays", str(arrays), "--out", str(tmp_path / "ar"))
    assert "4 nodes, 6 directed edges" in r.stdout
    (arrays / "indices.npy").write_bytes((arrays / "indices.npy").read_bytes()[:-8])
    r = cli("data", "import", "arrays", str(arrays), "--out", str(tmp_path / "ar2"), check=False)
    assert r.returncode == 2 and "indices.npy: truncated: its header declares a 6 int32 array" in r.stderr


def test_verify_reports_a_corrupted_dataset(cli, tmp_path):
    out = tmp_path / "k"
    cli("data", "generate", "kronecker", "--scale", "8", "--degree", "4", "--out", str(out))
    labels = out / "labels.npy"
    labels.write_bytes(labels.read_bytes()[:-1] + b"\x07")
    r = cli("data", "verify", str(out), check=False)
    assert r.returncode == 2 and "labels.npy: checksum mismatch" in r.stderr


def test_bench_generate_json(cli):
    r = cli("bench", "generate", "--scale", "10", "--degree", "8", "--json")
    report = json.loads(r.stdout)
    row = report["rows"][0]
    assert report["benchmark"] == "generate" and report["params"]["scale"] == 10
    assert row["nodes"] == 1024 and row["edges_directed"] == 8192 and row["mean_degree"] == 8.0
    assert row["peak_traced_mb"] > row["csr_mb"] > 0 and row["seconds"] > 0
    table = cli("bench", "generate", "--scale", "8", "--degree", "4").stdout
    assert "peak / CSR" in table and "seconds" in table


def test_help_describes_every_data_command(cli):
    for args in (["data", "import", "edgelist"], ["data", "generate", "kronecker"], ["data", "shard"]):
        r = cli(*args, "--help")
        assert r.returncode == 0 and "usage: saintpipe" in r.stdout


def test_import_of_an_integer_edge_list_streams_and_leaves_no_scratch(cli, tmp_path):
    rng = np.random.default_rng(2)
    pairs = rng.integers(0, 400, (3000, 2)) * 3  # ids with gaps
    np.savetxt(tmp_path / "g.txt", pairs, fmt="%d", header="a SNAP-style comment")
    out = tmp_path / "data" / "g"
    r = cli("-v", "data", "import", "edgelist", str(tmp_path / "g.txt"), "--out", str(out))
    assert "3000 lines read" in r.stderr  # the streamed build ran
    ids = np.unique(pairs)
    assert np.load(out / "node_ids.npy").tolist() == ids.tolist()
    indptr, indices = np.load(out / "indptr.npy"), np.load(out / "indices.npy")
    rows = np.repeat(np.arange(ids.size), np.diff(indptr))
    got = {(int(ids[a]), int(ids[b])) for a, b in zip(rows, indices)}
    want = {(int(u), int(v)) for u, v in pairs if u != v} | {(int(v), int(u)) for u, v in pairs if u != v}
    assert got == want
    assert "OK" in cli("data", "verify", str(out)).stdout
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == ["g"]  # the scratch directory is gone


def test_bench_import_json(cli, tmp_path):
    report = json.loads(cli("bench", "import", "--scale", "10", "--workdir", str(tmp_path), "--json").stdout)
    row = report["rows"][0]
    assert report["benchmark"] == "import" and row["lines"] == row["edges_directed"] > 1024
    assert 0 < row["read_s"] <= row["import_s"] and row["reader_s"] > 0
    assert row["read_ratio"] == row["reader_s"] / row["read_s"]
    assert row["peak_rss_gb"] >= row["base_rss_gb"] > 0 and row["dataset_gb"] > 0
    assert set(report["summary"]) == {"read rate / pyarrow.csv alone", "whole import rate / pyarrow.csv alone",
                                      "peak / dataset bytes"}
