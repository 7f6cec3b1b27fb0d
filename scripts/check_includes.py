#!/usr/bin/env python3
"""The core's layering: its folders include each other only down the data flow.

The folders under cpp/src are stages, in this order (docs/architecture.md,
"The source tree"):

    common → rank_table → plan → output → process → job → peers → record

A file may include its own stage's headers and those of the stages before
it, never one after it; no two stages may include each other. A public
header (cpp/include/davincirun/X.hpp) belongs to the stage whose folder
holds X.cpp, or whose .cpp includes it first (the file implementing it);
header-only ones are named in HEADER_ONLY. The umbrella davincirun.hpp is
for consumers only.

    python3 scripts/check_includes.py            the graph, then every violation; exit 1 if any
    python3 scripts/check_includes.py --graph    the graph only (exit 0)
"""

from __future__ import annotations

import re
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "cpp" / "src"
PUBLIC = ROOT / "cpp" / "include" / "davincirun"

STAGES = ["common", "rank_table", "plan", "output", "process", "job", "peers", "record"]
# Public headers with no .cpp of their own.
HEADER_ONLY = {
    "unique_fd.hpp": "common",
    "enum_names.hpp": "common",
    "fields.hpp": "common",
    "supervisor_options.hpp": "common",
}
UMBRELLA = "davincirun.hpp"
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def includes(path: Path):
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        match = INCLUDE.match(line)
        if match:
            yield number, match.group(1)


def public_stages() -> dict[str, str]:
    """Each public header's stage, from the .cpp that implements it."""
    stage_of: dict[str, str] = dict(HEADER_ONLY)
    sources = sorted(p for p in SRC.glob("*/*.cpp") if p.parent.name in STAGES)
    for source in sources:
        name = source.stem + ".hpp"
        if (PUBLIC / name).exists():
            stage_of.setdefault(name, source.parent.name)
    for source in sources:  # else the .cpp whose first include it is
        first = next(iter(includes(source)), None)
        if first and first[1].startswith("davincirun/"):
            stage_of.setdefault(first[1][len("davincirun/"):], source.parent.name)
    return stage_of


def main(argv: list[str]) -> int:
    stage_of = public_stages()
    problems: list[str] = []
    for header in sorted(PUBLIC.glob("*.hpp")):
        if header.name != UMBRELLA and header.name not in stage_of:
            problems.append(
                f"cpp/include/davincirun/{header.name}: no stage: add its .cpp to a folder of cpp/src, or name it "
                f"in HEADER_ONLY of scripts/check_includes.py")

    # (from stage, to stage) -> the includes that make the edge
    edges: dict[tuple[str, str], list[str]] = defaultdict(list)
    files = [(p, p.parent.name) for p in sorted(SRC.glob("*/*")) if p.suffix in (".cpp", ".hpp", ".inc")]
    files += [(p, stage_of.get(p.name)) for p in sorted(PUBLIC.glob("*.hpp")) if p.name != UMBRELLA]
    for path, stage in files:
        if stage not in STAGES:
            if path.parent.parent == SRC:
                problems.append(f"{path.relative_to(ROOT)}: cpp/src/{path.parent.name} is not a stage ({STAGES})")
            continue
        for number, target in includes(path):
            where = f"{path.relative_to(ROOT)}:{number} includes {target}"
            if target == "davincirun/" + UMBRELLA:
                problems.append(f"{where}: the umbrella header is for consumers; include the header you need")
                continue
            if target.startswith("davincirun/"):
                to = stage_of.get(target[len("davincirun/"):])
            elif "/" in target:
                to = target.split("/", 1)[0]
            else:
                to = stage  # beside the file
            if to is None or to not in STAGES:
                problems.append(f"{where}: not a header of any stage")
                continue
            if to != stage:
                edges[(stage, to)].append(where)

    order = {s: i for i, s in enumerate(STAGES)}
    print("stages: " + " → ".join(STAGES))
    for stage in STAGES:
        used = sorted({to for (frm, to) in edges if frm == stage}, key=order.get)
        counts = ", ".join(f"{to} ({len(edges[(stage, to)])})" for to in used)
        print(f"  {stage:<10} includes {counts or 'no other stage'}")
    if "--graph" in argv:
        return 0

    for (frm, to), where in sorted(edges.items(), key=lambda e: (order[e[0][0]], order[e[0][1]])):
        if order[to] <= order[frm]:
            continue
        if (to, frm) in edges:
            problems.append(
                f"{frm} and {to} include each other: {frm} → {to} in {'; '.join(where)}; "
                f"{to} → {frm} in {'; '.join(edges[(to, frm)])}")
        else:
            allowed = ", ".join(STAGES[: order[frm]]) or "none"
            problems.append(
                f"{frm} includes {to}, a later stage ({'; '.join(where)}): {frm} may include only itself and "
                f"the stages before it ({allowed}); move what it needs down the order")
    if problems:
        print(f"\n{len(problems)} layering problem(s):", file=sys.stderr)
        for problem in problems:
            print("  " + problem, file=sys.stderr)
        return 1
    print("includes: every stage includes only earlier stages")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
