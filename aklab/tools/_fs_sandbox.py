"""Race-free file access beneath one directory, for :class:`~aklab.tools.WorkspaceTool`.

Guarantees (against anyone who can change what is *inside* the root, while we work):

- Every path is walked one component at a time from a descriptor of the root, with
  ``openat(..., O_NOFOLLOW)``; intermediate components are opened with ``O_DIRECTORY``.
  No path is checked and then opened by name, so swapping a folder for a symlink between
  two steps cannot lead outside: the swap is seen as a symlink and judged as one.
- A symlink met on the way is resolved here, not by the kernel: an absolute target must lie
  inside the root, a relative one is walked from the link's folder, ``..`` never climbs
  above the root, and more than 40 links in one path is refused as a loop.
- What is opened is checked on its descriptor (``fstat``): it must be a regular file with
  exactly one link. A FIFO or device is refused (opened ``O_NONBLOCK``, so it cannot
  block), and so is a hard-linked file, which may be a file outside the root under a
  second name. Reads are refused too: the content of an outside file would otherwise
  reach the model, and from inside the root the two cases cannot be told apart.
- Walks (list, glob, grep) read folders through their descriptors (``os.scandir(fd)``) and
  never follow a symlinked folder; deletion uses ``shutil.rmtree(dir_fd=...)``, which is
  safe against symlink swaps on platforms where ``rmtree.avoids_symlink_attacks``.

Not guaranteed: a process that can write *outside* the root may move a folder we are
working in to outside it (it could then write there itself anyway); the root path itself
is trusted (it is resolved once, when the card is made).

Needs ``dir_fd`` support for ``open``/``mkdir``/``readlink``/``stat``/``unlink``,
``O_NOFOLLOW``, ``O_DIRECTORY`` and ``scandir`` on a descriptor: Linux (tested), and most
other POSIX systems; :func:`check_platform` says clearly when these are missing.
"""

from __future__ import annotations

import errno
import os
import posixpath
import re
import shutil
import stat
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

__all__ = [
    "MAX_PATH_CHARS",
    "PathError",
    "check_platform",
    "check_regular",
    "closing",
    "glob",
    "open_beneath",
    "open_file_in",
    "open_root",
    "split_path",
    "walk",
]

MAX_PATH_CHARS = 4096
MAX_SYMLINKS = 40
MAX_DEPTH = 64
"""Paths and walks go this many folders deep at most (a walk holds one descriptor per level)."""

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
DIR_FLAGS = os.O_RDONLY | _DIRECTORY
READ_FLAGS = os.O_RDONLY | _NONBLOCK
WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | _NONBLOCK
EDIT_FLAGS = os.O_RDWR | _NONBLOCK


