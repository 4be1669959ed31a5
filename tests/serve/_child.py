"""``python -m otel_loopguard.cli serve`` as a child process, for the tests of the command itself.

The child is started without ``preexec_fn``: a ``preexec_fn`` makes ``subprocess`` fork the test process (which runs
gRPC's threads from earlier tests) and run Python in the child before ``exec``; gRPC's fork handlers then restart
its poller in that child, whose ``epoll_wait`` fails once ``subprocess`` has closed the descriptors it does not pass
on, and the poller's error line ("Epoll1Poller ... encountered epoll_wait error: Bad file descriptor") lands in the
child's standard error before serve's own first line (11 of 200 children of a process with a gRPC server under load;
0 of 200 without ``preexec_fn``). A file limit is therefore set by the child itself (:data:`LIMITED`), and serve's
first line is looked for among the first lines, whatever a library writes before it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]

# Sets the open-file limit (soft and hard) to argv[1], then runs the command line with the rest of argv.
LIMITED = ("import resource, runpy, sys; limit = int(sys.argv.pop(1)); "
           "resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit)); "
           "runpy.run_module('otel_loopguard.cli', run_name='__main__', alter_sys=True)")
# Lines of standard error read while looking for serve's first line, at most.
_MAX_EARLY_LINES = 50
_FIRST_LINES = ("otel-loopguard serve: listening on", "otel-loopguard: error")


def serve_argv(args: Sequence[str], file_limit: int | None = None) -> list[str]:
    """The command line of ``serve ARGS``, under an open-file limit when given (set by the child itself); the status
    page on a free port unless ARGS name one (its default port would collide between tests running at once)."""
    if "--status" not in args:
        args = [*args, "--status", "127.0.0.1:0"]
    if file_limit is None:
        return [sys.executable, "-m", "otel_loopguard.cli", "serve", *args]
    return [sys.executable, "-c", LIMITED, str(file_limit), "serve", *args]


def first_line(stream: Any) -> str:
    """The first line serve writes (listening, or its error), skipping what libraries may write before it; the
    lines read are all returned when there is none (the process ended)."""
    seen = []
    for _ in range(_MAX_EARLY_LINES):
        line = stream.readline()
        if not line:
            break
        if line.startswith(_FIRST_LINES):
            return str(line)
        seen.append(line)
    return "".join(seen)


@contextmanager
def serve_command(args: Sequence[str], env: Mapping[str, str], *, file_limit: int | None = None,
                  **popen: Any) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """Start ``serve ARGS`` from the repository, in this environment without its ``OTEL_*`` and ``LOOPGUARD_*``
    variables, plus ``env``; yield the process and serve's first line on standard error (the listening line).

    Standard error stays a pipe the caller may read on; the process is killed if it still runs at the end.
    """
    child_env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LOOPGUARD_"))}
    child_env.update({"PYTHONPATH": str(REPO), **env})
    proc = subprocess.Popen(serve_argv(args, file_limit), cwd=REPO, env=child_env, stderr=subprocess.PIPE,
                            text=True, **popen)
    try:
        assert proc.stderr is not None
        yield proc, first_line(proc.stderr)
    finally:
        if proc.poll() is None:
            proc.kill()
