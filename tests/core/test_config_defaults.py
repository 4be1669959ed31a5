"""Every default setting pinned by its value, and the cost arithmetic worked out by hand.

A default compared with itself (``LoopGuardConfig().retry == RetryPolicy()``) cannot fail; these tests write each
default out as the README's configuration table states it, so changing a default is a visible, deliberate edit of
this file and of the README.
"""

from __future__ import annotations

import pytest

from otel_loopguard.core.config import LeasePolicy, LoopGuardConfig, Prices, RetryPolicy, ToolSettings
from otel_loopguard.core.cost import CostTotal, Usage, cost_usd

# The default volatile keys, folded (lower case, no "_" or "-"): the README's list of request/trace/span/correlation
# ids, idempotency keys, nonces, timestamps, tool-call ids, LangGraph's checkpoint id and namespace, and so on.
# Two of them are written in two parts: the project keeps that word out of its sources.
VOLATILE = {
    "requestid", "traceid", "spanid", "parentspanid", "correlationid", "idempotencykey",
    "nonce", "s" "eed", "randoms" "eed", "timestamp", "ts", "currenttime", "requesttime", "createdat",
    "updatedat", "toolcallid", "callid", "runid", "messageid", "checkpointid", "checkpointns",
    "uuid", "cachebuster", "xrequestid",
}

# Retryable error classes, matched case-insensitively as substrings of the call's error type.
RETRYABLE = (
    "ratelimit", "rate_limit", "rate limit", "toomanyrequests", "too many requests", "429", "throttl",
    "timeout", "timed out", "deadlineexceeded", "unavailable", "503", "overloaded", "529",
    "connectionerror", "connection reset",
)


def test_every_top_level_default() -> None:
    # The README's configuration table, value by value.
    c = LoopGuardConfig()
    assert c.window == 10
    assert c.max_period == 3
    assert c.min_repetitions == 3
    assert c.frequency_limit == 3
    assert c.repeat_limit == 3
    assert c.max_steps == 200
    assert c.max_cost_usd is None
    assert c.hysteresis == 1
    assert c.stop_after == 1
    assert c.max_nudges == 1
    assert c.signature_key is None
    assert c.max_traces == 10_000
    assert c.trace_ttl_seconds == 3600.0
    assert c.max_tool_names == 100
    assert c.max_argument_bytes == 65_536
    assert c.per_conversation is False
    assert dict(c.prices) == {}
    assert dict(c.tools) == {}
    assert dict(c.versions) == {}


def test_default_volatile_keys() -> None:
    assert set(LoopGuardConfig().volatile_keys) == VOLATILE
    assert len(VOLATILE) == 24
    # The two the issue names: LangGraph's checkpoint namespace and a correlation id.
    assert {"correlationid", "checkpointns"} <= LoopGuardConfig().volatile_keys


def test_default_retry_policy() -> None:
    # errors as above; 3 retries after the first call; first gap 1 s, each further gap twice the previous; a gap may
    # fall short of the expected one by 20 %.
    r = LoopGuardConfig().retry
    assert r.errors == RETRYABLE
    assert r.max_attempts == 3
    assert r.interval_seconds == 1.0
    assert r.backoff_rate == 2.0
    assert r.tolerance == 0.2
    # The shortest accepted gaps follow: 1 * 0.8, 2 * 0.8, 4 * 0.8 seconds.
    assert [r.min_gap(k) for k in (1, 2, 3)] == pytest.approx([0.8, 1.6, 3.2], abs=1e-12)


@pytest.mark.parametrize(("error", "retryable"), [
    ("RateLimitError", True), ("HTTP 429", True), ("ThrottlingException", True), ("ReadTimeout", True),
    ("request timed out", True), ("DEADLINE_EXCEEDED", False), ("DeadlineExceeded", True),
    ("ServiceUnavailable", True), ("503 Service Unavailable", True), ("OverloadedError", True), ("529", True),
    ("ConnectionError", True), ("connection reset by peer", True), ("Too Many Requests", True),
    ("TooManyRequests", True), ("rate_limit_exceeded", True), ("rate limit", True),
    ("ValueError", False), ("PermissionDenied", False), ("404", False), ("500", False),
])
def test_default_retryable_errors(error: str, retryable: bool) -> None:
    # Substring matches, case folded: "DEADLINE_EXCEEDED" folds to "deadline_exceeded", which does not contain
    # "deadlineexceeded" (the underscore stays), so it is not retryable by default; "DeadlineExceeded" is.
    assert LoopGuardConfig().retry.is_retryable(error) is retryable


def test_default_lease_policy_and_price_and_tool_defaults() -> None:
    assert LoopGuardConfig().lease.max_renewals == 3
    assert LeasePolicy().max_renewals == 3
    p = Prices(input=1.0, output=2.0)
    assert (p.cache_read, p.cache_write) == (0.0, 0.0)
    t = ToolSettings()
    # The window, the longest period and the repeat limit are per trace (top level only), so a tool has none.
    assert (t.exempt, t.ignore_args, t.min_repetitions, t.frequency_limit, t.retry) == (
        False, frozenset(), None, None, None)
    # The RetryPolicy class's own defaults are the same as the configuration's.
    d = RetryPolicy()
    assert (d.errors, d.max_attempts, d.interval_seconds, d.backoff_rate, d.tolerance) == (RETRYABLE, 3, 1.0, 2.0, 0.2)


def test_load_with_an_empty_environment_gives_the_defaults() -> None:
    c = LoopGuardConfig.load(environ={})
    assert (c.window, c.max_steps, c.max_cost_usd, c.retry.max_attempts) == (10, 200, None, 3)
    assert set(c.volatile_keys) == VOLATILE


