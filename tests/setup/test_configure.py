"""``otel_loopguard.configure()``: providers from the ``OTEL_*`` variables, the guard, a visible line per verdict."""

from __future__ import annotations

import re

from ._scripts import LOOP, STUCK_LINE, run_script

_CONFIGURE = "import otel_loopguard\nguard = otel_loopguard.configure()\n"


def test_a_six_call_loop_prints_a_stuck_line_with_no_environment() -> None:
    """With no variable set, the stuck transition is one line on standard error and nothing tries to export."""
    done = run_script(_CONFIGURE + LOOP)
    assert done.returncode == 0, done.stderr
    assert re.search(STUCK_LINE, done.stderr), done.stderr
    assert done.stderr.count("to export them, set OTEL_EXPORTER_OTLP_ENDPOINT") == 1
    # Nothing exported: no connection attempts to localhost:4317, so no exporter error lines.
    assert "Failed to export" not in done.stderr
    assert "Transient error" not in done.stderr
    assert done.stdout == ""


def test_a_second_call_returns_the_same_guard() -> None:
    """configure() is idempotent: the second call gives the first call's processor and adds no second one."""
    code = (_CONFIGURE + "again = otel_loopguard.configure(window=50)\nprint(again is guard)\n"
            "from opentelemetry import trace\n"
            "print(len(trace.get_tracer_provider()._active_span_processor._span_processors))\n")
    done = run_script(code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "1"]


def test_application_providers_are_used_untouched() -> None:
    """Providers the application set stay the globals, get the guard, and receive the events (no console line)."""
    code = '''
from opentelemetry import trace, _logs
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor, InMemoryLogRecordExporter
tp, lp, logs = TracerProvider(), LoggerProvider(), InMemoryLogRecordExporter()
lp.add_log_record_processor(SimpleLogRecordProcessor(logs))
trace.set_tracer_provider(tp)
_logs.set_logger_provider(lp)
import otel_loopguard
guard = otel_loopguard.configure()
''' + LOOP + '''
guard.force_flush()
print(trace.get_tracer_provider() is tp, _logs.get_logger_provider() is lp)
print(sorted({r.log_record.attributes["loopguard.verdict"] for r in logs.get_finished_logs()}))
'''
    done = run_script(code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["True True", "['stuck']"]
    assert "loopguard: trace" not in done.stderr
    assert "to export them" not in done.stderr


def test_otel_logs_exporter_console_is_honoured() -> None:
    """OTEL_LOGS_EXPORTER=console sends the verdict event to the SDK's console exporter instead of a line."""
    done = run_script(_CONFIGURE + LOOP, {"OTEL_LOGS_EXPORTER": "console", "OTEL_TRACES_EXPORTER": "none",
                                          "OTEL_METRICS_EXPORTER": "none"})
    assert done.returncode == 0, done.stderr
    assert '"event_name": "loopguard.verdict"' in done.stdout
    assert '"loopguard.verdict": "stuck"' in done.stdout
    assert not re.search(STUCK_LINE, done.stderr), done.stderr


def test_application_logging_gets_the_line_without_a_second_handler() -> None:
    """When the application configured logging, the line goes through its handler only (none added)."""
    code = ("import logging, sys\nlogging.basicConfig(stream=sys.stdout, level=logging.INFO, "
            "format='APP %(name)s %(levelname)s %(message)s')\n" + _CONFIGURE + LOOP)
    done = run_script(code)
    assert done.returncode == 0, done.stderr
    assert re.search("APP otel_loopguard WARNING " + STUCK_LINE, done.stdout), done.stdout
    assert "loopguard: trace" not in done.stderr


def test_zero_code_path_prints_the_same_line() -> None:
    """Under opentelemetry-instrument with LOOPGUARD_ENABLED and no logs exporter, the same line is printed."""
    env = {"LOOPGUARD_ENABLED": "true", "OTEL_TRACES_EXPORTER": "none", "OTEL_METRICS_EXPORTER": "none",
           "OTEL_LOGS_EXPORTER": "none"}
    code = ("from opentelemetry.instrumentation.auto_instrumentation import initialize\ninitialize()\n" + LOOP)
    done = run_script(code, env)
    assert done.returncode == 0, done.stderr
    assert re.search(STUCK_LINE, done.stderr), done.stderr
