"""kNN machinery: the FAISS memory bank, the voting rules (uniform, distance, cosine, class-balanced), top-k softmax attention, and index costs."""
