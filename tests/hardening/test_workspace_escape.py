"""Escape vectors against WorkspaceTool: each is refused clearly, and the tool still works after.

The races swap a folder for a symlink to an outside folder in a thread, bounded in count
(2,000 swaps) and time (5 s) and stopped through an Event; the reader or writer counts what
reached outside. No test sleeps.
"""

from __future__ import annotations

import ctypes
import os
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.messages import BinaryContent

from aklab.errors import ConfigError
from aklab.tools import ToolFactory, WorkspaceTool

SECRET = "TOP-SECRET-OUTSIDE"
MAX_SWAPS = 2_000
MAX_RACE_SECONDS = 5.0


@dataclass
class Host:
    name: str = "@Dev"
    role: str = "Developer"
    directory: Any = None


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    return path


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    path = tmp_path / "outside"
    path.mkdir()
    (path / "secret.txt").write_text(SECRET)
    (path / "f.txt").write_text(SECRET)
    return path


@pytest.fixture
def card(root: Path) -> WorkspaceTool:
    return WorkspaceTool(root=str(root))


@pytest.fixture
def tools(card: WorkspaceTool) -> dict[str, Any]:
    return {t.__name__: t for t in card.get_tools(Host())}


@pytest.fixture
def expand(card: WorkspaceTool) -> Callable[[str], Any]:
    registry = ToolFactory([card], Host()).get_command_registry()
    fn: Callable[[str], Any] = registry.callable("_expand_media_refs")
    return fn


def still_works(tools: dict[str, Any], root: Path) -> None:
    """A legitimate write, read, edit, grep, glob, list and delete after a refusal."""
    assert tools["workspace_write"]("ok/after.txt", "fine\n") == "wrote 5 characters to ok/after.txt"
    assert tools["workspace_read"]("ok/after.txt") == "fine\n"
    assert tools["workspace_edit"]("ok/after.txt", "fine", "good") == "edited ok/after.txt"
    assert (root / "ok" / "after.txt").read_text() == "good\n"
    assert tools["workspace_grep"]("good", "ok") == "ok/after.txt:1: good"
    assert tools["workspace_glob"]("ok/*.txt") == "ok/after.txt"
    assert tools["workspace_list"]("ok") == "ok/after.txt"
    assert tools["workspace_delete"]("ok") == "deleted ok"
    assert not (root / "ok").exists()


def no_secret_in(text: object) -> bool:
    return SECRET not in str(text)


# -- paths that say where they go -----------------------------------------------------------
@pytest.mark.parametrize("escape", ["..", "../x", "a/../../x", "./../ws/../x", "/etc/passwd", "//etc/passwd"])
def test_dot_dot_and_absolute_paths_are_refused_on_every_operation(
    root: Path, tools: dict[str, Any], escape: str
) -> None:
    calls = {
        "workspace_read": (escape,),
        "workspace_list": (escape,),
        "workspace_grep": ("x", escape),
        "workspace_write": (escape, "x"),
        "workspace_edit": (escape, "a", "b"),
        "workspace_delete": (escape,),
        "workspace_mkdir": (escape,),
    }
    for name, args in calls.items():
        with pytest.raises(ValueError, match="is outside the workspace root"):
            tools[name](*args)
    assert not (root.parent / "x").exists()
    still_works(tools, root)


def test_an_absolute_path_inside_the_root_is_accepted(root: Path, tools: dict[str, Any]) -> None:
    assert tools["workspace_write"](str(root / "abs.txt"), "x") == "wrote 1 characters to abs.txt"
    assert tools["workspace_read"](str(root / "abs.txt")) == "x"


def test_a_nul_byte_in_a_path_is_refused(root: Path, tools: dict[str, Any]) -> None:
    for name, args in {
        "workspace_read": ("a\x00b",),
        "workspace_write": ("a\x00b", "x"),
        "workspace_mkdir": ("a\x00b",),
        "workspace_delete": ("a\x00b",),
    }.items():
        with pytest.raises(ValueError, match="contains a NUL byte"):
            tools[name](*args)
    with pytest.raises(ValueError, match="bad glob pattern"):
        tools["workspace_glob"]("*\x00")
    still_works(tools, root)


