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
- from text to batches: ``encoding`` (token ids fitted to ``max_len``, for both tasks),
  ``collation`` (ids to padded batches, a DataLoader's ``collate_fn``) and ``batch_types`` (the
  ``Batch`` and ``ClassificationBatch`` it produces); ``padding``: ``pad_rows``, the one padding
  helper; ``token_batch_sampler``: which examples go together, token-budget length buckets and
  DDP shards; ``epoch_batches``: the Trainer's per-epoch batches (``Epochs``, ``LazyBatches``,
  ``ArrayBatches``).
- ``prepared/``: the prepared data directory, its format (``layout``, ``shards``), writing it
  (``transformer prepare``: ``request``, ``fingerprint``, ``tokenizers``, ``chunk_encoding``,
  ``prepare``) in constant memory, and reading it through memory maps (``directory``, ``pairs``)
  with corpora mixed by weight (``mixing``); ``seen_hashes``: the dedup filter's memory of pairs.
"""
