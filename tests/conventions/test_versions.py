"""The versions read from spans (conventions/versions.py) and the ``version_attributes`` setting."""

from __future__ import annotations

import pytest

from otel_loopguard import LoopGuardConfig
from otel_loopguard.conventions.span import SpanRecord
from otel_loopguard.conventions.traces import StepCollector, TraceCollector
from otel_loopguard.conventions.versions import (
    TraceVersions,
    VersionReader,
    version_attributes,
    version_keys,
    version_stamps,
)
from otel_loopguard.core.engine import LoopEngine
from otel_loopguard.errors import ConfigError

FIXED = ("service.version", "gen_ai.agent.version", "gen_ai.request.model", "app.prompt.version",
         "app.tools.version", "app.model.version", "app.harness.version")


def test_stamps_are_written_under_names_that_are_read_back() -> None:
    """The configured prompt and tools versions become app.prompt.version and app.tools.version, both read back."""
    config = LoopGuardConfig(versions={"prompt": "p7", "tools": "t2"})
    stamps = version_stamps(config)
    assert stamps == {"app.prompt.version": "p7", "app.tools.version": "t2"}
    assert set(stamps) <= version_keys(config)
    assert version_stamps(LoopGuardConfig()) == {}


def test_keys_fixed_and_configured() -> None:
    """The seven fixed names, and the configured ones besides (a repeated fixed name is one name)."""
    assert version_keys(LoopGuardConfig()) == frozenset(FIXED)
    config = LoopGuardConfig(version_attributes=("prompt.id_version", "gen_ai.request.model", "tools.hash"))
    assert version_keys(config) == frozenset((*FIXED, "prompt.id_version", "tools.hash"))


def test_span_attribute_before_resource_and_scalars_only() -> None:
    """A span's own value wins over its resource's; the resource fills in; lists, maps and empty text are skipped;
    numbers become text."""
    keys = frozenset(("service.version", "gen_ai.agent.version", "gen_ai.request.model", "app.prompt.version", "n"))
    attrs = {"service.version": "span-1", "gen_ai.agent.version": ["a", "b"], "app.prompt.version": "", "n": 3}
    resource = {"service.version": "res-1", "gen_ai.request.model": "m1", "gen_ai.agent.version": "res-a"}
    assert version_attributes(attrs, resource, keys) == (
        ("gen_ai.agent.version", "res-a"), ("gen_ai.request.model", "m1"), ("n", "3"), ("service.version", "span-1"))
    assert version_attributes({"other": "x"}, {"service.name": "a"}, keys) == ()


def test_value_bounded_and_escaped() -> None:
    """A 200-character value holding ESC becomes 128 printable characters ending in ``~`` and 12 hex digits."""
    [(key, value)] = version_attributes({"k": "\x1b[2J" + "y" * 196}, {}, frozenset({"k"}))
    assert key == "k"
    assert len(value) == 128
    assert value.startswith("\\x1b[2J")
    assert value[-13] == "~"
    assert value.isprintable()


@pytest.mark.parametrize("order", [(0, 1, 2), (2, 1, 0), (1, 2, 0)])
def test_trace_versions_earliest_span_whatever_the_order(order: tuple[int, ...]) -> None:
    """Per name, the earliest-starting span's value (a tie: the lower span id), whatever order they are noted in."""
    spans = [((("m", "late"),), 30, 1), ((("m", "early"), ("p", "p2")), 10, 9), ((("m", "tie"), ("p", "p1")), 10, 4)]
    versions = TraceVersions()
    for i in order:
        versions.note(*spans[i])
    assert versions.values() == (("m", "tie"), ("p", "p1"))


@pytest.mark.parametrize(("names", "message"), [
    (tuple(f"a{i}" for i in range(9)), "at most 8"),
    (("",), "is not an attribute name"),
    (("bad\nname",), "is not an attribute name"),
    (("has space",), "is not an attribute name"),
    (("x" * 129,), "is not an attribute name"),
    (("loopguard.verdict",), "loopguard's own"),
    (("gen_ai.conversation.id",), "names an id"),
    (("session_id",), "names an id"),
    ("app.prompt.version", "must be a list of strings"),
])
def test_bad_version_attributes_raise(names: object, message: str) -> None:
    """Too many names, a name that is empty, unprintable, spaced, too long, loopguard's own or an id raise a clear
    error."""
    with pytest.raises(ConfigError, match="version_attributes") as info:
        LoopGuardConfig(version_attributes=names)  # type: ignore[arg-type]
    assert message in str(info.value)


def test_version_attributes_default_and_duplicates() -> None:
    """By default no extra name; eight names are accepted, duplicates kept once."""
    assert LoopGuardConfig().version_attributes == ()
    names = tuple(f"a{i}" for i in range(8))
    assert LoopGuardConfig(version_attributes=(*names, "a0")).version_attributes == names


def test_collector_puts_versions_on_reports_when_asked() -> None:
    """``TraceCollector(versions=True)`` reports the earliest span's values (a resource's release, the first model),
    whatever order the spans come in, and so does a StepCollector's assembled trace; by default a report has none."""
    s = 10**9
    resource = {"service.version": "2.3.1"}
    spans = [
        SpanRecord(1, 1, None, "invoke_agent a", 0, 10 * s,
                   {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "a"}, resource),
        SpanRecord(1, 2, 1, "chat m1", 1 * s, 2 * s, {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m1"},
                   resource),
        SpanRecord(1, 3, 1, "chat m2", 3 * s, 4 * s, {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m2"},
                   resource),
    ]
    engine = LoopEngine(LoopGuardConfig())
    collector = TraceCollector(engine, versions=True)
    for span in reversed(spans):
        collector.add(span, "file")
    [report] = collector.finish()
    assert report.versions == (("gen_ai.request.model", "m1"), ("service.version", "2.3.1"))
    plain = TraceCollector(engine)
    for span in spans:
        plain.add(span, "file")
    assert plain.finish()[0].versions == ()
    steps = StepCollector(engine, versions=True)
    for span in spans:
        steps.add(span, "file")
    assert steps.finish()[0].versions == report.versions


def test_version_attributes_from_the_environment(caplog: pytest.LogCaptureFixture) -> None:
    """``LOOPGUARD_VERSION_ATTRIBUTES`` is a comma-separated list; a bad one warns and keeps the default."""
    config = LoopGuardConfig.load(environ={"LOOPGUARD_VERSION_ATTRIBUTES": "langfuse.prompt.version, app.toolset.hash"})
    assert config.version_attributes == ("langfuse.prompt.version", "app.toolset.hash")
    bad = LoopGuardConfig.load(environ={"LOOPGUARD_VERSION_ATTRIBUTES": "loopguard.verdict"})
    assert bad.version_attributes == ()
    assert "LOOPGUARD_VERSION_ATTRIBUTES" in caplog.text


def test_reader_merges_span_and_resource_versions() -> None:
    """The reader gives a span's own version before its resource's, the resource's alone when the span has none,
    and reads a new resource object anew."""
    read = VersionReader(frozenset({"service.version", "gen_ai.request.model"}))
    first = {"service.version": "1.0"}
    assert read({"gen_ai.request.model": "m1"}, first) == (("gen_ai.request.model", "m1"), ("service.version", "1.0"))
    assert read({"service.version": "span-2"}, first) == (("service.version", "span-2"),)
    assert read({}, first) == (("service.version", "1.0"),)
    assert read({}, {"service.version": "2.0"}) == (("service.version", "2.0"),)
