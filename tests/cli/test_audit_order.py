"""``audit`` and ``report`` give one report per trace, the same whatever the order or number of deliveries of its spans.

Every recorded fixture is rewritten the ways trace stores and exporters write spans (root first, sorted by start
time as Tempo and Jaeger export, reversed, shuffled, one span per JSON Lines record, split across files, some spans
delivered twice) and audited; each rewrite must give exactly the reports of the file as recorded (the ``source``
field aside, since it names the files read).
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from otel_loopguard.cli import main

FIXTURES = Path(__file__).parent.parent / "fixtures" / "otlp"


def _fixture_paths() -> list[Path]:
    paths = []
    for path in sorted(FIXTURES.rglob("*.json*")):
        # model_spans/logs/ holds OTLP log records recorded beside some traces: not traces.
        if path.name.startswith("MANIFEST") or path.suffix not in (".json", ".jsonl") or "logs" in path.parts:
            continue
        paths.append(path)
    return paths


def _documents(path: Path) -> list[dict[str, Any]]:
    text = path.read_text()
    try:
        doc = json.loads(text)
    except ValueError:
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    return doc if isinstance(doc, list) else [doc]


Item = tuple[dict[str, Any], dict[str, Any], dict[str, Any]]


def _flat(path: Path) -> list[Item]:
    """(resource, scope, span) of every span of a fixture, in file order: a fresh list to reorder (the dicts are
    shared and never changed)."""
    return list(_parsed(path))


@functools.cache
def _parsed(path: Path) -> tuple[Item, ...]:
    """Each fixture parsed once: every rewrite of it (five tests, several examples each) starts from these spans."""
    out = []
    for doc in _documents(path):
        for rs in doc.get("resourceSpans", []):
            for ss in rs.get("scopeSpans", []):
                for span in ss.get("spans", []):
                    out.append((rs.get("resource", {}), ss.get("scope", {}), span))
    return tuple(out)


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One folder for every rewrite of this module, each overwriting the last: thousands of tests create no new
    directories or files (creating and later deleting them cost more than the audits they feed)."""
    return tmp_path_factory.mktemp("rewrites")


def _request(items: list[tuple[dict[str, Any], dict[str, Any], dict[str, Any]]]) -> dict[str, Any]:
    return {"resourceSpans": [{"resource": r, "scopeSpans": [{"scope": s, "spans": [span]}]} for r, s, span in items]}


def _audit(paths: list[Path], *args: str) -> tuple[int, list[dict[str, Any]]]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(["audit", "--json", *args, *map(str, paths)])
    assert err.getvalue() == ""
    reports = [json.loads(line) for line in out.getvalue().splitlines()]
    for report in reports:
        report.pop("source")
    return status, sorted(reports, key=lambda r: r["trace_id"])


FIXTURE_PATHS = _fixture_paths()
BASELINE: dict[Path, tuple[int, list[dict[str, Any]]]] = {}


def _baseline(path: Path) -> tuple[int, list[dict[str, Any]]]:
    if path not in BASELINE:
        BASELINE[path] = _audit([path])
    return BASELINE[path]


def test_every_fixture_is_covered() -> None:
    """The fixtures folder holds the recorded traces (so the properties below cannot pass vacuously)."""
    assert len(FIXTURE_PATHS) >= 49
    _, reports = _baseline(FIXTURE_PATHS[0])
    assert reports and all(r["partial"] is False for r in reports)


def _write_lines(folder: Path, name: str, items: list[Any], cuts: list[int]) -> Path:
    path = folder / name
    lines, start = [], 0
    for cut in [*cuts, len(items)]:
        if cut > start:
            lines.append(json.dumps(_request(items[start:cut])))
            start = cut
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("order", ["root first", "by start time", "reversed", "one span per record"])
@pytest.mark.parametrize("path", FIXTURE_PATHS, ids=lambda p: p.name)
def test_store_orders_give_the_recorded_reports(path: Path, order: str, scratch: Path) -> None:
    """Root first, by start time (Tempo, Jaeger), reversed, or one span per JSON Lines record: the same reports."""
    items = _flat(path)
    if order == "root first":
        items.sort(key=lambda item: bool(item[2].get("parentSpanId")))
    elif order == "by start time":
        items.sort(key=lambda item: int(item[2]["startTimeUnixNano"]))
    elif order == "reversed":
        items.reverse()
    cuts = list(range(1, len(items))) if order == "one span per record" else []
    written = _write_lines(scratch, "rewritten.jsonl", items, cuts)
    assert _audit([written]) == _baseline(path)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
