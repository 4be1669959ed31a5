#!/usr/bin/env bash
# Build the OpenTelemetry Collector that the collector-config tests run, once, and print the binary's path.
#
#   bash tests/collector/build.sh                 # build (or reuse) and print the path on stdout
#   export LOOPGUARD_OTELCOL="$(bash tests/collector/build.sh)"
#   bash tests/collector/build.sh --regenerate    # re-run the Collector builder on manifest.yaml first
#
# The sources in otelcol/ are what the OpenTelemetry Collector Builder (ocb) v0.161.0 generates from
# manifest.yaml (components of ONE release: core v0.161.0/v1.67.0, contrib v0.161.0), committed with go.mod and
# go.sum, so a build needs only Go (>= the go line of otelcol/go.mod) and the Go module proxy.
#
# Cache: the binary goes to ${LOOPGUARD_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/otel-loopguard}/
# otelcol-loopguard-v0.161.0-<first 16 hex digits of the SHA-256 of the sources>; when that file exists the script
# prints its path at once. Modules and compiled packages stay in Go's own caches (GOMODCACHE, GOCACHE), so a
# rebuild after a source change is quick as well. tests/support/otelcol.py computes the same path.
# A cold build (empty module and build caches) fills ~1.1 GB of module cache and ~0.5 GB of build cache and
# takes ~7 minutes of CPU time: 4-5 minutes on an idle 2-core machine.
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
SRC="$HERE/otelcol"
RELEASE="v0.161.0"
BUILDER="go.opentelemetry.io/collector/cmd/builder@$RELEASE"
# The sources whose digest names the cached binary, in this order (tests/support/otelcol.py: SOURCE_FILES).
SOURCES=(go.mod go.sum components.go main.go main_others.go main_windows.go)

log() { printf 'build.sh: %s\n' "$*" >&2; }

# shellcheck source=gobuild.sh
source "$HERE/gobuild.sh"
go_environment "the Collector tests"

if [[ "${1:-}" == "--regenerate" ]]; then
  log "regenerating $SRC with $BUILDER"
  (cd "$HERE" && go run "$BUILDER" --config manifest.yaml --skip-compilation >&2)
fi

binary="$(cached_binary "otelcol-loopguard-$RELEASE" "$SRC" "${SOURCES[@]}")"

if [[ -x "$binary" ]]; then
  log "up to date: $binary"
  printf '%s\n' "$binary"
  exit 0
fi

build_cached "$binary" "$SRC" --version .
printf '%s\n' "$binary"
