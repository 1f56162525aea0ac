#!/usr/bin/env bash
# Type-check the allot namespace with mypy.
#
# setuptools maps folders onto the namespace (proto/ -> allot.proto, libs/core -> allot.core,
# ...), which mypy cannot follow through an editable install. So this script lays out the
# namespace as it is installed, as symlinks under build/typecheck/allot, and checks that tree
# (pyproject's [tool.mypy] sets mypy_path = "build/typecheck").
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
tree="build/typecheck/allot"

rm -rf build/typecheck
mkdir -p "$tree"
# Relative to the link's own folder, build/typecheck/allot.
ln -s ../../../proto "$tree/proto"
ln -s ../../../libs/core "$tree/core"
ln -s ../../../libs/bus "$tree/bus"
ln -s ../../../libs/client "$tree/client"
ln -s ../../../libs/workload "$tree/workload"
ln -s ../../../libs/sim "$tree/sim"
ln -s ../../../services "$tree/services"

exec .venv/bin/mypy "$@" "$tree"
