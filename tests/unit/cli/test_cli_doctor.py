"""``saintpipe doctor``: the table, the JSON and --clean, on a shared-memory directory of made-up files."""

from __future__ import annotations

import json
import subprocess

from saintpipe.services.feature_shard import shm
from saintpipe.services.pool import shared_memory

from saintpipe.cli import main
from saintpipe.core import shm_owners
from saintpipe.core.shm_owners import Owner

URL = "redis://127.0.0.1:6379/0"


def make_files(directory) -> dict[str, str]:
    proc = subprocess.Popen(["true"])
    proc.wait()
    gone, me = Owner(shm_owners.pid_namespace(), proc.pid, 4242), shm_owners.current()
    files = {
        "dead slot": f"{shared_memory.job_slots(URL, 'j')}+{gone.tag}-0badcafe-0",
        "dead region": f"{shm.PREFIX}{gone.tag}-0123456789abcdef",
        "live slot": f"{shared_memory.job_slots(URL, 'k')}+{me.tag}-0badcafe-0",
        "live region": f"{shm.PREFIX}{me.tag}-0123456789abcdef",
        "older slot": f"{shared_memory.job_slots(URL, 'j')}+0123456789abcdef-0",
    }
    for i, name in enumerate(files.values()):
        (directory / name).write_bytes(b"x" * 1024 * (i + 1))
    shared_memory.namespace_id(directory)
    return files


def test_doctor_lists_each_file_with_its_owner(tmp_path, capsys):
    files = make_files(tmp_path)
    assert main(["doctor", "--shm-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    lines = {name: line for line in out.splitlines() for name in files.values() if line.endswith(name)}
    assert set(lines) == set(files.values())
    assert "pool slot" in lines[files["dead slot"]] and "dead: leftover" in lines[files["dead slot"]]
    assert "feature region" in lines[files["dead region"]] and "1.0 KiB" not in lines[files["dead region"]]
    assert "dead: leftover" in lines[files["dead region"]] and "2.0 KiB" in lines[files["dead region"]]
    assert " alive " in lines[files["live slot"]] and " alive " in lines[files["live region"]]
    assert " unknown " in lines[files["older slot"]]
    assert "saintpipe-pool-namespace" in out and " kept " in out
    assert "2 left by dead processes (3.0 KiB)" in out and "saintpipe doctor --clean" in out
    assert "1 file(s) state no owner" in out
    assert all((tmp_path / name).exists() for name in files.values())  # looking removes nothing


def test_doctor_clean_removes_only_dead_owners_files(tmp_path, capsys):
    files = make_files(tmp_path)
    assert main(["doctor", "--shm-dir", str(tmp_path), "--clean"]) == 0
    out = capsys.readouterr().out
    assert f"removed {tmp_path / files['dead slot']} (1.0 KiB)" in out
    assert f"removed {tmp_path / files['dead region']} (2.0 KiB)" in out
    assert "freed 3072 bytes (3.0 KiB) in 2 file(s)" in out
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [files["live slot"], files["live region"], files["older slot"], "saintpipe-pool-namespace"])


def test_doctor_json(tmp_path, capsys):
    files = make_files(tmp_path)
    assert main(["doctor", "--shm-dir", str(tmp_path), "--json", "--clean"]) == 0
    report = json.loads(capsys.readouterr().out)
    by_name = {f["name"]: f for f in report["files"]}
    assert by_name[files["dead region"]] == {
        "kind": "feature region", "name": files["dead region"], "size": 2048,
        "owner_pid": shm.owner_of(files["dead region"]).pid, "owner_pid_namespace": shm_owners.pid_namespace(),
        "owner": "dead", "leftover": True, "removed": True,
    }
    assert by_name[files["live slot"]]["owner"] == "alive" and not by_name[files["live slot"]]["removed"]
    assert by_name[files["older slot"]]["owner"] == "unknown" and by_name[files["older slot"]]["owner_pid"] is None
    assert by_name["saintpipe-pool-namespace"]["owner"] == "kept"
    assert report["removed"] == sorted([files["dead slot"], files["dead region"]])
    assert (report["leftovers"], report["leftover_bytes"], report["freed_bytes"]) == (2, 3072, 3072)


def test_doctor_on_an_empty_or_missing_directory(tmp_path, capsys):
    assert main(["doctor", "--shm-dir", str(tmp_path / "missing")]) == 0
    assert "no saintpipe files" in capsys.readouterr().out
    assert main(["doctor", "--shm-dir", str(tmp_path), "--clean", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["files"] == []


def test_doctor_lists_and_cleans_online_normalization_state(tmp_path, capsys):
    from saintpipe.services.sampler import online_shared

    proc = subprocess.Popen(["true"])
    proc.wait()
    gone, me = Owner(shm_owners.pid_namespace(), proc.pid, 4242), shm_owners.current()
    dead = tmp_path / f"{online_shared.PREFIX}{gone.tag}-0123456789abcdef"
    live = tmp_path / f"{online_shared.PREFIX}{me.tag}-fedcba9876543210"
    dead.write_bytes(b"x" * 4096)
    live.write_bytes(b"x")
    assert main(["doctor", "--shm-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if line.endswith(dead.name))
    assert "online normalization" in line and "dead: leftover" in line
    assert main(["doctor", "--shm-dir", str(tmp_path), "--clean"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == [live.name]
