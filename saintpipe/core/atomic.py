"""Replace a directory atomically: build it under a temporary sibling name, then rename it into place.

Readers of ``target`` see either the old directory or the complete new one, never a half-written one; a
failure while building leaves ``target`` as it was and removes the temporary directory::

    with replacing_dir(out, check=must_be_a_dataset) as tmp:
        np.save(tmp / "indptr.npy", indptr)
        ...                                  # on success: tmp becomes out (mode 0o755)

Names beside ``target`` (same file system, so the final rename is atomic):
``.<name>.saintpipe-tmp-<owner>-<random>`` while building, and ``.<name>.saintpipe-old-<owner>-<random>`` for
a replaced directory between the rename and its removal, where ``<owner>`` is the PID namespace, pid and start
time of the writing process (:func:`saintpipe.core.shm_owners.current`). Every exit path removes them
(exceptions, SIGINT, and SIGTERM, which exits through ``SystemExit`` while a body runs); SIGKILL cannot be
caught, so the next :func:`replacing_dir` of the same target removes those whose owner is dead, never a live
writer's.

Only a real directory is ever replaced: a regular file, a symbolic link (never followed), a FIFO, a device or
a socket at ``target`` is refused before anything is written, and ``check`` may refuse a directory as well (a
dataset writer refuses one that is not a dataset). The replaced directory's files are unlinked, never
rewritten: readers that have them open or mapped keep valid data.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import logging
import os
import re
import secrets
import shutil
import signal
import stat
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from saintpipe.core import shm_owners

log = logging.getLogger(__name__)

TMP_INFIX = ".saintpipe-tmp-"
OLD_INFIX = ".saintpipe-old-"
# Names longer than this are shortened in sibling names (plus a digest), so that a
# sibling stays within the file system's 255-byte name limit.
_MAX_STEM = 120

_KINDS = {
    stat.S_IFDIR: "a directory",
    stat.S_IFREG: "a regular file",
    stat.S_IFLNK: "a symbolic link",
    stat.S_IFIFO: "a FIFO",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
}


def kind_of(mode: int) -> str:
    """What an ``st_mode`` is, in words ("a directory", "a FIFO", ...)."""
    return _KINDS.get(stat.S_IFMT(mode), "a special file")


def _stem(target: Path) -> str:
    name = target.name
    if len(name.encode()) <= _MAX_STEM:
        return name
    return name.encode()[: _MAX_STEM - 13].decode(errors="ignore") + "~" + hashlib.sha1(name.encode()).hexdigest()[:12]


def _sibling_name(target: Path, infix: str) -> Path:
    owner = shm_owners.current()
    return target.with_name(f".{_stem(target)}{infix}{owner.tag}-{secrets.token_hex(4)}")


def _make_parents(directory: Path) -> list[Path]:
    """``mkdir -p directory``; returns the directories it created, deepest first."""
    missing = []
    for parent in (directory, *directory.parents):
        if os.path.lexists(parent):
            break
        missing.append(parent)
    directory.mkdir(parents=True, exist_ok=True)
    return missing


def temp_sibling(target: Path | str) -> Path:
    """Create an empty temporary directory (mode 0o700) beside ``target``, named after it and this process.

    ``target``'s parents are created as needed.
    """
    target = Path(target)
    _make_parents(target.parent)
    while True:
        tmp = _sibling_name(target, TMP_INFIX)
        try:
            os.mkdir(tmp, 0o700)
            return tmp
        except FileExistsError:  # 32 random bits taken: draw again
            continue


def _not_replaceable(target: Path, st: os.stat_result) -> OSError:
    return NotADirectoryError(errno.ENOTDIR, f"exists and is {kind_of(st.st_mode)}, not a directory: not replaced",
                              str(target))


def replace_dir(new: Path | str, target: Path | str, *, check: Callable[[Path], None] | None = None) -> None:
    """Rename directory ``new`` to ``target``; an existing ``target`` is removed only after the rename.

    Args:
        new: the complete new directory, on the same file system as ``target`` (see :func:`temp_sibling`).
        target: where it goes. Only a real directory there is replaced; anything else raises
            ``NotADirectoryError`` and stays as it is.
        check: called with the existing directory before it is replaced; raises to refuse it. Called
            again once it is renamed aside, so a directory swapped in meanwhile is not replaced either.

    If the second rename fails (or is interrupted) the old directory is put back, so ``target`` is
    never left missing.
    """
    new, target = Path(new), Path(target)
    try:
        before = os.lstat(target)
    except FileNotFoundError:
        os.rename(new, target)
        return
    if not stat.S_ISDIR(before.st_mode):
        raise _not_replaceable(target, before)
    if check is not None:
        check(target)
    old = _sibling_name(target, OLD_INFIX)
    try:
        os.rename(target, old)
        aside = os.lstat(old)
        if not stat.S_ISDIR(aside.st_mode):
            raise _not_replaceable(target, aside)
        if (aside.st_dev, aside.st_ino) != (before.st_dev, before.st_ino):
            raise FileExistsError(errno.EEXIST, "changed while being replaced: not replaced", str(target))
        if check is not None:
            check(old)
        os.rename(new, target)
    except BaseException:
        # Whatever was interrupted where: the old one goes back unless the new one is in place.
        if os.path.lexists(old):
            if os.path.lexists(new):
                os.rename(old, target)
            else:
                _remove_tree(old)
        raise
    _remove_tree(old)


def _remove_tree(path: Path) -> None:
    """Remove a directory tree, even when interrupted midway (the interruption propagates afterwards)."""
    try:
        shutil.rmtree(path)
    except BaseException as exc:
        shutil.rmtree(path, ignore_errors=True)
        if not isinstance(exc, OSError):
            raise
        if os.path.lexists(path):
            log.warning("could not remove %s: %s", path, exc)


def _tree_size(path: Path) -> int:
    total = 0
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, name)).st_size
    return total


def leftovers(target: Path | str) -> list[Path]:
    """The temporary and replaced directories beside ``target`` whose owner process is dead.

    Never a live process's (another write to the same target going on), nor one whose owner
    is in another PID namespace or unknown.
    """
    target = Path(target)
    pattern = re.compile(
        rf"\.{re.escape(_stem(target))}(?:{re.escape(TMP_INFIX)}|{re.escape(OLD_INFIX)}){shm_owners.OWNER_PATTERN}"
        r"-[0-9a-f]{1,32}")
    found = []
    try:
        entries = list(os.scandir(target.parent))
    except OSError:  # no parent yet, or unreadable: nothing to clean
        return []
    for entry in entries:
        match = pattern.fullmatch(entry.name)
        if match is None or not entry.is_dir(follow_symlinks=False):
            continue
        if shm_owners.status(shm_owners.Owner.from_groups(*match.group(1, 2, 3))) == shm_owners.DEAD:
            found.append(Path(entry.path))
    return sorted(found)


def remove_leftovers(target: Path | str) -> list[Path]:
    """Remove :func:`leftovers` beside ``target`` (a killed writer's); log and return them. Never raises."""
    removed = []
    try:
        for path in leftovers(target):
            size = _tree_size(path)
            shutil.rmtree(path, ignore_errors=True)
            if not os.path.lexists(path):
                log.info("removed %s, left by a writer process that is gone (%d bytes)", path, size)
                removed.append(path)
    except Exception as exc:  # noqa: BLE001 - cleanup is best effort; the write itself comes first
        log.warning("could not remove leftovers beside %s: %s", target, exc)
    return removed


def _exit_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


@contextlib.contextmanager
def _sigterm_exits() -> Iterator[None]:
    """While the body runs, SIGTERM raises ``SystemExit(143)`` instead of killing the process on the spot.

    So ``finally`` blocks run and the temporary directory is removed. Only where SIGTERM has its
    default action, and in the main thread (the only one that may set handlers): a program with
    its own SIGTERM handler keeps it. The previous handler is restored afterwards.
    """
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGTERM) != signal.SIG_DFL:
        yield
        return
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


