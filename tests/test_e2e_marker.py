"""The ``e2e`` marker splits the suite: ``pytest -m "not e2e"`` is the fast subset, plain ``pytest`` runs everything."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# One file of each kind, and the nodes each must give: hand-listed from what each test starts.
PATHS = ["tests/reliability/test_secrets.py", "tests/integration/test_zero_code.py", "tests/package/test_packaging.py",
         "tests/collector_config/test_otelcol_validate.py", "tests/serve/test_attacks.py"]


def _collected(marker: str) -> set[str]:
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-m",
                          marker, *PATHS], cwd=ROOT, capture_output=True, text=True, timeout=300)
    return {line.split("::")[0] + "::" + line.split("::")[1].split("[")[0]
            for line in out.stdout.splitlines() if "::" in line}


def test_tests_that_start_real_components_are_e2e_and_the_rest_are_not() -> None:
    """rotel (fixture), the Collector (folder), zero-code instrumentation (folder) and the wheel in a fresh virtualenv
    (file) are e2e; a keyed-digest check and serve under a file limit (a child of this package only) are not."""
    e2e, fast = _collected("e2e"), _collected("not e2e")
    assert "tests/reliability/test_secrets.py::test_no_secret_reaches_the_backend_in_events_span_events_or_metrics" in e2e
    assert "tests/package/test_packaging.py::test_wheel_runs_demo_and_audit_in_a_fresh_virtualenv" in e2e
    assert {n.split("::")[0] for n in e2e} == {
        "tests/reliability/test_secrets.py", "tests/integration/test_zero_code.py", "tests/package/test_packaging.py",
        "tests/collector_config/test_otelcol_validate.py"}
    assert {n.split("::")[0] for n in fast} == {"tests/reliability/test_secrets.py", "tests/serve/test_attacks.py"}
    assert "tests/reliability/test_secrets.py::test_signature_digests_are_keyed" in fast
    assert not e2e & fast
