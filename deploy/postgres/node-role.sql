-- One GPU node's own PostgreSQL login role (a member of vramplan_node; grants.sql says what it may do).
-- Run as the superuser, once per node, with the name and a fresh password in the environment:
--   NODE_DB_USER=vramplan_node_gpu01 NODE_DB_PASSWORD="$(openssl rand -hex 24)" \
--     psql -U postgres -d vramplan -v ON_ERROR_STOP=1 -f deploy/postgres/node-role.sql
-- The node's DATABASE_URL is then postgres://vramplan_node_gpu01:PASSWORD@DBHOST:5432/vramplan.
-- Retire a node: REVOKE vramplan_node FROM vramplan_node_gpu01; DROP ROLE vramplan_node_gpu01;
\getenv node_user NODE_DB_USER
\getenv node_password NODE_DB_PASSWORD
CREATE ROLE :"node_user" LOGIN PASSWORD :'node_password' IN ROLE vramplan_node CONNECTION LIMIT 20;
