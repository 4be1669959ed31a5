"""Hysteresis never delays a cycle of permanent failures (errors that retrying cannot fix), as it never delays a
budget; any other cycle still needs ``hysteresis`` evaluations before ``stuck``."""

from __future__ import annotations

import pytest

from otel_loopguard.core.config import DEFAULT_PERMANENT_ERRORS, LoopGuardConfig
from otel_loopguard.core.engine import LoopEngine

from ._helpers import call, kinds, observe_all


def _failing(errors: list[str], tool: str = "read_file") -> list:
    """The same call (same arguments) once per error class, one second apart."""
    return [call(tool, {"path": "/etc/secret"}, result=None, result_captured=False, error=e, at=float(i))
            for i, e in enumerate(errors)]


@pytest.mark.parametrize("error", ["PermissionError", "AuthenticationError", "NotFoundError", "FileNotFoundError",
                                   "PERMISSION_DENIED", "INVALID_ARGUMENT", "ValidationError", "BadRequestError",
                                   "404", "403"])
def test_a_cycle_of_permanent_failures_is_stuck_at_once(error: str) -> None:
    """hysteresis=3, min_repetitions=3: the third identical failing call is stuck at once (index 2), with a nudge.

    Without the rule the same cycle would need three evaluations (indexes 2, 3, 4): see the next test.
    """
    engine = LoopEngine(LoopGuardConfig(hysteresis=3))
    _, obs = observe_all(engine, _failing([error] * 5))
    assert kinds(obs) == ["working", "working", "stuck", "stuck", "stuck"]
    assert obs[2].transition is not None and obs[2].intervention is not None
    assert obs[2].intervention.action == "nudge"


def test_other_failures_still_wait_for_hysteresis() -> None:
    """RuntimeError is neither retryable nor permanent: with hysteresis=3 the cycle judged stuck at indexes 2, 3
    and 4 (cycle start 0 each time) enters stuck at the third of them, index 4."""
    engine = LoopEngine(LoopGuardConfig(hysteresis=3))
    _, obs = observe_all(engine, _failing(["RuntimeError"] * 6))
    assert kinds(obs) == ["working", "working", "working", "working", "stuck", "stuck"]


def test_one_non_permanent_failure_in_the_cycles_keeps_the_delay() -> None:
    """Every call of the cycles must be a permanent failure: one RuntimeError among the last three calls keeps the
    hysteresis (stuck at index 4 as above; at index 4 the last three calls are 2..4, all permanent again, but the
    streak already reached 3 there)."""
    engine = LoopEngine(LoopGuardConfig(hysteresis=3))
    _, obs = observe_all(engine, _failing(["NotFoundError", "RuntimeError", "NotFoundError", "NotFoundError",
                                           "NotFoundError"]))
    # Index 2: calls 0..2 include the RuntimeError: delayed (streak 1). Index 3: calls 1..3 include it: streak 2.
    # Index 4: calls 2..4 are all permanent: stuck at once (it would have been stuck by the streak too).
    assert kinds(obs) == ["working", "working", "working", "working", "stuck"]


def test_a_permanent_cycle_found_by_frequency_is_stuck_at_once() -> None:
    """A x A y A with A failing NotFoundError: the frequency rule sees A three times at index 4; stuck at once."""
    engine = LoopEngine(LoopGuardConfig(hysteresis=3))
    a = {"path": "/missing"}
    calls = [call("read_file", a, result_captured=False, error="NotFoundError", at=0),
             call("search", {"q": "x"}, result="1 row", at=1),
             call("read_file", a, result_captured=False, error="NotFoundError", at=2),
             call("search", {"q": "y"}, result="2 rows", at=3),
             call("read_file", a, result_captured=False, error="NotFoundError", at=4)]
    _, obs = observe_all(engine, calls)
    assert kinds(obs) == ["working"] * 4 + ["stuck"]
    assert obs[4].verdict.rule == "frequency"


def test_the_list_is_configurable() -> None:
    """With permanent_errors=("quota",) a PermissionError is an ordinary failure (delayed, stuck at index 4) and a
    QuotaExceeded is permanent (stuck at index 2)."""
    config = LoopGuardConfig(hysteresis=3, permanent_errors=("quota",))
    _, obs = observe_all(LoopEngine(config), _failing(["PermissionError"] * 5))
    assert kinds(obs).index("stuck") == 4
    _, obs = observe_all(LoopEngine(config), _failing(["QuotaExceeded"] * 5))
    assert kinds(obs).index("stuck") == 2


def test_default_list_and_environment() -> None:
    """The defaults are pinned; LOOPGUARD_PERMANENT_ERRORS replaces them, or extends them with a leading "+"."""
    assert DEFAULT_PERMANENT_ERRORS == (
        "permission", "forbidden", "accessdenied", "access denied", "403",
        "authentication", "unauthenticated", "unauthorized", "401",
        "notfound", "not_found", "not found", "nosuch", "404",
        "invalidargument", "invalid_argument", "invalid argument", "validationerror", "badrequest", "bad request",
        "unprocessable", "valueerror", "typeerror", "400", "422",
    )
    assert LoopGuardConfig.load(environ={"LOOPGUARD_PERMANENT_ERRORS": "Quota, Gone"}).permanent_errors == (
        "quota", "gone")
    extended = LoopGuardConfig.load(environ={"LOOPGUARD_PERMANENT_ERRORS": "+Quota"}).permanent_errors
    assert extended == (*DEFAULT_PERMANENT_ERRORS, "quota")


def test_retryable_errors_are_not_permanent() -> None:
    """No default retryable pattern (rate limits, timeouts, 5xx) is matched by a permanent one, and vice versa."""
    config = LoopGuardConfig()
    for error in ("RateLimitError", "TimeoutError", "ServiceUnavailable", "APIConnectionError", "429", "503"):
        assert not config.is_permanent(error)
        assert config.retry.is_retryable(error)
    for error in ("PermissionError", "NotFoundError", "AuthenticationError", "ValidationError"):
        assert config.is_permanent(error)
        assert not config.retry.is_retryable(error)
