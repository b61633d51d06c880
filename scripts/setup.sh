#!/usr/bin/env bash
# setup.sh — from a fresh Debian 12 checkout to a working backplane: install
# the missing packages, build build/ (RelWithDebInfo), then run the main job
# on the CPU: list the devices, then run the Llama decoder (builtin model).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/packages.sh

bp_install_packages
jobs=${BP_JOBS:-$(nproc)}
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build build -j"$jobs"

echo
echo "+ build/bin/backplane devices"
build/bin/backplane devices
echo
echo "+ build/bin/backplane run --device cpu"
build/bin/backplane run --device cpu
