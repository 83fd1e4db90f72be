"""Foundations every layer uses: errors, atomic files, paths, provenance and fingerprints, run-time set-up (seeds, threads, device), progress, timing, config fields."""
