"""Hostile or odd dataset inputs (issue 19, findings 4, 5 and 7): clear errors, never a traceback or a huge allocation.

Sizes are checked against the available memory before allocating (generators
and .npy/.npz headers), a directory or random bytes get an error saying what
they are, big-endian numbers are converted, and absurd labels are refused at
import and by ``data verify``.
"""

from __future__ import annotations

import json
import logging
import tracemalloc
import zipfile
from pathlib import Path

import numpy as np
import pytest
from numpy.lib import format as npy_format

from saintpipe.cli import build_parser, main
from saintpipe.core import memory
from saintpipe.core.errors import DatasetError, InvalidArgument
from saintpipe.services.dataset import checks
from saintpipe.services.dataset.demo import generate_demo
from saintpipe.services.dataset.importers.arrays import find_array_files, import_arrays
from saintpipe.services.dataset.importers.edgelist import import_edgelist
from saintpipe.services.dataset.importers.npz import import_npz
from saintpipe.services.dataset.kronecker import generate_kronecker
from saintpipe.services.dataset.store import write_dataset
from saintpipe.services.dataset.verify import verify_dataset

GIB = 1 << 30
BIG_LABEL = 2**40
# Peak numpy memory (traced) allowed for a refusal: a refusal must come before any real allocation.
REFUSAL_BYTES = 1 << 20


@pytest.fixture
def available(monkeypatch):
    """Make ``available_memory`` report 21.3 GiB, so messages and refusals do not depend on this machine."""
    monkeypatch.setattr(memory, "available_memory", lambda: int(21.3 * GIB))


def traced_peak(call) -> tuple[BaseException, int]:
    """Run ``call`` (which must raise); return the exception and the peak traced allocation."""
    tracemalloc.start()
    try:
        call()
    except Exception as exc:  # noqa: BLE001 - the caller checks the type
        raised = exc
    else:
        raise AssertionError("expected an error")
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return raised, peak


def dump_arrays(directory: Path, arrays: dict, **dtypes: str) -> Path:
    """One .npy per role (splits as train/val/test ids), each role's dtype overridable: ``features=">f4"``."""
    directory.mkdir(parents=True, exist_ok=True)
    flat = {"indptr": arrays["indptr"], "indices": arrays["indices"], "features": arrays["features"],
            "labels": arrays["labels"], **arrays["splits"]}
    for role, array in flat.items():
        np.save(directory / f"{role}.npy", array.astype(dtypes.get(role, array.dtype)))
    return directory


def npz_with_header(path: Path, member: str, header: dict | bytes, data: bytes = b"", **members) -> Path:
    """An npz whose ``member`` holds only a hand-written .npy header (and ``data``), plus real ``members``."""
    with zipfile.ZipFile(path, "w") as archive:
        for key, array in members.items():
            with archive.open(f"{key}.npy", "w") as fh:
                npy_format.write_array(fh, array, allow_pickle=False)
        with archive.open(f"{member}.npy", "w") as fh:
            if isinstance(header, bytes):
                fh.write(header)
            else:
                npy_format.write_array_header_1_0(fh, header)
            fh.write(data)
    return path


# --- generators: arguments and memory (finding 4) ---


@pytest.mark.parametrize("call, message", [
    (lambda: generate_demo(num_nodes=-5), "--nodes must be at least 1, got -5"),
    (lambda: generate_demo(num_nodes=100, seed=-1), "--seed must be at least 0, got -1"),
    (lambda: generate_demo(num_nodes=100, seed=2**63), "--seed must be at most 9,223,372,036,854,775,807"),
    (lambda: generate_demo(num_nodes=2.5), "--nodes must be an integer, got 2.5"),
    (lambda: generate_demo(num_nodes=100, mean_degree=float("nan")), "mean_degree must be a finite number"),
    (lambda: generate_demo(num_nodes=100, homophily=1.5), "homophily must be at most 1, got 1.5"),
    (lambda: generate_kronecker(8, 4, seed=-1), "--seed must be at least 0, got -1"),
    (lambda: generate_kronecker(31, 4), "--scale must be at most 30, got 31"),
    (lambda: generate_kronecker(4, 4, num_classes=17), "--classes must be at most 16, got 17"),
    (lambda: generate_kronecker(8, float("inf")), "--degree must be a finite number"),
])
def test_generator_arguments_are_refused_naming_the_flag(call, message):
    with pytest.raises(InvalidArgument) as err:
        call()
    assert message in str(err.value)


