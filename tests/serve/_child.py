"""``python -m otel_loopguard.cli serve`` as a child process, for the tests of the command itself."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


@contextmanager
def serve_command(args: Sequence[str], env: Mapping[str, str], **popen: Any) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """Start ``serve ARGS`` from the repository, in this environment without its ``OTEL_*`` and ``LOOPGUARD_*``
    variables, plus ``env``; yield the process and the first line it wrote to standard error (the listening line).

    Standard error stays a pipe the caller may read on; the process is killed if it still runs at the end.
    """
    child_env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LOOPGUARD_"))}
    child_env.update({"PYTHONPATH": str(REPO), **env})
    proc = subprocess.Popen([sys.executable, "-m", "otel_loopguard.cli", "serve", *args], cwd=REPO, env=child_env,
                            stderr=subprocess.PIPE, text=True, **popen)
    try:
        assert proc.stderr is not None
        yield proc, proc.stderr.readline()
    finally:
        if proc.poll() is None:
            proc.kill()
