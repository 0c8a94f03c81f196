#!/usr/bin/env bash
# Takes the README's screenshot of the dashboard's job page,
# docs/dashboard-job.png: runs the end-to-end dashboard test
# (tests/ui/dashboard_test.py: real jobs on this machine's Docker engine,
# `barge ui`, headless Chromium) and keeps its picture of the running job's
# page. Needs what that test needs: a built barge, Docker, chromium,
# chromium-driver and python3-selenium (scripts/install-deps.sh).
#
# Usage: scripts/screenshot-dashboard.sh [PNG]   (default docs/dashboard-job.png)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build=${BUILD_DIR:-build}
out=${1:-docs/dashboard-job.png}
[[ -x "$build/runner/barge" ]] || { echo "screenshot-dashboard: build barge first (scripts/build.sh)" >&2; exit 1; }
mkdir -p "$(dirname "$out")"
/usr/bin/python3 tests/ui/dashboard_test.py --barge "$build/runner/barge" --source . \
  --out "$build/ui-screenshot" --screenshot "$out"
echo "screenshot-dashboard: wrote $out"
