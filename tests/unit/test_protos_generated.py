"""The committed generated protobuf/gRPC code matches the .proto files.

Regenerates every protos/saintpipe/protos/*.proto into a temporary directory
with the project's protoc command and compares each output with the
committed file under saintpipe/protos/ (like Ray's CI check).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROTO_DIR = ROOT / "protos" / "saintpipe" / "protos"
PROTOS = sorted(PROTO_DIR.glob("*.proto"))


def test_there_are_protos():
    assert PROTOS, f"no .proto files in {PROTO_DIR}"


@pytest.mark.parametrize("proto", PROTOS, ids=[p.name for p in PROTOS])
def test_generated_code_is_current(proto: Path, tmp_path: Path):
    rel = proto.relative_to(ROOT / "protos")
    subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", "-I", str(ROOT / "protos"), f"--python_out={tmp_path}",
         f"--pyi_out={tmp_path}", f"--grpc_python_out={tmp_path}", str(rel)],
        cwd=ROOT / "protos", check=True, capture_output=True,
    )
    stem = proto.stem
    generated = sorted((tmp_path / "saintpipe" / "protos").glob(f"{stem}_pb2*"))
    assert {p.name for p in generated} == {f"{stem}_pb2.py", f"{stem}_pb2.pyi", f"{stem}_pb2_grpc.py"}
    for fresh in generated:
        committed = ROOT / "saintpipe" / "protos" / fresh.name
        assert committed.is_file(), f"{committed} is missing: run protoc (see the PREAMBLE command) and commit it"
        assert committed.read_text() == fresh.read_text(), (
            f"{committed} is stale: regenerate with `python -m grpc_tools.protoc -I protos --python_out=. "
            f"--pyi_out=. --grpc_python_out=. {rel.as_posix()}` from the repository root"
        )