@contextlib.contextmanager
def replacing_dir(target: Path | str, *, mode: int = 0o755,
                  check: Callable[[Path], None] | None = None) -> Iterator[Path]:
    """Yield a fresh temporary directory beside ``target``; on success it replaces ``target``.

    Args:
        target: the directory to create or replace.
        mode: permissions of the new directory (the temporary one is 0o700).
        check: refuses an existing directory at ``target`` by raising (see :func:`replace_dir`);
            called before the temporary directory is made, and again right before the rename.

    Leftovers of killed writers of the same target are removed first (:func:`remove_leftovers`).
    On an exception in the body or in the final rename, on SIGINT or on SIGTERM, the temporary
    directory (and any parent directory this call created) is removed, ``target`` is left as it
    was, and the exception propagates.
    """
    target = Path(target)
    try:
        st = os.lstat(target)
    except FileNotFoundError:
        pass
    else:
        if not stat.S_ISDIR(st.st_mode):
            raise _not_replaceable(target, st)
        if check is not None:
            check(target)
    remove_leftovers(target)
    with _sigterm_exits():
        created = _make_parents(target.parent)
        tmp = None
        try:
            tmp = temp_sibling(target)
            yield tmp
            os.chmod(tmp, mode)
            replace_dir(tmp, target, check=check)
        except BaseException:
            if tmp is not None:
                _remove_tree(tmp)
            for parent in created:  # deepest first; only while empty
                with contextlib.suppress(OSError):
                    os.rmdir(parent)
            raise
