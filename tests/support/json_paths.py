"""Paths into decoded JSON, for tests that mutate documents one field at a time."""

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