def test_very_long_and_very_deep_paths_are_refused_without_creating_anything(root: Path, tools: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=r"path is too long \(5000 characters"):
        tools["workspace_write"]("a" * 5000, "x")
    with pytest.raises(ValueError, match="is too long"):
        tools["workspace_write"]("b" * 300, "x")
    with pytest.raises(ValueError, match="folders deep; use at most"):
        tools["workspace_write"]("d/" * 1000 + "x", "x")
    assert list(root.iterdir()) == []
    still_works(tools, root)


# -- symlinks ------------------------------------------------------------------------------
def test_a_symlinked_file_leading_outside_is_neither_read_nor_written(
    root: Path, outside: Path, tools: dict[str, Any], expand: Any
) -> None:
    (root / "link.txt").symlink_to(outside / "secret.txt")
    (root / "dangling.txt").symlink_to(outside / "new.txt")
    (root / "zero").symlink_to("/dev/zero")
    for path in ["link.txt", "zero"]:
        with pytest.raises(ValueError, match="through a symlink that is outside the workspace root"):
            tools["workspace_read"](path)
    with pytest.raises(ValueError, match="outside the workspace root"):
        tools["workspace_write"]("link.txt", "overwritten")
    with pytest.raises(ValueError, match="outside the workspace root"):
        tools["workspace_edit"]("link.txt", SECRET, "changed")
    with pytest.raises(ValueError, match="outside the workspace root"):
        tools["workspace_write"]("dangling.txt", "escaped")
    assert (outside / "secret.txt").read_text() == SECRET
    assert not (outside / "new.txt").exists()
    assert tools["workspace_delete"]("link.txt") == "deleted link.txt"  # the link only
    assert (outside / "secret.txt").read_text() == SECRET
    still_works(tools, root)


def test_a_symlinked_parent_folder_leading_outside_is_refused_for_every_operation(
    root: Path, outside: Path, tools: dict[str, Any]
) -> None:
    (root / "dir").symlink_to(outside)
    (root / "rel").symlink_to("../outside")
    for base in ["dir", "rel"]:
        for name, args in {
            "workspace_read": (f"{base}/secret.txt",),
            "workspace_list": (base,),
            "workspace_grep": ("SECRET", base),
            "workspace_write": (f"{base}/new.txt", "x"),
            "workspace_edit": (f"{base}/secret.txt", SECRET, "x"),
            "workspace_mkdir": (f"{base}/sub",),
            "workspace_delete": (f"{base}/secret.txt",),
        }.items():
            with pytest.raises(ValueError, match="outside the workspace root"):
                tools[name](*args)
    assert tools["workspace_delete"]("dir") == "deleted dir"  # the link, never the folder it points to
    assert sorted(p.name for p in outside.iterdir()) == ["f.txt", "secret.txt"]
    assert (outside / "secret.txt").read_text() == SECRET
    still_works(tools, root)


def test_symlinks_that_stay_inside_the_root_are_still_followed(root: Path, tools: dict[str, Any]) -> None:
    tools["workspace_write"]("real/data.txt", "inside")
    (root / "alias").symlink_to("real")
    (root / "abs_alias").symlink_to(root / "real")
    (root / "real" / "up").symlink_to("../real/data.txt")
    assert tools["workspace_read"]("alias/data.txt") == "inside"
    assert tools["workspace_read"]("abs_alias/data.txt") == "inside"
    assert tools["workspace_read"]("real/up") == "inside"
    assert tools["workspace_write"]("alias/more.txt", "x") == "wrote 1 characters to real/more.txt"
    still_works(tools, root)


def test_a_symlink_loop_is_refused_rather_than_followed_forever(root: Path, tools: dict[str, Any]) -> None:
    (root / "a").symlink_to("b")
    (root / "b").symlink_to("a")
    (root / "self").symlink_to("self")
    for path in ["a", "b/x.txt", "self"]:
        with pytest.raises(ValueError, match="too many symlinks"):
            tools["workspace_read"](path)
    with pytest.raises(ValueError, match="too many symlinks"):
        tools["workspace_write"]("a/x.txt", "x")
    assert tools["workspace_grep"]("x") == "(no matches)"
    still_works(tools, root)


