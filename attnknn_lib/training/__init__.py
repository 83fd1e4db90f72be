"""Training: the loops (Attn-KNN, CNN, attention on frozen embeddings), the shared recipe, training runs with stable ids, the model cache, and the one-run job."""
