"""Scoring: sacreBLEU for translation (``bleu``), classification metrics (``classification``) and
evaluating a trained classifier on a labelled split (``classifier``)."""
