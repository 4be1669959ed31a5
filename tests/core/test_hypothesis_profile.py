"""Property tests run derandomised in CI: the Hypothesis profile loaded by tests/conftest.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_PROBE = """
import sys
sys.argv = ["pytest"]
import tests.conftest
from hypothesis import settings
print(settings.default.derandomize, settings.default.database is None)
"""


# Variables by which Hypothesis itself recognises a CI machine (and then derandomises its default profile): a local
# run has none of them.
_CI_MARKERS = ("CI", "TF_BUILD", "GITHUB_ACTIONS", "BUILDKITE", "CIRCLECI", "CIRRUS_CI", "CODEBUILD_BUILD_ID",
               "GITLAB_CI", "HEROKU_TEST_RUN_ID", "TEAMCITY_VERSION", "bamboo.buildKey")


def _profile(env_extra: dict[str, str]) -> str:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("LOOPGUARD_", "HYPOTHESIS_")) and k not in _CI_MARKERS}
    env.update(env_extra)
    return subprocess.run([sys.executable, "-c", _PROBE], cwd=ROOT, env=env, capture_output=True, text=True,
                          check=True, timeout=120).stdout.strip()


def test_ci_loads_the_derandomised_profile() -> None:
    """With LOOPGUARD_REQUIRE_E2E=1 (as .ci/run sets it) the default settings are derandomised, with no database."""
    assert _profile({"LOOPGUARD_REQUIRE_E2E": "1"}) == "True True"


def test_a_local_run_explores() -> None:
    """Without it, the default profile draws fresh random data (derandomize off)."""
    assert _profile({}).split()[0] == "False"
