"""Fine-tuning quorum's retrievers on BioASQ golden files: data, dev split, trainers, cards.

`data` turns golden files and a corpus into training rows (BM25 hard negatives from a throwaway
embedded index), `dev` scores a model on the held-out questions, `trainers` runs
sentence-transformers' own trainers and `card` writes what was done into the model directory.
"""
