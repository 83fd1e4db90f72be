"""Report: generic LaTeX tables, figures, macros, result records and the README block; names no experiment."""
