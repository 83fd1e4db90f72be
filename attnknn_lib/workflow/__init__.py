"""Workflow: the command line behind ./run_all.sh, profiles and parameters, the plan, and the jobs Snakemake runs."""
