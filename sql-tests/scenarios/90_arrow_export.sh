#!/bin/bash
# Arrow export: scoot.arrow_stream and the pg_scoot Python package (python/) against this
# cluster, with pyarrow, pandas, polars and DuckDB reading the stream (python/tests/test_arrow.py:
# every mapped type with NULLs and edge values, many blocks and batch sizes, TOAST, added
# columns, filters, privileges and row-level security, consistency while other sessions write,
# cancellation, errors for unmapped types and text fallback).
set -euo pipefail
cd "$(dirname "$0")/../../python"
PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} exec python3 -m pytest -q -p no:cacheprovider tests
