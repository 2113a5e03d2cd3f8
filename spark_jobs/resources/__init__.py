"""Package data the platform reads at run time, through :mod:`importlib.resources`: the skeleton
``lakehouse new`` copies (``skeleton/``) and the manifest of the JVM jars (``jars/pom.xml``)."""
