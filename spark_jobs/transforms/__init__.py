"""Pure ``DataFrame -> DataFrame`` functions, identical for ``readStream`` and ``read``."""
