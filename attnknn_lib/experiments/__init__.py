"""Experiments: one package per experiment, each declaring ``EXPERIMENT``, beside two that hold none.

``framework/`` says how an experiment is declared (:mod:`.framework.declaration`), found
(:mod:`.framework.catalog`), read or rendered by its notebook (:mod:`.framework.reading`) and cut into
part jobs (:mod:`.framework.parts`); ``common/`` holds the science several experiments share
(:mod:`.common.shared`, :mod:`.common.robustness`, :mod:`.common.fixed_embedding`). Importing this
package imports no experiment.
"""