def test_grep_glob_and_list_never_follow_a_symlinked_folder(root: Path, outside: Path, tools: dict[str, Any]) -> None:
    (root / "dir").symlink_to(outside)
    (root / "nested").mkdir()
    (root / "nested" / "deep").symlink_to(outside)
    assert tools["workspace_grep"]("SECRET") == "(no matches)"
    assert tools["workspace_glob"]("**/*.txt") == "(no matches)"
    assert tools["workspace_glob"]("*/*") == "(no matches)"
    assert no_secret_in(tools["workspace_list"]("nested"))
    still_works(tools, root)


@pytest.mark.parametrize("pattern", ["../*", "../outside/*.txt", "**/../../*", "/etc/*", "nested/../../*"])
def test_a_glob_reaching_out_through_dot_dot_is_refused(
    root: Path, outside: Path, tools: dict[str, Any], expand: Any, pattern: str
) -> None:
    (outside / "x.png").write_bytes(b"\x89PNG outside")
    with pytest.raises(ValueError, match="is outside the workspace root"):
        tools["workspace_glob"](pattern)
    media = pattern.replace("*.txt", "*.png") if pattern.endswith(".txt") else pattern + ".png"
    assert expand(f"!!{media}") == f"!!{media}[Error: path is outside the workspace]"
    still_works(tools, root)


# -- hard links ------------------------------------------------------------------------------
def test_a_hardlink_to_an_outside_file_is_not_read(root: Path, outside: Path, tools: dict[str, Any]) -> None:
    os.link(outside / "secret.txt", root / "hard.txt")
    with pytest.raises(ValueError, match="has 2 hard links"):
        tools["workspace_read"]("hard.txt")
    assert tools["workspace_grep"]("SECRET") == "(no matches)"
    still_works(tools, root)


def test_a_hardlink_to_an_outside_file_is_not_written_or_edited(
    root: Path, outside: Path, tools: dict[str, Any]
) -> None:
    os.link(outside / "secret.txt", root / "hard.txt")
    with pytest.raises(ValueError, match="has 2 hard links"):
        tools["workspace_write"]("hard.txt", "overwritten")
    with pytest.raises(ValueError, match="has 2 hard links"):
        tools["workspace_edit"]("hard.txt", SECRET, "edited")
    assert (outside / "secret.txt").read_text() == SECRET
    assert tools["workspace_delete"]("hard.txt") == "deleted hard.txt"  # removes the name inside only
    assert (outside / "secret.txt").read_text() == SECRET
    still_works(tools, root)


# -- special files -----------------------------------------------------------------------------
def test_a_fifo_inside_the_root_is_refused_without_blocking(root: Path, tools: dict[str, Any], expand: Any) -> None:
    os.mkfifo(root / "pipe.txt")
    os.mkfifo(root / "pipe.png")
    (root / "via_link").symlink_to("pipe.txt")
    start = time.monotonic()
    for path in ["pipe.txt", "via_link"]:
        with pytest.raises(ValueError, match="not a regular file"):
            tools["workspace_read"](path)
        with pytest.raises(ValueError, match="not a regular file"):
            tools["workspace_write"](path, "x")
    with pytest.raises(ValueError, match="not a regular file"):
        tools["workspace_grep"]("x", "pipe.txt")
    assert tools["workspace_grep"]("x") == "(no matches)"
    assert expand("!!pipe.png") == "!!pipe.png[Error: special: not attached]"
    assert expand("!!*.png") == "!!*.png[Error: no image found in the workspace]"
    assert time.monotonic() - start < 5
    still_works(tools, root)


def test_an_intermediate_file_is_not_a_folder(root: Path, tools: dict[str, Any]) -> None:
    tools["workspace_write"]("f.txt", "x")
    with pytest.raises(ValueError, match=re.escape("'f.txt' is not a directory")):
        tools["workspace_write"]("f.txt/inner", "x")
    with pytest.raises(ValueError, match="exists and is not a directory"):
        tools["workspace_mkdir"]("f.txt")
    still_works(tools, root)


# -- races -------------------------------------------------------------------------------------
_LIBC = ctypes.CDLL(None, use_errno=True)
_AT_FDCWD, _RENAME_EXCHANGE = -100, 2


def exchange(a: Path, b: Path) -> None:
    """Swap two names atomically (renameat2 RENAME_EXCHANGE), so ``a`` never goes missing."""
    if _LIBC.renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


