"""WorkspaceTool: file tools sandboxed to one folder, plus ``!!path`` media expansion.

The sandbox (see :mod:`aklab.tools._fs_sandbox` for the exact guarantees):

- ``root`` is resolved once, when the card is made (``~`` expanded, symlinks resolved,
  relative to the current folder at that moment), so a later ``%cd`` changes nothing.
  The filesystem root, the home folder, its ancestors and system folders are refused
  unless ``allow_broad_root=True``. A missing root is created at first use.
- Every path is opened component by component from a descriptor of the root with
  ``O_NOFOLLOW``; neither ``..``, an absolute path, a symlink (even one swapped in while we
  work) nor a hard link leads out of it. Symlinks that stay inside the root are followed
  for reads and writes; walks (list, glob, grep, media globs) never follow them.
- Only regular files with a single link are read or written: a hard-linked file may be a
  file outside the root under a second name, and reading it would leak that file as
  surely as writing would change it, so both are refused (copy the file in instead).
- What reaches the model is capped: a read shows ``max_read_chars`` from ``offset``, grep
  shows at most 200 hits and ``max_grep_chars``, skips files over ``max_file_bytes`` and
  stops after ``grep_timeout`` seconds (patterns run on the ``regex`` engine with a
  timeout, so a catastrophic pattern ends as a message). ``!!`` media references attach
  at most ``max_media_files`` images and ``max_media_bytes`` per message. Every cut says
  what was cut.
"""

from __future__ import annotations

import functools
import math
import os
import re
import shutil
import stat
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from pydantic import PrivateAttr, model_validator
from pydantic_ai.messages import BinaryContent

from aklab._text import counted
from aklab.errors import ConfigError
from aklab.tools import _fs_sandbox as fs
from aklab.tools._fs_text import (
    MAX_GREP_HITS,
    Grep,
    compile_pattern,
    decode_window,
    read_all,
    size_text,
    write_all,
)
from aklab.tools.card import ToolCard, ToolHost

__all__ = ["IMAGE_MEDIA_TYPES", "MAX_GREP_HITS", "WorkspaceTool"]

IMAGE_MEDIA_TYPES = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
}
MAX_GLOB_MATCHES = 500
DOCUMENT_NOTE = "[=> Use workspace_read tool]"
MISSING_NOTE = "[Error: no image found in the workspace]"
OUTSIDE_NOTE = "[Error: path is outside the workspace]"
SYSTEM_PROMPT = (
    "You have a workspace folder: use the workspace_* tools with paths relative to it, and write "
    '!!path (or !!"path with spaces", or a glob like !!*.png) in a message to show an image from it.'
)
_SYSTEM_DIRS = {"/bin", "/boot", "/dev", "/etc", "/lib", "/lib64", "/proc", "/run", "/sbin", "/sys", "/usr", "/var"}

# ``!!`` at the start or after whitespace, then a quoted path or a bare token; trailing
# punctuation is not part of a bare token, and an already annotated ``!!x[...]`` is skipped.
_MEDIA_REF = re.compile(r'(?<!\S)!!(?:"(?P<quoted>[^"\n]+)"|(?P<bare>[^\s"\[]+?))(?=[.,;:!?)\]}]*(?:\s|$))')
_Media = tuple[list[tuple[str, BinaryContent]], str]
_P = ParamSpec("_P")
_R = TypeVar("_R")


def _os_errors(method: Callable[_P, _R]) -> Callable[_P, _R]:
    """Turn an unexpected OSError (disk full, a file vanishing mid-walk) into a ValueError the model sees."""

    @functools.wraps(method)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return method(*args, **kwargs)
        except OSError as exc:
            raise ValueError(f"the file system refused: {exc.strerror or exc}; check the path and try again") from None

    return wrapper


