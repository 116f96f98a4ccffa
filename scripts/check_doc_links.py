#!/usr/bin/env python3
"""Checks every relative link in the repository's Markdown files: the file it names exists inside
the repository, and an #anchor names a heading of that file (GitHub's slugs). Links to http(s)
and mailto are not followed. Prints each broken link as file:line and exits 1 if there is one.

Usage: scripts/check_doc_links.py [REPO_ROOT]
"""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parent.parent).resolve()
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^\s*```")


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path):
    found, fenced = set(), False
    for line in path.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced and line.startswith("#"):
            found.add(slug(line.lstrip("#")))
    return found


def markdown_files():
    skip = {"build", ".git"}
    for p in sorted(root.rglob("*.md")):
        rel = p.relative_to(root).parts
        if rel[0] in skip or rel[0].startswith("build"):
            continue
        yield p


broken = []
for md in markdown_files():
    fenced = False
    for number, line in enumerate(md.read_text(encoding="utf-8").splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if fenced:
            continue
        for target in LINK.findall(line):
            if re.match(r"^(https?|mailto):", target):
                continue
            path_part, _, fragment = target.partition("#")
            dest = md if path_part == "" else (md.parent / path_part).resolve()
            where = f"{md.relative_to(root)}:{number}: {target}"
            if root not in dest.parents and dest != root:
                broken.append(f"{where}: outside the repository")
            elif not dest.exists():
                broken.append(f"{where}: no such file")
            elif fragment and dest.suffix == ".md" and fragment not in anchors(dest):
                broken.append(f"{where}: no heading '#{fragment}' in {dest.relative_to(root)}")

for b in broken:
    print(b)
print(f"check_doc_links: {len(broken)} broken link(s)" if broken else "check_doc_links: every link resolves")
sys.exit(1 if broken else 0)
