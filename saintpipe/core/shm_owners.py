"""Who owns a saintpipe file under ``/dev/shm``, and removing the files of owners that are gone.

A file under ``/dev/shm`` outlives the process that made it: a process killed with SIGKILL (its resource
tracker with it) leaves its files behind, holding memory until reboot. So every saintpipe file there names its
owner: the PID namespace, the pid and the start time of the process that created it (:func:`current`, written
as ``<namespace>-<pid>-<start>``). A later process can then tell a leftover from a file in use without asking
anybody.

This module is the one registry of those files: the directory (:data:`SHM_DIR`),
each component's names (:class:`OwnedNames`: prefix, pattern, owner and group
read out of a name, fresh names), their :class:`Kind` s (:data:`POOL_KINDS`,
:data:`FEATURE_KINDS`, :data:`ONLINE_KINDS`, all of them in :data:`KINDS`), and
finding and removing leftovers (:func:`scan`, :func:`remove_leftovers`). The
pool (``services/pool/shared_memory.py``), the feature shards
(``services/feature_shard/shm.py``) and the sampler's shared online state
(``services/sampler/online_shared.py``), which may not import each other, take
their names from here, and ``saintpipe doctor`` lists and cleans every kind
without importing any of them.

Why removing a dead owner's file is safe, and why a dead producer's pool slots may still be needed:
docs/explanation/shared-memory.md.
"""

from __future__ import annotations

import logging
import os
import re
import secrets
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

log = logging.getLogger(__name__)

# Where every saintpipe file of this module's kinds lives. Components keep it as their own SHM_DIR (one name
# a test can point elsewhere per component); every function here takes the directory as an argument.
SHM_DIR = Path("/dev/shm")

# A file's owner state, as `saintpipe doctor` prints it.
ALIVE = "alive"
DEAD = "dead"
ELSEWHERE = "other-pid-namespace"  # a container sharing /dev/shm but not our pids: never ours to judge
UNKNOWN = "unknown"  # no owner in the name (an older saintpipe), or nothing to check it against
KEPT = "kept"  # a file that stays on purpose (the pool's namespace marker)

# Regex of an owner tag, for the names' own patterns: namespace, pid, start time (groups 1-3).
OWNER_PATTERN = r"(\d{1,20})-(\d{1,10})-(\d{1,20})"
_PID_MAX = 2**31 - 1  # larger pids are forged names: os.kill would raise OverflowError


@dataclass(frozen=True)
class Owner:
    """The process that created a file: PID namespace (inode), pid, start time (clock ticks after boot).

    ``start`` is None where unknown (names of an older saintpipe, or no /proc); then a pid
    reused by another process reads as alive: such a file is kept, never wrongly removed.
    """

    namespace: int
    pid: int
    start: int | None = None

    @property
    def tag(self) -> str:
        """``<namespace>-<pid>-<start>`` (start 0 when unknown), for file names."""
        return f"{self.namespace}-{self.pid}-{self.start or 0}"

    @classmethod
    def from_groups(cls, namespace: str, pid: str, start: str | None) -> Owner:
        """From the groups of :data:`OWNER_PATTERN` (``start`` None or "0": unknown)."""
        return cls(int(namespace), int(pid), (int(start) or None) if start else None)


def pid_namespace() -> int:
    """This process's PID namespace (inode of /proc/self/ns/pid); 0 where unknown."""
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return 0


