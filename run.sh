#!/usr/bin/env bash
# Sets up tapeflow (packages, configure, Release build) and runs the main sample.
set -euo pipefail
cd "$(dirname "$0")"
tools/setup.sh
exec "${TAPEFLOW_BUILD_DIR:-build}/samples/seed_basics"
