"""Workflow: the command line behind ./run_all.sh, profiles and parameters, the plan, the jobs Snakemake runs, reproducibility checks, and the bench."""
