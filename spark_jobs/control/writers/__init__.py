"""What the platform writes for people to start from: sample events (:mod:`.samples`,
``lakehouse generate``) and a new pipeline's skeleton (:mod:`.skeleton`, ``lakehouse new``)."""
