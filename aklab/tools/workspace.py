"""WorkspaceTool: file tools sandboxed to one folder, plus ``!!path`` media expansion.

Every path is resolved (symlinks included) against ``root`` and refused when the result
lies outside it, so neither ``..``, an absolute path nor a symlink leads out of the folder.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from pydantic_ai.messages import BinaryContent

from aklab.tools.card import ToolCard, ToolHost

__all__ = ["IMAGE_MEDIA_TYPES", "MAX_GREP_HITS", "WorkspaceTool"]

IMAGE_MEDIA_TYPES = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
}
MAX_GREP_HITS = 200
MAX_GLOB_MATCHES = 500
DOCUMENT_NOTE = "[=> Use workspace_read tool]"
MISSING_NOTE = "[Error: no image found in the workspace]"
OUTSIDE_NOTE = "[Error: path is outside the workspace]"
SYSTEM_PROMPT = (
    "You have a workspace folder: use the workspace_* tools with paths relative to it, and write "
    '!!path (or !!"path with spaces", or a glob like !!*.png) in a message to show an image from it.'
)

# ``!!`` at the start or after whitespace, then a quoted path or a bare token; trailing
# punctuation is not part of a bare token, and an already annotated ``!!x[...]`` is skipped.
_MEDIA_REF = re.compile(r'(?<!\S)!!(?:"(?P<quoted>[^"\n]+)"|(?P<bare>[^\s"\[]+?))(?=[.,;:!?)\]}]*(?:\s|$))')
_Media = tuple[list[tuple[str, BinaryContent]], str]


class WorkspaceTool(ToolCard):
    """A folder the agent reads and writes, and shows images from."""

    name: str = "WorkspaceTool"
    description: str = "Read, search and edit files in a sandboxed workspace folder."
    root: str

    # -- sandbox ------------------------------------------------------------------------
    def root_path(self) -> Path:
        """The resolved root folder, created if missing."""
        root = Path(self.root).expanduser().resolve()
        root.mkdir(parents=True, exist_ok=True)
        return root

    def resolve(self, path: str) -> Path:
        """``path`` resolved against the root; ValueError when it leads outside it."""
        root = self.root_path()
        try:
            target = (root / path).resolve()
        except (OSError, RuntimeError, ValueError) as exc:
            raise ValueError(f"cannot resolve path {path!r} in the workspace {root}: {exc}") from None
        if not target.is_relative_to(root):
            raise ValueError(f"path {path!r} is outside the workspace root {root}; use a path inside it")
        return target

    def _rel(self, target: Path) -> str:
        return target.relative_to(self.root_path()).as_posix() or "."

    # -- operations (also usable from code) -----------------------------------------------
    def read_file(self, path: str) -> str:
        target = self.resolve(path)
        if not target.is_file():
            raise ValueError(f"{path!r} is not a file in the workspace")
        try:
            return target.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            size = target.stat().st_size
            raise ValueError(f"{path!r} is not UTF-8 text ({size} bytes); show an image with !!{path}") from None

    def list_dir(self, path: str = ".") -> str:
        target = self.resolve(path)
        if not target.is_dir():
            raise ValueError(f"{path!r} is not a directory in the workspace")
        entries = [self._rel(e) + ("/" if e.is_dir() else "") for e in sorted(target.iterdir())]
        return "\n".join(entries) or "(empty)"

    def glob_paths(self, pattern: str) -> list[Path]:
        """Resolved matches inside the root, sorted by path; escapes are dropped."""
        root = self.root_path()
        try:
            candidates = list(root.glob(pattern))
        except (ValueError, NotImplementedError) as exc:
            raise ValueError(f"bad glob pattern {pattern!r}: {exc}; use a pattern relative to the workspace") from None
        found = set()
        for candidate in candidates:
            try:
                resolved = candidate.resolve()
            except (OSError, RuntimeError):
                continue
            if resolved.is_relative_to(root):
                found.add(resolved)
        return sorted(found, key=self._rel)

    def grep_files(self, pattern: str, path: str = ".") -> str:
        try:
            regex = re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"invalid regular expression {pattern!r}: {exc}") from None
        hits: list[str] = []
        for file in self._files(self.resolve(path)):
            try:
                lines = file.read_text(encoding="utf-8").splitlines()
            except (UnicodeDecodeError, OSError):
                continue
            for number, line in enumerate(lines, start=1):
                if regex.search(line):
                    hits.append(f"{self._rel(file)}:{number}: {line}")
                    if len(hits) >= MAX_GREP_HITS:
                        return "\n".join([*hits, f"(stopped at {MAX_GREP_HITS} hits; narrow the search)"])
        return "\n".join(hits) or "(no matches)"

    def _files(self, start: Path) -> Iterator[Path]:
        root = self.root_path()
        if start.is_file():
            yield start
            return
        if not start.is_dir():
            raise ValueError(f"{self._rel(start)!r} does not exist in the workspace")
        for folder, dirs, files in os.walk(start, followlinks=False):
            dirs.sort()
            for name in sorted(files):
                resolved = (Path(folder) / name).resolve()
                if resolved.is_relative_to(root) and resolved.is_file():
                    yield resolved

    def write_file(self, path: str, content: str) -> str:
        target = self.resolve(path)
        if target.is_dir():
            raise ValueError(f"{path!r} is a directory; give a file path")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")
        return f"wrote {len(content)} characters to {self._rel(target)}"

    def edit_file(self, path: str, old: str, new: str) -> str:
        if not old:
            raise ValueError("the text to replace must not be empty")
        text = self.read_file(path)
        count = text.count(old)
        if count != 1:
            found = "not found" if count == 0 else f"found {count} times"
            raise ValueError(f"text to replace {found} in {path!r}; it must occur exactly once (add context)")
        target = self.resolve(path)
        target.write_text(text.replace(old, new, 1), encoding="utf-8")
        return f"edited {self._rel(target)}"

    def delete_path(self, path: str) -> str:
        target = self.resolve(path)
        root = self.root_path()
        if target == root:
            raise ValueError("refusing to delete the workspace root itself")
        link = Path(os.path.normpath(root / path))
        if link.is_symlink() and link.parent.resolve().is_relative_to(root):  # the link, not its target
            link.unlink()
        elif target.is_dir():
            shutil.rmtree(target)
        elif target.exists():
            target.unlink()
        else:
            raise ValueError(f"{path!r} does not exist in the workspace")
        return f"deleted {path}"

    def make_dir(self, path: str) -> str:
        target = self.resolve(path)
        if target.exists() and not target.is_dir():
            raise ValueError(f"{path!r} exists and is not a directory")
        target.mkdir(parents=True, exist_ok=True)
        return f"directory {self._rel(target)} ready"

    # -- media expansion ------------------------------------------------------------------
    def expand_media_refs(self, text: str) -> str | list[str | BinaryContent]:
        """Images for ``!!`` references, notes for documents and misses; ``text`` itself if nothing matched."""
        parts: list[str | BinaryContent] = []
        pending: list[str] = []
        position = 0
        changed = False
        for match in _MEDIA_REF.finditer(text):
            pending.append(text[position : match.end()])
            position = match.end()
            images, note = self._media(match.group("quoted") or match.group("bare"))
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

    def _media(self, ref: str) -> _Media:
        if any(c in ref for c in "*?["):
            try:
                matches = [p for p in self.glob_paths(ref) if p.is_file() and _media_type(p)]
            except ValueError:
                matches = []
            images = [(f"\n{self._rel(p)}:", _binary(p)) for p in matches[:MAX_GLOB_MATCHES]]
            return images, "" if images else MISSING_NOTE
        try:
            target = self.resolve(ref)
        except ValueError:
            return [], OUTSIDE_NOTE
        if not target.is_file():
            return [], MISSING_NOTE
        if _media_type(target) is None:
            return [], DOCUMENT_NOTE
        return [("", _binary(target))], ""

    # -- channels -------------------------------------------------------------------------
    def get_tools(self, host: ToolHost) -> list[Callable[..., Any]]:
        def workspace_read(path: str) -> str:
            """The text of a file in the workspace."""
            return self.read_file(path)

        def workspace_list(path: str = ".") -> str:
            """The entries of a workspace folder (folders end with "/")."""
            return self.list_dir(path)

        def workspace_glob(pattern: str) -> str:
            """Workspace paths matching a glob pattern such as "**/*.py", sorted."""
            paths = self.glob_paths(pattern)
            shown = [self._rel(p) + ("/" if p.is_dir() else "") for p in paths[:MAX_GLOB_MATCHES]]
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


def _media_type(path: Path) -> str | None:
    return IMAGE_MEDIA_TYPES.get(path.suffix.lower())


def _binary(path: Path) -> BinaryContent:
    media_type = _media_type(path) or "application/octet-stream"
    return BinaryContent(data=path.read_bytes(), media_type=media_type)
