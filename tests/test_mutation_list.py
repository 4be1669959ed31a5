"""The equivalent-mutant list is matched entry to mutant, one to one (tests/mutation_score.py)."""

from __future__ import annotations

from tests.mutation_score import change_of, line_of, load_equivalents, match_equivalents

F = "otel_loopguard.core.period.xǁPeriodǁupdate"

# A mutant's diff as mutmut prints it: the function's code, 3 lines of context. The def line is 1, so the hunk
# starting at line 4 has context lines 4, 5, 6 and changes line 7.
DIFF = """--- otel_loopguard/core/period.py
+++ otel_loopguard/core/period.py
@@ -4,7 +4,7 @@
         a = 1
         b = 2
         if same:
-            ev_match[p] = 0
+            ev_match[p] = 1
         c = 3
         d = 4"""


def _entry(change: str, line: int | None = None) -> dict[str, object]:
    return {"function": F, "change": change, "reason": "r", "line": line}


def test_the_changed_line_is_counted_from_the_def_line() -> None:
    """The hunk starts at line 4 with three context lines: the change is line 7; the change text is stripped."""
    assert line_of(DIFF) == 7
    assert change_of(DIFF) == "- ev_match[p] = 0\n+ ev_match[p] = 1"


def test_an_entry_matching_two_mutants_is_a_problem_until_it_names_the_line() -> None:
    """The same change at lines 7 and 12 of one function: without a line the entry matches both (a problem, naming
    the lines); with line 12 it matches that mutant only; with line 30 it matches none."""
    change = "- ev_match[p] = 0\n+ ev_match[p] = 1"
    mutants = {f"{F}__mutmut_3": (F, change, 7), f"{F}__mutmut_8": (F, change, 12),
               f"{F}__mutmut_9": (F, "- x\n+ y", 12)}
    matched, problems = match_equivalents([_entry(change)], mutants)
    assert matched == set()
    assert problems == [f"matches 2 mutants (lines 7, 12; name one with `line`): {F}: - ev_match[p] = 0"]
    assert match_equivalents([_entry(change, 12)], mutants) == ({f"{F}__mutmut_8"}, [])
    assert match_equivalents([_entry(change, 30)], mutants) == (
        set(), [f"matches no mutant: {F}: - ev_match[p] = 0 (line 30)"])


def test_an_entry_listed_twice_is_a_problem() -> None:
    """Two entries for the one mutant: the second is reported, the mutant counted once."""
    mutants = {f"{F}__mutmut_9": (F, "- x\n+ y", 12)}
    matched, problems = match_equivalents([_entry("- x\n+ y"), _entry("- x\n+ y", 12)], mutants)
    assert matched == {f"{F}__mutmut_9"}
    assert problems == [f"listed twice: {F}: - x (line 12)"]


def test_every_entry_has_a_function_a_change_and_a_reason() -> None:
    """The list parses; each entry names a function of the package, a change of removed and added lines, a reason,
    and a line (if any) that is a positive integer."""
    entries = load_equivalents()
    assert len(entries) > 300
    for e in entries:
        assert e["function"].startswith("otel_loopguard."), e
        assert e["change"].startswith("- ") and "\n+ " in e["change"], e
        assert e["reason"].strip(), e
        assert e["line"] is None or (isinstance(e["line"], int) and e["line"] > 0), e