class Swapper:
    """Swaps ``root/d`` between a real folder and a symlink to ``outside`` until stopped or bounded."""

    def __init__(self, root: Path, outside: Path) -> None:
        self.root, self.stop, self.swaps = root, threading.Event(), 0
        self.error: BaseException | None = None
        (root / "d").mkdir(exist_ok=True)
        (root / "d" / "f.txt").write_text("inside")
        (root / "dl").symlink_to(outside)
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        d, dl = self.root / "d", self.root / "dl"
        deadline = time.monotonic() + MAX_RACE_SECONDS
        try:
            while not self.stop.is_set() and self.swaps < MAX_SWAPS and time.monotonic() < deadline:
                exchange(d, dl)  # d is now a symlink to outside
                exchange(d, dl)  # and a folder again
                self.swaps += 1
        except BaseException as exc:
            self.error = exc
        finally:
            self.stop.set()

    def __enter__(self) -> Swapper:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=MAX_RACE_SECONDS + 5)
        assert not self.thread.is_alive()
        assert self.error is None, self.error
        assert self.swaps > 0


def race(root: Path, outside: Path, attempt: Callable[[], object]) -> Iterator[object]:
    """Results of ``attempt`` while a Swapper runs (refusals count as None)."""
    with Swapper(root, outside) as swapper:
        while not swapper.stop.is_set():
            try:
                yield attempt()
            except ValueError:
                yield None


def test_reads_racing_a_folder_swapped_for_an_outside_symlink_never_see_outside(
    root: Path, outside: Path, tools: dict[str, Any]
) -> None:
    results = list(race(root, outside, lambda: tools["workspace_read"]("d/f.txt")))
    assert results and all(no_secret_in(r) for r in results)
    assert "inside" in results or None in results
    still_works(tools, root)


def test_writes_racing_a_folder_swap_never_land_outside(root: Path, outside: Path, tools: dict[str, Any]) -> None:
    n = 0

    def attempt() -> object:
        nonlocal n
        n += 1
        return tools["workspace_write"](f"d/w{n % 50}.txt", "written")

    results = list(race(root, outside, attempt))
    assert results
    assert sorted(p.name for p in outside.iterdir()) == ["f.txt", "secret.txt"]
    assert (outside / "f.txt").read_text() == SECRET
    still_works(tools, root)


def test_grep_glob_and_list_racing_a_folder_swap_never_walk_outside(
    root: Path, outside: Path, tools: dict[str, Any]
) -> None:
    (outside / "only-outside.txt").write_text(SECRET)
    calls = [
        lambda: tools["workspace_grep"]("SECRET|inside"),
        lambda: tools["workspace_glob"]("**/*.txt"),
        lambda: tools["workspace_list"]("d"),
        lambda: tools["workspace_grep"]("SECRET|inside", "d"),
    ]
    n = 0

    def attempt() -> object:
        nonlocal n
        n += 1
        return calls[n % len(calls)]()

    results = list(race(root, outside, attempt))
    assert results and all(no_secret_in(r) and "only-outside" not in str(r) for r in results)
    still_works(tools, root)


def test_mkdir_edit_and_delete_racing_a_folder_swap_never_touch_outside(
    root: Path, outside: Path, tools: dict[str, Any]
) -> None:
    n = 0

    def attempt() -> object:
        nonlocal n
        n += 1
        step = n % 4
        if step == 0:
            return tools["workspace_mkdir"]("d/newdir")
        if step == 1:
            return tools["workspace_delete"]("d/f.txt")
        if step == 2:
            return tools["workspace_write"]("d/f.txt", "inside")
        return tools["workspace_edit"]("d/f.txt", "inside", "inside")

    list(race(root, outside, attempt))
    assert sorted(p.name for p in outside.iterdir()) == ["f.txt", "secret.txt"]
    assert (outside / "f.txt").read_text() == SECRET
    still_works(tools, root)


