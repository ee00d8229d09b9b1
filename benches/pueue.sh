#!/usr/bin/env bash
# Builds pueue 4.0.4 from crates.io into target/bench-cache/ for the `chain` row of
# `cargo bench --bench daemon` (catalyst's dependent chain against pueue's `--after`).
# Idempotent: does nothing when the binaries are already there.
set -euo pipefail
cd "$(dirname "$0")/.."
root=target/bench-cache/pueue-4.0.4
if [ -x "$root/bin/pueue" ] && [ -x "$root/bin/pueued" ]; then
  echo "pueue 4.0.4 is already built in $root"
  exit 0
fi
echo "building pueue 4.0.4 from crates.io into $root (a few minutes)"
CARGO_TARGET_DIR=target/bench-cache/build cargo install pueue --version 4.0.4 --locked --root "$root"
