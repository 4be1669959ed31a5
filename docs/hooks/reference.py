"""MkDocs hook: the reference pages (configuration, command line, the processor's API), generated from the code.

A page holds a marker (``<!-- reference: configuration -->``, ``<!-- reference: environment -->``,
``<!-- reference: cli -->``, ``<!-- reference: processor -->``) that is replaced by Markdown rendered from
otel_loopguard itself: the configuration classes' fields, defaults and ``Args:`` docstrings, the documented constants
of ``environment_variables.py``, the argparse parsers' help, and every public member of ``LoopGuardSpanProcessor``
(those its base classes define included) with its signature and docstring. Written once, in the code, so the
reference cannot drift from it; a setting without a description, or a public member without a docstring, fails the
build (``mkdocs build --strict`` in CI).
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import inspect
import itertools
import os
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from otel_loopguard import LoopGuardSpanProcessor
from otel_loopguard.cli import build_parser
from otel_loopguard.conventions.live import Host
from otel_loopguard.core import environment_variables
from otel_loopguard.core.config import LeasePolicy, LoopGuardConfig, Prices, RetryPolicy, ToolSettings, env_name

# Each configuration class with the TOML table it is written in (the top level has none).
_TABLES: tuple[tuple[type, str], ...] = (
    (LoopGuardConfig, ""),
    (RetryPolicy, "[retry]"),
    (LeasePolicy, "[lease]"),
    (Prices, '[prices."MODEL"]'),
    (ToolSettings, '[tools."TOOL"]'),
)
# The width the command-line help is wrapped at, so the page does not depend on the terminal of the build.
_HELP_COLUMNS = "100"


def field_descriptions(cls: type) -> dict[str, str]:
    """The ``Args:`` section of a class's docstring: field name -> its one-paragraph description."""
    doc = inspect.cleandoc(cls.__doc__ or "")
    descriptions: dict[str, str] = {}
    in_args, current = False, ""
    for line in doc.splitlines():
        if line.strip() in ("Args:", "Attributes:"):
            in_args = True
            continue
        if in_args and line and not line.startswith(" "):
            in_args = False
        match = re.match(r"^    (\w+): (.*)$", line) if in_args else None
        if match:
            current = match.group(1)
            descriptions[current] = match.group(2)
        elif in_args and current and line.startswith("        "):
            descriptions[current] += " " + line.strip()
    return descriptions


def _shown_default(field: dataclasses.Field[Any]) -> str:
    """A field's default as the page shows it: lists sorted and joined, none for None, required when absent."""
    if field.default is not dataclasses.MISSING:
        value = field.default
    elif field.default_factory is not dataclasses.MISSING:
        value = field.default_factory()
    else:
        return "required"
    if field.name == "signature_key":
        return "random per process"
    if value is None:
        return "none"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, (RetryPolicy, LeasePolicy)):
        return f"see `{_table_of(type(value))}`"
    if isinstance(value, (frozenset, tuple)):
        items = sorted(value) if isinstance(value, frozenset) else value
        return ", ".join(f"`{getattr(item, 'value', item)}`" for item in items) or "none"
    if isinstance(value, dict):
        return "none" if not value else ", ".join(f"`{key}`" for key in value)
    return f"`{value}`"


def _table_of(cls: type) -> str:
    return dict(_TABLES)[cls]


def _environment_of(cls: type, field: dataclasses.Field[Any]) -> str:
    """The variable a top-level setting is read from, or a dash."""
    setting = field.metadata.get("setting")
    if cls is LoopGuardConfig and field.name == "versions":
        return "`LOOPGUARD_VERSION_<KEY>`"
    if cls is LoopGuardConfig and setting is not None and setting.env is not None:
        return f"`{env_name(field.name)}`"
    return "—"


def _cell(text: str) -> str:
    """A docstring's reStructuredText as a Markdown table cell: ``x`` and :role:`x` become `x`."""
    text = re.sub(r":\w+:`~?([^`]+)`", r"`\1`", text).replace("``", "`")
    return text.replace("|", "\\|")


def render_configuration() -> str:
    """One table per configuration class: setting, default, environment variable, meaning."""
    parts: list[str] = []
    for cls, table in _TABLES:
        descriptions = field_descriptions(cls)
        title = f"`{table}`" if table else "top level"
        summary = inspect.cleandoc(cls.__doc__ or "").splitlines()[0]
        parts += [f"### {title}", "", summary, "",
                  "| setting | default | environment | meaning |", "|---|---|---|---|"]
        for field in dataclasses.fields(cls):
            if field.name not in descriptions:
                raise ValueError(f"{cls.__name__}.{field.name} has no description in its docstring's Args")
            parts.append(f"| `{field.name}` | {_cell(_shown_default(field))} | {_environment_of(cls, field)} "
                         f"| {_cell(descriptions[field.name])} |")
        parts.append("")
    return "\n".join(parts)


