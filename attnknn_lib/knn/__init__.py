"""kNN machinery: the FAISS memory, the voting rules (uniform, distance, cosine; ties to the nearest neighbour; a prior correction), top-k softmax attention, and index costs."""
