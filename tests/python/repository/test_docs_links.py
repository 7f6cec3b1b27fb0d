"""The documentation holds together: every relative link of every Markdown
file of the repository (README.md, CONTRIBUTING.md, docs/ with docs/zh/,
bench/...) names a file that exists and, with a #fragment, a heading or an
HTML anchor of it; every Python code block of the docs parses, as Python 3.7
(the oldest version users run) reads it where this interpreter can tell.

Anchors follow GitHub's rule for headings: the heading's text, lower-cased,
without punctuation (Chinese punctuation included), spaces made hyphens, and
-1, -2... added to repeats."""

import ast
import functools
import os
import re
import sys
import unicodedata

import pytest
from conftest import REPO

SKIPPED_DIRS = {"build", "dist", "node_modules"}  # build/ holds virtual environments full of other Markdown

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})\s*([\w+-]*)")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^()\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_DEFINITION = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"")
INLINE_CODE = re.compile(r"(`+)(.+?)\1")
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def markdown_files():
    found = []
    for root, dirs, files in os.walk(REPO):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS and not d.startswith(".") and "egg-info" not in d)
        found.extend(os.path.join(root, f) for f in sorted(files) if f.endswith(".md"))
    return found


def parse(path):
    """(lines outside code blocks as (number, text), code blocks as (number, language, text))."""
    prose, blocks = [], []
    fence = None
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    for number, line in enumerate(lines, 1):
        match = FENCE.match(line)
        if fence is None and match:
            fence = (match.group(1), match.group(2).lower(), number, [])
        elif fence is not None and len(line.strip()) >= len(fence[0]) and not line.strip().strip(fence[0][0]):
            blocks.append((fence[2], fence[1], "\n".join(fence[3])))
            fence = None
        elif fence is not None:
            fence[3].append(line)
        else:
            prose.append((number, line))
    assert fence is None, "%s:%d: a code block is never closed" % (path, fence[2])
    return prose, blocks


def heading_slug(text):
    """GitHub's anchor for a heading's text."""
    text = INLINE_CODE.sub(lambda m: m.group(2), text)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link's text stays
    text = re.sub(r"<[^>]+>", "", text).replace("*", "")
    kept = []
    for ch in text.lower():
        category = unicodedata.category(ch)
        if ch in " -" or category[0] in "LMN" or category == "Pc":
            kept.append("-" if ch == " " else ch)
    return "".join(kept)


@functools.lru_cache(maxsize=None)
def anchors_of(path):
    prose, _ = parse(path)
    anchors, seen = set(), {}
    for _, line in prose:
        anchors.update(HTML_ANCHOR.findall(line))
        match = HEADING.match(line)
        if match:
            slug = heading_slug(match.group(2))
            count = seen.get(slug, 0)
            seen[slug] = count + 1
            anchors.add(slug if count == 0 else "%s-%d" % (slug, count))
    return frozenset(anchors)


def links_of(path):
    prose, _ = parse(path)
    for number, line in prose:
        line = INLINE_CODE.sub("", line)  # `[x](y)` in code is not a link
        targets = INLINE_LINK.findall(line)
        definition = REFERENCE_DEFINITION.match(line)
        if definition:
            targets.append(definition.group(1))
        for target in targets:
            yield number, target


def broken_link(path, target):
    """Why a link does not resolve, or None."""
    if SCHEME.match(target) or target.startswith("//"):
        return None  # another site: not checked here
    file_part, _, fragment = target.partition("#")
    file_part = file_part.split("?")[0]
    resolved = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
    if not resolved.startswith(REPO + os.sep):
        return "points outside the repository"
    if not os.path.exists(resolved):
        return "no such file: %s" % os.path.relpath(resolved, REPO)
    if fragment and resolved.endswith(".md") and fragment not in anchors_of(resolved):
        return "no heading or anchor #%s in %s" % (fragment, os.path.relpath(resolved, REPO))
    return None


def test_the_docs_are_found():
    found = {os.path.relpath(p, REPO) for p in markdown_files()}
    for page in ["README.md", "docs/usage.md", "docs/notebooks.md", "docs/zh/README.md", "docs/zh/usage.md",
                 "docs/zh/notebooks.md", "docs/zh/migration.md"]:
        assert page in found


@pytest.mark.parametrize("path", markdown_files(), ids=lambda p: os.path.relpath(p, REPO))
def test_every_relative_link_resolves(path):
    broken = []
    for number, target in links_of(path):
        why = broken_link(path, target)
        if why:
            broken.append("%s:%d: (%s) %s" % (os.path.relpath(path, REPO), number, target, why))
    assert not broken, "\n".join(broken)


def test_the_link_check_finds_what_is_broken(tmp_path):
    """The checker itself: a missing file and a missing anchor are found, a good one is not."""
    page = tmp_path / "page.md"
    text = "# Démarrage rapide\n\n## 快速开始（一个单元格）\n\n```text\n# not a heading\n```\n"
    page.write_text(text, encoding="utf-8")
    assert anchors_of(str(page)) == {"démarrage-rapide", "快速开始一个单元格"}
    assert heading_slug("The `davincirun` command") == "the-davincirun-command"
    assert heading_slug("Coming from davincirunsdk 0.1.x") == "coming-from-davincirunsdk-01x"
    inside = os.path.join(REPO, "docs", "page.md")
    assert broken_link(inside, "usage.md#python-api") is None
    assert broken_link(inside, "https://example.org/nothing.md") is None
    assert "no such file" in broken_link(inside, "nothing.md")
    assert "no heading" in broken_link(inside, "usage.md#nothing-here")


def python_blocks():
    for path in markdown_files():
        _, blocks = parse(path)
        for number, language, text in blocks:
            if language in ("python", "py"):
                yield pytest.param(text, id="%s:%d" % (os.path.relpath(path, REPO), number))


@pytest.mark.parametrize("source", list(python_blocks()))
def test_every_python_block_parses(source):
    if sys.version_info >= (3, 8):
        ast.parse(source, feature_version=(3, 7))
    else:
        ast.parse(source)
