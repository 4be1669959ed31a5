"""Walks through decoded JSON or YAML: the paths of a document, for tests that mutate it one field at a time, and
the strings below a node."""

from __future__ import annotations

from typing import Any


def json_paths(node: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path (a tuple of keys and indices) in a decoded JSON value, the root's empty path first."""
    found = [path]
    if isinstance(node, dict):
        for key, child in node.items():
            found.extend(json_paths(child, path + (key,)))
    elif isinstance(node, list):
        for index, child in enumerate(node):
            found.extend(json_paths(child, path + (index,)))
    return found


def strings_below(node: Any) -> list[str]:
    """Every string below a node of decoded JSON or YAML, depth first (a string node is its own one string)."""
    if isinstance(node, str):
        return [node]
    if isinstance(node, list):
        return [s for item in node for s in strings_below(item)]
    if isinstance(node, dict):
        return [s for item in node.values() for s in strings_below(item)]
    return []
