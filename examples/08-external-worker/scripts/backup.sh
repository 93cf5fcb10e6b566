#!/bin/sh
# A script an external worker runs per job: the payload arrives on stdin (and in JOB_PAYLOAD).
# Lines "PROGRESS <json>" report progress; the last "RESULT <json>" line is the job's result.
# Exit 0 completes the job, 65 dead-letters it, anything else is retried.
set -eu
payload=$(cat)
name=$(printf '%s' "$payload" | sed -n 's/.*"name" *: *"\([^"]*\)".*/\1/p')
steps=$(printf '%s' "$payload" | sed -n 's/.*"steps" *: *\([0-9][0-9]*\).*/\1/p')
steps=${steps:-3}
if [ "$name" = "" ]; then
  echo "payload has no name" >&2
  exit 65
fi
if [ "$name" = "flaky" ] && [ "$JOB_ATTEMPT" = "1" ]; then
  echo "the disk was busy, try again" >&2
  exit 1
fi
i=1
while [ "$i" -le "$steps" ]; do
  echo "PROGRESS {\"step\": $i, \"of\": $steps}"
  sleep "${STEP_SECONDS:-0.1}"
  i=$((i + 1))
done
echo "backed up $name in $steps steps"
echo "RESULT {\"name\": \"$name\", \"steps\": $steps, \"attempt\": $JOB_ATTEMPT}"
