#!/bin/sh
# Build the fake NVML library and the ABI checker against the official nvml.h.
#
#   tools/fake_nvml/build.sh OUTDIR
#   tools/fake_nvml/build.sh --cached
#
# Writes OUTDIR/libnvidia-ml.so.1 and OUTDIR/nvml_abi_check. --cached builds into
# tools/fake_nvml/build/KEY/ (ignored by git; FAKE_NVML_CACHE_DIR moves it) unless that folder is
# already there, and prints the folder as its last line. KEY hashes this script, the sources, nvml.h,
# the compiler's version and the flags: a change to any of them builds anew.
#
# The header is looked up in this order:
# $NVML_INCLUDE_DIR/nvml.h; the nvidia-nvml-dev-cu12 wheel installed for $PYTHON (default python3);
# /usr/local/cuda/include; /usr/include. Exit status 2: no compiler; 3: no header; 1: compile error.
# FAKE_NVML_SOURCE replaces fake_nvml.c (tests use it to show a wrong prototype does not compile).
set -eu

if [ "$#" -ne 1 ]; then
    echo "usage: $0 OUTDIR | --cached" >&2
    exit 64
fi
outdir=$1
here=$(cd "$(dirname "$0")" && pwd)
script="$here/$(basename "$0")"
cc=${CC:-gcc}
python=${PYTHON:-python3}

if ! command -v "$cc" >/dev/null 2>&1; then
    echo "fake_nvml: C compiler '$cc' not found (install gcc or set CC)" >&2
    exit 2
fi

find_header_dir() {
    if [ -n "${NVML_INCLUDE_DIR:-}" ] && [ -f "$NVML_INCLUDE_DIR/nvml.h" ]; then
        echo "$NVML_INCLUDE_DIR"
        return 0
    fi
    if command -v "$python" >/dev/null 2>&1; then
        # nvidia/ is a namespace package in the wheel: look through sys.path instead of importing.
        found=$("$python" -c '
import os, sys
for entry in sys.path:
    candidate = os.path.join(entry, "nvidia", "nvml_dev", "include")
    if os.path.isfile(os.path.join(candidate, "nvml.h")):
        print(candidate)
        break
' 2>/dev/null || true)
        if [ -n "$found" ]; then
            echo "$found"
            return 0
        fi
    fi
    for dir in /usr/local/cuda/include /usr/include; do
        if [ -f "$dir/nvml.h" ]; then
            echo "$dir"
            return 0
        fi
    done
    return 1
}

if ! include_dir=$(find_header_dir); then
    echo "fake_nvml: nvml.h not found; pip install nvidia-nvml-dev-cu12 (or set NVML_INCLUDE_DIR)" >&2
    exit 3
fi

flags="-std=c11 -D_POSIX_C_SOURCE=200809L -O2 -Wall -Wextra -Werror -I$include_dir"
source=${FAKE_NVML_SOURCE:-$here/fake_nvml.c}

if [ "$outdir" = "--cached" ]; then
    key=$( { cat "$script" "$source" "$here/abi_check.c" "$include_dir/nvml.h"; "$cc" --version; echo "$flags"; } \
        | sha256sum | cut -c1-16)
    cache=${FAKE_NVML_CACHE_DIR:-$here/build}
    if [ -f "$cache/$key/libnvidia-ml.so.1" ] && [ -f "$cache/$key/nvml_abi_check" ]; then
        echo "fake_nvml: cached $cache/$key"
        echo "$cache/$key"
        exit 0
    fi
    mkdir -p "$cache"
    tmp=$(mktemp -d "$cache/.building.XXXXXX")
    trap 'rm -rf "$tmp"' EXIT
    sh "$script" "$tmp" || exit $?
    chmod 755 "$tmp"
    # rename(2) makes the finished folder appear whole; a concurrent build that got there first wins.
    mv -T "$tmp" "$cache/$key" 2>/dev/null || true
    echo "$cache/$key"
    exit 0
fi

mkdir -p "$outdir"
# -Wmissing-prototypes: every exported function must match a prototype in nvml.h, or the build fails.
"$cc" $flags -Wmissing-prototypes -fPIC -shared -Wl,-soname,libnvidia-ml.so.1 \
    -o "$outdir/libnvidia-ml.so.1" "$source" || exit 1
"$cc" $flags -o "$outdir/nvml_abi_check" "$here/abi_check.c" || exit 1
echo "fake_nvml: built $outdir/libnvidia-ml.so.1 against $include_dir/nvml.h"
