#!/usr/bin/env bash
# Sets up tapeflow (packages, configure, Release build) and runs the main sample.
set -euo pipefail
cd "$(dirname "$0")"
tools/setup.sh
# The main sample: TF's custom training loop with a MirroredStrategy on Fashion-MNIST.
cd "${TAPEFLOW_BUILD_DIR:-build}/samples"
exec ./distributed_training "$@"