def render_environment() -> str:
    """Every ``LOOPGUARD_*`` variable with the docstring its constant carries in ``environment_variables.py``."""
    tree = ast.parse(inspect.getsource(environment_variables))
    rows = ["| variable | meaning |", "|---|---|"]
    for statement, following in itertools.pairwise(tree.body):
        if (isinstance(statement, ast.Assign) and isinstance(following, ast.Expr)
                and isinstance(following.value, ast.Constant) and isinstance(following.value.value, str)):
            name = statement.targets[0].id  # type: ignore[attr-defined]
            meaning = " ".join(following.value.value.split())
            rows.append(f"| `{name}` | {_cell(meaning)} |")
    if len(rows) - 2 != len(environment_variables.__all__):
        raise ValueError("environment_variables.py: every variable needs a docstring right after its constant")
    return "\n".join(rows) + "\n"


@contextmanager
def _help_width() -> Iterator[None]:
    # argparse wraps help at the terminal's width, read from COLUMNS.
    saved = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = _HELP_COLUMNS
    try:
        yield
    finally:
        if saved is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = saved


def render_cli() -> str:
    """The top-level help, then each command's ``--help``, as the parsers print them."""
    with _help_width():
        parser = build_parser()
        parts = ["## `otel-loopguard`", "", "```text", parser.format_help().rstrip(), "```", ""]
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, command in action.choices.items():
                    parts += [f"## `otel-loopguard {name}`", "", "```text", command.format_help().rstrip(), "```", ""]
    return "\n".join(parts)


_SECTIONS = ("Args:", "Returns:", "Raises:", "Attributes:")


def _docstring_markdown(doc: str) -> str:
    """A Google-style docstring as Markdown: each section's label in bold, each of its entries a list item."""
    out: list[str] = []
    in_section = False
    for line in doc.splitlines():
        if line.strip() in _SECTIONS:
            in_section = True
            out += ["", f"**{line.strip()[:-1]}**", ""]
        elif in_section and line.startswith("    ") and not line.startswith("     "):
            entry = re.match(r"^    (\w+): (.*)$", line)
            item = f"`{entry.group(1)}`: {entry.group(2)}" if entry else line.strip()
            if entry or not out[-1].startswith("- "):
                out.append(f"- {item}")
            else:
                out[-1] += f" {item}"
        elif in_section and line.startswith("    "):
            out[-1] += f" {line.strip()}"
        else:
            in_section = in_section and bool(line.strip())
            out.append(line)
    text = re.sub(r":\w+:`~?([^`]+)`", r"`\1`", "\n".join(out)).replace("``", "`")
    return text.strip() + "\n"


def _signature(member: Any) -> str:
    """A callable's parameters without annotations and without ``self``."""
    parameters = [p.replace(annotation=inspect.Parameter.empty)
                  for p in inspect.signature(member).parameters.values() if p.name != "self"]
    return str(inspect.Signature(parameters))


def render_processor() -> str:
    """The constructor, then every public member of the processor, wherever its class hierarchy defines it; the
    members the live assembler calls (its ``Host`` protocol) last, apart."""
    cls = LoopGuardSpanProcessor
    public = sorted(name for name in dir(cls) if not name.startswith("_"))
    asked = {name for name in vars(Host) if not name.startswith("_")}
    parts = [f"### `LoopGuardSpanProcessor{_signature(cls.__init__)}`", "",
             _docstring_markdown(inspect.getdoc(cls) or "")]
    for group, names in (("", [n for n in public if n not in asked]),
                         ("### Called by the live assembler, not by applications", [n for n in public if n in asked])):
        if group:
            parts += [group, ""]
        for name in names:
            member = getattr(cls, name)
            doc = inspect.getdoc(member)
            if not doc:
                raise ValueError(f"LoopGuardSpanProcessor.{name} has no docstring")
            shown = name if isinstance(inspect.getattr_static(cls, name), property) else f"{name}{_signature(member)}"
            parts += [f"#### `{shown}`", "", _docstring_markdown(doc)]
    return "\n".join(parts)


_MARKERS: dict[str, Callable[[], str]] = {
    "<!-- reference: configuration -->": render_configuration,
    "<!-- reference: environment -->": render_environment,
    "<!-- reference: cli -->": render_cli,
    "<!-- reference: processor -->": render_processor,
}


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Replace each reference marker on a page by what the code says today."""
    for marker, render in _MARKERS.items():
        if marker in markdown:
            markdown = markdown.replace(marker, render())
    return markdown


__all__ = ["field_descriptions", "on_page_markdown", "render_cli", "render_configuration",
           "render_environment", "render_processor"]
