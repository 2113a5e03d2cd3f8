"""The model layer: pipeline specs, the lake's paths, error classes and typed records. Plain
data; imports nothing else of the package."""
