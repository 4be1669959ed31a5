"""Write what tests/collector_config/test_backends_e2e.py recorded into docs/backends.md (between its markers).

    LOOPGUARD_BACKENDS_RECORD=/tmp/backends.json python -m pytest tests/collector_config/test_backends_e2e.py
    python tests/collector_config/render_backends_doc.py /tmp/backends.json

So the page shows the backends' answers as the test saw them, never figures typed by hand.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

DOC = Path(__file__).resolve().parents[2] / "docs" / "backends.md"
BEGIN = "<!-- recorded by test_backends_e2e.py: begin -->"
END = "<!-- recorded by test_backends_e2e.py: end -->"


def _number(value: float) -> str:
    return f"{value:.6g}"


def _jaeger(seen: dict[str, Any]) -> list[str]:
    lines = ["**Jaeger** (`/api/traces?service=otel-loopguard-demo`): `loopguard.verdict` span events on each",
             "`invoke_agent` span, as (previous → verdict, rule, intervention):", "",
             "| agent span | verdict events |", "|---|---|"]
    for agent, events in sorted(seen.get("jaeger_verdict_events", {}).items()):
        cells = "; ".join(f"{p} → {v}, {r}, {i}" for p, v, r, i in events)
        lines.append(f"| `invoke_agent {agent}` | {cells} |")
    stuck = seen.get("jaeger_stuck_search")
    if stuck is not None:
        lines += ["", f'Tag search `tags={{"loopguard.verdict":"stuck"}}` answered {len(stuck)} traces: '
                  + ", ".join(f"`{t}`" for t in stuck) + "."]
    return lines


def _panels(seen: dict[str, Any]) -> list[str]:
    lines = ["**Dashboard panels** (Prometheus instant queries, `$job` = the demo's service, `$agent` = All,",
             "`$__rate_interval` = 5m, `$__range` = 1h):", "", "| panel / query | series → value |", "|---|---|"]
    for name, series in sorted(seen.get("panels", {}).items()):
        cells = "; ".join(f"{key} → {_number(value)}" for key, value in series.items()) or "(no series)"
        lines.append(f"| {name} | {cells} |")
    plain = seen.get("plain_increase_stuck")
    if plain is not None:
        lines += ["", "The same stuck transitions through plain `increase(…[5m])`: "
                  + (", ".join(_number(float(r["value"][1])) for r in plain) or "no series") + "."]
    return lines


def _loki(seen: dict[str, Any]) -> list[str]:
    entry = seen.get("loki_stuck_entry", {})
    panels = seen.get("loki_panels", {})
    return ["**Loki** (the documented OTLP mapping applied to the records the Collector delivered): index labels "
            + ", ".join(f"`{n}`" for n in entry.get("labels", [])) + "; structured metadata "
            + ", ".join(f"`{n}`" for n in entry.get("metadata", [])) + ".", "",
            f"Top tools in loops: {panels.get('top_tools_in_loops')}; verdict events shown by default (stuck, "
            f"uncertain): {panels.get('verdict_events_default')}.", "",
            f"Prometheus `job` values: {seen.get('job_values')}."]


def render(seen: dict[str, Any]) -> str:
    """The Markdown block for one recording."""
    return "\n".join([BEGIN, *_jaeger(seen), "", *_panels(seen), "", *_loki(seen), END])


def main(argv: list[str]) -> int:
    """Replace the block between the markers of docs/backends.md with the recording in ``argv[1]``."""
    seen = json.loads(Path(argv[1]).read_text(encoding="utf-8"))
    text = DOC.read_text(encoding="utf-8")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    DOC.write_text(head + render(seen) + tail, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
