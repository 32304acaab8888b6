#!/usr/bin/env bash
# Part 2 of bench/connect_parity.sh: the same landing files on gateway local.
export TARDY_HOME=/tmp/c13local
rm -rf $TARDY_HOME; mkdir -p $TARDY_HOME
cd /work/wt13
PY=/work/main/.venv/bin/python
export PYTHONPATH=/work/wt13/src
unset TARDY_SPARK_REMOTE
cp -r /tmp/c13home/landing $TARDY_HOME/landing
# the same two deliveries: first the files up to 2026-01-11 00:00, then the late file
mv $TARDY_HOME/landing/pos/arrival_ts=20260111T010000Z /tmp/c13late
T="$PY -m tardy.cli"
$T ingest --json | grep -E '"files_ingested"' | tail -1
/work/main/.venv/bin/sqlmesh plan --auto-apply --no-prompts --skip-tests --execution-time 2026-01-11 2>&1 | tail -1
mv /tmp/c13late $TARDY_HOME/landing/pos/arrival_ts=20260111T010000Z
$T ingest --json | grep -E '"files_ingested"' | tail -1
$T restate --reason "late rows, local" --json > /tmp/c13l-restate.json
RID=$($PY -c "import json; print(json.load(open('/tmp/c13l-restate.json'))['restatement_id'])")
$T fingerprint --json > /tmp/c13l-fp-promoted.json
$T rollback $RID --reason "check local" --json > /dev/null
$T fingerprint --json > /tmp/c13l-fp.json
echo done
