"""The science several experiments share: the shared steps, the robustness grid, the fixed-embedding comparison."""
