#!/bin/sh
# Write deploy/redis/users.acl from the passwords in deploy/.env: one Redis ACL user for the web, one
# for beat, one per GPU node. The file holds SHA-256 hashes, never a password. Unauthenticated
# clients may only PING (the health check).
#
#   deploy/redis/make-acl.sh [ENV_FILE] > deploy/redis/users.acl
#
# Further nodes: NODE_REDIS_USER=vramplan-node-gpu02 NODE_REDIS_PASSWORD=... deploy/redis/make-acl.sh --node
# prints the one line to append; then `redis-cli ACL LOAD` (as an admin) or restart Redis.
set -eu
here=$(cd "$(dirname "$0")" && pwd)

hash() { printf %s "$1" | sha256sum | cut -d' ' -f1; }
# Keys and channels: all (the node queues are named after the nodes); commands: all but @dangerous
# (no FLUSHALL, KEYS, CONFIG, DEBUG, ACL, SHUTDOWN, ...).
rights='~* &* +@all -@dangerous'

if [ "${1:-}" = "--node" ]; then
    echo "user ${NODE_REDIS_USER:?} on #$(hash "${NODE_REDIS_PASSWORD:?}") $rights"
    exit 0
fi

env_file=${1:-$here/../.env}
value() { sed -n "s/^$1=//p" "$env_file" | tail -n 1; }
web=$(value WEB_REDIS_PASSWORD)
beat=$(value BEAT_REDIS_PASSWORD)
node_user=$(value NODE_REDIS_USER)
node=$(value NODE_REDIS_PASSWORD)
for pair in "WEB_REDIS_PASSWORD:$web" "BEAT_REDIS_PASSWORD:$beat" "NODE_REDIS_USER:$node_user" "NODE_REDIS_PASSWORD:$node"; do
    if [ -z "${pair#*:}" ]; then
        echo "make-acl.sh: ${pair%%:*} is empty in $env_file" >&2
        exit 1
    fi
done
echo "user default on nopass resetchannels -@all +ping"
echo "user vramplan-web on #$(hash "$web") $rights"
echo "user vramplan-beat on #$(hash "$beat") $rights"
echo "user $node_user on #$(hash "$node") $rights"