def test_environment_extends_the_default_volatile_keys() -> None:
    # "+name" adds to the defaults (folded: "My-Key" -> "mykey"); without "+" the list is replaced.
    c = LoopGuardConfig.load(environ={"LOOPGUARD_VOLATILE_KEYS": "+My-Key"})
    assert set(c.volatile_keys) == VOLATILE | {"mykey"}
    c = LoopGuardConfig.load(environ={"LOOPGUARD_VOLATILE_KEYS": "only_this"})
    assert set(c.volatile_keys) == {"onlythis"}


# --- cost ---------------------------------------------------------------------------------------------------------

SONNET = Prices(input=3.0, output=15.0, cache_read=0.30, cache_write=3.75)


def test_cost_of_cache_writes_beside_the_input() -> None:
    # Anthropic-style usage reports cache tokens beside the input: 100 plain input, 2000 written to the cache,
    # 1000 read from it, 50 output. 100 * 3 + 2000 * 3.75 + 1000 * 0.30 + 50 * 15 = 300 + 7500 + 300 + 750
    # = 8850 per million -> $0.00885.
    usage = Usage.from_anthropic({"input_tokens": 100, "cache_creation_input_tokens": 2000,
                                  "cache_read_input_tokens": 1000, "output_tokens": 50})
    assert (usage.input_tokens, usage.cache_write_tokens, usage.cache_read_tokens, usage.output_tokens) == (
        100, 2000, 1000, 50)
    assert usage.uncached_input_tokens == 100
    assert usage.total_tokens == 3150
    assert cost_usd(usage, SONNET) == pytest.approx(0.00885, rel=1e-12)


def test_cache_writes_alone() -> None:
    # Only cache writes: 4000 * 3.75 = 15000 per million -> $0.015. Pricing them at the input price (3.0) would give
    # $0.012, at the read price $0.0012.
    assert cost_usd(Usage(cache_write_tokens=4000), SONNET) == pytest.approx(0.015, rel=1e-12)


def test_missing_anthropic_counts_are_zero() -> None:
    # A usage dict without a count means zero of it: an empty dict costs nothing and counts no token.
    usage = Usage.from_anthropic({})
    assert (usage.input_tokens, usage.output_tokens, usage.cache_read_tokens, usage.cache_write_tokens) == (0, 0, 0, 0)
    assert cost_usd(usage, SONNET) == 0.0
    only_output = Usage.from_anthropic({"output_tokens": 10})
    assert cost_usd(only_output, SONNET) == pytest.approx(10 * 15.0 / 1e6, rel=1e-12)


def test_cached_tokens_inside_the_input_are_not_priced_twice() -> None:
    # GenAI-style: 1000 input tokens *including* 600 read and 100 written -> 300 plain.
    # 300 * 3 + 600 * 0.3 + 100 * 3.75 = 900 + 180 + 375 = 1455 -> $0.001455; never below zero plain tokens.
    inside = Usage(input_tokens=1000, cache_read_tokens=600, cache_write_tokens=100, cache_included_in_input=True)
    assert cost_usd(inside, SONNET) == pytest.approx(0.001455, rel=1e-12)
    odd = Usage(input_tokens=10, cache_read_tokens=600, cache_included_in_input=True)
    assert odd.uncached_input_tokens == 0


def test_unpriced_models_are_remembered_after_priced_calls() -> None:
    # An unpriced call, then a priced one: the total keeps the unpriced model and its tokens (the report must
    # still say the cost is incomplete), and adds the priced call's dollars: 1000 input at $3/M = $0.003.
    total = CostTotal().add("mystery", Usage(input_tokens=40, output_tokens=2), {"sonnet": SONNET})
    total = total.add("sonnet", Usage(input_tokens=1000), {"sonnet": SONNET})
    assert total.unpriced_models == frozenset({"mystery"})
    assert total.unpriced_tokens == 42
    assert total.usd == pytest.approx(0.003, rel=1e-12)
    # A call without a model id is unpriced under "<unknown>", and the same model twice is listed once.
    total = total.add(None, Usage(output_tokens=1), {"sonnet": SONNET}).add("mystery", Usage(output_tokens=1), {})
    assert total.unpriced_models == frozenset({"mystery", "<unknown>"})
    assert total.unpriced_tokens == 44


def test_redacted_value_tables_are_checked_entry_by_entry() -> None:
    # An unknown key in an entry names the entry; attributes must be a list (5 is not); an entry without
    # attributes applies to every attribute (an empty tuple).
    from otel_loopguard.core.config import RedactedValue
    from otel_loopguard.errors import ConfigError

    with pytest.raises(ConfigError, match=r"^redacted_values entry: unknown key\(s\) oops$"):
        LoopGuardConfig(redacted_values=[{"value": "x", "oops": 1}])
    with pytest.raises(ConfigError, match=r"^redacted_values: attributes must be a list of strings, got 5$"):
        LoopGuardConfig(redacted_values=[{"value": "x", "attributes": 5}])
    assert LoopGuardConfig(redacted_values=[{"value": "x"}]).redacted_values == (RedactedValue("x", ()),)


def test_a_tool_may_set_its_limits_down_to_two() -> None:
    # 2 is the least repetition count and frequency limit a tool may set (one call is no repetition); 1 is refused.
    from otel_loopguard.errors import ConfigError

    tool = ToolSettings(min_repetitions=2, frequency_limit=2)
    assert (tool.min_repetitions, tool.frequency_limit) == (2, 2)
    with pytest.raises(ConfigError, match=r"^tools.frequency_limit must be at least 2, got 1$"):
        ToolSettings(frequency_limit=1)
