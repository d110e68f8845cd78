from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.messages import BinaryContent

from aklab.tools import ToolFactory, WorkspaceTool

PNG = b"\x89PNG\r\n\x1a\nfake"


@dataclass
class Host:
    name: str = "@Dev"
    role: str = "Developer"
    directory: Any = None


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "ws"


@pytest.fixture
def tools(root: Path) -> dict[str, Any]:
    return {t.__name__: t for t in WorkspaceTool(root=str(root)).get_tools(Host())}


@pytest.fixture
def expand(root: Path) -> Any:
    registry = ToolFactory([WorkspaceTool(root=str(root))], Host()).get_command_registry()
    return registry.callable("_expand_media_refs")


def test_the_root_folder_is_created_when_missing(root: Path, tools: dict[str, Any]) -> None:
    assert tools["workspace_list"]() == "(empty)"
    assert root.is_dir()


def test_written_files_read_back_and_parent_folders_are_created(root: Path, tools: dict[str, Any]) -> None:
    assert tools["workspace_write"]("notes/today.md", "hello\n") == "wrote 6 characters to notes/today.md"
    assert tools["workspace_read"]("notes/today.md") == "hello\n"
    assert (root / "notes" / "today.md").read_text() == "hello\n"


def test_reading_a_missing_or_binary_file_is_a_clear_error(root: Path, tools: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="is not a file"):
        tools["workspace_read"]("missing.txt")
    (root / "pic.png").write_bytes(PNG)
    with pytest.raises(ValueError, match="not UTF-8 text"):
        tools["workspace_read"]("pic.png")


def test_listing_shows_sorted_paths_with_folders_marked(tools: dict[str, Any]) -> None:
    tools["workspace_write"]("b.txt", "")
    tools["workspace_write"]("a/inner.txt", "")
    tools["workspace_mkdir"]("c")
    assert tools["workspace_list"]() == "a/\nb.txt\nc/"
    assert tools["workspace_list"]("a") == "a/inner.txt"
    with pytest.raises(ValueError, match="not a directory"):
        tools["workspace_list"]("b.txt")


def test_glob_returns_matching_paths_sorted(tools: dict[str, Any]) -> None:
    for path in ["src/z.py", "src/a.py", "src/deep/m.py", "README.md"]:
        tools["workspace_write"](path, "")
    assert tools["workspace_glob"]("**/*.py") == "src/a.py\nsrc/deep/m.py\nsrc/z.py"
    assert tools["workspace_glob"]("*.txt") == "(no matches)"


def test_grep_reports_file_line_and_text_for_each_hit(tools: dict[str, Any]) -> None:
    tools["workspace_write"]("a.py", "import os\nx = 1\n")
    tools["workspace_write"]("pkg/b.py", "def f():\n    return os.getcwd()\n")
    assert tools["workspace_grep"](r"\bos\b") == "a.py:1: import os\npkg/b.py:2:     return os.getcwd()"
    assert tools["workspace_grep"]("def", "pkg") == "pkg/b.py:1: def f():"
    assert tools["workspace_grep"]("nowhere") == "(no matches)"
    with pytest.raises(ValueError, match="invalid regular expression"):
        tools["workspace_grep"]("(unclosed")


def test_grep_stops_at_two_hundred_hits(tools: dict[str, Any]) -> None:
    tools["workspace_write"]("many.txt", "hit\n" * 300)
    lines = tools["workspace_grep"]("hit").splitlines()
    assert len(lines) == 201
    assert lines[199] == "many.txt:200: hit"
    assert "stopped at 200 hits" in lines[200]


def test_edit_replaces_exactly_one_occurrence(tools: dict[str, Any]) -> None:
    tools["workspace_write"]("f.txt", "alpha beta beta")
    assert tools["workspace_edit"]("f.txt", "alpha", "gamma") == "edited f.txt"
    assert tools["workspace_read"]("f.txt") == "gamma beta beta"
    with pytest.raises(ValueError, match="found 2 times"):
        tools["workspace_edit"]("f.txt", "beta", "delta")
    with pytest.raises(ValueError, match="not found"):
        tools["workspace_edit"]("f.txt", "omega", "delta")
    assert tools["workspace_read"]("f.txt") == "gamma beta beta"


def test_delete_removes_files_and_folders_but_never_the_root(root: Path, tools: dict[str, Any]) -> None:
    tools["workspace_write"]("gone.txt", "x")
    tools["workspace_write"]("dir/inner.txt", "x")
    tools["workspace_delete"]("gone.txt")
    tools["workspace_delete"]("dir")
    assert list(root.iterdir()) == []
    with pytest.raises(ValueError, match="does not exist"):
        tools["workspace_delete"]("gone.txt")
    with pytest.raises(ValueError, match="root itself"):
        tools["workspace_delete"](".")


def test_mkdir_creates_nested_folders_and_is_repeatable(root: Path, tools: dict[str, Any]) -> None:
    assert tools["workspace_mkdir"]("a/b/c") == "directory a/b/c ready"
    assert tools["workspace_mkdir"]("a/b/c") == "directory a/b/c ready"
    assert (root / "a" / "b" / "c").is_dir()


