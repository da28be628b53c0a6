#!/bin/sh
# First start of the postgres container (docker-entrypoint-initdb.d): the owner role the web and
# migrations use, its database, and the group role that every GPU node's own login role joins.
# Passwords come from the environment (\getenv), never from this file or psql's command line.
set -eu
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname postgres <<'SQL'
\getenv owner_password VRAMPLAN_DB_PASSWORD
CREATE ROLE vramplan LOGIN PASSWORD :'owner_password';
CREATE DATABASE vramplan OWNER vramplan;
CREATE ROLE vramplan_node NOLOGIN;
SQL
