"""What the run directory holds of a tuning study: the tuner's concepts as every reader reads them.

- :mod:`~profilers.contract.study.summary`: a study's summary.json and its trial entries;
- :mod:`~profilers.contract.study.trials`: what a study's trials say, derived once (the cost at a
  price, the Pareto front, the convergence and best so far);
- :mod:`~profilers.contract.study.verdict`: what the study can claim of its best configuration;
- :mod:`~profilers.contract.study.spread`: how far one configuration's throughput moves between
  processes (the anchors);
- :mod:`~profilers.contract.study.bill` and :mod:`~profilers.contract.study.cost`: what the study
  cost and when its gain pays it back;
- :mod:`~profilers.contract.study.trial_view`: one trial as every layer shows it.

Torch-free, as the rest of the contract: the dashboard reads studies through it.
"""
