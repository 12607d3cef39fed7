"""The prepared data directory: what ``transformer prepare`` writes and ``train --data-dir`` reads.

Its format:

- ``layout``: the directory's file names, id types and version (the diagram is there);
- ``shards``: one side of one corpus, its ids, offsets and lengths, written (``ShardWriter``)
  and read back through memory maps (``Shard``, ``PreparedCorpus``).

Reading it:

- ``directory``: ``PreparedData``, an opened and checked directory;
- ``pairs``: ``PreparedPairs``, a split's pairs fitted to a model's ``max_len``;
- ``mixing``: ``MixedEpochs``, the Trainer's batches of them with corpora mixed by weight.

Writing it (``transformer prepare``), in constant memory whatever the corpus size:

- ``request``: ``PrepareRequest`` and its ``Filters``, checked before anything is read;
- ``fingerprint``: the inputs' hashes and the key that tells an up-to-date directory;
- ``tokenizers``: the tokenizer stage, copied from a run or trained on a sample;
- ``chunk_encoding``: line pairs encoded and filtered chunk by chunk in worker processes;
- ``prepare``: ``prepare()``, the stages in order and the directory renamed into place.
"""
