#!/usr/bin/env bash
# Shows that DuckDB reads the Parquet files this library writes for Iceberg v3 types: it writes two small v3
# tables (a variant column, unshredded in one and shredded in the other, a timestamp_ns and a timestamptz_ns
# column) with scripts/duckdbcheck, installs DuckDB's Node.js client (@duckdb/node-api, from the npm registry,
# with its prebuilt library) and compares every row DuckDB reads from the data files with the values written.
# Not part of the test suite: it needs the npm registry.
#
#   scripts/duckdb-read.sh [DIR]      (DIR: where the tables and the client go; default a temporary folder)
#
# Exits 1 when a row differs. DuckDB reads a variant null as NULL and keeps timestamptz at microseconds.
set -euo pipefail
cd "$(dirname "$0")/.."
work=${1:-$(mktemp -d /tmp/duckdb-read.XXXXXX)}
mkdir -p "$work/node"
go run ./scripts/duckdbcheck -dir "$work/table" 2>/dev/null
npm install --prefix "$work/node" --no-audit --no-fund --silent @duckdb/node-api@1.5.6-r.1
cp scripts/duckdbcheck/compare.mjs "$work/node/"
node "$work/node/compare.mjs" "$work/table"
