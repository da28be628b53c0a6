-- What a GPU node's worker may do, granted to the group role vramplan_node (init.sh creates it).
-- Run as the superuser after every `manage.py migrate` that adds a table the worker reads:
--   psql -U postgres -d vramplan -v ON_ERROR_STOP=1 -f deploy/postgres/grants.sql
-- It grants in the database psql connects to (-d), whatever its name. tests/test_deploy_grants.py runs it
-- so in a scratch database, then a real worker logged in as a node role from node-role.sql.
-- A node reads the catalog, workloads, orders, jobs and programs; it writes its own node row, claims
-- and ends jobs, stores measurements and decides orders. It cannot read users, API tokens or sessions.
DO $$ BEGIN
  CREATE ROLE vramplan_node NOLOGIN;
EXCEPTION WHEN duplicate_object THEN NULL;
END $$;
-- The database this file is run in (psql -d), whatever its name.
DO $$ BEGIN
  EXECUTE format('GRANT CONNECT ON DATABASE %I TO vramplan_node', current_database());
END $$;
GRANT USAGE ON SCHEMA public TO vramplan_node;
GRANT SELECT ON
  catalog_vendor, catalog_precision, catalog_architecture, catalog_architecture_precisions,
  catalog_accelerator, catalog_configuration, catalog_cudatoolkit, catalog_pytorchwheel,
  budgets_workload, measurements_registeredprogram, measurements_registeredprogram_allowed_configurations
  TO vramplan_node;
-- SELECT ... FOR UPDATE (claiming a job, locking a free node or an order) needs UPDATE as well.
GRANT SELECT, INSERT, UPDATE ON
  catalog_node, measurements_acceptancejob, measurements_measurement, measurements_order
  TO vramplan_node;