def test_demo_of_1e11_nodes_is_refused_for_memory_before_allocating(available):
    err, peak = traced_peak(lambda: generate_demo(num_nodes=10**11))
    assert isinstance(err, InvalidArgument)
    assert str(err).startswith("demo dataset of 100,000,000,000 nodes needs about ")
    assert str(err).endswith(" TiB of memory; 21.3 GiB is available (use fewer --nodes)")
    assert peak < REFUSAL_BYTES


def test_kronecker_of_huge_scale_is_refused_for_memory_before_allocating(available):
    err, peak = traced_peak(lambda: generate_kronecker(30, 16))
    assert isinstance(err, InvalidArgument)
    assert str(err).startswith("kronecker graph of 2^30 nodes (mean degree 16, 50 features) needs about ")
    assert "GiB of memory; 21.3 GiB is available (use a smaller --scale, --degree or --feature-dim)" in str(err)
    assert peak < REFUSAL_BYTES


def test_generators_that_fit_still_generate(available):
    assert generate_demo(num_nodes=1, seed=0)["indptr"].tolist() == [0, 0]
    assert generate_kronecker(6, 4, seed=2**63 - 1)["indptr"].size == 65


# --- npz headers, random bytes, directories (findings 4 and 5) ---


def test_npz_header_declaring_petabytes_is_refused_before_allocating(tmp_path, available, tiny):
    path = npz_with_header(tmp_path / "x.npz", "features",
                           {"descr": "<f4", "fortran_order": False, "shape": (10**10, 10**7)},
                           indptr=tiny["indptr"], indices=tiny["indices"])
    err, peak = traced_peak(lambda: import_npz(path))
    assert isinstance(err, DatasetError)
    assert str(err) == (f"{path}[features]: a 10000000000 x 10000000 float32 array (as its header declares) "
                        "needs about 355.3 PiB of memory; 21.3 GiB is available")
    assert peak < REFUSAL_BYTES


def test_npz_member_shorter_than_its_header_is_truncated(tmp_path):
    path = npz_with_header(tmp_path / "x.npz", "labels", {"descr": "<i8", "fortran_order": False, "shape": (100,)},
                           data=b"\0" * 80)
    with pytest.raises(DatasetError, match=r"x.npz\[labels\]: truncated: its header declares a 100 int64 array "
                                           r"\(800 bytes\) but only 80 bytes of data follow"):
        import_npz(path)


def test_npz_member_with_a_malformed_header_is_named(tmp_path):
    bad = npy_format.magic(1, 0) + (14).to_bytes(2, "little") + b"{'shape': (1,"
    with pytest.raises(DatasetError, match=r"x.npz\[labels\]: malformed .npy header"):
        import_npz(npz_with_header(tmp_path / "x.npz", "labels", bad + b" " * 20))
    with zipfile.ZipFile(tmp_path / "y.npz", "w") as archive:
        archive.writestr("notes.txt", "hello")
    with pytest.raises(DatasetError, match=r"y.npz\[notes.txt\]: not a .npy array"):
        import_npz(tmp_path / "y.npz")


def test_random_bytes_are_not_an_npz_and_not_called_pickled(tmp_path):
    path = tmp_path / "x.npz"
    path.write_bytes(np.random.default_rng(0).bytes(4096))
    with pytest.raises(DatasetError) as err:
        import_npz(path)
    assert str(err.value) == f"{path}: not an .npz file (not a zip archive)"


def test_a_directory_given_as_an_input_file_is_called_a_directory(tmp_path, tiny):
    (tmp_path / "in.npz").mkdir()
    with pytest.raises(DatasetError) as err:
        import_npz(tmp_path / "in.npz")
    assert str(err.value) == f"{tmp_path / 'in.npz'}: is a directory, expected a .npz file"

    src = dump_arrays(tmp_path / "arrays", tiny)
    (tmp_path / "labels_dir.npy").mkdir()
    with pytest.raises(DatasetError, match=r"labels_dir.npy: is a directory, expected a .npy file$"):
        import_arrays({**find_array_files(src), "labels": tmp_path / "labels_dir.npy"}, name="t")

    (tmp_path / "edges.csv").mkdir()
    with pytest.raises(DatasetError, match=r"edges.csv: is a directory, expected a text table \(CSV/TSV\)$"):
        import_edgelist(tmp_path / "edges.csv")
    edges = tmp_path / "e.csv"
    edges.write_text("0,1\n1,2\n")
    with pytest.raises(DatasetError, match=r"labels_dir.npy: is a directory, expected a .npy file$"):
        import_edgelist(edges, labels=tmp_path / "labels_dir.npy")
    (tmp_path / "feats").mkdir()
    with pytest.raises(DatasetError, match=r"feats: is a directory, expected a text table"):
        import_edgelist(edges, features=tmp_path / "feats")


