"""The mutation score per module, from the last ``mutmut run`` (a developer command; see the README's Development section).

Usage (from the repository root, after ``mutmut run``)::

    .venv/bin/python tests/mutation_score.py              # the table
    .venv/bin/python tests/mutation_score.py --survivors  # and every surviving mutant that is not equivalent

Score = killed / (mutants - equivalent). Killed counts mutants a test failed on, and those that made a test time
out. Equivalent mutants (no test can tell them from the original: same behaviour, only slower, or unreachable)
are listed by hand in ``tests/mutation_equivalent.toml``, each with the reason, and matched by their function and
their changed lines (not by mutmut's numbers, which shift when the code changes).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter, defaultdict
from pathlib import Path

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


def load_equivalents() -> dict[tuple[str, str], str]:
    data = tomllib.loads(EQUIVALENT.read_text()) if EQUIVALENT.exists() else {}
    return {(e["function"], e["change"].strip()): e["reason"] for e in data.get("equivalent", [])}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--survivors", action="store_true", help="print every surviving non-equivalent mutant")
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown (for the README)")
    args = parser.parse_args(argv)

    import os

    os.chdir(ROOT)
    from mutmut.mutation.data import SourceFileMutationData
    from mutmut.mutation.diff_apply import get_diff_for_mutant
    from mutmut.stats import status_by_exit_code
    from mutmut.utils.file_utils import walk_mutatable_files

    equivalents = load_equivalents()
    used: set[tuple[str, str]] = set()
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    survivors: list[tuple[str, str]] = []
    for path in walk_mutatable_files():
        data = SourceFileMutationData(path=path)
        data.load()
        for name, code in data.exit_code_by_key.items():
            status = status_by_exit_code[code]
            module = module_of(name)
            counts[module]["mutants"] += 1
            if status in KILLED:
                counts[module]["killed"] += 1
                continue
            if status == "not checked":
                counts[module]["not checked"] += 1
                continue
            diff = get_diff_for_mutant(name, path=path)
            key = (function_of(name), change_of(diff))
            if key in equivalents:
                used.add(key)
                counts[module]["equivalent"] += 1
                continue
            counts[module]["survived" if status == "survived" else "no tests"] += 1
            survivors.append((name, diff))

    def score_of(c: Counter[str]) -> str:
        judged = c["mutants"] - c["equivalent"] - c["not checked"]
        return f"{100 * c['killed'] / judged:.1f}%" if judged else "-"

    if args.markdown:
        print("| module | mutants | equivalent | killed | survived | no test | not run | score |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        for module in sorted(counts):
            c = counts[module]
            print(f"| `{module.removeprefix('otel_loopguard.')}` | {c['mutants']} | {c['equivalent']} | {c['killed']} "
                  f"| {c['survived']} | {c['no tests']} | {c['not checked']} | {score_of(c)} |")
        return 0
    print(f"{'module':36} {'mutants':>7} {'equiv.':>6} {'killed':>6} {'surv.':>5} {'no test':>7} {'score':>7}")
    for module in sorted(counts):
        c = counts[module]
        print(f"{module:36} {c['mutants']:7} {c['equivalent']:6} {c['killed']:6} {c['survived']:5} "
              f"{c['no tests']:7} {score_of(c):>7}" + (f"  ({c['not checked']} not checked)" if c["not checked"] else ""))
    stale = set(equivalents) - used
    if stale:
        print(f"\n{len(stale)} listed equivalent mutant(s) not among the survivors: not checked yet, killed, or gone "
              f"(review {EQUIVALENT.name} after a full run):")
        for function, change in sorted(stale):
            print(f"  {function}: {change.splitlines()[0] if change else ''}")
    if args.survivors:
        for name, diff in survivors:
            print(f"\n# {name}\n{diff}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
