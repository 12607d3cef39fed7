"""Text on disk to padded id tensors, laid out alike for translation and classification.

- ``text_files``: UTF-8 line reading (plain or gzip) with errors naming file, line and byte offset.
- ``tokenizer``: SentencePiece tokenizers with fixed special ids (PAD 0, UNK 1, BOS 2, EOS 3);
  ``tokenizer_pair``: a translation model's source/target pair and its ``tokenizer/`` folder.
- reading a corpus: ``parallel`` (aligned source/target files, ``ParallelCorpus``) and
  ``classification`` (TSV/CSV/JSONL texts with labels, ``ClassificationData``); ``labels``: the
  label vocabulary saved with a classifier.
- ``corpora``: corpora by name (Multi30k; GoEmotions, NSMC), the data search folders, downloads;
  ``classification_splits``: reproducible held-out splits; ``builtin_task``: the English-to-German
  number-words task of ``transformer demo``.
- ``batching``: encoding with a length limit and collation, for both tasks; ``batch``: the
  ``Batch`` and ``ClassificationBatch`` they produce; ``padding``: ``pad_rows``, the one padding
  helper; ``sampler``: token-budget length buckets and DDP shards; ``epochs``: the Trainer's
  per-epoch batches (``Epochs``, ``LazyBatches``, ``ArrayBatches``).
- ``prepare``: ``transformer prepare``, parallel text to a prepared data directory in constant
  memory; ``prepared``: that directory's format, read through memory maps (``PreparedData``,
  ``PreparedPairs``), and its epochs with corpora mixed by weight (``MixedEpochs``).
"""
