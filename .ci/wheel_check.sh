#!/usr/bin/env bash
# Build the wheel from this checkout, install it into a fresh venv, and from a folder outside the
# checkout compile every shipped spec by name and train and render a tiny scene (.ci/wheel_smoke.py).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
pip_quiet=(--quiet --disable-pip-version-check)
# Build from a copy so that the checkout gets no build/ or *.egg-info.
mkdir "$work/src"
cp -r "$repo/pyproject.toml" "$repo/setup.py" "$repo/README.md" "$repo/LICENSE" "$repo/xprc" \
  "$repo/grammar" "$repo/specs" "$work/src/"
python -m pip wheel "${pip_quiet[@]}" --no-deps -w "$work/dist" "$work/src"
python -m venv "$work/venv"
"$work/venv/bin/python" -m pip install "${pip_quiet[@]}" "$work"/dist/xprc-*.whl
mkdir "$work/outside"
cd "$work/outside"
XPRC_CACHE_DIR="$work/cache" "$work/venv/bin/python" "$repo/.ci/wheel_smoke.py"
