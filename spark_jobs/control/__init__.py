"""The control layer, without a JVM: status, readiness, validation, the quality suites as data,
and by concept the rollback wing (:mod:`.rollback`), maintenance plans (:mod:`.maintenance`),
coordination (:mod:`.coordination`: locks, leases, the shared driver's protocol) and the
writers of samples and skeletons (:mod:`.writers`). Airflow's light tasks call it through the
service; it imports only the logs and model layers."""
