"""Who may do what, when: one writer per pipeline (:mod:`.lock`, with :mod:`.lease` on an
object store) and the shared Spark driver's wire protocol (:mod:`.driver`)."""
