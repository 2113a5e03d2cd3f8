"""The plain-file log layer: the filesystem helper, the checkpoint log, the Delta log and the
``_ops`` records, read and written as files (no JVM). Imports only the model layer."""
