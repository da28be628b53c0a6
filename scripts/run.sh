#!/usr/bin/env bash
# Started by `make run`: migrate, load the catalog, create the demo admin, then serve the API and
# admin with one local Celery worker (embedded broker unless CELERY_BROKER_URL says otherwise).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-.venv/bin}
HOST=${HOST:-127.0.0.1}
PORT=${PORT:-8000}
export DJANGO_DEBUG=${DJANGO_DEBUG:-1}
mkdir -p var

"$BIN/python" manage.py migrate --no-input
"$BIN/python" manage.py loadcatalog --keep-edits  # never overwrites edits made in the admin
"$BIN/python" manage.py createdemouser --base-url "http://$HOST:$PORT"
# the CPU-only configuration this machine is (added when the catalog has none): the local worker's node matches it
LOCAL_CONFIGURATION=$("$BIN/python" manage.py localconfiguration)

# One local worker with an embedded beat (node heartbeats); stopped when the server stops.
"$BIN/celery" -A vramplan worker --beat --concurrency 1 --loglevel INFO \
  --schedule var/celerybeat-schedule -n "local@%h" >var/worker.log 2>&1 &
WORKER_PID=$!
trap 'kill $WORKER_PID 2>/dev/null || true; wait $WORKER_PID 2>/dev/null || true' EXIT INT TERM

cat <<MSG

  vramplan is starting on http://$HOST:$PORT/
    API         http://$HOST:$PORT/api/v1/
    API docs    http://$HOST:$PORT/api/docs/   (sign in at /api-auth/login/ or /admin/ first)
    OpenAPI     http://$HOST:$PORT/api/schema/
    Admin       http://$HOST:$PORT/admin/
    Worker log  var/worker.log  (Celery, pid $WORKER_PID)
    This machine's configuration  $LOCAL_CONFIGURATION  (order it to run acceptance jobs on the local worker)

MSG
"$BIN/python" manage.py runserver "$HOST:$PORT" --noreload
