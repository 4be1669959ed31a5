"""The README stays a newcomer's page, the documentation site's generated references cover the code, and the
examples the recipes include exist and print a stuck verdict."""

from __future__ import annotations

import dataclasses
import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
import yaml

from otel_loopguard.core.config import LoopGuardConfig
from tests.support.external import require_module
from tests.support.json_paths import strings_below

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
# The two commands of the quickstart; .ci/run runs the second one verbatim.
DEMO_COMMAND = "python3 -m venv .venv && .venv/bin/pip install -q -e . && .venv/bin/otel-loopguard demo"
TEST_COMMAND = "python3 -m venv .venv && .venv/bin/pip install -q -e '.[test]' && .venv/bin/python -m pytest"


def _hook() -> ModuleType:
    """The MkDocs hook that generates the reference pages, imported from its file."""
    spec = importlib.util.spec_from_file_location("docs_reference_hook", DOCS / "hooks" / "reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_readme_has_at_most_300_lines() -> None:
    """A newcomer reads the README in five minutes: 300 lines at most."""
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 300


def test_the_readme_keeps_the_two_commands_ci_runs() -> None:
    """The demo and test commands stand in the README verbatim, and .ci/run runs the test command as written."""
    readme = README.read_text(encoding="utf-8")
    assert DEMO_COMMAND in readme and TEST_COMMAND in readme
    assert TEST_COMMAND in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


def test_every_relative_link_of_the_readme_exists() -> None:
    """Each link of the README to a file of the repository (docs pages, examples) names a file or folder there."""
    links = re.findall(r"\]\(([^)#]+)\)", README.read_text(encoding="utf-8"))
    relative = [link for link in links if "://" not in link]
    assert "docs/configuration.md" in relative and "examples/pydantic_ai_loop.py" in relative
    for link in relative:
        assert (ROOT / link).exists(), link


def test_the_nav_and_the_pages_are_the_same_set() -> None:
    """Every page in mkdocs.yml's nav exists under docs/, and every Markdown page under docs/ is in the nav."""
    nav = strings_below(yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))["nav"])
    pages = {str(path.relative_to(DOCS)) for path in DOCS.rglob("*.md")}
    assert sorted(nav) == sorted(pages)
    for placeholder in ("architecture.md", "setup.md", "status-page.md", "hostile-input.md", "backends.md",
                        "observability-sdks.md", "agent-steps.md", "testing.md"):
        assert placeholder in pages


def test_the_configuration_reference_has_a_row_per_field() -> None:
    """The generated configuration reference has one row per LoopGuardConfig field, e.g. window: default 10, read
    from LOOPGUARD_WINDOW, described by the class's docstring."""
    text = _hook().render_configuration()
    for field in dataclasses.fields(LoopGuardConfig):
        assert f"| `{field.name}` |" in text, field.name
    assert ("| `window` | `10` | `LOOPGUARD_WINDOW` | how many recent calls of a trace the detectors look at. |"
            in text)
    assert "| `signature_key` | random per process | `LOOPGUARD_SIGNATURE_KEY` |" in text
    assert "| `per_conversation` | `false` |" in text
    assert "### `[retry]`" in text and "| `max_attempts` | `3` | — | retries allowed after the first call. |" in text
    assert "| `input` | required | — | price of input tokens (the cached ones excluded). |" in text


def test_a_setting_without_a_description_fails_the_build() -> None:
    """A field missing from its class's Args section is an error, so the reference cannot silently lose a row."""
    hook = _hook()

    @dataclasses.dataclass
    class Undocumented:
        """A class whose docstring documents one of its two fields.

        Args:
            documented: this one.
        """

        documented: int = 1
        forgotten: int = 2

    assert hook.field_descriptions(Undocumented) == {"documented": "this one."}
    hook._TABLES = ((Undocumented, ""),)
    with pytest.raises(ValueError, match=r"Undocumented\.forgotten has no description"):
        hook.render_configuration()


def test_the_environment_reference_lists_every_variable() -> None:
    """Each variable of environment_variables.py has a row with its documented meaning."""
    text = _hook().render_environment()
    assert "| `LOOPGUARD_ENABLED` | `true` adds the processor to the global tracer provider" in text
    # The 32 names of environment_variables.__all__, counted by hand: 25, LOOPGUARD_INTERVENTIONS, the five
    # switches of agent steps (hand-off, agent, model steps, output repetition and its limit) and
    # LOOPGUARD_VERSION_ATTRIBUTES.
    assert text.count("| `LOOPGUARD_") == 32


def test_the_cli_reference_has_every_command_with_its_options() -> None:
    """The generated command-line reference holds each command's help, with options only that command has."""
    text = _hook().render_cli()
    for command, option in (("audit", "--max-buffer-mb"), ("report", "--by"), ("calibrate", "--incidents"),
                            ("demo", "--no-color"), ("serve", "--bearer-token-file")):
        start = text.index(f"## `otel-loopguard {command}`")
        section = text[start:text.find("\n## ", start + 1)]
        assert f"usage: otel-loopguard {command}" in section and option in section, command


def test_every_example_is_run_and_included_by_a_recipe() -> None:
    """run_all.py runs exactly the example scripts, and each is included by a recipe page."""
    run_all = (ROOT / "examples" / "run_all.py").read_text(encoding="utf-8")
    scripts = sorted(path.name for path in (ROOT / "examples").glob("*_loop.py"))
    assert scripts == ["langgraph_loop.py", "openai_agents_loop.py", "openai_client_loop.py", "pydantic_ai_loop.py"]
    recipes = "".join(path.read_text(encoding="utf-8") for path in (DOCS / "recipes").glob("*.md"))
    for script in scripts:
        assert f'"{script}"' in run_all, script
        assert f'--8<-- "examples/{script}"' in recipes, script


def test_the_pydantic_ai_example_prints_a_stuck_verdict_and_the_stop() -> None:
    """The pydantic-ai recipe, run as a user runs it: the same search three times is stuck, the fourth is stopped."""
    require_module("pydantic_ai", "pydantic-ai-slim")
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "pydantic_ai_loop.py")], capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "loopguard: search: working -> stuck (rule period, call 3)",
        "run stopped: loopguard stopped the run: made the same search call 4 times with the same result, and it "
        "went on after a nudge",
    ]


def test_the_processor_reference_shows_every_public_member_with_its_docstring() -> None:
    """Each public member of the processor, also those its base classes define, has a heading and its docstring."""
    text = _hook().render_processor()
    for heading in ("#### `verdict(trace_id)`", "#### `check(trace_id=None)`", "#### `resolve(trace_id, approved)`",
                    "#### `add_listener(listener)`", "#### `errors`", "#### `tracked_traces`",
                    "#### `force_flush(timeout_millis=30000)`", "#### `shutdown()`", "#### `on_start(span, "
                    "parent_context=None)`", "#### `on_end(span)`", "#### `learn(trace_id, record)`"):
        assert heading in text, heading
    # check's Returns section, a list item with the inline literals turned into Markdown code.
    assert "**Returns**\n\n- `stop` once the trace was stopped" in text
    # The assembler's questions come last, under their own heading.
    assert text.index("### Called by the live assembler") < text.index("#### `publish(event, target)`")
    assert text.index("#### `verdict(trace_id)`") < text.index("### Called by the live assembler")
