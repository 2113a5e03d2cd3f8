"""The control layer, without a JVM: batches, status, readiness, validation, rollback planning,
locks and the quality suites as data. Airflow's light tasks call it; it imports only the logs
and model layers."""