def test_npy_header_declaring_petabytes_is_refused_in_arrays_and_side_files(tmp_path, available, tiny):
    src = dump_arrays(tmp_path / "arrays", tiny)
    huge = tmp_path / "huge.npy"
    with open(huge, "wb") as fh:
        npy_format.write_array_header_1_0(fh, {"descr": "<f4", "fortran_order": False, "shape": (10**10, 10**7)})
    message = r"huge.npy: a 10000000000 x 10000000 float32 array \(as its header declares\) needs about 355.3 PiB"
    with pytest.raises(DatasetError, match=message):
        import_arrays({**find_array_files(src), "features": huge}, name="t")
    edges = tmp_path / "e.csv"
    edges.write_text("0,1\n1,2\n")
    err, peak = traced_peak(lambda: import_edgelist(edges, features=huge))
    assert isinstance(err, DatasetError) and "355.3 PiB of memory; 21.3 GiB is available" in str(err)
    assert peak < REFUSAL_BYTES


# --- byte order (finding 5) ---


def test_big_endian_arrays_import_equal_to_native(tmp_path, tiny, caplog):
    native = import_arrays(find_array_files(dump_arrays(tmp_path / "le", tiny)), name="t")
    src = dump_arrays(tmp_path / "be", tiny, features=">f4", labels=">i8", indptr=">i8", indices=">i4",
                      train=">i8", val=">i4", test=">u2")
    with caplog.at_level(logging.INFO, logger="saintpipe.services.dataset.importers.coerce"):
        swapped = import_arrays(find_array_files(src), name="t")
    for role in ("indptr", "indices", "features", "labels"):
        assert swapped[role].dtype == native[role].dtype and swapped[role].dtype.isnative
        assert np.array_equal(swapped[role], native[role])
    for split in ("train", "val", "test"):
        assert np.array_equal(swapped["splits"][split], native["splits"][split])
    assert "features.npy: converted >f4 data to the native byte order (<f4)" in caplog.text


def test_big_endian_npz_and_side_files_import(tmp_path, tiny):
    masks = {f"{s}_mask": np.isin(np.arange(40), tiny["splits"][s]) for s in ("train", "val", "test")}
    np.savez(tmp_path / "be.npz", indptr=tiny["indptr"].astype(">i8"), indices=tiny["indices"].astype(">i4"),
             features=tiny["features"].astype(">f8"), labels=tiny["labels"].astype(">i4"), **masks)
    data = import_npz(tmp_path / "be.npz")
    assert data["features"].dtype == np.float64 and np.allclose(data["features"], tiny["features"])
    assert np.array_equal(data["labels"], tiny["labels"])

    edges = tmp_path / "e.csv"
    edges.write_text("0,1\n1,2\n")
    np.save(tmp_path / "x.npy", np.arange(6, dtype=">f4").reshape(3, 2))
    np.save(tmp_path / "y.npy", np.array([0, 1, 1], dtype=">i8"))
    data = import_edgelist(edges, features=tmp_path / "x.npy", labels=tmp_path / "y.npy")
    assert data["features"].dtype.isnative and data["features"].tolist() == [[0, 1], [2, 3], [4, 5]]
    assert data["labels"].tolist() == [0, 1, 1]


# --- absurd labels (finding 7) ---


def test_label_2_pow_40_is_refused_naming_node_and_bound(tmp_path, tiny):
    labels = tiny["labels"].copy()
    labels[3] = BIG_LABEL
    src = dump_arrays(tmp_path / "arrays", {**tiny, "labels": labels})
    with pytest.raises(DatasetError) as err:
        import_arrays(find_array_files(src), name="t")
    assert str(err.value) == (f"{src / 'labels.npy'}: label 1,099,511,627,776 at node 3 implies "
                              "1,099,511,627,777 classes; at most 100,000 are allowed (--max-classes)")
    # A raised bound still refuses a class count that the labels in use cannot justify.
    with pytest.raises(DatasetError, match=r"implies 1,099,511,627,777 classes but only 4 distinct labels occur"):
        import_arrays(find_array_files(src), name="t", max_classes=2**41)
    with pytest.raises(DatasetError, match=r"labels: label 1,099,511,627,776 at node 3 implies"):
        write_dataset(tmp_path / "out", **{**tiny, "labels": labels})


