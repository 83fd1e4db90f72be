"""How an experiment is declared, found, read by its notebook and cut into part jobs (no experiment)."""
