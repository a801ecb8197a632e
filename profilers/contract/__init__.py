"""The run directory's one definition: what the profiler writes and everything else reads.

- :mod:`~profilers.contract.schema`: file names, run.db tables and the schema version, summary.json's
  version, step phases, trial statuses, run states, and where a study's trial runs live;
- :mod:`~profilers.contract.records`: the typed records the layers exchange (a step, a device
  sample, a device, an operator);
- :mod:`~profilers.contract.reader`: the one reader of run.db (a consistent snapshot in one read
  transaction, and the incremental reads a dashboard polls with);
- :mod:`~profilers.contract.summarize`: every statistic of a run, derived from its records;
- :mod:`~profilers.contract.rundir`: a whole run directory (profile or study) loaded as one
  ``RunData`` for the advice, the reports and the dashboard;
- :mod:`~profilers.contract.study`: what the directory holds of a tuning study (its summary and
  trial entries, what its trials say, its verdict, the spread between processes and its bill);
- :mod:`~profilers.contract.plan_doc`: ``autotune plan``'s JSON saved beside a run.

Torch-free and cheap to import: the dashboard (``tui/``), which may import nothing else of
``profilers``, reads runs through it.
"""
