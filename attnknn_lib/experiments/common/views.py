"""How the robustness experiments (label noise, long tail) name their settings for a reader: the
memory alone changed under the clean-trained models, or the models retrained on the changed data."""

SETTING_TITLES = {"bank": "memory only", "trained": "retrained"}
