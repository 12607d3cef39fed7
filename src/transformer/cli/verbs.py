"""The verbs as the top-level help lists them, in a table light enough that ``transformer --help``
and a verb's own parser import no other verb (:func:`transformer.cli.build_parser`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Verb:
    """One verb as the top-level help lists it: its name, the module under ``transformer.cli``
    that declares its flags (``add``) and runs it (``run``), and its one-line summary (the same
    as the module's own ``help=``, which a test holds it to)."""

    name: str
    module: str
    summary: str


# in workflow order: train, use, look inside, serve, convert (as the help's epilog groups them);
# a light table, so that `transformer --help` and a verb's parser import no other verb
VERBS = (
    Verb("demo", "demo", "train on the built-in number-words task, show translations and attention"),
    Verb("prepare", "prepare",
         "parallel text (one or several corpora, with weights) -> a prepared data directory"),
    Verb("train", "train", "train a translation model (Multi30k by name, or any parallel text files)"),
    Verb("classify", "classify", "encoder-only text classification: train, predict, evaluate"),
    Verb("average", "average",
         "average the parameters of several model directories, or of a run's last snapshots"),
    Verb("memory", "memory",
         "estimate the training memory of a configuration (and measure it with --measure)"),
    Verb("config", "config", "show the resolved configuration of a preset, flags applied"),
    Verb("translate", "translate",
         "translate sentences given as arguments, or lines from stdin, a file or a prompt"),
    Verb("evaluate", "evaluate", "score a model on a test split with sacreBLEU (BLEU, chrF, TER)"),
    Verb("score", "score",
         "log-probability of given translations by forced decoding, for filtering and reranking"),
    Verb("attention", "attention", "draw the attention maps of one sentence"),
    Verb("plot", "plot", "draw the positional encoding or a run's training curves"),
    Verb("serve", "serve", "serve models over HTTP (JSON API and the web page at /)"),
    Verb("import", "import_model",
         "turn another toolkit's model into our model directory (Marian/OPUS-MT)"),
    Verb("export", "export",
         "write a model directory in another engine's format (CTranslate2, Hugging Face)"),
    Verb("version", "version", "print the package and PyTorch versions and the machine"),
)


def verb_in(argv: Sequence[str]) -> str | None:
    """The verb ``argv`` names (its first word that is not a flag; the top level's flags take no
    value), or None."""
    return next((word for word in argv if not word.startswith("-")), None)