# -- the root ----------------------------------------------------------------------------------
def test_a_relative_root_is_resolved_once_so_chdir_changes_nothing(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    cwd = os.getcwd()
    try:
        os.chdir(first)
        card = WorkspaceTool(root="ws")
        os.chdir(second)
        tools = {t.__name__: t for t in card.get_tools(Host())}
        tools["workspace_write"]("a.txt", "x")
        assert (first / "ws" / "a.txt").read_text() == "x"
        assert not (second / "ws").exists()
        assert card.root == "ws" and card.root_dir == str(first / "ws")
        still_works(tools, first / "ws")
    finally:
        os.chdir(cwd)


@pytest.mark.parametrize("broad", ["/", "~", "/root/..", "/etc", "/usr"])
def test_a_broad_root_is_refused_unless_opted_in(broad: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"WorkspaceTool.root=.* set allow_broad_root=True") as info:
        WorkspaceTool(root=broad)
    assert "\n" not in str(info.value)
    WorkspaceTool(root=broad, allow_broad_root=True)  # made, never used
    ok = WorkspaceTool(root=str(tmp_path / "ws"))
    assert ok.write_file("a.txt", "x") == "wrote 1 characters to a.txt"


def test_an_ancestor_of_home_is_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home" / "me"))
    with pytest.raises(ConfigError, match="an ancestor of the home folder"):
        WorkspaceTool(root=str(tmp_path / "home"))
    with pytest.raises(ConfigError, match="the home folder"):
        WorkspaceTool(root="~")
    assert WorkspaceTool(root="~/project").root_dir == str(tmp_path / "home" / "me" / "project")


def test_a_missing_root_is_one_clear_config_error() -> None:
    message = 'WorkspaceTool.root is missing: give the workspace folder, e.g. root="workspace"'
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}$"):
        WorkspaceTool()
    with pytest.raises(ConfigError, match=re.escape(message)):
        WorkspaceTool(root="  ")


@pytest.mark.parametrize(
    ("field", "value"),
    [("max_read_chars", 0), ("max_media_files", -1), ("grep_timeout", float("nan")), ("grep_timeout", float("inf"))],
)
def test_bad_caps_are_config_errors(field: str, value: float, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=f"WorkspaceTool.{field} must be"):
        WorkspaceTool(root=str(tmp_path), **{field: value})


