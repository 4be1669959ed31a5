# Shared by build.sh (the Collector) and build-jaeger.sh (Jaeger v2): Go from the module proxy only, and one
# cached binary per digest of the committed sources. Sourced, not run; the caller sets `log` and `set -euo pipefail`.

# go_environment WHAT: put Go on PATH and set the environment every build uses; exits when Go is missing.
go_environment() {
  # Go keeps its caches under $HOME (and so do these scripts); a CI environment without HOME gets the user's home
  # directory from the password database, as Python's Path.home() does in tests/support/otelcol.py.
  HOME="${HOME:-$(getent passwd "$(id -u)" | cut -d: -f6)}"
  export HOME
  # The official Go distribution installs into /usr/local/go/bin, which a non-login shell may not have on PATH.
  if ! command -v go >/dev/null 2>&1 && [[ -x /usr/local/go/bin/go ]]; then
    PATH="/usr/local/go/bin:$PATH"
  fi
  if ! command -v go >/dev/null 2>&1; then
    log "the go command is not installed; $1 needs Go (see tests/collector/)"
    exit 1
  fi
  # Modules come from the Go module proxy only: nothing else is reachable from CI, and a module the proxy does
  # not serve should fail loudly instead of falling back to a version-control checkout.
  export GOPROXY="${GOPROXY:-https://proxy.golang.org}"
  export GOFLAGS="${GOFLAGS:-} -buildvcs=false"
  export CGO_ENABLED=0
}

# cached_binary PREFIX SRC FILE...: the cache path <cache>/<PREFIX>-<first 16 hex digits of the SHA-256 of the
# files, in order> (tests/support/otelcol.py: cached_build_path computes the same).
cached_binary() {
  local prefix="$1" src="$2"
  shift 2
  local digest cache_dir
  digest="$(cd "$src" && cat "$@" | sha256sum | cut -c1-16)"
  cache_dir="${LOOPGUARD_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/otel-loopguard}"
  printf '%s\n' "$cache_dir/$prefix-$digest"
}

# build_cached BINARY SRC VERSION-ARG PACKAGE: go build PACKAGE in SRC into a temporary file beside BINARY, check
# it answers VERSION-ARG, then move it into place (a failed or interrupted build leaves no binary behind).
build_cached() {
  local binary="$1" src="$2" version_arg="$3" package="$4"
  mkdir -p "$(dirname "$binary")"
  log "building $binary (a cold build takes several minutes on 2 cores)"
  local start=$SECONDS tmp
  tmp="$(mktemp "$(dirname "$binary")/.build.XXXXXX")"
  trap 'rm -f "$tmp"' EXIT
  # -trimpath and -s -w as the Collector builder compiles its distributions.
  (cd "$src" && go build -trimpath -ldflags='-s -w' -o "$tmp" "$package")
  "$tmp" "$version_arg" >&2
  chmod +x "$tmp"
  mv -f "$tmp" "$binary"
  trap - EXIT
  log "built in $((SECONDS - start)) s"
}
