"""Span → tool call: read the spans of every convention in :mod:`.table` (and user-defined ones) into engine values.

Works on plain attribute mappings, so the processor (live SDK spans), ``audit`` and ``serve`` (decoded OTLP) share
one reading of every convention. The module functions (:func:`span_role`, :func:`agent_name`, :func:`llm_usage`)
know the built-in conventions; an :class:`Extractor` built from a configuration also knows the user-defined ones
and the configured placeholders (``redacted_values``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from operator import itemgetter
from typing import Any, TypeVar

from ..core.cache import BoundedCache, small
from ..core.config import DEFAULT_REDACTED_VALUES, LoopGuardConfig, RedactedValue
from ..core.cost import MAX_TOKENS, Usage
from ..core.model import Lease, ToolCall
from . import names as n
from .envelopes import ENVELOPES, Envelope
from .model_calls import MAX_ERROR_LEN, Turn, failure_class, read_messages, tool_activity
from .table import AGENT_SPANS, MODEL_SPANS, TOOL_CONVENTIONS, AgentSpans, Convention, ModelSpans, Source, When
from .user import user_conventions

_E = TypeVar("_E", bound="Extractor")

ROLE_TOOL = "tool"
ROLE_LLM = "llm"
ROLE_AGENT = "agent"

_NS = 1e-9
_CACHE_ENTRIES = 2048
_MISSING: Any = object()


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return _MISSING



# -- compiled rows ---------------------------------------------------------------------------------------------------

# A condition: (kind, key, values). Kinds: attribute equals one of values, attribute present, name prefix, name equals.
_EQ, _HAS, _PREFIX, _NAME = 0, 1, 2, 3
_Conditions = tuple[tuple[int, str, frozenset[str]], ...]


def _conditions(when: tuple[When, ...]) -> _Conditions:
    out: list[tuple[int, str, frozenset[str]]] = []
    for c in when:
        if c.span_name_prefix:
            out.append((_PREFIX, c.span_name_prefix, frozenset()))
        elif c.span_name_equals:
            out.append((_NAME, c.span_name_equals, frozenset()))
        elif c.equals:
            out.append((_EQ, c.attribute, frozenset(c.equals)))
        else:
            out.append((_HAS, c.attribute, frozenset()))
    return tuple(out)


def _marker(conditions: _Conditions) -> str | None:
    # One attribute every span of the row must have (a cheap pre-filter for "may this span matter?").
    for kind, key, _ in conditions:
        if kind in (_EQ, _HAS):
            return key
    return None


def _name_marker(conditions: _Conditions) -> str | None:
    # For a row that tests no attribute (recognised by its span name alone), what every span name of the row starts
    # with: the pre-filter must let those spans through too.
    if _marker(conditions) is not None:
        return None
    for kind, key, _ in conditions:
        if kind in (_PREFIX, _NAME):
            return key
    return None


def _plain_keys(sources: tuple[Source, ...]) -> tuple[str, ...] | None:
    # Sources that are all plain span attributes are read inline (the common case).
    if all(not (s.from_span_name or s.event or s.path) for s in sources):
        return tuple(s.attribute for s in sources)
    return None


class _Part:
    """Where a row reads one part of a call that may be unrecorded (arguments or result), and its envelopes.

    Attributes:
        keys: the attributes, when every source is a plain attribute (read inline), else None.
        sources: every source, first present wins.
        envelopes: envelopes peeled off the value, the first that applies wins.

    A value that is a placeholder, or an object whose every value is one (``{"q": "[REDACTED]"}``), is unrecorded;
    a value found in an envelope is checked again, by the same rule.
    """

    __slots__ = ("envelopes", "keys", "sources")

    def __init__(self, sources: tuple[Source, ...], envelopes: tuple[str, ...]) -> None:
        self.sources = sources
        self.keys = _plain_keys(sources)
        self.envelopes = tuple(ENVELOPES[e] for e in envelopes)


class _Row:
    """A :class:`~.table.Convention` compiled for reading."""

    __slots__ = ("agent", "args", "call_id", "conditions", "convention", "error", "error_keys", "events", "name",
                 "result", "tool", "tool_key")

    def __init__(self, convention: Convention) -> None:
        self.convention = convention
        self.name = convention.name
        self.conditions = _conditions(convention.when)
        self.tool = convention.tool_name or (Source(from_span_name=True),)
        first = self.tool[0]
        # The first tool-name source, when it is a plain attribute (read inline; the rest only when it is absent).
        self.tool_key = first.attribute if _plain_keys((first,)) is not None else None
        self.args = _Part(convention.arguments, convention.unwrap_arguments)
        self.result = _Part(convention.result, convention.unwrap_result)
        self.error = convention.error
        self.error_keys = _plain_keys(self.error)
        self.call_id = convention.call_id
        self.agent = convention.agent_name
        self.events = any(s.event for s in (*convention.arguments, *convention.result, *self.error, *self.tool,
                                             *self.call_id))


_AGENT_ROWS = tuple((_conditions(a.when), a) for a in AGENT_SPANS)
_MODEL_ROWS = tuple((_conditions(m.when), m) for m in MODEL_SPANS)

#: What :meth:`_Table.classify` answers: the role (None: not read), and the row (a tool convention, an agent or a
#: model convention; a tool row with role None is a span that is recognised and is not a call).
_Hit = tuple[str | None, "_Row | AgentSpans | ModelSpans | None"]
_NO_HIT: _Hit = (None, None)
# Attribute key sets remembered, and answers per key set (values of the compared attributes, span name tests).
_PLANS = 1024
_HITS_PER_PLAN = 256


class _Plan:
    """The classification of spans with one set of attribute keys (in one order).

    Which rows' presence conditions hold, and which compared attributes are there, depend only on the keys: what is
    left to look at per span is the values of those attributes (:attr:`values`), and the span name only when a row
    that tests it was reached for those values (then :attr:`hits` holds a dict by the name's tests).
    """

    __slots__ = ("hits", "marked", "values")

    def __init__(self, compared: tuple[str, ...], marked: bool) -> None:
        #: The values of the compared attributes the span has (a tuple, one value, or () for none).
        self.values: Callable[[Mapping[str, Any]], Any] = itemgetter(*compared) if compared else _nothing
        #: The span has an attribute of :attr:`_Table.markers` (see :func:`may_matter`).
        self.marked = marked
        self.hits: BoundedCache[Any, _Hit | _ByName] = BoundedCache(_HITS_PER_PLAN)


class _ByName(BoundedCache[str, _Hit]):
    """Answers that depend on the span name (a row testing it was reached): by name, and by the name's tests.

    Span names are few in practice (one per tool or model), so the name itself is the first key; a name not seen
    yet costs its tests (each prefix and name of the table's conditions), which decide as well as the name does.
    """

    __slots__ = ("by_tests",)

    def __init__(self, tests: tuple[bool, ...], hit: _Hit) -> None:
        super().__init__(_HITS_PER_PLAN)
        self.by_tests = {tests: hit}

    def decide(self, table: _Table, attrs: Mapping[str, Any], name: str) -> _Hit:
        tests = table._name_tests(name)
        hit = self.by_tests.get(tests)
        if hit is None:
            hit = self.by_tests[tests] = table._scan(attrs, name)[0]
        return self.put(name, hit)


def _nothing(attrs: Mapping[str, Any]) -> tuple[()]:
    return ()


class _Table:
    """Tool rows (user-defined first), then the agent and model rows, with a cached classification.

    The classification of a span depends only on its attribute keys, the values of the attributes the conditions
    compare and, for some, the span name's tests: a :class:`_Plan` per key set and a dict by the values make a
    trace's thousands of spans cost a tuple of their keys and two dict lookups each instead of a scan of the table.
    """

    __slots__ = ("_compared", "_last", "_name_equals", "_name_prefixes", "_plans", "_rows", "markers", "name_markers",
                 "rows")

    def __init__(self, rows: tuple[_Row, ...]) -> None:
        self.rows = rows
        #: Every row in the order tried, with its answer.
        self._rows: tuple[tuple[_Conditions, _Hit], ...] = (
            *((r.conditions, (None if r.convention.not_a_call else ROLE_TOOL, r)) for r in rows),
            *(((c, (ROLE_AGENT, a)) for c, a in _AGENT_ROWS)),
            *(((c, (ROLE_LLM, m)) for c, m in _MODEL_ROWS)),
        )
        eq: dict[str, None] = {}
        prefixes: dict[str, None] = {}
        equals: dict[str, None] = {}
        for conditions, _ in self._rows:
            for kind, key, _values in conditions:
                if kind == _EQ:
                    eq[key] = None
                elif kind == _PREFIX:
                    prefixes[key] = None
                elif kind == _NAME:
                    equals[key] = None
        self._compared = tuple(eq)
        self._name_prefixes = tuple(prefixes)
        self._name_equals = tuple(equals)
        self._plans: BoundedCache[tuple[str, ...], _Plan] = BoundedCache(_PLANS)
        self._last: tuple[Any, str, _Hit, bool] | None = None
        keys = {_marker(c) for c, _ in self._rows}
        #: One attribute of every row: a span without any of these (and not named like a tool span) is not read.
        self.markers = frozenset(k for k in keys if k is not None)
        #: What the names of spans of rows that test no attribute start with (the GenAI ``execute_tool `` prefix,
        #: a user convention's ``span_name_prefix``): such a span may matter without any of :attr:`markers`.
        self.name_markers = tuple(dict.fromkeys(k for c, _ in self._rows if (k := _name_marker(c)) is not None))

    def classify(self, attrs: Mapping[str, Any], name: str) -> _Hit:
        """The role and row of a span."""
        return self._lookup(attrs, name)[0]

    def read_hit(self, attrs: Mapping[str, Any], name: str) -> _Hit:
        """Like :meth:`classify`, for a span that passes :func:`may_matter`; no role for any other."""
        hit, marked = self._lookup(attrs, name)
        if marked or name.startswith(self.name_markers):
            return hit
        return _NO_HIT

    def marked(self, attrs: Mapping[str, Any], name: str) -> bool:
        """:func:`may_matter` with the table's markers, from the span's classification."""
        return self._lookup(attrs, name)[1] or name.startswith(self.name_markers)

    def _lookup(self, attrs: Mapping[str, Any], name: str) -> tuple[_Hit, bool]:
        """The role and row of a span, and whether it has one of :attr:`markers`."""
        # Callers ask about one span several times in a row (its role, then its call): the last answer is kept,
        # with a reference to the attributes so their id cannot be reused meanwhile. Threads may share the table
        # (serve reads requests in parallel): the answer is always taken from one snapshot of it.
        last = self._last
        if last is not None and last[0] is attrs and last[1] == name:
            return last[2], last[3]
        keys = tuple(attrs)
        plan = self._plans.get(keys)
        if plan is None:
            plan = _Plan(tuple(k for k in self._compared if k in attrs), not self.markers.isdisjoint(keys))
            if small(keys):  # a huge key set is classified each time rather than kept
                self._plans.put(keys, plan)
        values = plan.values(attrs)
        try:
            known = plan.hits.get(values)
        except TypeError:  # an unhashable value (an OTLP kvlist) where a string was expected: decided by a scan
            hit = self._scan(attrs, name)[0]
        else:
            if known is None:
                hit, by_name = self._scan(attrs, name)
                plan.hits.put(values, _ByName(self._name_tests(name), hit) if by_name else hit)
            elif isinstance(known, _ByName):
                hit = known.get(name) or known.decide(self, attrs, name)
            else:
                hit = known
        self._last = (attrs, name, hit, plan.marked)
        return hit, plan.marked

    def _name_tests(self, name: str) -> tuple[bool, ...]:
        return (*[name.startswith(p) for p in self._name_prefixes], *[name == e for e in self._name_equals])

    def _scan(self, attrs: Mapping[str, Any], name: str) -> tuple[_Hit, bool]:
        """The first row whose conditions hold, and whether the span name was tested on the way."""
        by_name = False
        for conditions, hit in self._rows:
            for kind, key, values in conditions:
                if kind == _EQ:
                    value = attrs.get(key)
                    # SDK attributes and OTLP kvlists may hold dicts, which are unhashable: only strings can match.
                    if value is None or value.__class__ is not str or value not in values:
                        break
                elif kind == _HAS:
                    if key not in attrs:
                        break
                else:
                    by_name = True
                    if not (name.startswith(key) if kind == _PREFIX else name == key):
                        break
            else:
                return hit, by_name
        return _NO_HIT, by_name

    def tool_row(self, attrs: Mapping[str, Any], name: str) -> _Row | None:
        """The tool row of a span (a not-a-call row included), or None."""
        row = self.classify(attrs, name)[1]
        return row if row.__class__ is _Row else None


_BUILTIN_ROWS = tuple(_Row(c) for c in TOOL_CONVENTIONS)
_BUILTIN = _Table(_BUILTIN_ROWS)

#: A span that can matter to loopguard has at least one of these keys (or a GenAI tool span name: see
#: :func:`may_matter`); checking for them first keeps unrelated spans cheap.
MARKER_KEYS = _BUILTIN.markers
#: ... or a span name starting with one of these (see :attr:`_Table.name_markers`).
NAME_MARKERS = _BUILTIN.name_markers


def may_matter(attrs: Mapping[str, Any], name: str, markers: frozenset[str] = MARKER_KEYS,
               names: tuple[str, ...] = NAME_MARKERS) -> bool:
    """Whether a span may be a tool, model or agent span (a cheap pre-filter; :func:`span_role` decides)."""
    return not markers.isdisjoint(attrs) or name.startswith(names)


def span_role(attrs: Mapping[str, Any], name: str = "") -> str | None:
    """The role of a span (tool, llm or agent) in the built-in conventions, or None."""
    return _BUILTIN.classify(attrs, name)[0]


def _plain_value(src: Source, attrs: Mapping[str, Any], name: str) -> Any:
    """A source's value without JSON paths or events (agent names)."""
    if src.from_span_name:
        return _strip(name, src) or None
    if src.event or src.path:
        return None
    return attrs.get(src.attribute)


def _strip(name: str, src: Source) -> str:
    if src.strip_prefix and name.startswith(src.strip_prefix):
        name = name[len(src.strip_prefix):]
    if src.strip_suffix and name.endswith(src.strip_suffix):
        name = name[: -len(src.strip_suffix)]
    return name


def _first_name(sources: tuple[Source, ...], attrs: Mapping[str, Any], name: str) -> str | None:
    for src in sources:
        value = _plain_value(src, attrs, name)
        if value:
            return value if value.__class__ is str else str(value)
    return None


def agent_name(attrs: Mapping[str, Any], default: str | None = None, name: str = "") -> str | None:
    """The agent's name, as the span's convention says it.

    On a tool span only the tool convention's agent attribute counts (never the tool's own name, which OpenLLMetry
    writes as ``traceloop.entity.name``); on an agent span, the agent convention's; else ``gen_ai.agent.name``.
    """
    return _agent_name(_BUILTIN, attrs, default, name)


def _agent_name(table: _Table, attrs: Mapping[str, Any], default: str | None, name: str) -> str | None:
    role, row = table.classify(attrs, name)
    if row.__class__ is _Row:
        return _first_name(row.agent, attrs, name) or default
    if role == ROLE_AGENT:
        return _first_name(row.agent_name, attrs, name) or default  # type: ignore[union-attr]
    value = attrs.get(n.GEN_AI_AGENT_NAME)
    return str(value) if value else default


def conversation_id(attrs: Mapping[str, Any]) -> str | None:
    """The conversation (session) id, when the span has one."""
    value = attrs.get(n.GEN_AI_CONVERSATION_ID) or attrs.get(n.OI_SESSION_ID)
    return str(value) if value else None


def _int(value: Any) -> int:
    """A token count, bounded to ``0..MAX_TOKENS`` (unreadable: 0)."""
    # Counts are ints or absent; int(None) would cost a raised and caught TypeError per missing count.
    if value.__class__ is int and 0 <= value <= MAX_TOKENS:
        return value
    if value is None:
        return 0
    try:
        return min(max(int(value), 0), MAX_TOKENS)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an infinite float token count
        return 0


def llm_usage(attrs: Mapping[str, Any]) -> tuple[str | None, Usage] | None:
    """The model id and token usage of a model span, or None when it reports no usage."""
    if attrs.get(n.GEN_AI_USAGE_INPUT_TOKENS) is not None or attrs.get(n.GEN_AI_USAGE_OUTPUT_TOKENS) is not None:
        model = attrs.get(n.GEN_AI_RESPONSE_MODEL) or attrs.get(n.GEN_AI_REQUEST_MODEL)
        write = attrs.get(n.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS)
        if write is None:
            write = attrs.get(n.GEN_AI_USAGE_CACHE_WRITE_INPUT_TOKENS)
        # The GenAI conventions count cached tokens inside input_tokens.
        usage = Usage(
            input_tokens=_int(attrs.get(n.GEN_AI_USAGE_INPUT_TOKENS)),
            output_tokens=_int(attrs.get(n.GEN_AI_USAGE_OUTPUT_TOKENS)),
            cache_read_tokens=_int(attrs.get(n.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS)),
            cache_write_tokens=_int(write),
            cache_included_in_input=True,
        )
        return (str(model) if model else None), usage
    if attrs.get(n.OI_TOKEN_PROMPT) is not None or attrs.get(n.OI_TOKEN_COMPLETION) is not None:
        model = attrs.get(n.OI_LLM_MODEL_NAME)
        # OpenInference's prompt count includes its cache details, like the GenAI one.
        usage = Usage(
            input_tokens=_int(attrs.get(n.OI_TOKEN_PROMPT)),
            output_tokens=_int(attrs.get(n.OI_TOKEN_COMPLETION)),
            cache_read_tokens=_int(attrs.get(n.OI_TOKEN_CACHE_READ)),
            cache_write_tokens=_int(attrs.get(n.OI_TOKEN_CACHE_WRITE)),
            cache_included_in_input=True,
        )
        return (str(model) if model else None), usage
    return None


def _failed_class(status_message: str | None, events: Iterable[tuple[str, Mapping[str, Any]]],
                  fallback: str | None = None) -> str:
    for name, event_attrs in events:
        if name == n.EVENT_EXCEPTION and event_attrs.get(n.EXCEPTION_TYPE):
            return str(event_attrs[n.EXCEPTION_TYPE])
    return failure_class(status_message or fallback)


# -- the extractor -----------------------------------------------------------------------------------------------------

class _Placeholders:
    """The configured ``redacted_values``, ready for lookups."""

    __slots__ = ("anywhere", "by_key", "longest", "texts")

    def __init__(self, values: Iterable[RedactedValue]) -> None:
        anywhere: set[str] = set()
        by_key: dict[str, set[str]] = {}
        for v in values:
            if v.attributes:
                for key in v.attributes:
                    by_key.setdefault(key, set()).add(v.value)
            else:
                anywhere.add(v.value)
        self.anywhere = frozenset(anywhere)
        self.by_key = {k: frozenset(vs | anywhere) for k, vs in by_key.items()}
        # No longer text is a placeholder: such text is not looked up (hashing a long argument text costs).
        self.longest = max(map(len, anywhere.union(*by_key.values())), default=-1)
        # Placeholders looked for inside an object ({"query": "[REDACTED]"}), also as an encoder with ASCII
        # output writes them there (Python's json.dumps: "«hidden»" becomes "\u00abhidden\u00bb"), so that an
        # object of such placeholders still reaches the parse that decides.
        self.texts = tuple(sorted({form for v in anywhere if v for form in (v, json.dumps(v)[1:-1])}))

    def within(self, text: str) -> bool:
        """Whether a placeholder occurs in ``text`` (a cheap test before parsing it)."""
        for t in self.texts:  # noqa: SIM110 - a loop, not any() over a generator: this runs for every argument
            if t in text:
                return True
        return False


class Extractor:
    """Turns tool spans into :class:`ToolCall` values, through the convention table and user-defined rows.

    JSON values (envelopes, paths) are parsed once per distinct text: a loop repeats the same text, and the cache
    makes each repeat a dict lookup.

    Args:
        max_bytes: text longer than this is passed on as it is, neither parsed nor cached, so a huge
            argument costs the host no parse and the caches hold no huge keys (the canonicalizer
            digests such text whole).
        redacted_values: placeholders meaning "not recorded" (the configuration's ``redacted_values``).
        conventions: user-defined conventions, tried before the built-in ones.
    """

    def __init__(self, max_bytes: int = 65_536, *, redacted_values: Iterable[RedactedValue] = DEFAULT_REDACTED_VALUES,
                 conventions: Iterable[Convention] = ()) -> None:
        self._max_bytes = max_bytes
        self._json_cache: BoundedCache[str, Any] = BoundedCache(_CACHE_ENTRIES)
        self._unwrap_cache: BoundedCache[tuple[str, str], Any] = BoundedCache(_CACHE_ENTRIES)
        self._placeholders = _Placeholders(redacted_values)
        user = tuple(_Row(c) for c in conventions)
        self._table = _Table(user + _BUILTIN_ROWS) if user else _Table(_BUILTIN_ROWS)
        #: Attribute keys at least one of which every span that may matter carries (user conventions included).
        self.marker_keys = self._table.markers
        #: Span-name prefixes that make a span worth reading without any of :attr:`marker_keys` (see
        #: :meth:`may_matter`): the GenAI tool span name, and user conventions recognised by their span names.
        self.marker_names = self._table.name_markers
        #: ``read_role(attrs, name)``: the role of a span that passes :meth:`may_matter` (None for any other span)
        #: and what reads it, in one classification, for the readers of decoded spans: pass the second item to
        #: :meth:`call_of` for a tool span instead of classifying the span again.
        self.read_role: Callable[[Mapping[str, Any], str], tuple[str | None, Any]] = self._table.read_hit

    @classmethod
    def from_config(cls: type[_E], config: LoopGuardConfig) -> _E:
        """An extractor with the configuration's ``max_argument_bytes``, ``redacted_values`` and conventions.

        Raises:
            ConfigError: a ``[conventions.NAME]`` table is invalid (the message names the table and the key).
        """
        return cls(config.max_argument_bytes, redacted_values=config.redacted_values,
                   conventions=user_conventions(config.conventions))

    # -- roles -------------------------------------------------------------------------------------------------------

    def may_matter(self, attrs: Mapping[str, Any], name: str) -> bool:
        """Whether a span may be a tool, model or agent span (:func:`may_matter` with this extractor's markers).

        Answered by the span's classification, which is kept for the :meth:`span_role` and reading that follow.
        """
        return self._table.marked(attrs, name)

    def span_role(self, attrs: Mapping[str, Any], name: str = "") -> str | None:
        """The role of a span (tool, llm or agent), user-defined conventions included."""
        return self._table.classify(attrs, name)[0]

    def convention(self, attrs: Mapping[str, Any], name: str = "") -> Convention | None:
        """The convention a tool span is read in (user-defined ones first), or None."""
        row = self._table.tool_row(attrs, name)
        return row.convention if row is not None else None

    def agent_name(self, attrs: Mapping[str, Any], default: str | None = None, name: str = "") -> str | None:
        """The agent's name as the span's convention says it (see :func:`agent_name`)."""
        return _agent_name(self._table, attrs, default, name)

    # -- reading -----------------------------------------------------------------------------------------------------

    def tool_call(
        self,
        attrs: Mapping[str, Any],
        span_name: str,
        start_ns: int | None,
        end_ns: int | None,
        status_error: bool = False,
        status_message: str | None = None,
        events: Iterable[tuple[str, Mapping[str, Any]]] = (),
    ) -> ToolCall:
        """Read one tool span (of any convention) as a :class:`ToolCall`.

        A span no convention recognises is read as a GenAI ``execute_tool`` span (the tool name falls back to the
        span name).
        """
        row = self._table.tool_row(attrs, span_name) or _GENAI_ROW
        return self.call_of(row, attrs, span_name, start_ns, end_ns, status_error, status_message, events)

    def call_of(self, row: _Row, attrs: Mapping[str, Any], span_name: str, start_ns: int | None,
                end_ns: int | None, status_error: bool = False, status_message: str | None = None,
                events: Iterable[tuple[str, Mapping[str, Any]]] = ()) -> ToolCall:
        """A tool span as a :class:`ToolCall`, read in the row :attr:`read_role` gave with the role tool."""
        ev: list[tuple[str, Mapping[str, Any]]] | None = None
        if row.events or status_error:
            ev = list(events)
        get = attrs.get
        tool = get(row.tool_key) if row.tool_key is not None else None
        if not tool:
            tool = self._value(row.tool, attrs, span_name, ev)[0] or span_name or "unknown"
        args, args_captured = self._content(row.args, attrs, span_name, ev)
        result, result_captured = self._content(row.result, attrs, span_name, ev)
        error = self._error(row, attrs, span_name, ev if ev is not None else events, status_error, status_message,
                            result)
        lease = None
        deadline = get(n.LOOPGUARD_WAIT_DEADLINE)
        if deadline is not None:
            try:
                lease = Lease(str(get(n.LOOPGUARD_WAIT_OWNER) or ""), float(deadline))
            except (TypeError, ValueError, OverflowError):  # OverflowError: an int beyond float range
                lease = None
        progress = get(n.LOOPGUARD_PROGRESS)
        return ToolCall(
            tool=tool if tool.__class__ is str else str(tool),
            arguments=args,
            arguments_captured=args_captured,
            result=result,
            result_captured=result_captured,
            error=error,
            progress=str(progress) if progress is not None else None,
            start=start_ns * _NS if start_ns else None,
            end=end_ns * _NS if end_ns else None,
            lease=lease,
        )

    def _content(self, part: _Part, attrs: Mapping[str, Any], span_name: str,
                 ev: list[tuple[str, Mapping[str, Any]]] | None) -> tuple[Any, bool]:
        """The arguments or the result of a call, and whether they were recorded (a placeholder is not).

        The value of the first present source; when one of the part's envelopes holds it, the value inside.
        """
        keys = part.keys
        if keys is not None:
            value, key = None, ""
            for key in keys:
                value = attrs.get(key)
                if value is not None:
                    break
        else:
            value, key = self._value(part.sources, attrs, span_name, ev)
        if value is None:
            return None, False
        ph = self._placeholders
        if value.__class__ is str:
            # Inline: the common case is text that is no placeholder and holds none.
            if (len(value) <= ph.longest and value in ph.by_key.get(key, ph.anywhere)) or (
                    value.startswith("{") and ph.within(value) and self._object_redacted(value)):
                return None, False
        elif self._redacted(value, key):
            return None, False
        for envelope in part.envelopes:
            if value.__class__ is not str or envelope.may_be(value):
                inner = self._unwrap(envelope, value)
                if inner is not value:
                    if self._redacted(inner, ""):
                        return None, False
                    return inner, True
        return value, True

    def _error(self, row: _Row, attrs: Mapping[str, Any], span_name: str,
               events: Iterable[tuple[str, Mapping[str, Any]]], status_error: bool, status_message: str | None,
               result: Any) -> str | None:
        """The call's error class, or None.

        ``events`` is the span's events: the list :meth:`call_of` made when the row reads events or the status is an
        error, else the iterable it was given, read only when an error flag (``true``) asks for the exception
        event's type (the retry policy's classes are exception types).
        """
        keys = row.error_keys
        if keys is not None:
            for key in keys:
                value = attrs.get(key)
                if value and value is not True:
                    return str(value)[:MAX_ERROR_LEN]
                if value is True:
                    return _failed_class(status_message, events, result if isinstance(result, str) else None)
            if status_error:
                return _failed_class(status_message, events)
            return None
        ev = events if isinstance(events, list) else None
        for src in row.error:
            value = self._source(src, attrs, span_name, ev)
            if not value:
                # Absent, false, empty or 0 (an exit or status code of success): no error, as on the inline path.
                continue
            if value is True:
                # Failed, without a class: the exception event's, the status text, else the result's text.
                text = result if isinstance(result, str) else None
                return _failed_class(status_message, events, text)
            return str(value)[:MAX_ERROR_LEN]
        if status_error:
            return _failed_class(status_message, events)
        return None

    def model_turn(self, attrs: Mapping[str, Any], span_name: str, span_id: int, parent_span_id: int | None,
                   start_ns: int, end_ns: int, *, messages: bool = True, context: bool = True) -> Turn | None:
        """A model span as a :class:`~.model_calls.Turn` (usage, and with ``messages`` its tool-call content).

        Returns None for a span that is not a model span.
        """
        role, row = self._table.classify(attrs, span_name)
        if role != ROLE_LLM:
            return None
        content = read_messages(attrs, row.messages) if messages and row.messages else None  # type: ignore[union-attr]
        calls = content.calls if content is not None else ()
        if messages and not calls and tool_activity(attrs) is not None:
            # The model asked for tools but what it asked is not recorded (content off): one call that cannot be
            # compared, so a trace of such calls is uncertain, never working for want of calls.
            calls = ((None, n.UNREAD_TOOL, None),)
        response_id = attrs.get(n.GEN_AI_RESPONSE_ID)
        return Turn(
            span_id=span_id,
            parent_span_id=parent_span_id,
            start_ns=start_ns,
            end_ns=end_ns,
            response_id=str(response_id) if response_id else None,
            usage=llm_usage(attrs),
            calls=calls,
            results=content.results if content is not None else None,
            history=content.history if content is not None else (),
            agent=_agent_name(self._table, attrs, None, span_name) if context else None,
            conversation=conversation_id(attrs) if context else None,
        )

    def call_id(self, attrs: Mapping[str, Any], span_name: str = "",
                events: Iterable[tuple[str, Mapping[str, Any]]] = ()) -> str | None:
        """The call id of a tool span (volatile: never part of a signature), when its convention records one."""
        row = self._table.tool_row(attrs, span_name)
        if row is None:
            return None
        value = self._value(row.call_id, attrs, span_name, list(events) if row.events else None)[0]
        return str(value) if value is not None else None

    def _value(self, sources: tuple[Source, ...], attrs: Mapping[str, Any], span_name: str,
               ev: list[tuple[str, Mapping[str, Any]]] | None) -> tuple[Any, str]:
        """The first present source's value, and the attribute it came from ("" for the span name)."""
        for src in sources:
            value = self._source(src, attrs, span_name, ev)
            if value is not None:
                return value, src.attribute
        return None, ""

    def _source(self, src: Source, attrs: Mapping[str, Any], span_name: str,
                ev: list[tuple[str, Mapping[str, Any]]] | None) -> Any:
        if src.from_span_name:
            return _strip(span_name, src) or None
        if src.event:
            value = None
            for name, event_attrs in ev or ():
                if name == src.event:
                    value = event_attrs.get(src.attribute)
                    if value is not None:
                        break
        else:
            value = attrs.get(src.attribute)
        if value is None or not src.path:
            return value
        return self._path(value, src.path)

    def _path(self, value: Any, path: tuple[str | int, ...]) -> Any:
        if value.__class__ is str:
            value = self._parse(value)
            if value is _MISSING:
                return None
        for step in path:
            if isinstance(step, int):
                if isinstance(value, (list, tuple)) and -len(value) <= step < len(value):
                    value = value[step]
                else:
                    return None
            elif isinstance(value, Mapping):
                value = value.get(step)
                if value is None:
                    return None
            else:
                return None
        return value

    def _parse(self, text: str) -> Any:
        if len(text) > self._max_bytes:
            return _MISSING
        cache = self._json_cache
        hit = cache.get(text, cache)
        if hit is not cache:
            return hit
        return cache.put(text, _loads(text))

    def _parsed_or_none(self, text: str) -> Any:
        value = self._parse(text)
        return None if value is _MISSING else value

    def _unwrap(self, envelope: Envelope, value: Any) -> Any:
        unwrap = envelope.unwrap
        if value.__class__ is str:
            if len(value) > self._max_bytes:
                return value
            key = (envelope.name, value)
            cache = self._unwrap_cache
            hit = cache.get(key, _MISSING)
            if hit is not _MISSING:
                return value if hit is None else hit
            inner = unwrap(value, self._parsed_or_none)
            # None marks "not in this envelope", so the caller keeps the very object it passed.
            cache.put(key, None if inner is value else inner)
            return inner
        return unwrap(value, self._parsed_or_none)

    def _redacted(self, value: Any, key: str) -> bool:
        """Whether a value is a placeholder for content that was not recorded, or an object of placeholders.

        Args:
            value: the argument or result value.
            key: the attribute it came from (placeholders may be limited to some attributes).
        """
        ph = self._placeholders
        if value.__class__ is str:
            if value in ph.by_key.get(key, ph.anywhere):
                return True
            # An object whose every value is a placeholder ({"query": "[REDACTED]"}, Mastra 0.x's sensitive-data
            # filter, which hides results' fields as well as arguments'): nothing of the content is left to compare.
            return value.startswith("{") and ph.within(value) and self._object_redacted(value)
        if isinstance(value, Mapping):
            return self._all_placeholders(value)
        return False

    def _object_redacted(self, text: str) -> bool:
        """Whether JSON text is an object whose every value is a placeholder (``{"query": "[REDACTED]"}``)."""
        if len(text) > self._max_bytes:
            return False
        doc = self._parse(text)
        return isinstance(doc, dict) and self._all_placeholders(doc)

    def _all_placeholders(self, doc: Mapping[str, Any]) -> bool:
        anywhere = self._placeholders.anywhere
        return bool(doc) and all(v.__class__ is str and v in anywhere for v in doc.values())


_GENAI_ROW = next(r for r in _BUILTIN_ROWS if r.name == "genai")