def test_a_root_that_is_a_file_is_a_clear_error_at_use(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    card = WorkspaceTool(root=str(tmp_path / "file"))
    with pytest.raises(ValueError, match=r"cannot be opened .*fix WorkspaceTool\.root"):
        card.read_file("a.txt")


# -- caps ----------------------------------------------------------------------------------
def test_a_multi_megabyte_read_is_cut_and_says_how_to_read_on(root: Path, tools: dict[str, Any]) -> None:
    line = "0123456789" * 9 + "é\n"  # 92 characters, 93 bytes
    (root / "big.txt").write_text(line * 50_000)  # 4.65 MB
    first = tools["workspace_read"]("big.txt")
    text, note = first.rsplit("\n", 1)
    assert len(text) == 100_000 and first.startswith(line)
    assert note == (
        "[cut: showing characters 0-100000 of big.txt (4650000 bytes); "
        "call workspace_read with offset=100000 to see more]"
    )
    second = tools["workspace_read"]("big.txt", offset=100_000)
    assert second.startswith((line * 1000)[100_000:][:50])
    assert "offset=200000" in second
    assert tools["workspace_read"]("big.txt", offset=4_600_000 - 10) == (line * 50_000)[-10:]
    assert "past the end" in tools["workspace_read"]("big.txt", offset=10**9)
    still_works(tools, root)


def test_grep_output_is_capped_and_says_so(root: Path, tools: dict[str, Any]) -> None:
    (root / "many.txt").write_text(("x" * 150 + " hit\n") * 20_000)
    (root / "a_one_line.js").write_text("var a=1;" * 500_000 + "hit")  # a 4 MB single line
    out = tools["workspace_grep"]("hit")
    assert len(out) < 20_000 + 300
    assert out.splitlines()[-1].startswith("(output cut at 20000 characters after ")
    assert "line cut: 4000003 characters" in out
    still_works(tools, root)


def test_grep_skips_files_over_the_size_limit_and_names_them(root: Path) -> None:
    card = WorkspaceTool(root=str(root), max_file_bytes=1_000_000)
    (root / "huge.log").write_bytes(b"needle\n" * 300_000)
    (root / "small.txt").write_text("needle\n")
    assert card.grep_files("needle") == "small.txt:1: needle\n(skipped 1 file over 1.0 MB: huge.log)"
    with pytest.raises(ValueError, match=r"over the 1\.0 MB edit limit"):
        card.edit_file("huge.log", "needle", "pin")
    still_works({t.__name__: t for t in card.get_tools(Host())}, root)


def test_a_catastrophic_regex_ends_in_bounded_time_with_a_message(root: Path) -> None:
    card = WorkspaceTool(root=str(root), grep_timeout=0.5)
    tools = {t.__name__: t for t in card.get_tools(Host())}
    (root / "evil.txt").write_text("a" * 60 + "!\n")
    start = time.monotonic()
    assert tools["workspace_grep"](r"^(a+)+$") == "(no matches)"
    assert time.monotonic() - start < 2
    start = time.monotonic()
    out = tools["workspace_grep"](r"^(a|aa)+$")
    assert time.monotonic() - start < 5
    assert out == "(the search timed out at evil.txt:1; simplify the regular expression or narrow the path)"
    with pytest.raises(ValueError, match="use at most 1000"):
        tools["workspace_grep"]("a" * 1001)
    still_works(tools, root)


# -- media expansion -------------------------------------------------------------------------
def test_a_glob_of_many_large_images_attaches_only_what_the_caps_allow(root: Path, expand: Any) -> None:
    blob = b"\x89PNG" + bytes(1_048_572)  # 1 MiB
    for i in range(60):
        (root / "shots" / f"{i:02}").mkdir(parents=True)
        (root / "shots" / f"{i:02}" / "s.png").write_bytes(blob)
    result = expand("!!**/*.png")
    images = [p for p in result if isinstance(p, BinaryContent)]
    assert len(images) == 9 and sum(len(p.data) for p in images) <= 10_000_000
    assert result[0] == (
        "!!**/*.png[Note: 60 images matched; 9 attached (9.4 MB); a message takes at most 10 images, 10.0 MB]\n"
        "shots/00/s.png:"
    )
    later = expand("!!**/*.png and !!shots/59/s.png")  # the budget is per message
    assert "[Note: not attached (1.0 MB)" in "".join(p for p in later if isinstance(p, str))


def test_media_count_cap_applies_across_references(root: Path) -> None:
    card = WorkspaceTool(root=str(root), max_media_files=2)
    for name in "abc":
        (root / f"{name}.png").write_bytes(b"\x89PNG")
    result = card.expand_media_refs("!!a.png !!b.png !!c.png")
    assert [p for p in result if isinstance(p, BinaryContent)] == [
        BinaryContent(b"\x89PNG", media_type="image/png")
    ] * 2
    assert "!!c.png[Note: not attached (0.0 kB); a message takes at most 2 images, 10.0 MB]" in result[-1]


def test_media_through_symlinks_or_hardlinks_is_not_attached(
    root: Path, outside: Path, expand: Any, tools: dict[str, Any]
) -> None:
    (outside / "pic.png").write_bytes(b"\x89PNG outside")
    (root / "link.png").symlink_to(outside / "pic.png")
    (root / "dir").symlink_to(outside)
    os.link(outside / "pic.png", root / "hard.png")
    assert expand("!!link.png") == "!!link.png[Error: path is outside the workspace]"
    assert expand("!!dir/pic.png") == "!!dir/pic.png[Error: path is outside the workspace]"
    assert expand("!!hard.png") == "!!hard.png[Error: hardlink: not attached]"
    assert expand("!!**/*.png") == "!!**/*.png[Error: no image found in the workspace]"
    (root / "own.png").write_bytes(b"\x89PNG own")
    assert expand("!!*.png") == ["!!*.png\nown.png:", BinaryContent(b"\x89PNG own", media_type="image/png")]
    still_works(tools, root)


def test_the_model_facing_tool_names_are_unchanged(card: WorkspaceTool) -> None:
    names = [t.__name__ for t in card.get_tools(Host())]
    assert names == [
        "workspace_read",
        "workspace_list",
        "workspace_glob",
        "workspace_grep",
        "workspace_write",
        "workspace_edit",
        "workspace_delete",
        "workspace_mkdir",
    ]
    assert re.search(r"offset", card.get_tools(Host())[0].__doc__ or "")
