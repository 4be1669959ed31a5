"""The package version, from the installed distribution."""

from importlib import metadata

try:
    VERSION = metadata.version("otel-loopguard")
except metadata.PackageNotFoundError:  # pragma: no cover - running from a checkout without install
    VERSION = "0+unknown"
