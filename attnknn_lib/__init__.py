"""Attn-KNN paper library: data, models, FAISS memory bank, voting rules, metrics, calibration.

Notebooks hold the narrative and call into these modules; every number is computed here.
"""

__version__ = "0.1.0"
