#!/usr/bin/env bash
# Session 10 spike (issue 13): the connect gateway against local on the same landing files.
# Part 1: cluster up, simulate, ingest, plan, a late file, restate, fingerprint, rollback,
# fingerprint, cluster down (home /tmp/c13home). Part 2 (connect_parity_local.sh) replays the
# same landing files on gateway local. Compare the /tmp/c13*-fp*.json files. Not in make test.
export TARDY_HOME=/tmp/c13home
rm -rf $TARDY_HOME; mkdir -p $TARDY_HOME
cd /work/wt13
PY=/work/main/.venv/bin/python
export PYTHONPATH=/work/wt13/src
eval "$($PY -m tardy.cluster up 2>/tmp/c13-up.log)"
env | grep TARDY_ | sed 's/PASSWORD=.*/PASSWORD=.../'
T="$PY -m tardy.cli --gateway connect"
$T simulate --stores 2 --days 10 --transactions-per-store-day 20 --seed 3 --through 2026-01-11T00:00:00Z --json | tail -3
time $T ingest --json | grep -E '"files_ingested"|"rows"'
time /work/main/.venv/bin/sqlmesh --gateway connect plan --auto-apply --no-prompts --skip-tests --execution-time 2026-01-11 2>&1 | tail -3
mkdir -p $TARDY_HOME/landing/pos/arrival_ts=20260111T010000Z
$PY - <<'PY' > $TARDY_HOME/landing/pos/arrival_ts=20260111T010000Z/late.jsonl
import json
for d in (2, 4):
    for i in range(2):
        print(json.dumps({"transaction_id": f"C13-{d}-{i}", "record_type": "sale", "store_id": 1, "product_id": 2, "quantity": 1, "unit_price": 4.5, "event_ts": f"2026-01-0{d}T08:00:00Z"}))
PY
$T ingest --json | grep -E '"files_ingested"'
time $T restate --reason "late rows over connect" --json > /tmp/c13-restate.json || { echo RESTATE FAILED; tail -30 /tmp/c13-restate.json; }
$PY -c "import json; d=json.load(open('/tmp/c13-restate.json')); print(d['status'], d.get('restatement_id'), d.get('promoted'), d.get('seconds'))"
RID=$($PY -c "import json; print(json.load(open('/tmp/c13-restate.json'))['restatement_id'])")
$T fingerprint --json > /tmp/c13-fp-promoted.json
time $T rollback $RID --reason "check over connect" --json | tail -5
$T fingerprint --json > /tmp/c13-fp.json && echo fingerprint ok
TARDY_HOME=/tmp/c13home $PY -m tardy.cluster down
