-- What a GPU node's worker may do, granted to the group role vramplan_node (init.sh creates it).
-- Run as the superuser after every `manage.py migrate` that adds a table the worker reads:
--   psql -U postgres -d vramplan -v ON_ERROR_STOP=1 -f deploy/postgres/grants.sql
-- It grants in the database psql connects to (-d), whatever its name. tests/test_deploy_grants.py runs it
-- so in a scratch database, then a real worker logged in as a node role from node-role.sql.
-- A node reads the catalog, workloads, orders, jobs and programs; it writes node rows (its heartbeat),
-- claims and ends jobs, stores measurements and decides orders. It cannot read users, API tokens or
-- sessions, write the rest of the catalog, create orders or jobs, change a stored measurement, or delete.
-- Table privileges cannot single out rows: any node may write any node's row, job or order decision.
-- The file is the whole list: it first takes back every table privilege vramplan_node holds here, so
-- running it again (one transaction) also removes what an earlier version granted.
BEGIN;
DO $$ BEGIN
  CREATE ROLE vramplan_node NOLOGIN;
EXCEPTION WHEN duplicate_object THEN NULL;
END $$;
-- The database this file is run in (psql -d), whatever its name.
DO $$ BEGIN
  EXECUTE format('GRANT CONNECT ON DATABASE %I TO vramplan_node', current_database());
END $$;
GRANT USAGE ON SCHEMA public TO vramplan_node;
REVOKE ALL ON ALL TABLES IN SCHEMA public FROM vramplan_node;
-- The catalog (the API shows it to every user) and programs; the worker's code reads all of these but
-- catalog_precision, catalog_architecture_precisions, catalog_cudatoolkit, catalog_pytorchwheel and
-- measurements_registeredprogram_allowed_configurations.
GRANT SELECT ON
  catalog_vendor, catalog_precision, catalog_architecture, catalog_architecture_precisions,
  catalog_accelerator, catalog_configuration, catalog_cudatoolkit, catalog_pytorchwheel,
  budgets_workload, measurements_registeredprogram, measurements_registeredprogram_allowed_configurations
  TO vramplan_node;
-- SELECT ... FOR UPDATE (claiming a job, locking a free node or an order) needs UPDATE as well.
GRANT SELECT, INSERT, UPDATE ON catalog_node TO vramplan_node;  -- a heartbeat creates, then updates, its row
GRANT SELECT, UPDATE ON measurements_acceptancejob, measurements_order TO vramplan_node;  -- claim, progress, end; decide
GRANT SELECT, INSERT ON measurements_measurement TO vramplan_node;  -- a run's measurement, stored once
COMMIT;