class PathError(ValueError):
    """A path the sandbox refuses; ``reason`` is one word a caller may branch on."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


def check_platform() -> str | None:
    """Why this platform cannot sandbox safely, or ``None`` when it can."""
    needed = [os.open, os.mkdir, os.readlink, os.stat, os.unlink]
    if not (_NOFOLLOW and _DIRECTORY) or not all(f in os.supports_dir_fd for f in needed):
        return "this platform lacks openat(O_NOFOLLOW|O_DIRECTORY); WorkspaceTool needs Linux or another POSIX system"
    if os.scandir not in os.supports_fd or not shutil.rmtree.avoids_symlink_attacks:
        return "this platform cannot list folders or delete trees by descriptor; WorkspaceTool needs Linux"
    return None


def shown(path: str) -> str:
    """``path`` as a short repr for messages."""
    return repr(path if len(path) <= 100 else path[:100] + "…")


def split_path(path: str, root: str) -> list[str]:
    """The components of ``path`` below ``root``, normalized lexically (``a/../b`` is ``b``)."""
    if "\x00" in path:
        raise PathError(f"path {shown(path)} contains a NUL byte; use a plain relative path", "nul")
    if len(path) > MAX_PATH_CHARS:
        raise PathError(f"path is too long ({len(path)} characters, at most {MAX_PATH_CHARS})", "long")
    norm = posixpath.normpath(path or ".")
    if norm.startswith("/"):
        if norm.lstrip("/") == root.lstrip("/"):
            return []
        if not norm.startswith(root.rstrip("/") + "/"):
            raise _outside(path, root)
        norm = norm[len(root.rstrip("/")) + 1 :]
    if norm == ".." or norm.startswith("../"):
        raise _outside(path, root)
    parts = [p for p in norm.split("/") if p not in ("", ".")]
    if len(parts) > MAX_DEPTH:
        raise PathError(f"path {shown(path)} is {len(parts)} folders deep; use at most {MAX_DEPTH}", "long")
    return parts


def _outside(path: str, root: str, how: str = "") -> PathError:
    return PathError(f"path {shown(path)} {how}is outside the workspace root {root}; use a path inside it", "outside")


def open_root(root: str) -> int:
    """A descriptor of ``root`` (created if missing); the caller closes it."""
    try:
        os.makedirs(root, exist_ok=True)
        return os.open(root, DIR_FLAGS | _NOFOLLOW | _CLOEXEC)
    except OSError as exc:
        raise PathError(
            f"the workspace root {root} cannot be opened ({exc.strerror}); fix WorkspaceTool.root", "root"
        ) from None


@contextmanager
def closing(fd: int) -> Iterator[int]:
    try:
        yield fd
    finally:
        os.close(fd)


def _readlink(name: str, dir_fd: int) -> str | None:
    try:
        return os.readlink(name, dir_fd=dir_fd)
    except OSError:
        return None


def _reopen(root_fd: int, names: list[str]) -> int:
    """The folder at ``names`` below the root, walked again without following links."""
    fd = os.dup(root_fd)
    for name in names:
        with closing(fd):
            fd = os.open(name, DIR_FLAGS | _NOFOLLOW | _CLOEXEC, dir_fd=fd)
    return fd


@dataclass
class Opened:
    """An open descriptor and the physical path (below the root) it was reached by."""

    fd: int
    parts: list[str]

    @property
    def rel(self) -> str:
        return "/".join(self.parts) or "."


def open_beneath(
    root_fd: int, root: str, path: str, flags: int, *, make_dirs: bool = False, mode: int = 0o666
) -> Opened:
    """Open ``path`` below the root with ``flags``; never leaves the root, never follows a link blindly.

    ``make_dirs`` creates missing folders on the way (and the leaf too when ``flags`` has
    ``O_DIRECTORY``). Special files are refused before they are opened when seen as such.
    """
    todo = deque(split_path(path, root))
    names: list[str] = []
    cur = os.dup(root_fd)
    links = 0
    try:
        while todo:
            name = todo.popleft()
            if name in ("", "."):
                continue
            if name == "..":
                if not names:
                    raise _outside(path, root, "leads through a symlink that ")
                names.pop()
                os.close(cur)
                cur = -1
                try:
                    cur = _reopen(root_fd, names)
                except OSError:
                    raise PathError(f"path {shown(path)} changed while being opened; try again", "race") from None
                continue
            last = not todo
            want = flags if last else DIR_FLAGS
            if last and not want & _DIRECTORY:
                _refuse_special(name, cur, path)
            try:
                fd = os.open(name, want | _NOFOLLOW | _CLOEXEC, mode, dir_fd=cur)
            except FileNotFoundError:
                if make_dirs and (not last or want & _DIRECTORY):
                    try:
                        os.mkdir(name, dir_fd=cur)
                    except FileExistsError:
                        pass
                    todo.appendleft(name)
                    continue
                raise PathError(f"{shown(path)} does not exist in the workspace", "missing") from None
            except OSError as exc:
                target = _readlink(name, cur) if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK) else None
                if target is None:
                    raise _os_error(exc, path, "/".join([*names, name]), last) from None
                links += 1
                if links > MAX_SYMLINKS:
                    raise PathError(f"path {shown(path)} goes through too many symlinks (a loop?)", "loop") from None
                if target.startswith("/"):
                    norm = posixpath.normpath(target)
                    if norm != root and not norm.startswith(root.rstrip("/") + "/"):
                        raise _outside(path, root, "leads through a symlink that ") from None
                    names = []
                    os.close(cur)
                    cur = os.dup(root_fd)
                    target = norm[len(root) :].lstrip("/")
                todo.extendleft(reversed([p for p in target.split("/") if p]))
                continue
            if last:
                return Opened(fd, [*names, name])
            os.close(cur)
            cur, names = fd, [*names, name]
        if flags & _DIRECTORY:
            fd, cur = cur, -1
            return Opened(fd, names)
        raise PathError(f"{shown(path)} is a directory; give a file path", "isdir")
    finally:
        if cur != -1:
            os.close(cur)


def _refuse_special(name: str, dir_fd: int, path: str) -> None:
    """Refuse a FIFO, device or socket before opening it (opening some devices has effects)."""
    try:
        mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
    except OSError:
        return
    if not (stat.S_ISREG(mode) or stat.S_ISLNK(mode) or stat.S_ISDIR(mode)):
        raise PathError(f"{shown(path)} is not a regular file (a FIFO, device or socket); refused", "special")


def _os_error(exc: OSError, path: str, where: str, last: bool) -> PathError:
    if exc.errno == errno.ENAMETOOLONG:
        return PathError(f"a name in path {shown(path)} is too long (at most 255 bytes each)", "long")
    if exc.errno == errno.EISDIR:
        return PathError(f"{shown(path)} is a directory; give a file path", "isdir")
    if exc.errno == errno.ENOTDIR:
        what = shown(path) if last else repr(where)
        return PathError(f"{what} is not a directory in the workspace", "notdir")
    if exc.errno in (errno.ENXIO, errno.ENODEV, errno.ETXTBSY):
        return PathError(f"{shown(path)} is not a regular file (a FIFO, device or socket); refused", "special")
    return PathError(f"cannot open {shown(path)} in the workspace: {exc.strerror}", "os")


def check_regular(fd: int, path: str) -> os.stat_result:
    """``fstat`` of ``fd``; PathError unless it is a regular file with one link."""
    st = os.fstat(fd)
    if stat.S_ISDIR(st.st_mode):
        raise PathError(f"{shown(path)} is a directory; give a file path", "isdir")
    if not stat.S_ISREG(st.st_mode):
        raise PathError(f"{shown(path)} is not a regular file (a FIFO, device or socket); refused", "special")
    if st.st_nlink > 1:
        raise PathError(
            f"{shown(path)} has {st.st_nlink} hard links, so it may be a file outside the workspace; "
            "refused (ask the user to copy it in)",
            "hardlink",
        )
    return st


def open_file_in(dir_fd: int, name: str, rel: str) -> tuple[int, os.stat_result]:
    """Open the regular single-link file ``name`` of a walked folder for reading."""
    fd = os.open(name, READ_FLAGS | _NOFOLLOW | _CLOEXEC, dir_fd=dir_fd)
    try:
        return fd, check_regular(fd, rel)
    except BaseException:
        os.close(fd)
        raise


@dataclass
class Entry:
    """One entry met by :func:`walk`: its path below the root and the folder holding it."""

    rel: str
    name: str
    dir_fd: int
    is_dir: bool


def scan(dir_fd: int) -> list[tuple[str, bool, bool]]:
    """``(name, is_dir, is_file)`` of a folder's entries, sorted, symlinks never followed."""
    with os.scandir(dir_fd) as entries:
        found = [(e.name, e.is_dir(follow_symlinks=False), e.is_file(follow_symlinks=False)) for e in entries]
    return sorted(found)


