#!/bin/sh
# tracer_test.sh SRC: test_tracer.py with scripts/model-traces.sh's venv
# (SRC/.venv-models) if there is one, else python3; it exits 77 (skip)
# where torch is missing.
py=$1/.venv-models/bin/python
[ -x "$py" ] || py=python3
exec "$py" -W ignore "$1/tests/traces/test_tracer.py"
