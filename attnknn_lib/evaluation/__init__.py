"""Evaluation: metrics, post-hoc calibration, inference with trained models (embeddings, attention vote, CNN softmax) and the compared methods."""
