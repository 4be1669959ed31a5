"""Run every example and check that each printed a stuck verdict (CI runs this after the tests).

Each example runs in a fresh interpreter (they instrument their framework process-wide), with the framework
packages of examples/requirements.txt installed. Exit status 0 when every example printed ``-> stuck``, else 1.

    pip install -e . -r examples/requirements.txt
    python examples/run_all.py
"""

import subprocess
import sys
import time
from pathlib import Path

EXAMPLES = ("pydantic_ai_loop.py", "openai_agents_loop.py", "langgraph_loop.py", "openai_client_loop.py")
# Generous: an example takes a few seconds, but CI's two cores are shared.
TIMEOUT_SECONDS = 300


def run(script: Path) -> str | None:
    """Run one example; None when it printed a stuck verdict and exited 0, else what went wrong."""
    try:
        done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                              timeout=TIMEOUT_SECONDS, check=False)
    except subprocess.TimeoutExpired:
        return f"no exit within {TIMEOUT_SECONDS} s"
    if done.returncode != 0:
        return f"exit status {done.returncode}: {done.stderr.strip().splitlines()[-1:]}"
    if "-> stuck" not in done.stdout:
        return f"no stuck verdict in its output: {done.stdout.strip()[:300]!r}"
    return None


def main() -> int:
    """Run the examples one after the other and print one line each."""
    failed = 0
    for name in EXAMPLES:
        started = time.monotonic()
        problem = run(Path(__file__).resolve().parent / name)
        failed += problem is not None
        seconds = time.monotonic() - started
        print(f"ok   {name} ({seconds:.1f} s)" if problem is None else f"FAIL {name} ({seconds:.1f} s): {problem}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