@pytest.mark.parametrize("escape", ["../x", "sub/../../x", "/etc/passwd"])
def test_paths_leading_out_of_the_root_are_refused_on_every_operation(
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
        with pytest.raises(ValueError, match=re.escape(f"path '{escape}' is outside the workspace root {root}")):
            tools[name](*args)
    assert not (root.parent / "x").exists()


def test_symlinks_pointing_outside_the_root_are_refused(root: Path, tmp_path: Path, tools: dict[str, Any]) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    root.mkdir()
    (root / "dir_link").symlink_to(outside)
    (root / "file_link").symlink_to(outside / "secret.txt")
    (root / "dangling").symlink_to(outside / "new.txt")
    for path in ["dir_link/secret.txt", "file_link"]:
        with pytest.raises(ValueError, match="outside the workspace root"):
            tools["workspace_read"](path)
    with pytest.raises(ValueError, match="outside the workspace root"):
        tools["workspace_write"]("dangling", "escaped")
    assert not (outside / "new.txt").exists()
    assert tools["workspace_grep"]("secret") == "(no matches)"
    assert tools["workspace_glob"]("**/*.txt") == "(no matches)"


def test_a_symlink_inside_the_root_is_followed_and_deleting_it_keeps_its_target(
    root: Path, tools: dict[str, Any]
) -> None:
    tools["workspace_write"]("real.txt", "content")
    (root / "alias.txt").symlink_to(root / "real.txt")
    assert tools["workspace_read"]("alias.txt") == "content"
    tools["workspace_delete"]("alias.txt")
    assert not (root / "alias.txt").exists()
    assert (root / "real.txt").read_text() == "content"


def test_the_system_prompt_is_one_fixed_line_about_the_workspace(root: Path) -> None:
    prompts = WorkspaceTool(root=str(root)).get_system_prompts(Host())
    assert len(prompts) == 1 and "\n" not in prompts[0]
    assert "workspace" in prompts[0] and "!!" in prompts[0]


def test_an_image_reference_becomes_binary_content_in_place(root: Path, expand: Any) -> None:
    root.mkdir()
    (root / "chart.png").write_bytes(PNG)
    assert expand("Look at !!chart.png, then answer.") == [
        "Look at !!chart.png",
        BinaryContent(data=PNG, media_type="image/png"),
        ", then answer.",
    ]


@pytest.mark.parametrize(
    ("name", "media_type"),
    [("a.jpg", "image/jpeg"), ("a.JPEG", "image/jpeg"), ("a.gif", "image/gif"), ("a.webp", "image/webp")],
)
def test_each_image_kind_gets_its_media_type(root: Path, expand: Any, name: str, media_type: str) -> None:
    root.mkdir()
    (root / name).write_bytes(b"img")
    assert expand(f"!!{name}") == [f"!!{name}", BinaryContent(data=b"img", media_type=media_type)]


def test_a_quoted_reference_may_contain_spaces(root: Path, expand: Any) -> None:
    root.mkdir()
    (root / "my screenshot.png").write_bytes(PNG)
    result = expand('see !!"my screenshot.png" here')
    assert result == ['see !!"my screenshot.png"', BinaryContent(data=PNG, media_type="image/png"), " here"]


def test_a_glob_expands_every_matching_image_sorted_by_path(root: Path, expand: Any) -> None:
    root.mkdir()
    for name in ["z.png", "a.png", "m.png"]:
        (root / name).write_bytes(name.encode())
    (root / "notes.txt").write_text("not an image")
    result = expand("compare !!*.png")
    assert [p.data for p in result if isinstance(p, BinaryContent)] == [b"a.png", b"m.png", b"z.png"]
    labels = "".join(p for p in result if isinstance(p, str))
    assert labels.index("a.png:") < labels.index("m.png:") < labels.index("z.png:")


def test_a_document_reference_is_annotated_to_use_workspace_read(root: Path, expand: Any) -> None:
    root.mkdir()
    (root / "report.pdf").write_bytes(b"%PDF")
    assert expand("summarise !!report.pdf") == "summarise !!report.pdf[=> Use workspace_read tool]"


def test_a_reference_matching_nothing_is_annotated_as_an_error(root: Path, expand: Any) -> None:
    missing = "!!nonexistent.png[Error: no image found in the workspace]"
    assert expand("show !!nonexistent.png") == f"show {missing}"
    assert expand("show !!*.gif") == "show !!*.gif[Error: no image found in the workspace]"


def test_a_reference_leading_out_of_the_root_is_annotated_not_read(root: Path, tmp_path: Path, expand: Any) -> None:
    (tmp_path / "x.png").write_bytes(PNG)
    assert expand("!!../x.png") == "!!../x.png[Error: path is outside the workspace]"


def test_text_without_references_comes_back_as_the_same_object(expand: Any) -> None:
    for text in ["plain text", "Wow!! Great", "a!!b.png is not a reference"]:
        assert expand(text) is text


def test_already_annotated_text_is_left_alone(root: Path, expand: Any) -> None:
    root.mkdir()
    (root / "report.pdf").write_bytes(b"%PDF")
    once = expand("!!report.pdf and !!missing.png")
    assert expand(once) is once


def test_images_and_annotations_mix_in_order(root: Path, expand: Any) -> None:
    root.mkdir()
    (root / "a.png").write_bytes(PNG)
    (root / "doc.md").write_text("# doc")
    result = expand("!!doc.md then !!a.png end")
    assert result == [
        "!!doc.md[=> Use workspace_read tool] then !!a.png",
        BinaryContent(data=PNG, media_type="image/png"),
        " end",
    ]
