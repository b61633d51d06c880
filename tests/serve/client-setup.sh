#!/usr/bin/env bash
# client-setup.sh DIR — test set-up (CTest fixture serve_client): fetch the
# npm package openai into DIR/node_modules (scripts/packages.sh). Without
# network the tests that need it skip, except under CI (CI=true), where a
# failed download fails the set-up.
set -uo pipefail
source "$(dirname "$0")/../../scripts/packages.sh"
if bp_fetch_openai_client "$1"; then exit 0; fi
if [[ ${CI:-} == true ]]; then exit 1; fi
echo "serve_client: the openai package could not be fetched; the serve tests will skip." >&2
exit 0