@pytest.mark.parametrize("path", FIXTURE_PATHS, ids=lambda p: p.name)
def test_shuffled_split_and_duplicated_spans_give_the_recorded_reports(path: Path, scratch: Path,
                                                                        data: st.DataObject) -> None:
    """Spans shuffled, spread over JSON Lines records and files, some delivered twice: the same reports."""
    items = _flat(path)
    rng = random.Random(data.draw(st.integers(0, 2**32 - 1), label="shuffle"))
    rng.shuffle(items)
    duplicated = data.draw(st.lists(st.integers(0, len(items) - 1), max_size=len(items)), label="duplicates")
    items += [items[i] for i in duplicated]
    rng.shuffle(items)
    files = data.draw(st.integers(1, 3), label="files")
    bounds = sorted(data.draw(st.lists(st.integers(0, len(items)), min_size=files - 1, max_size=files - 1)))
    paths, start = [], 0
    for i, end in enumerate([*bounds, len(items)]):
        part = items[start:end]
        start = end
        cuts = sorted(set(data.draw(st.lists(st.integers(1, max(1, len(part) - 1)), max_size=4))))
        if part:  # a file with no span is an input error of its own ("no spans in this file"), not a split of a trace
            paths.append(_write_lines(scratch, f"part{i}.jsonl", part, [c for c in cuts if c < len(part)]))
    status, reports = _audit(paths)
    expected_status, expected = _baseline(path)
    assert (status, reports) == (expected_status, expected)


def test_a_trace_split_root_first_is_one_report_not_two(tmp_path: Path) -> None:
    """The recorded same-call loop stored root first: one report, stuck, 5 calls (not 'working after 0 calls')."""
    path = FIXTURES / "pydantic_ai__same_call_loop.json"
    items = _flat(path)
    items.sort(key=lambda item: bool(item[2].get("parentSpanId")))
    assert not items[0][2].get("parentSpanId")  # the root is written first
    status, [report] = _audit([_write_lines(tmp_path, "root_first.jsonl", items, list(range(1, len(items))))])
    # The scenario (tests/fixtures/README.md): search(query="weather in Paris") five times with the same result.
    assert status == 1 and report["steps_used"] == 5
    assert any(t["to"] == "stuck" for t in report["transitions"])


def test_overlapping_export_files_count_each_call_once(tmp_path: Path) -> None:
    """The same export file given twice (or two overlapping exports) is one trace whose calls count once."""
    path = FIXTURES / "pydantic_ai__healthy.json"
    copy = tmp_path / "copy.json"
    copy.write_text(path.read_text())
    status, [report] = _audit([path, copy])
    # The healthy scenario makes four tool calls (search, read, get_weather, convert_currency), none repeated.
    assert (status, report["steps_used"], report["verdict"], report["ok"]) == (0, 4, "working", True)


def test_report_counts_one_trace_in_any_order(tmp_path: Path) -> None:
    """``report`` over a root-first rewrite counts 1 trace and its 5 calls, 100% stuck (not 2 traces, 50%)."""
    path = FIXTURES / "pydantic_ai__same_call_loop.json"
    items = _flat(path)
    items.sort(key=lambda item: int(item[2]["startTimeUnixNano"]))
    written = _write_lines(tmp_path, "by_start.jsonl", items, list(range(1, len(items))))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["report", "--by", "service.name", "--json", str(written), str(path)]) == 0
    [group] = [json.loads(line) for line in out.getvalue().splitlines()]
    assert (group["traces"], group["tool_calls"], group["stuck"]) == (1, 5, 1)
