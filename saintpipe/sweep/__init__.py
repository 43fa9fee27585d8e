"""``saintpipe sweep``: hyperparameter trials that share one sampler fleet, one pool and one feature service.

:mod:`saintpipe.sweep.config` reads and checks the sweep file and expands its search space into the trial
list; :mod:`saintpipe.sweep.driver` starts the shared services, registers a pool group per trial and runs
the trials as Ray Tune trials; :mod:`saintpipe.sweep.results` keeps the results table.
"""
