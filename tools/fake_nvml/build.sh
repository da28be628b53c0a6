#!/bin/sh
# Build the fake NVML library and the ABI checker against the official nvml.h.
#
#   tools/fake_nvml/build.sh OUTDIR
#
# Writes OUTDIR/libnvidia-ml.so.1 and OUTDIR/nvml_abi_check. The header is looked up in this order:
# $NVML_INCLUDE_DIR/nvml.h; the nvidia-nvml-dev-cu12 wheel installed for $PYTHON (default python3);
# /usr/local/cuda/include; /usr/include. Exit status 2: no compiler; 3: no header; 1: compile error.
# FAKE_NVML_SOURCE replaces fake_nvml.c (tests use it to show a wrong prototype does not compile).
set -eu

if [ "$#" -ne 1 ]; then
    echo "usage: $0 OUTDIR" >&2
    exit 64
fi
outdir=$1
here=$(cd "$(dirname "$0")" && pwd)
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

mkdir -p "$outdir"
flags="-std=c11 -D_POSIX_C_SOURCE=200809L -O2 -Wall -Wextra -Werror -I$include_dir"
# -Wmissing-prototypes: every exported function must match a prototype in nvml.h, or the build fails.
"$cc" $flags -Wmissing-prototypes -fPIC -shared -Wl,-soname,libnvidia-ml.so.1 \
    -o "$outdir/libnvidia-ml.so.1" "${FAKE_NVML_SOURCE:-$here/fake_nvml.c}" || exit 1
"$cc" $flags -o "$outdir/nvml_abi_check" "$here/abi_check.c" || exit 1
echo "fake_nvml: built $outdir/libnvidia-ml.so.1 against $include_dir/nvml.h"
