"""Data: the dataset registry and loaders, tensors and augmentation, label noise, class imbalance, and the data spec an experiment trains on."""