class WorkspaceTool(ToolCard):
    """A folder the agent reads and writes, and shows images from."""

    name: str = "WorkspaceTool"
    description: str = "Read, search and edit files in a sandboxed workspace folder."
    root: str = ""
    """The workspace folder; relative paths are taken from the current folder when the card is made."""
    allow_broad_root: bool = False
    """Allow ``/``, the home folder, its ancestors and system folders as the root (models could change anything)."""
    max_read_chars: int = 100_000
    """Characters one read returns; the rest is reachable with ``offset``."""
    max_grep_chars: int = 20_000
    """Characters of grep output."""
    max_file_bytes: int = 10_000_000
    """Files larger than this are skipped by grep and refused by edit."""
    grep_timeout: float = 5.0
    """Seconds one grep may take in all (the regular expression included)."""
    max_media_files: int = 10
    """Images that ``!!`` references attach to one message."""
    max_media_bytes: int = 10_000_000
    """Bytes of images that ``!!`` references attach to one message."""

    _root: str = PrivateAttr(default="")

    @model_validator(mode="after")
    def _resolve_root(self) -> WorkspaceTool:
        if not self.root.strip():
            raise ConfigError('WorkspaceTool.root is missing: give the workspace folder, e.g. root="workspace"')
        if (why := fs.check_platform()) is not None:
            raise ConfigError(why)
        for field in ("max_read_chars", "max_grep_chars", "max_file_bytes", "max_media_files", "max_media_bytes"):
            if getattr(self, field) < 1:
                raise ConfigError(f"WorkspaceTool.{field} must be at least 1 (got {getattr(self, field)})")
        if not 0 < self.grep_timeout < math.inf:
            raise ConfigError(
                f"WorkspaceTool.grep_timeout must be a finite number of seconds above 0 (got {self.grep_timeout})"
            )
        resolved = os.path.realpath(os.path.expanduser(self.root))
        if not self.allow_broad_root and (why := _broad(resolved)):
            raise ConfigError(
                f"WorkspaceTool.root={self.root!r} is {why}, so a model could read and change everything in it; "
                'use a project folder such as root="workspace", or set allow_broad_root=True'
            )
        self._root = resolved
        return self

    # -- sandbox ------------------------------------------------------------------------
    @property
    def root_dir(self) -> str:
        """The root folder as resolved when the card was made."""
        return self._root

    def root_path(self) -> Path:
        """The resolved root folder, created if missing."""
        os.close(fs.open_root(self._root))
        return Path(self._root)

    def _open(self, path: str, flags: int, *, make_dirs: bool = False) -> fs.Opened:
        root_fd = fs.open_root(self._root)
        try:
            return fs.open_beneath(root_fd, self._root, path, flags, make_dirs=make_dirs)
        finally:
            os.close(root_fd)

    def _open_file(self, path: str, flags: int, *, make_dirs: bool = False) -> tuple[fs.Opened, os.stat_result]:
        opened = self._open(path, flags, make_dirs=make_dirs)
        try:
            return opened, fs.check_regular(opened.fd, path)
        except BaseException:
            os.close(opened.fd)
            raise

    # -- operations (also usable from code) -----------------------------------------------
    @_os_errors
    def read_file(self, path: str, offset: int = 0) -> str:
        """At most ``max_read_chars`` characters of a text file from ``offset``, saying what was cut."""
        if offset < 0:
            raise ValueError(f"offset must be 0 or more (got {offset})")
        try:
            opened, st = self._open_file(path, fs.READ_FLAGS)
        except fs.PathError as exc:
            if exc.reason in ("missing", "isdir"):
                raise ValueError(f"{fs.shown(path)} is not a file in the workspace") from None
            raise
        with fs.closing(opened.fd):
            text, more = decode_window(opened.fd, offset, self.max_read_chars, path, st.st_size)
        if offset and not text and not more:
            return f"[offset {offset} is past the end of {opened.rel}]"
        if not more:
            return text
        end = offset + len(text)
        return (
            f"{text}\n[cut: showing characters {offset}-{end} of {opened.rel} ({st.st_size} bytes); "
            f"call workspace_read with offset={end} to see more]"
        )

    @_os_errors
    def list_dir(self, path: str = ".") -> str:
        try:
            opened = self._open(path, fs.DIR_FLAGS)
        except fs.PathError as exc:
            if exc.reason in ("notdir", "missing", "isdir"):
                raise ValueError(f"{fs.shown(path)} is not a directory in the workspace") from None
            raise
        with fs.closing(opened.fd):
            entries = fs.scan(opened.fd)
        prefix = "/".join(opened.parts)
        shown = [(f"{prefix}/{n}" if prefix else n) + ("/" if d else "") for n, d, _ in entries[:MAX_GLOB_MATCHES]]
        more = [f"(stopped at {MAX_GLOB_MATCHES} of {len(entries)} entries)"] if len(entries) > MAX_GLOB_MATCHES else []
        return "\n".join(shown + more) or "(empty)"

    @_os_errors
    def glob_paths(self, pattern: str, limit: int = MAX_GLOB_MATCHES + 1) -> list[tuple[str, bool]]:
        """``(path, is_dir)`` of up to ``limit`` matches, sorted by path; symlinks are never followed."""
        root_fd = fs.open_root(self._root)
        try:
            found: list[tuple[str, bool]] = []
            for entry in fs.glob(root_fd, self._root, pattern):
                found.append((entry.rel, entry.is_dir))
                if len(found) >= limit:
                    break
            return found
        finally:
            os.close(root_fd)

    @_os_errors
    def grep_files(self, pattern: str, path: str = ".") -> str:
        """Lines matching ``pattern`` as ``file:line: text``, capped in hits, characters and time."""
        matcher = compile_pattern(pattern)
        deadline = time.monotonic() + self.grep_timeout
        grep = Grep(matcher, deadline, self.max_grep_chars)
        skipped: list[str] = []
        try:
            folder: fs.Opened | None = self._open(path, fs.DIR_FLAGS)
        except fs.PathError as exc:
            if exc.reason != "notdir":
                raise
            folder = None
        if folder is None:
            opened, st = self._open_file(path, fs.READ_FLAGS)
            with fs.closing(opened.fd):
                self._grep_one(grep, opened.fd, st, opened.rel, skipped)
        else:
            with fs.closing(folder.fd):
                for entry in fs.walk(folder.fd, "/".join(folder.parts)):
                    if entry.is_dir:
                        continue
                    if grep.stop or time.monotonic() > deadline:
                        grep.stop = grep.stop or f"(search stopped after {self.grep_timeout:g} s; narrow the path)"
                        break
                    try:
                        fd, st = fs.open_file_in(entry.dir_fd, entry.name, entry.rel)
                    except (OSError, fs.PathError):
                        continue
                    with fs.closing(fd):
                        self._grep_one(grep, fd, st, entry.rel, skipped)
        notes = [grep.stop] if grep.stop else []
        if skipped:
            notes.append(
                f"(skipped {counted(len(skipped), 'file')} over {size_text(self.max_file_bytes)}: "
                f"{', '.join(skipped[:5])})"
            )
        return "\n".join(grep.hits + notes) or "(no matches)"

    def _grep_one(self, grep: Grep, fd: int, st: os.stat_result, rel: str, skipped: list[str]) -> None:
        if st.st_size > self.max_file_bytes:
            skipped.append(rel)
            return
        try:
            lines = read_all(fd, st.st_size).decode("utf-8").splitlines()
        except (UnicodeDecodeError, OSError):
            return
        for number, line in enumerate(lines, start=1):
            if not grep.search(line, rel, number):
                return

    @_os_errors
    def write_file(self, path: str, content: str) -> str:
        opened, _ = self._open_file(path, fs.WRITE_FLAGS, make_dirs=True)
        with fs.closing(opened.fd):
            write_all(opened.fd, content.encode("utf-8"))
        return f"wrote {len(content)} characters to {opened.rel}"

    @_os_errors
    def edit_file(self, path: str, old: str, new: str) -> str:
        if not old:
            raise ValueError("the text to replace must not be empty")
        try:
            opened, st = self._open_file(path, fs.EDIT_FLAGS)
        except fs.PathError as exc:
            if exc.reason in ("missing", "isdir"):
                raise ValueError(f"{fs.shown(path)} is not a file in the workspace") from None
            raise
        with fs.closing(opened.fd):
            if st.st_size > self.max_file_bytes:
                raise ValueError(
                    f"{path!r} is {size_text(st.st_size)}, over the {size_text(self.max_file_bytes)} edit limit"
                )
            try:
                text = read_all(opened.fd, st.st_size).decode("utf-8")
            except UnicodeDecodeError:
                raise ValueError(f"{path!r} is not UTF-8 text ({st.st_size} bytes)") from None
            count = text.count(old)
            if count != 1:
                found = "not found" if count == 0 else f"found {count} times"
                raise ValueError(f"text to replace {found} in {path!r}; it must occur exactly once (add context)")
            write_all(opened.fd, text.replace(old, new, 1).encode("utf-8"))
        return f"edited {opened.rel}"

    @_os_errors
    def delete_path(self, path: str) -> str:
        parts = fs.split_path(path, self._root)
        if not parts:
            raise ValueError("refusing to delete the workspace root itself")
        try:
            parent = self._open("/".join(parts[:-1]), fs.DIR_FLAGS)
        except fs.PathError as exc:
            if exc.reason == "missing":
                raise ValueError(f"{fs.shown(path)} does not exist in the workspace") from None
            raise
        name = parts[-1]
        with fs.closing(parent.fd):
            try:
                mode = os.stat(name, dir_fd=parent.fd, follow_symlinks=False).st_mode
                if stat.S_ISDIR(mode):
                    shutil.rmtree(name, dir_fd=parent.fd)
                else:  # a file, or a symlink itself (never its target)
                    os.unlink(name, dir_fd=parent.fd)
            except FileNotFoundError:
                raise ValueError(f"{fs.shown(path)} does not exist in the workspace") from None
            except OSError as exc:
                raise ValueError(f"cannot delete {fs.shown(path)}: {exc.strerror or exc}") from None
        return f"deleted {path}"

    @_os_errors
    def make_dir(self, path: str) -> str:
        try:
            opened = self._open(path, fs.DIR_FLAGS, make_dirs=True)
        except fs.PathError as exc:
            if exc.reason == "notdir":
                raise ValueError(f"{fs.shown(path)} exists and is not a directory") from None
            raise
        os.close(opened.fd)
        return f"directory {opened.rel} ready"

    # -- media expansion ------------------------------------------------------------------
    def expand_media_refs(self, text: str) -> str | list[str | BinaryContent]:
        """Images for ``!!`` references, notes for documents, misses and cuts; ``text`` itself if nothing matched.

        One message attaches at most ``max_media_files`` images and ``max_media_bytes``.
        """
        parts: list[str | BinaryContent] = []
        pending: list[str] = []
        position = 0
        changed = False
        budget = _Budget(self.max_media_files, self.max_media_bytes)
        for match in _MEDIA_REF.finditer(text):
            pending.append(text[position : match.end()])
            position = match.end()
            images, note = self._media(match.group("quoted") or match.group("bare"), budget)
            if note:
                pending.append(note)
                changed = True
            for label, content in images:
                pending.append(label)
                parts.extend([s for s in ["".join(pending)] if s])
                parts.append(content)
                pending = []
        pending.append(text[position:])
        if any(isinstance(p, BinaryContent) for p in parts):
            parts.extend([s for s in ["".join(pending)] if s])
            return parts
        return "".join(pending) if changed else text

    def _media(self, ref: str, budget: _Budget) -> _Media:
        if any(c in ref for c in "*?["):
            try:
                matches = [rel for rel, is_dir in self.glob_paths(ref, limit=10_000) if not is_dir and _media_type(rel)]
            except fs.PathError as exc:
                return [], OUTSIDE_NOTE if exc.reason == "outside" else MISSING_NOTE
            images: list[tuple[str, BinaryContent]] = []
            left_out = 0
            for rel in matches:
                try:
                    opened, st = self._open_file(rel, fs.READ_FLAGS)
                except fs.PathError:
                    continue  # a hard link or special file: not an image of the workspace
                with fs.closing(opened.fd):
                    content = budget.take(opened.fd, st.st_size, rel)
                if content is None:
                    left_out += 1
                else:
                    images.append((f"\n{rel}:", content))
            if not images and not left_out:
                return [], MISSING_NOTE
            if not left_out:
                return images, ""
            return images, (
                f"[Note: {len(images) + left_out} images matched; {len(images)} attached ({size_text(budget.used)}); "
                f"a message takes at most {budget.files} images, {size_text(budget.bytes)}]"
            )
        try:
            opened, st = self._open_file(ref, fs.READ_FLAGS)
        except fs.PathError as exc:
            if exc.reason == "outside":
                return [], OUTSIDE_NOTE
            if exc.reason in ("missing", "isdir", "notdir"):
                return [], MISSING_NOTE
            return [], f"[Error: {exc.reason}: not attached]"
        with fs.closing(opened.fd):
            if _media_type(ref) is None:
                return [], DOCUMENT_NOTE
            content = budget.take(opened.fd, st.st_size, ref)
        if content is None:
            return [], (
                f"[Note: not attached ({size_text(st.st_size)}); a message takes at most "
                f"{budget.files} images, {size_text(budget.bytes)}]"
            )
        return [("", content)], ""

    # -- channels -------------------------------------------------------------------------
    def get_tools(self, host: ToolHost) -> list[Callable[..., Any]]:
        def workspace_read(path: str, offset: int = 0) -> str:
            """The text of a file in the workspace (long files come in parts: pass `offset` for the next)."""
            return self.read_file(path, offset)

        def workspace_list(path: str = ".") -> str:
            """The entries of a workspace folder (folders end with "/")."""
            return self.list_dir(path)

        def workspace_glob(pattern: str) -> str:
            """Workspace paths matching a glob pattern such as "**/*.py", sorted."""
            paths = self.glob_paths(pattern)
            shown = [rel + ("/" if is_dir else "") for rel, is_dir in paths[:MAX_GLOB_MATCHES]]
            more = [f"(stopped at {MAX_GLOB_MATCHES} matches)"] if len(paths) > MAX_GLOB_MATCHES else []
            return "\n".join(shown + more) or "(no matches)"

        def workspace_grep(pattern: str, path: str = ".") -> str:
            """Lines matching a regular expression, as "file:line: text" (at most 200)."""
            return self.grep_files(pattern, path)

        def workspace_write(path: str, content: str) -> str:
            """Create or overwrite a file (parent folders are created)."""
            return self.write_file(path, content)

        def workspace_edit(path: str, old: str, new: str) -> str:
            """Replace the one occurrence of `old` in a file with `new`."""
            return self.edit_file(path, old, new)

        def workspace_delete(path: str) -> str:
            """Delete a file or a folder with its contents."""
            return self.delete_path(path)

        def workspace_mkdir(path: str) -> str:
            """Create a folder (and its parents)."""
            return self.make_dir(path)

        return [
            workspace_read,
            workspace_list,
            workspace_glob,
            workspace_grep,
            workspace_write,
            workspace_edit,
            workspace_delete,
            workspace_mkdir,
        ]

    def get_system_prompts(self, host: ToolHost) -> list[str]:
        return [SYSTEM_PROMPT]

    def get_commands(self, host: ToolHost) -> list[Callable[..., Any]]:
        def _expand_media_refs(text: str) -> str | list[str | BinaryContent]:
            """Expand !!path image references in a prompt into binary content."""
            return self.expand_media_refs(text)

        return [_expand_media_refs]


# -- helpers -------------------------------------------------------------------------------
def _broad(root: str) -> str:
    """Why ``root`` is too broad a workspace, or ``""``."""
    home = os.path.realpath(os.path.expanduser("~"))
    if os.path.dirname(root) == root:
        return "a filesystem root"
    if root == home:
        return "the home folder"
    if home.startswith(root.rstrip("/") + "/"):
        return "an ancestor of the home folder"
    if root in _SYSTEM_DIRS:
        return "a system folder"
    return ""


class _Budget:
    """What is left of one message's media allowance."""

    def __init__(self, files: int, size: int) -> None:
        self.files, self.bytes = files, size
        self.count = 0
        self.used = 0

    def full(self) -> bool:
        return self.count >= self.files

    def take(self, fd: int, size: int, rel: str) -> BinaryContent | None:
        if self.full() or self.used + size > self.bytes:
            return None
        data = read_all(fd, size)
        self.count += 1
        self.used += len(data)
        return BinaryContent(data=data, media_type=_media_type(rel) or "application/octet-stream")


def _media_type(path: str) -> str | None:
    return IMAGE_MEDIA_TYPES.get(os.path.splitext(path)[1].lower())
