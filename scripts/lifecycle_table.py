"""Writes the job's life-cycle table (cpp/src/common/lifecycle.cpp, through
davincirunsdk._core.job_transitions()) as Markdown: an overview, an event
a row and a state a column, then every answer with its reason.

    python3 scripts/lifecycle_table.py                  # print it
    python3 scripts/lifecycle_table.py --write FILE     # replace it in FILE (docs/architecture.md)
    python3 scripts/lifecycle_table.py --check FILE     # exit 1 when FILE's copy is not the table's

FILE holds the table between the lines BEGIN and END below; the test suite
runs --check on docs/architecture.md, so the document is the table."""

import argparse
import sys

BEGIN = "<!-- lifecycle table: begin (scripts/lifecycle_table.py --write docs/architecture.md) -->"
END = "<!-- lifecycle table: end -->"

SHORT = {
    "waiting_for_table": "table",
    "planning": "plan",
    "starting": "start",
    "running": "run",
    "stopping": "stop",
    "killing": "kill",
    "draining": "drain",
    "waiting_for_servers": "wait",
    "restarting": "restart",
    "done": "done",
}
MARK = {"note": "·", "ignored": "·", "deferred": "later", "impossible": "–"}


def cell_text(cell):
    if cell["answer"] in ("proceed", "stop", "escalate"):
        text = "→ " + SHORT[cell["next"]] if cell["next"] != cell["state"] else "named"
        if cell["answer"] == "stop":
            text = "**" + text + "**"
        return text + (" ✉" if cell["tells_peers"] else "")
    return MARK[cell["answer"]]


def render(cells):
    states = list(dict.fromkeys(c["state"] for c in cells))
    events = list(dict.fromkeys(c["event"] for c in cells))
    by = {(c["state"], c["event"]): c for c in cells}
    out = [
        "Overview: what each event does in each state. **→ x**: the event names the job's stop (when it is the "
        "first) and the job moves to x; → x: it moves to x; **named**: it names the stop and the job stays; ✉: "
        "the other servers are told; ·: nothing changes (a rank's exit is recorded, or that the attempt is not to be "
        "restarted); later: kept until this "
        "short state ends; –: cannot happen here. The states: " + ", ".join(
            "%s `%s`" % (SHORT[s], s) for s in states) + ".",
        "",
        "| event | " + " | ".join(SHORT[s] for s in states) + " |",
        "| --- |" + " --- |" * len(states),
    ]
    for e in events:
        out.append("| `%s` | " % e + " | ".join(cell_text(by[(s, e)]) for s in states) + " |")
    out += ["", "Every answer and its reason (states that answer alike share a row):", "",
            "| event | in | answer | then | what happens, or why nothing |", "| --- | --- | --- | --- | --- |"]
    for e in events:
        groups = []
        for s in states:
            c = by[(s, e)]
            key = (c["answer"], c["next"] if c["next"] != s else None, c["tells_peers"], c["why"])
            for group in groups:
                if group[0] == key:
                    group[1].append(s)
                    break
            else:
                groups.append((key, [s]))
        for (answer, nxt, peers, why), in_states in groups:
            then = ("`%s`" % nxt) if nxt else "stays"
            out.append("| `%s` | %s | %s | %s | %s%s |" % (
                e, ", ".join(SHORT[s] for s in in_states), answer, then, why,
                "; the other servers are told" if peers else ""))
    return "\n".join(out) + "\n"


def replace(text, table):
    start = text.index(BEGIN) + len(BEGIN)
    end = text.index(END)
    return text[:start] + "\n" + table + text[end:]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", metavar="FILE")
    parser.add_argument("--check", metavar="FILE")
    args = parser.parse_args()
    from davincirunsdk import _core

    table = render(_core.job_transitions())
    if args.write or args.check:
        path = args.write or args.check
        with open(path, encoding="utf-8") as f:
            text = f.read()
        wanted = replace(text, table)
        if args.check:
            if wanted != text:
                print("%s: its life-cycle table differs from the code's; run python3 scripts/lifecycle_table.py "
                      "--write %s" % (path, path), file=sys.stderr)
                return 1
            return 0
        with open(path, "w", encoding="utf-8") as f:
            f.write(wanted)
        return 0
    sys.stdout.write(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