def start_time(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks after boot, /proc/PID/stat field 22); None if unknown."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        # Field 2, the command, is in parentheses and may hold spaces or ")": count from the last ")".
        return int(stat.rsplit(b")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


_current: dict[int, Owner] = {}  # by pid: a forked child is an owner of its own


def current() -> Owner:
    """This process as an owner (computed once per process)."""
    pid = os.getpid()
    owner = _current.get(pid)
    if owner is None:
        owner = _current[pid] = Owner(pid_namespace(), pid, start_time(pid))
    return owner


def status(owner: Owner | None) -> str:
    """:data:`ALIVE`, :data:`DEAD`, :data:`ELSEWHERE` or :data:`UNKNOWN`.

    DEAD only for an owner of this PID namespace whose pid no longer exists, or
    now belongs to a process started at another time (the pid was reused).
    """
    if owner is None or not 0 < owner.pid <= _PID_MAX:
        return UNKNOWN
    here = pid_namespace()
    if not here:
        return UNKNOWN
    if owner.namespace != here:
        return ELSEWHERE
    try:
        os.kill(owner.pid, 0)
    except ProcessLookupError:
        return DEAD
    except PermissionError:
        pass  # exists, another user's: its start time below still tells a reused pid
    if owner.start is not None:
        started = start_time(owner.pid)
        if started is not None and started != owner.start:
            return DEAD
    return ALIVE


def _no_group(name: str) -> str | None:
    return None


@dataclass(frozen=True)
class Kind:
    """One kind of saintpipe file under ``/dev/shm``.

    Args:
        label: what ``saintpipe doctor`` calls it.
        prefix: every name of the kind starts with it (the longest matching prefix wins).
        owner_of: the owner a name states; None when it states none.
        group_of: files that live and die together: a dead owner's file is kept while another
            file of its group has a live owner (a pool job whose producers still run).
        keep: never a leftover (the pool's namespace marker).
    """

    label: str
    prefix: str
    owner_of: Callable[[str], Owner | None]
    group_of: Callable[[str], str | None] = _no_group
    keep: bool = False


@dataclass(frozen=True)
class ShmFile:
    """One saintpipe file found under the shared-memory directory."""

    kind: str
    path: Path
    size: int
    owner: Owner | None
    status: str
    group: str | None = None
    leftover: bool = field(default=False, compare=False)  # removable: see :func:`scan`

    @property
    def name(self) -> str:
        return self.path.name


def _kind_of(name: str, kinds: Sequence[Kind]) -> Kind | None:
    matching = [k for k in kinds if name.startswith(k.prefix)]
    return max(matching, key=lambda k: len(k.prefix)) if matching else None


def scan(directory: Path, kinds: Sequence[Kind]) -> list[ShmFile]:
    """Every regular file of these kinds under ``directory``, sorted by name, each with its owner's state.

    ``leftover`` is set on the files whose owner is DEAD, unless another file of their group has a live owner.
    Files of live owners, of another PID namespace, of unknown owners and kept kinds are never leftovers.
    """
    found: list[ShmFile] = []
    try:
        entries = list(os.scandir(directory))
    except OSError:  # no such directory: nothing there
        return []
    for entry in entries:
        kind = _kind_of(entry.name, kinds)
        if kind is None:
            continue
        try:
            st = entry.stat(follow_symlinks=False)
        except FileNotFoundError:  # removed meanwhile
            continue
        if not entry.is_file(follow_symlinks=False):
            continue
        owner = None if kind.keep else kind.owner_of(entry.name)
        state = KEPT if kind.keep else status(owner)
        found.append(ShmFile(kind.label, Path(directory) / entry.name, st.st_size, owner, state,
                             kind.group_of(entry.name)))
    live_groups = {f.group for f in found if f.group is not None and f.status == ALIVE}
    files = [replace(f, leftover=f.status == DEAD and f.group not in live_groups) for f in found]
    return sorted(files, key=lambda f: f.name)


def leftovers(directory: Path, kinds: Sequence[Kind]) -> list[ShmFile]:
    """The files of ``kinds`` under ``directory`` that :func:`scan` marks as leftovers."""
    return [f for f in scan(directory, kinds) if f.leftover]


def remove(files: Iterable[ShmFile]) -> list[ShmFile]:
    """Unlink these files; returns those removed (one already gone, or another user's, is skipped).

    Give it only leftovers (:func:`leftovers`): it checks nothing itself.
    """
    removed = []
    for f in files:
        try:
            os.unlink(f.path)
        except FileNotFoundError:  # another process cleaned it first
            continue
        except OSError as exc:  # another user's file in the sticky /dev/shm, a read-only directory, ...
            log.debug("cannot remove %s: %s", f.path, exc)
            continue
        removed.append(f)
    return removed


def remove_leftovers(directory: Path, kinds: Sequence[Kind], *,
                     keep: Callable[[ShmFile], bool] | None = None) -> list[ShmFile]:
    """Remove the leftovers of ``kinds`` under ``directory`` (except those ``keep`` names); log and return them.

    Never raises: a component calls it as it starts, and a failed cleanup must not stop it.
    """
    try:
        found = [f for f in leftovers(directory, kinds) if keep is None or not keep(f)]
        removed = remove(found)
    except Exception as exc:  # noqa: BLE001 - cleanup is best effort; the component's own work comes first
        log.warning("could not remove leftover shared-memory files under %s: %s", directory, exc)
        return []
    if removed:
        log.info("removed %d leftover shared-memory file(s) of dead processes under %s (%d bytes): %s",
                 len(removed), directory, sum(f.size for f in removed),
                 ", ".join(f.name for f in removed[:5]) + (" ..." if len(removed) > 5 else ""))
    return removed


@dataclass(frozen=True)
class OwnedNames:
    """The names of one kind of file: its prefix and the pattern of a whole name, which states the owner.

    Args:
        prefix: every name starts with it.
        pattern: a whole name (``fullmatch``); names it does not match state no owner.
        owner_at: the pattern's group of the owner's PID namespace; its pid and start time are the next two
            (the groups of :data:`OWNER_PATTERN`; the start time's group may match nothing: unknown).
        group_at: the pattern's group of the files that live and die together (:attr:`Kind.group_of`);
            None: each file on its own.
    """

    prefix: str
    pattern: re.Pattern[str]
    owner_at: int = 1
    group_at: int | None = None

    def match(self, name: str) -> re.Match[str] | None:
        """The pattern's match of the whole name; None for a name that is not one of these."""
        return self.pattern.fullmatch(name)

    def owner_of(self, name: str) -> Owner | None:
        """The process a name states as its creator; None for a name that states none."""
        match = self.match(name)
        return Owner.from_groups(*match.group(self.owner_at, self.owner_at + 1, self.owner_at + 2)) if match else None

    def owner_is_dead(self, name: str) -> bool:
        """True only when ``name`` was created by a process of this PID namespace that no longer exists.

        Another namespace, a name stating no owner (an older saintpipe's, or made by hand), or a live
        owner (with the start time the name states, where it states one): False.
        """
        return status(self.owner_of(name)) == DEAD

    def group_of(self, name: str) -> str | None:
        """The group a name belongs to (see ``group_at``); None without one."""
        if self.group_at is None:
            return None
        match = self.match(name)
        return match.group(self.group_at) if match else None

    def fresh(self) -> str:
        """A new name for this process: the prefix, its owner tag (:func:`current`), 16 random hex digits."""
        return f"{self.prefix}{current().tag}-{secrets.token_hex(8)}"

    def kind(self, label: str) -> Kind:
        """These names as a :class:`Kind` ``saintpipe doctor`` calls ``label``."""
        return Kind(label, self.prefix, self.owner_of, self.group_of)


# --- The registry: every saintpipe file under /dev/shm. ---

POOL_PREFIX = "saintpipe-pool-"
FEATURE_PREFIX = "saintpipe-features-"
ONLINE_PREFIX = "saintpipe-online-"

# The pool's slots (services/pool/shared_memory.py): saintpipe-pool-<server>-<job>+<owner>-<writer>-<n>.
# Group 1, the job's slots on one server, is a slot's group: a dead producer's slots stay while a producer of
# the same job on the same server lives (Redis entries may still name them).
POOL_SLOTS = OwnedNames(
    POOL_PREFIX,
    re.compile("(" + re.escape(POOL_PREFIX) + r"[0-9a-f]{8}-[A-Za-z0-9][A-Za-z0-9_.:-]{0,127})\+" + OWNER_PATTERN
               + r"-[0-9a-f]{8}-\d{1,9}"),
    owner_at=2, group_at=1,
)
# Each /dev/shm's random identity, which slot references name: kept, never a leftover.
POOL_NAMESPACE_FILE = POOL_PREFIX + "namespace"
# The feature clients' regions (services/feature_shard/shm.py): saintpipe-features-<owner>-<random>; names of an
# older saintpipe lack the start time. A region is its client's alone, so a dead client's region is garbage.
FEATURE_REGIONS = OwnedNames(
    FEATURE_PREFIX,
    re.compile(re.escape(FEATURE_PREFIX) + r"(\d{1,20})-(\d{1,10})-(?:(\d{1,20})-)?[0-9a-f]{1,64}"),
)
# The sampler service's shared online normalization state (services/sampler/online_shared.py):
# saintpipe-online-<owner>-<16 hex digits>, one file per service, garbage once its owner is dead.
ONLINE_STATES = OwnedNames(ONLINE_PREFIX, re.compile(re.escape(ONLINE_PREFIX) + OWNER_PATTERN + r"-[0-9a-f]{16}"))

POOL_KINDS = (
    POOL_SLOTS.kind("pool slot"),
    Kind("pool namespace", POOL_NAMESPACE_FILE, POOL_SLOTS.owner_of, keep=True),
)
FEATURE_KINDS = (FEATURE_REGIONS.kind("feature region"),)
ONLINE_KINDS = (ONLINE_STATES.kind("online normalization"),)
# Every kind: what `saintpipe doctor` lists and cleans.
KINDS = (*POOL_KINDS, *FEATURE_KINDS, *ONLINE_KINDS)
