#!/usr/bin/env bash
# Sets up tapeflow as run.sh does, then runs the whole test suite through CTest.
set -euo pipefail
cd "$(dirname "$0")"
tools/setup.sh
cd "${TAPEFLOW_BUILD_DIR:-build}"
exec ctest --output-on-failure -j "${TAPEFLOW_JOBS:-$(nproc)}" "$@"
