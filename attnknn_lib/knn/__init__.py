"""kNN machinery: the FAISS memory bank, the voting rules (uniform, distance, cosine; ties to the nearest neighbour; a prior correction), top-k softmax attention, and index costs."""
