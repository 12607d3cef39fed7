"""Text on disk to padded id tensors: tokenizer, corpora, batching, the built-in task."""