def test_label_bound_is_configurable_and_real_datasets_pass(tmp_path, tiny, real_datasets):
    src = dump_arrays(tmp_path / "arrays", tiny)
    with pytest.raises(DatasetError, match=r"label 2 at node \d+ implies 3 classes; at most 2 are allowed"):
        import_arrays(find_array_files(src), name="t", max_classes=2)
    assert import_arrays(find_array_files(src), name="t", max_classes=3)["labels"].max() == 2
    for name, classes in (("cora", 7), ("citeseer", 6)):
        data = import_npz(real_datasets / f"{name}.npz")
        assert checks.check_labels(data["labels"], data["labels"].size) == (classes, False)
    # Sparse but real numberings pass: 3 labels in use, up to 1,003 classes.
    sparse = np.array([0, 5, 1002, -1], dtype=np.int64)
    assert checks.check_labels(sparse, 4) == (1003, False)
    with pytest.raises(DatasetError, match=r"label of node 0 is -2 \(class ids are >= 0, -1 = unlabelled\)"):
        checks.check_labels(np.array([-2, 0], dtype=np.int64), 2)
    with pytest.raises(DatasetError, match=r"multi-label matrix has 3 columns \(classes\); at most 2 are allowed"):
        checks.check_labels(np.zeros((4, 3), dtype=np.uint8), 4, max_classes=2)


def test_edgelist_labels_table_with_2_pow_40_and_negative_seed(tmp_path):
    edges = tmp_path / "e.csv"
    edges.write_text("a,b\nb,c\n")
    labels = tmp_path / "labels.csv"
    labels.write_text(f"a,0\nb,{BIG_LABEL}\nc,1\n")
    with pytest.raises(DatasetError, match=r"labels.csv: label 1,099,511,627,776 at node 1 implies "
                                           r"1,099,511,627,777 classes; at most 100,000 are allowed"):
        import_edgelist(edges, labels=labels, string_ids=True)
    with pytest.raises(InvalidArgument, match="--seed must be at least 0, got -1"):
        import_edgelist(edges, seed=-1)


def _tamper_manifest(directory: Path, **fields) -> None:
    path = directory / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest.update(fields)
    path.write_text(json.dumps(manifest))


def test_verify_flags_a_stored_dataset_with_absurd_labels(tiny_dataset, rewrite_file):
    # As the issue found it: labels and manifest consistent (checksums too), 2**40 + 1 classes.
    labels = np.load(tiny_dataset / "labels.npy")
    labels[3] = BIG_LABEL
    rewrite_file(tiny_dataset, "labels.npy", array=labels)
    _tamper_manifest(tiny_dataset, num_classes=BIG_LABEL + 1)
    with pytest.raises(DatasetError, match=r"manifest.json: num_classes is 1,099,511,627,777 for 40 nodes; "
                                           r"single-label datasets of that size have at most 1,040 classes"):
        verify_dataset(tiny_dataset)
    # The manifest back in bounds: the labels themselves are refused.
    _tamper_manifest(tiny_dataset, num_classes=3)
    with pytest.raises(DatasetError, match=r"labels.npy: label 1,099,511,627,776 at node 3 implies "
                                           r"1,099,511,627,777 classes; at most 100,000 are allowed"):
        verify_dataset(tiny_dataset)


def test_verify_flags_a_manifest_class_count_the_labels_cannot_justify(tiny_dataset):
    _tamper_manifest(tiny_dataset, num_classes=1020)  # plausible for 40 nodes, not for 3 labels in use
    with pytest.raises(DatasetError, match=r"manifest.json: num_classes is 1,020 but labels.npy holds only 3 "
                                           r"distinct labels \(at most 1,003 classes are accepted for them\)"):
        verify_dataset(tiny_dataset)
    _tamper_manifest(tiny_dataset, num_classes=3)
    assert verify_dataset(tiny_dataset).num_classes == 3
    with pytest.raises(DatasetError, match=r"implies 3 classes; at most 2 are allowed \(--max-classes\)"):
        verify_dataset(tiny_dataset, max_classes=2)


def test_cli_max_classes_flag(tmp_path, tiny, tiny_dataset, capsys):
    args = build_parser().parse_args(["data", "import", "npz", "x.npz", "--out", "o"])
    assert args.max_classes == checks.DEFAULT_MAX_CLASSES
    src = dump_arrays(tmp_path / "arrays", tiny)
    assert main(["data", "import", "arrays", str(src), "--out", str(tmp_path / "o"), "--max-classes", "2"]) == 2
    assert "implies 3 classes; at most 2 are allowed (--max-classes)" in capsys.readouterr().err
    assert main(["data", "import", "arrays", str(src), "--out", str(tmp_path / "o"), "--max-classes", "3"]) == 0
    assert main(["data", "verify", str(tiny_dataset), "--max-classes", "2"]) == 2
    assert "at most 2 are allowed (--max-classes)" in capsys.readouterr().err
