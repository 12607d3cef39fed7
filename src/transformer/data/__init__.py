"""Text on disk to padded id tensors.

- ``tokenizer``: SentencePiece tokenizers with fixed special ids (PAD 0, UNK 1, BOS 2, EOS 3).
- ``text_files``: UTF-8 line reading (plain or gzip) with errors naming file, line and byte offset.
- ``parallel``: aligned source/target files into a ``ParallelCorpus``.
- ``corpora``: corpora by name (Multi30k), the data search folders, downloads.
- ``batching``: max_len handling, token-budget length buckets, DDP shards, ``collate_pairs``.
- ``batch``: the ``Batch`` dataclass training and evaluation consume.
- ``builtin_task``: the English-to-German number-words task of ``transformer demo``.
- ``classification``: TSV/CSV/JSONL classification data, label vocabularies, GoEmotions and NSMC.
"""
