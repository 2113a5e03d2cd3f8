"""Rollback, one wing (docs/concepts/rollback.md), without a JVM:

- :mod:`.plans`: what is asked (:class:`~.plans.Request`) and what will be done
  (:class:`~.plans.Plan` of :class:`~.plans.HopStep` and :class:`~.plans.TableStep`), and the
  journal of a rollback carried out (:class:`~.plans.Journal`);
- :mod:`.lineage`: each hop's micro-batches joined to the Delta commits they wrote and read;
- :mod:`.planner`: a request made into a plan, from the logs;
- :mod:`.replays`: the undone batches kept, to run again exactly as logged;
- :mod:`.rebuild`: a stateful hop's checkpoint restarted at a batch (``refresh --from``);
- :mod:`.execute`: a plan carried out under the pipeline's lock, step by repeatable step;
- :mod:`.journals`: where rollbacks are recorded;
- :mod:`.restore`: the table step, on the session the caller passes (Delta's RESTORE);
- :mod:`.summary`: what a plan takes away, for people.
"""
