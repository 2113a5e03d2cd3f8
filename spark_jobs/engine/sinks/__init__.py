"""The Sinks: how each hop kind writes (:data:`spark_jobs.engine.hops.SINKS`), one module each:
:mod:`.ingest` (a table and its quarantine), :mod:`.append` (append and join), :mod:`.merge`
(aggregate). Every sink writes through ``foreachBatch`` and calls ``run.fence()`` before its
first Delta commit of a batch or a backfill (:class:`spark_jobs.engine.contracts.Sink`)."""
