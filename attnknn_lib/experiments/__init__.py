"""Experiments: one package per experiment, each declaring ``EXPERIMENT`` (:mod:`.declaration`).

:mod:`.catalog` finds them; :mod:`.shared` and :mod:`.robustness` hold the steps they share.
Importing this package imports no experiment.
"""
