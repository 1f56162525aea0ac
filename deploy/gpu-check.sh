#!/usr/bin/env bash
# Check a GPU host end to end: the real NVML inventory, faults and samples, then one 1-GPU
# job through the real node agent, which must see exactly its GPU. Where the host has no
# NVIDIA GPU (no NVML), it says it skipped and exits 0.
#
#   deploy/gpu-check.sh [--work-dir DIR]      (from a checkout with `pip install -e .`)
set -euo pipefail
cd "$(dirname "$0")/.."
python="${PYTHON:-$(command -v python3)}"
[ -x .venv/bin/python ] && python=.venv/bin/python
exec "$python" -m allot.client.gpucheck "$@"
