#!/usr/bin/env bash
# M2 against M2R (named lists of regular expressions), four fresh-plane runs, the order alternating.
exec "$(dirname "$0")/../2026-12-05-m2n-fresh/run.sh" M2R "${1:-4}"
