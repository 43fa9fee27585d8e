"""The committed generated protobuf/gRPC modules match the .proto files.

Regenerates every .proto under protos/ with the command the project uses (see
PREAMBLE / docs) into a temporary directory and compares file by file, so a
.proto edited without regenerating fails here. Stale generated files with no
.proto behind them fail too.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PROTOS = ROOT / "protos"
GENERATED_SUFFIXES = ("_pb2.py", "_pb2.pyi", "_pb2_grpc.py")


def _generated_files(base: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(base)): p.read_bytes()
        for p in sorted(base.rglob("*"))
        if p.is_file() and p.name.endswith(GENERATED_SUFFIXES)
    }


def test_committed_stubs_match_the_proto_files(tmp_path):
    protos = sorted(str(p.relative_to(PROTOS)) for p in PROTOS.rglob("*.proto"))
    assert protos, "no .proto files under protos/"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            "-I",
            str(PROTOS),
            f"--python_out={tmp_path}",
            f"--pyi_out={tmp_path}",
            f"--grpc_python_out={tmp_path}",
            *protos,
        ],
        check=False,
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    fresh = _generated_files(tmp_path)
    regenerate = (
        "regenerate from the repo root with: python -m grpc_tools.protoc -I protos --python_out=. "
        "--pyi_out=. --grpc_python_out=. protos/saintpipe/protos/X.proto"
    )
    missing = [name for name in fresh if not (ROOT / name).is_file()]
    assert not missing, f"generated files not committed: {missing}; {regenerate}"
    differ = [name for name in fresh if (ROOT / name).read_bytes() != fresh[name]]
    assert not differ, f"committed stubs out of date: {differ}; {regenerate}"
    committed = {f"saintpipe/protos/{name}" for name in _generated_files(ROOT / "saintpipe" / "protos")}
    stale = sorted(committed - set(fresh))
    assert not stale, f"generated files with no .proto behind them: {stale}"
