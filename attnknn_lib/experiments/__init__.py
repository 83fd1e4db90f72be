"""Experiments: one package per experiment, each declaring ``EXPERIMENT`` (:mod:`.declaration`).

:mod:`.catalog` finds them; :mod:`.shared`, :mod:`.robustness` and :mod:`.fixed_embedding` hold the
steps they share, and :mod:`.parts` cuts a long measurement into parts the workflow runs as jobs.
Importing this package imports no experiment.
"""
