#!/usr/bin/env bash
# The readings history's cost per reading (BENCHMARKS.md, "The readings history"): ReadingHistory.swift
# and FIFO.swift compiled alone with -O (bench/history-cost/Stubs.swift stands in for the types they
# use), run for 200 devices (600 series, all kept) and for 1,000 (3,000 series, 640 kept).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d "${TMPDIR:-/tmp}/gattway-history-cost.XXXXXX")"
trap 'rm -rf "$work"' EXIT
sed -e '/^import /d' "$root/Sources/Gateway/Readings/ReadingHistory.swift" > "$work/ReadingHistory.swift"
swiftc -O -wmo "$root/Sources/FIFOQueue/FIFO.swift" "$work/ReadingHistory.swift" \
  "$root/bench/history-cost/Stubs.swift" "$root/bench/history-cost/main.swift" -o "$work/history-cost" -suppress-warnings
"$work/history-cost" 200 3000
"$work/history-cost" 1000 600
