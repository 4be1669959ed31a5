"""The pinned audit outputs checked against what was derived without the code that wrote them.

``tests/golden/audit_equivalence.json`` is written by the code it guards, so ``--regenerate`` first checks every
output it is about to pin: a recorded fixture against its scenario's hand-derived expectation
(``tests/support/scenario_expectations.py``), the "mixed" input against the reports worked out by hand in
``tests/cli/test_golden_by_hand.py``, an input that merely combines checked ones (all fixtures as JSON Lines,
gzipped, as protobuf; the mixed documents merged) against the reports of its parts, and the rest (text forms,
aggregates, a later observation time, the benchmark slice, malformed lines) as ``tests/cli/_golden_derived.py``
derives them. A disagreement stops the regeneration. An output no check covers must be named in
:data:`NOT_DERIVED`, with why, and is printed.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from tests.cli._golden_derived import DERIVED, check_derived
from tests.support.scenario_expectations import expected

# Outputs with no hand-derived counterpart, each with why (none today: tests/cli/_golden_derived.py derives the text
# forms, the aggregates, the later observation time, the benchmark slice and the malformed lines' messages).
NOT_DERIVED: dict[str, str] = {}
COMBINED = ("all fixtures jsonl", "all fixtures jsonl.gz", "all fixtures protobuf")


def _reports(output: dict[str, Any]) -> list[dict[str, Any]]:
    """The JSON reports of one output, without ``source`` (a file name that differs between inputs)."""
    reports = [json.loads(line) for line in output["stdout"].splitlines() if line.strip()]
    for report in reports:
        report.pop("source", None)
    return reports


def _key(report: dict[str, Any]) -> str:
    return json.dumps(report, sort_keys=True)


def _check_fixture(name: str, output: dict[str, Any]) -> list[str]:
    """A recorded fixture's output against its scenario's expectation (file name ``source__scenario.json``)."""
    source, _, scenario = name.removeprefix("fixture ").removesuffix(".json").partition("__")
    problems = []
    for report in _reports(output):
        try:
            expected(source, scenario).check(report)
        except (AssertionError, KeyError) as exc:
            problems.append(f"{name}: not the hand-derived expectation of {source}/{scenario}: {exc!r}"[:400])
    return problems


def check_outputs(outputs: dict[str, Any]) -> tuple[list[str], list[str]]:
    """Problems (outputs that disagree with what was derived by hand) and the outputs no check covers."""
    from tests.cli.test_golden_by_hand import MIXED

    problems: list[str] = []
    checked: set[str] = set()
    parts: Counter[str] = Counter()
    for name, output in outputs.items():
        if name.startswith("fixture "):
            problems += _check_fixture(name, output)
            parts.update(_key(r) for r in _reports(output))
            checked.add(name)
    if "mixed" in outputs:
        checked.add("mixed")
        if _reports(outputs["mixed"]) != MIXED:
            problems.append("mixed: not the reports derived by hand in tests/cli/test_golden_by_hand.py")
    for name in COMBINED:
        if name in outputs:
            checked.add(name)
            if Counter(_key(r) for r in _reports(outputs[name])) != parts:
                problems.append(f"{name}: not the reports of the fixtures it combines")
    if "mixed one document" in outputs:
        checked.add("mixed one document")
        mixed = {_key(r) for r in MIXED}
        if not {_key(r) for r in _reports(outputs["mixed one document"])} <= mixed:
            problems.append("mixed one document: a report that is none of the mixed input's hand-derived reports")
    if all(name in outputs for name in DERIVED):
        derived, names = check_derived(outputs)
        problems += derived
        checked |= names
    unchecked = sorted(set(outputs) - checked)
    problems += [f"{name}: no check and no reason in NOT_DERIVED" for name in unchecked if name not in NOT_DERIVED]
    return problems, [name for name in unchecked if name in NOT_DERIVED]
