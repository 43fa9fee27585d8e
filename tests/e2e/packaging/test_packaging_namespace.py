"""One import namespace: the built package installs `saintpipe` and nothing else.

The component folders stay at the top of the repository (services/, trainer/)
and pyproject.toml maps them under ``saintpipe``. A wheel built from the
checkout must hold exactly the checkout's modules, all under ``saintpipe/``,
and an environment with only that wheel must not see ``services`` or
``trainer`` as top-level packages.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
# Where each top-level namespace's modules live in the checkout.
SOURCES = {"saintpipe": ROOT / "saintpipe", "saintpipe/services": ROOT / "services",
           "saintpipe/trainer": ROOT / "trainer"}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Built from a copy: setuptools writes build/ and *.egg-info beside the sources.
    src = tmp_path_factory.mktemp("src")
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.nbi", "*.nbc")
    for folder in ("saintpipe", "services", "trainer", "protos"):
        shutil.copytree(ROOT / folder, src / folder, ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                    "--disable-pip-version-check", "-w", str(out), str(src)], check=True, cwd=out)
    (built,) = out.glob("saintpipe-*.whl")
    return built


def source_modules() -> set[str]:
    found = set()
    for prefix, folder in SOURCES.items():
        for path in [*folder.rglob("*.py"), *folder.rglob("*.lua")]:
            rel = path.relative_to(folder)
            if prefix == "saintpipe" and rel.parts[0] in ("services", "trainer"):
                continue
            found.add(f"{prefix}/{rel.as_posix()}")
    return found


def test_wheel_installs_only_saintpipe(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    top = {name.split("/")[0] for name in names}
    assert {t for t in top if not t.endswith(".dist-info")} == {"saintpipe"}


def test_wheel_holds_every_module_and_script_of_the_checkout(wheel: Path) -> None:
    packaged = set(zipfile.ZipFile(wheel).namelist())
    missing = source_modules() - packaged
    assert not missing, f"pyproject.toml's package list leaves out: {sorted(missing)}"


def test_only_saintpipe_is_importable_from_the_installed_wheel(wheel: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--disable-pip-version-check",
                    "--target", str(site), str(wheel)], check=True)
    # --target puts the console script in bin/; a real install puts it beside python.
    installed = {p.name for p in site.iterdir() if not p.name.endswith(".dist-info")} - {"bin"}
    assert installed == {"saintpipe"}
    probe = (
        "import importlib.util, sys\n"
        "sys.path.insert(0, sys.argv[1])\n"
        "import saintpipe.services.pool.config, saintpipe.trainer.config, saintpipe.core.errors\n"
        "assert saintpipe.services.pool.config.__file__.startswith(sys.argv[1])\n"
        "print([n for n in ('services', 'trainer') if importlib.util.find_spec(n) is not None])\n"
    )
    # -S: no site-packages (so not the checkout's editable install); the run's
    # dependencies come from this interpreter's site-packages added after the wheel.
    deps = [p for p in sys.path if p.endswith("site-packages")]
    env_path = ":".join(deps)
    result = subprocess.run([sys.executable, "-S", "-c", probe, str(site)], cwd=tmp_path, capture_output=True,
                            text=True, env={"PYTHONPATH": env_path, "PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
