#!/usr/bin/env bash
# claims-review: the shape of seed 001 — four decision points inside one
# scripted run, each a real gate (approvectl gate) instead of a marker file
# and `exit 0`. Re-run it after an approval (same RUN_KEY): steps that
# completed are skipped and gates already decided return at once, so only
# the remaining work is done.
#
#   RUN_KEY=claims-1234 WORK=/tmp/claims ./claims-review.sh
#
# Exit codes are approvectl's: 0 done; 5 a gate was rejected; 6 a gate
# expired; 7 the run was cancelled; 1-3 errors.
set -euo pipefail
: "${RUN_KEY:?set RUN_KEY, the key that finds this run again}"
: "${WORK:?set WORK, the working directory}"
mkdir -p "$WORK"
as=${SCRIPT_USER:-alice}
ctl() { approvectl --as "$as" "$@"; }

TOLLGATE_RUN=$(ctl begin --request-id "$RUN_KEY" --name claims-review)
export TOLLGATE_RUN
echo "run $TOLLGATE_RUN" >&2

ctl step extract -- sh -c 'echo "claim 1: the report says X" > "$WORK/claims.txt"; echo ran >> "$WORK/extract.log"'
ctl gate claims --summary "Are these the claims to check?" --artifact "$WORK/claims.txt"

ctl step adjudicate -- sh -c 'echo "claim 1: supported" > "$WORK/verdicts.txt"; echo ran >> "$WORK/adjudicate.log"'
ctl gate adjudication --summary "Do you accept the verdicts?" --artifact "$WORK/verdicts.txt"

ctl step fix-plan -- sh -c 'echo "edit section 2" > "$WORK/plan.txt"; echo ran >> "$WORK/fix-plan.log"'
ctl gate fix-plan --summary "Apply this fix plan?" --artifact "$WORK/plan.txt"

ctl step commit -- sh -c 'echo "diff --git a/report b/report" > "$WORK/commit.diff"; echo ran >> "$WORK/commit.log"'
ctl gate commit --summary "Push this commit?" --artifact "$WORK/commit.diff" --grant-out "$WORK/grant.json"

ctl finish --reason "claims reviewed and committed"
