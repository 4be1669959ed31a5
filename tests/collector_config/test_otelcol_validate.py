"""Every shipped configuration, alone and in its documented combination, in the real Collector (v0.161.0).

``validate`` resolves the files, unmarshals every component's settings and checks the pipelines; starting the
Collector also builds the components (OTTL statements are parsed there) and binds the listeners. The Collector logs
a warning for a deprecated component name and an info line when it has to add context prefixes to OTTL paths:
the shipped files must start without either, so they keep working when those aliases are removed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.otelcol import write_overlay

from ._collector import CONFIG_DIR, DEPRECATION_MARKERS, listener_overlay, run_shipped

# Each full configuration alone, and the merge the README and agent-raw-copy.yaml's header document.
COMBINATIONS = (
    ("agent.yaml",),
    ("gateway.yaml",),
    ("tail-sampling.yaml",),
    ("agent.yaml", "agent-raw-copy.yaml"),
)
IDS = ["+".join(c) for c in COMBINATIONS]


def _validate(binary: Path, configs: list[Path], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    command = [str(binary), "validate", *(arg for path in configs for arg in ("--config", str(path)))]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, env=env, check=False)


@pytest.mark.parametrize("names", COMBINATIONS, ids=IDS)
def test_validate_accepts_the_shipped_configuration(otelcol_bin: Path, names: tuple[str, ...]) -> None:
    """``otelcol validate`` exits 0 for each file and the documented merge, as shipped (default variables)."""
    done = _validate(otelcol_bin, [CONFIG_DIR / name for name in names])
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("names", COMBINATIONS, ids=IDS)
def test_validate_accepts_other_listen_hosts(otelcol_bin: Path, names: tuple[str, ...]) -> None:
    """OTELCOL_LISTEN_HOST=0.0.0.0 (the documented way to accept other hosts) still gives a valid configuration."""
    env = {**os.environ, "OTELCOL_LISTEN_HOST": "0.0.0.0"}
    done = _validate(otelcol_bin, [CONFIG_DIR / name for name in names], env)
    assert done.returncode == 0, done.stdout + done.stderr


def test_validate_rejects_the_overlay_alone(otelcol_bin: Path) -> None:
    """agent-raw-copy.yaml declares no receiver (it uses agent.yaml's), so it fails alone, as its header says.

    It also shows that ``validate`` rejects what cannot run (one that accepted everything would make the tests
    above worthless).
    """
    done = _validate(otelcol_bin, [CONFIG_DIR / "agent-raw-copy.yaml"])
    assert done.returncode != 0
    assert "no receiver configuration" in done.stdout + done.stderr


def test_validate_rejects_a_misspelt_ottl_statement(otelcol_bin: Path, tmp_path: Path) -> None:
    """A broken redaction statement fails ``validate``, so the passing runs above did parse the shipped OTTL."""
    overlay = {
        "processors": {
            "transform/redact_genai": {"trace_statements": [{"context": "span", "statements": ["delete_kee(x)"]}]}
        }
    }
    done = _validate(otelcol_bin, [CONFIG_DIR / "agent.yaml", write_overlay(tmp_path, overlay)])
    assert done.returncode != 0
    assert "delete_kee" in done.stdout + done.stderr


@pytest.mark.parametrize("names", COMBINATIONS, ids=IDS)
def test_starts_without_deprecation_warnings(otelcol_bin: Path, tmp_path: Path, names: tuple[str, ...]) -> None:
    """The Collector starts each configuration (listeners on free ports) and logs no deprecation or rewrite."""
    _overlay, ports = listener_overlay(*names)
    assert ports.all(), "every configuration listens somewhere"
    with run_shipped(otelcol_bin, tmp_path, names, env={}) as running:
        output = running.collector.output()
    assert "Everything is ready" in output
    offending = [line for line in output.splitlines() if any(m in line for m in DEPRECATION_MARKERS)]
    assert not offending, "\n".join(offending)


@pytest.mark.parametrize(("require", "outcome", "code"), [("1", "errors", 1), ("", "skipped", 0)])
def test_a_missing_collector_fails_under_require_e2e_and_skips_otherwise(
    tmp_path: Path, require: str, outcome: str, code: int
) -> None:
    """LOOPGUARD_OTELCOL naming no binary: CI's LOOPGUARD_REQUIRE_E2E=1 turns the skip into a failure.

    The failure is raised in the fixture, so pytest reports it as an error, and exits 1 like for a failure.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOPGUARD_")}
    env.update({"LOOPGUARD_OTELCOL": str(tmp_path / "no-otelcol"), "LOOPGUARD_REQUIRE_E2E": require})
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfEs",
         f"{__file__}::test_validate_accepts_the_shipped_configuration"],
        capture_output=True, text=True, timeout=300, env=env, cwd=Path(__file__).resolve().parents[2], check=False,
    )
    summary = done.stdout.strip().splitlines()[-1]
    assert done.returncode == code and f"4 {outcome}" in summary, done.stdout[-3000:]
    assert "no Collector binary at" in done.stdout