def walk(dir_fd: int, prefix: str, max_depth: int = MAX_DEPTH) -> Iterator[Entry]:
    """Every file and folder below ``dir_fd`` (sorted, depth first); symlinks are skipped.

    Folders are entered with ``O_NOFOLLOW|O_DIRECTORY`` from their parent's descriptor, so
    one swapped for a symlink mid-walk is skipped rather than followed. The descriptors
    yielded stay open only until the next step. ``max_depth`` 1 lists ``dir_fd`` only.
    """
    for name, is_dir, is_file in scan(dir_fd):
        rel = f"{prefix}/{name}" if prefix else name
        if is_file:
            yield Entry(rel, name, dir_fd, False)
        elif is_dir:
            yield Entry(rel, name, dir_fd, True)
            if max_depth <= 1:
                continue
            try:
                sub = os.open(name, DIR_FLAGS | _NOFOLLOW | _CLOEXEC, dir_fd=dir_fd)
            except OSError:
                continue
            with closing(sub):
                yield from walk(sub, rel, max_depth - 1)


def glob(root_fd: int, root: str, pattern: str) -> Iterator[Entry]:
    """Entries whose path matches ``pattern`` (``*``, ``?``, ``[...]``, ``**`` for any folders).

    Matching is pathlib's, on a walk that never follows symlinks; a pattern reaching out of
    the root (``..``, absolute) is refused. Sorted by path.
    """
    if not pattern or "\x00" in pattern:
        raise PathError(f"bad glob pattern {shown(pattern)}; use a pattern relative to the workspace", "pattern")
    if pattern.startswith("/"):
        if not pattern.startswith(root.rstrip("/") + "/"):
            raise _outside(pattern, root)
        pattern = pattern[len(root.rstrip("/")) + 1 :]
    parts = [p for p in pattern.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise _outside(pattern, root)
    if not parts:
        return
    literal: list[str] = []
    while len(parts) > 1 and not any(c in parts[0] for c in "*?["):
        literal.append(parts.pop(0))
    regex = re.compile("".join(r"(?:[^/]+/)*" if p == "**" else _translate(p) + "/" for p in parts))
    dirs_only = parts[-1] == "**"
    depth = MAX_DEPTH if "**" in parts else len(parts)
    try:
        opened = open_beneath(root_fd, root, "/".join(literal), DIR_FLAGS)
    except PathError as exc:
        if exc.reason in ("missing", "notdir"):
            return
        raise
    with closing(opened.fd):
        prefix = "/".join(opened.parts)
        for entry in walk(opened.fd, prefix, depth):
            tail = entry.rel[len(prefix) :].lstrip("/")
            if (entry.is_dir or not dirs_only) and regex.fullmatch(tail + "/"):
                yield entry


def _translate(part: str) -> str:
    """One path component's glob as a regex that never crosses ``/``."""
    out, i = [], 0
    while i < len(part):
        c = part[i]
        i += 1
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[" and (end := part.find("]", i + 1 if part[i : i + 1] in ("!", "]") else i)) != -1:
            body = part[i:end].replace("\\", "\\\\")
            out.append("[^/" + body[1:] + "]" if body.startswith("!") else "[" + body + "]")
            i = end + 1
        else:
            out.append(re.escape(c))
    return "".join(out)
