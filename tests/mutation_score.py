"""The mutation score per module, from the last ``mutmut run`` (a developer command; see the README's Development section).

Usage (from the repository root, after ``mutmut run``)::

    .venv/bin/python tests/mutation_score.py              # the table
    .venv/bin/python tests/mutation_score.py --survivors  # and every surviving mutant that is not equivalent

Score = killed / (mutants - equivalent). Killed counts mutants a test failed on, and those that made a test time
out. Equivalent mutants (no test can tell them from the original: same behaviour, only slower, or unreachable)
are listed by hand in ``tests/mutation_equivalent.toml``, each with the reason, and matched by their function and
their changed lines (not by mutmut's numbers, which shift when the code changes).

Each entry must match exactly one mutant among all that mutmut generated (whatever their status, so a run of one
module checks every entry): when the same change can be made at several places of one function, the entry names the
place with ``line`` (the changed line's number in the function as mutmut prints it, its first line, a decorator or
the ``def``, being 1). An entry that matches no mutant or several is an error: the table is printed with the problems
and the exit status is 1. A surviving mutant counts as equivalent only when an entry matches it and nothing else.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - mutmut 3 runs on 3.10 too
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
EQUIVALENT = ROOT / "tests" / "mutation_equivalent.toml"
KILLED = {"killed", "timeout", "caught by type check", "segfault"}


def change_of(diff: str) -> str:
    """The removed and added lines of a mutant's diff, stripped: what identifies the mutation in its function."""
    lines = [line for line in diff.splitlines() if not line.startswith(("---", "+++", "@@"))]
    return "\n".join(line[0] + " " + line[1:].strip() for line in lines if line[:1] in "-+")


def function_of(name: str) -> str:
    return name.rsplit("__mutmut_", 1)[0]


def module_of(name: str) -> str:
    return function_of(name).rsplit(".", 1)[0]


def line_of(diff: str) -> int | None:
    """The number, within its function as mutmut prints it (its first line being 1) of the line a diff changes."""
    line = None
    for text in diff.splitlines():
        if text.startswith("@@"):
            line = int(text.split()[1].split(",")[0].lstrip("-"))
        elif line is not None and not text.startswith(("---", "+++")):
            if text[:1] in "-+":
                return line
            line += 1
    return None


def load_equivalents() -> list[dict[str, Any]]:
    """The entries of the equivalent list, each with ``function``, ``change`` (stripped), ``reason`` and ``line``."""
    data = tomllib.loads(EQUIVALENT.read_text()) if EQUIVALENT.exists() else {}
    return [{"function": e["function"], "change": e["change"].strip(), "reason": e["reason"], "line": e.get("line")}
            for e in data.get("equivalent", [])]


def match_equivalents(entries: list[dict[str, Any]], mutants: dict[str, tuple[str, str, int | None]]
                      ) -> tuple[set[str], list[str]]:
    """The mutants matched by exactly one entry each, and a line per entry that matches none or several.

    Args:
        entries: the equivalent list (:func:`load_equivalents`).
        mutants: mutant name -> (function, change, line) for every generated mutant of the entries' functions.
    """
    by_change: dict[tuple[str, str], list[tuple[str, int | None]]] = defaultdict(list)
    for name, (function, change, line) in mutants.items():
        by_change[(function, change)].append((name, line))
    matched: set[str] = set()
    problems: list[str] = []
    for entry in entries:
        found = [(name, line) for name, line in by_change.get((entry["function"], entry["change"]), [])
                 if entry["line"] is None or entry["line"] == line]
        where = f"{entry['function']}: {entry['change'].splitlines()[0] if entry['change'] else ''}"
        if entry["line"] is not None:
            where += f" (line {entry['line']})"
        if not found:
            problems.append(f"matches no mutant: {where}")
        elif len(found) > 1:
            lines = ", ".join(str(line) for _, line in sorted(found, key=lambda f: f[1] or 0))
            problems.append(f"matches {len(found)} mutants (lines {lines}; name one with `line`): {where}")
        elif found[0][0] in matched:
            problems.append(f"listed twice: {where}")
        else:
            matched.add(found[0][0])
    return matched, problems


def collect(entries: list[dict[str, Any]]) -> tuple[dict[str, Counter[str]], list[tuple[str, str]], list[str]]:
    """Per module counts, the surviving non-equivalent mutants and the equivalent list's problems, from mutants/."""
    from mutmut.mutation.data import SourceFileMutationData
    from mutmut.mutation.diff_apply import get_diff_for_mutant
    from mutmut.stats import status_by_exit_code
    from mutmut.utils.file_utils import walk_mutatable_files

    listed = {e["function"] for e in entries}
    statuses: dict[str, str] = {}
    described: dict[str, tuple[str, str, int | None]] = {}
    diffs: dict[str, str] = {}
    for path in walk_mutatable_files():
        data = SourceFileMutationData(path=path)
        data.load()
        for name, code in data.exit_code_by_key.items():
            statuses[name] = status = status_by_exit_code[code]
            if function_of(name) in listed or status not in KILLED | {"not checked"}:
                diffs[name] = diff = get_diff_for_mutant(name, path=path)
                described[name] = (function_of(name), change_of(diff), line_of(diff))
    equivalent, problems = match_equivalents(entries, described)
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    survivors: list[tuple[str, str]] = []
    for name, status in statuses.items():
        c = counts[module_of(name)]
        c["mutants"] += 1
        if status in KILLED:
            c["killed"] += 1
        elif status == "not checked":
            c["not checked"] += 1
        elif name in equivalent:
            c["equivalent"] += 1
        else:
            c["survived" if status == "survived" else "no tests"] += 1
            survivors.append((name, diffs[name]))
    return counts, survivors, problems


def score_of(c: Counter[str]) -> str:
    judged = c["mutants"] - c["equivalent"] - c["not checked"]
    return f"{100 * c['killed'] / judged:.1f}%" if judged else "-"


def print_table(counts: dict[str, Counter[str]], markdown: bool) -> None:
    if markdown:
        print("| module | mutants | equivalent | killed | survived | no test | not run | score |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        for module in sorted(counts):
            c = counts[module]
            print(f"| `{module.removeprefix('otel_loopguard.')}` | {c['mutants']} | {c['equivalent']} | {c['killed']} "
                  f"| {c['survived']} | {c['no tests']} | {c['not checked']} | {score_of(c)} |")
        return
    print(f"{'module':36} {'mutants':>7} {'equiv.':>6} {'killed':>6} {'surv.':>5} {'no test':>7} {'score':>7}")
    for module in sorted(counts):
        c = counts[module]
        print(f"{module:36} {c['mutants']:7} {c['equivalent']:6} {c['killed']:6} {c['survived']:5} "
              f"{c['no tests']:7} {score_of(c):>7}" + (f"  ({c['not checked']} not checked)" if c["not checked"] else ""))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--survivors", action="store_true", help="print every surviving non-equivalent mutant")
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown (for the README)")
    args = parser.parse_args(argv)
    os.chdir(ROOT)
    counts, survivors, problems = collect(load_equivalents())
    print_table(counts, args.markdown)
    if problems:
        print(f"\n{len(problems)} entr{'y' if len(problems) == 1 else 'ies'} of {EQUIVALENT.name} not matching exactly "
              f"one mutant (the score is not valid until they do):", file=sys.stderr)
        for problem in problems:
            print(f"  {problem}", file=sys.stderr)
    if args.survivors:
        for name, diff in survivors:
            print(f"\n# {name}\n{diff}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
