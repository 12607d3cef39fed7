"""How to decode: the options of one translation call, and their defaults, written once.

    DecodeOptions(beam_size=4, length_penalty=0.6)          # the paper's (section 6.1)
    DecodeOptions(beam_size=1)                               # greedy
    DecodeOptions(sampling=True, sampling_topp=0.9, seed=1)  # one sample a sentence (beam 1)
    DecodeOptions(beam_size=1, target_prefix="Ein Mann", no_repeat_ngram=3)

Every reader of decoding settings takes its defaults from here: a run's training configuration
(``TranslationTrainConfig.decode_max_len_a/b``), a model directory's record
(``transformer.model_dir.record``), ``translate``, ``evaluate``, ``serve`` and an imported model.
A bad value raises :class:`OptionError` (a ValueError) naming the field. :data:`FIELDS` is the
options' own table: each field's command-line flag, request field of ``POST /v1/translate``, type
and help, from which ``translate``/``evaluate``'s flags and the server's request schema are made
(:data:`FLAGS` and :data:`REQUEST_FIELDS` name each field's flag and request field, for messages).
A new option is a field with its check in :class:`DecodeOptions`, a row of :data:`FIELDS`, and
what its kernel reads (:func:`transformer.decoding.plan.plan`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

# the paper's beam search (section 6.1): beam 4, length penalty alpha 0.6
BEAM_SIZE = 4
LENGTH_PENALTY = 0.6
# a translation is at most a * source tokens + b tokens (fairseq's max_len_a/max_len_b)
MAX_LEN_A = 1.5
MAX_LEN_B = 10
# ... rounded up to a multiple of this: sentences of similar length then share one limit, so an
# engine that takes one limit a call (CTranslate2) decodes a batch in a call or two, not one
# call per distinct length (14 a server batch of 32 Multi30k sentences, 2.7 at this step)
MAX_LEN_STEP = 16


def length_limit(source_tokens: int, a: float, b: int) -> int:
    """The length limit ``a * source_tokens + b`` rounded down, then up to a multiple of
    :data:`MAX_LEN_STEP` (before any cap): ``length_limit(14, 1.5, 10)`` is 32."""
    return -(-math.floor(source_tokens * a + b) // MAX_LEN_STEP) * MAX_LEN_STEP
# sampling draws each token from the whole distribution unless these cut it (Hugging Face's
# "off" values: top-k 0 keeps every token, top-p 1 keeps every token, temperature 1 changes none)
SAMPLING_TOPK = 0
SAMPLING_TOPP = 1.0
TEMPERATURE = 1.0
# repetition guards off: no n-gram is banned, no token is penalised
NO_REPEAT_NGRAM = 0
REPETITION_PENALTY = 1.0
# no end of sentence before this many target tokens (a target prefix counting): off
MIN_LENGTH = 0
# a file is read, sorted by length and translated this many batches of lines at a time: memory
# stays flat in the file's size, and padding nearly as low as sorting the whole file
FILE_WINDOW_BATCHES = 32
# ``classify predict`` reads, classifies and writes a file this many texts at a time
FILE_WINDOW_TEXTS = 4096

class OptionError(ValueError):
    """A bad decoding option: ``field`` (a :class:`DecodeOptions` field) and ``problem``, one line.
    ``str()`` is ``"field: problem"``; :meth:`named` puts another name (a flag, a request field)
    in the field's place."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem

    def named(self, names: Mapping[str, str]) -> str:
        """``"NAME: problem"``, NAME being ``names[field]`` (the field itself when absent)."""
        return f"{names.get(self.field, self.field)}: {self.problem}"


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _finite(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


@dataclass(frozen=True)
class DecodeOptions:
    """How to decode. ``beam_size=1`` is greedy decoding; None: the paper's 4, or 1 with
    ``sampling``. The defaults are the paper's (section 6.1: beam 4, length penalty 0.6); a
    translation is at most ``max_len_a * source tokens + max_len_b`` tokens, rounded up to a
    multiple of 16 (:func:`length_limit`), and never more than ``max_len`` or the model's
    positions.

    ``sampling``: draw each token from the model's distribution (Hugging Face ``do_sample``), after
    ``temperature`` (logits divided by it), ``sampling_topk`` (only the K most probable tokens;
    0: all) and ``sampling_topp`` (only the fewest most probable tokens whose probability reaches
    P; 1: all), in that order; ``nbest`` samples per sentence; ``seed`` makes the draws repeat
    (None: a fresh seed per call). Sampling is not combined with beam search (``beam_size`` must
    be 1). ``target_prefix``: every translation starts with this text (as the target tokenizer
    splits it) and the rest is decoded. ``no_repeat_ngram`` (N > 0: no N-gram of target tokens
    occurs twice) and ``repetition_penalty`` (R: the logit of a token already in the output is
    divided by R when positive, multiplied by R when negative) as Hugging Face ``generate``'s
    ``no_repeat_ngram_size`` and ``repetition_penalty``. ``min_length``: no end of sentence before
    this many target tokens, a target prefix counting (fairseq's ``--min-len``, CTranslate2's
    ``min_decoding_length``); a sentence's length limit is raised to hold them. ``forbid``: target
    phrases no translation may contain, each as the target tokenizer encodes it (CTranslate2's
    ``suppress_sequences``, Hugging Face's ``bad_words_ids``). Raises :class:`OptionError` naming
    the first field out of range."""

    beam_size: int | None = None
    length_penalty: float = LENGTH_PENALTY
    nbest: int | None = None
    max_len_a: float | None = MAX_LEN_A
    max_len_b: int = MAX_LEN_B
    max_len: int | None = None
    sampling: bool = False
    sampling_topk: int = SAMPLING_TOPK
    sampling_topp: float = SAMPLING_TOPP
    temperature: float = TEMPERATURE
    seed: int | None = None
    target_prefix: str | None = None
    no_repeat_ngram: int = NO_REPEAT_NGRAM
    repetition_penalty: float = REPETITION_PENALTY
    # word alignments of each translated line (transformer.inference.alignment); the search ignores it
    alignments: bool = False
    min_length: int = MIN_LENGTH
    forbid: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.beam_size is None:  # resolved here, so that a caller may leave it to sampling
            object.__setattr__(self, "beam_size", 1 if self.sampling is True else BEAM_SIZE)
        self._check_search()
        self._check_sampling()
        self._check_steering()

    def _check_search(self) -> None:
        if not _is_int(self.beam_size) or self.beam_size < 1:  # type: ignore[operator]
            raise OptionError("beam_size", f"must be a positive integer, got {self.beam_size!r}")
        if self.nbest is not None:
            most = None if self.sampling else self.beam_size
            if not _is_int(self.nbest) or self.nbest < 1 or (most is not None and self.nbest > most):
                raise OptionError("nbest", f"must be between 1 and the beam size {self.beam_size}, "
                                  f"got {self.nbest!r}" if most else
                                  f"must be a positive number of samples, got {self.nbest!r}")
        if not _finite(self.length_penalty) or self.length_penalty < 0:
            raise OptionError("length_penalty", f"must be a non-negative number, got {self.length_penalty!r}")
        if self.max_len_a is not None and (not _finite(self.max_len_a) or self.max_len_a < 0):
            raise OptionError("max_len_a", f"must be a non-negative number, got {self.max_len_a!r}")
        if not _is_int(self.max_len_b):
            raise OptionError("max_len_b", f"must be an integer, got {self.max_len_b!r}")
        if self.max_len is not None and (not _is_int(self.max_len) or self.max_len < 1):
            raise OptionError("max_len", f"must be positive, got {self.max_len!r}")

    def _check_sampling(self) -> None:
        if not isinstance(self.sampling, bool):
            raise OptionError("sampling", f"must be true or false, got {self.sampling!r}")
        if not _is_int(self.sampling_topk) or self.sampling_topk < 0:
            raise OptionError("sampling_topk", f"must be a non-negative integer (0: no cut), got {self.sampling_topk!r}")
        if not _finite(self.sampling_topp) or not 0 < self.sampling_topp <= 1:
            raise OptionError("sampling_topp", f"must be in (0, 1] (1: no cut), got {self.sampling_topp!r}")
        if not _finite(self.temperature) or self.temperature <= 0:
            raise OptionError("temperature", f"must be a positive number, got {self.temperature!r}")
        if self.seed is not None and (not _is_int(self.seed) or self.seed < 0):
            raise OptionError("seed", f"must be a non-negative integer, got {self.seed!r}")
        if self.sampling:
            if self.beam_size != 1:
                raise OptionError("beam_size", "sampling draws every token of a sample by chance and "
                                  f"keeps no beam: it needs beam size 1, got {self.beam_size}")
            return
        unused = {"sampling_topk": (self.sampling_topk, SAMPLING_TOPK),
                  "sampling_topp": (self.sampling_topp, SAMPLING_TOPP),
                  "temperature": (self.temperature, TEMPERATURE), "seed": (self.seed, None)}
        for name, (value, off) in unused.items():
            if value != off:
                raise OptionError(name, f"applies to sampling only, and sampling is off (got {value!r})")

    def _check_steering(self) -> None:
        if self.target_prefix is not None and not isinstance(self.target_prefix, str):
            raise OptionError("target_prefix", f"must be text, got {type(self.target_prefix).__name__}")
        if not _is_int(self.no_repeat_ngram) or self.no_repeat_ngram < 0:
            raise OptionError("no_repeat_ngram", f"must be a non-negative integer (0: off), got {self.no_repeat_ngram!r}")
        if not _finite(self.repetition_penalty) or self.repetition_penalty <= 0:
            raise OptionError("repetition_penalty", f"must be a positive number (1: off), got {self.repetition_penalty!r}")
        if not _is_int(self.min_length) or self.min_length < 0:
            raise OptionError("min_length", f"must be a non-negative integer (0: off), got {self.min_length!r}")
        if self.max_len is not None and self.min_length > self.max_len:
            raise OptionError("min_length", f"{self.min_length} is above max_len {self.max_len}")
        if isinstance(self.forbid, list):  # a list from JSON or Python: kept as a tuple (hashable)
            object.__setattr__(self, "forbid", tuple(self.forbid))
        if not isinstance(self.forbid, tuple) or not all(isinstance(p, str) for p in self.forbid):
            raise OptionError("forbid", f"must be a list of phrases (text), got {self.forbid!r}")
        for phrase in self.forbid:
            if not phrase.strip():
                raise OptionError("forbid", "a forbidden phrase is empty")


@dataclass(frozen=True)
class OptionField:
    """One row of the options' table: a :class:`DecodeOptions` field as a command-line flag and
    as a request field of ``POST /v1/translate``.

    ``kind``: ``int``, ``float``, ``bool`` (a switch), ``text`` or ``phrases`` (a list of texts:
    on the command line a FILE of one phrase a line, ``reads_file``). ``flag``: None for a field no
    flag sets; ``request``: None for one no request sets. ``group``: the parser's group
    (``translate``: that verb's own flags, which ``evaluate`` has not). ``help``: the flag's help,
    its defaults spelled out."""

    name: str
    kind: str
    flag: str | None
    request: str | None
    help: str
    group: str = "decoding"
    metavar: str | None = None

    @property
    def reads_file(self) -> bool:
        """Whether the flag names a file of phrases, one a line (the field holds the phrases)."""
        return self.kind == "phrases"


_SAMPLING = "sampling and repetition guards"
FIELDS: tuple[OptionField, ...] = (
    OptionField("beam_size", "int", "--beam", "beam",
                f"beam size; 1 is greedy decoding (default {BEAM_SIZE}, as the paper; "
                "1 with --sampling, which keeps no beam)"),
    OptionField("length_penalty", "float", "--length-penalty", "length_penalty",
                f"GNMT length penalty alpha of beam search (default {LENGTH_PENALTY}, as the paper)"),
    OptionField("nbest", "int", "--nbest", "nbest",
                "print the K best translations of each sentence (with --sampling: K samples, "
                "most probable first)", group="translate"),
    OptionField("max_len_a", "float", "--max-len-a", None,
                "a translation has at most a * source tokens + b tokens, rounded up to a "
                f"multiple of {MAX_LEN_STEP} (default: the run's training setting, else {MAX_LEN_A})"),
    OptionField("max_len_b", "int", "--max-len-b", None,
                f"see --max-len-a (default: the run's, else {MAX_LEN_B})"),
    OptionField("max_len", "int", "--max-len", "max_len",
                "absolute cap in tokens (default: model positions)"),
    OptionField("min_length", "int", "--min-length", "min_length",
                "no end of sentence before N target tokens, a target prefix counting (fairseq's "
                f"min_len, CTranslate2's min_decoding_length; default {MIN_LENGTH}: off); a "
                "sentence's length limit is raised to hold them", metavar="N"),
    OptionField("forbid", "phrases", "--forbid", "forbid",
                "a file of target phrases, one a line, that no translation may contain, each "
                "as the target tokenizer encodes it (CTranslate2's suppress_sequences, Hugging "
                "Face's bad_words_ids): greedy, beam and sampling", metavar="FILE"),
    OptionField("sampling", "bool", "--sampling", "sampling",
                "draw each token from the model's distribution instead of searching for the most "
                "probable translation (translate's n-best gives several samples a sentence); not "
                "with --beam above 1", group=_SAMPLING),
    OptionField("sampling_topk", "int", "--sampling-topk", "sampling_topk",
                "with --sampling: draw only among the K most probable tokens "
                f"(default {SAMPLING_TOPK}: all; 1 is greedy decoding)", group=_SAMPLING, metavar="K"),
    OptionField("sampling_topp", "float", "--sampling-topp", "sampling_topp",
                "with --sampling: draw only among the fewest most probable tokens whose "
                f"probabilities sum to at least P (nucleus sampling; default {SAMPLING_TOPP:g}: all)",
                group=_SAMPLING, metavar="P"),
    OptionField("temperature", "float", "--temperature", "temperature",
                "with --sampling: divide the logits by T before the cuts (below 1: surer, above 1: "
                f"more varied; default {TEMPERATURE:g})", group=_SAMPLING, metavar="T"),
    OptionField("seed", "int", "--seed", "seed",
                "with --sampling: the same seed gives the same samples for the same input line, "
                "whatever the batch (default: a fresh seed each run)", group=_SAMPLING, metavar="N"),
    OptionField("target_prefix", "text", "--target-prefix", "target_prefix",
                "every translation starts with TEXT (as the target tokenizer splits it) and the "
                "model decodes the rest; the line is translated whole", group="translate",
                metavar="TEXT"),
    OptionField("no_repeat_ngram", "int", "--no-repeat-ngram", "no_repeat_ngram",
                "no N-gram of target tokens occurs twice in a translation (Hugging Face's "
                f"no_repeat_ngram_size; default {NO_REPEAT_NGRAM}: off)", group=_SAMPLING, metavar="N"),
    OptionField("repetition_penalty", "float", "--repetition-penalty", "repetition_penalty",
                "a token already in the translation has its logit divided by R when positive, "
                "multiplied by R when negative (Hugging Face's repetition_penalty; default "
                f"{REPETITION_PENALTY:g}: off; 1.2 is a common choice)", group=_SAMPLING, metavar="R"),
    OptionField("alignments", "bool", "--alignments", "alignments",
                "add each line's word alignments as Pharaoh pairs 'i-j' (0-based source word i, "
                "target word j; words: whitespace-separated): after the translation as "
                "'TRANSLATION ||| 0-0 1-2', or in --json as alignments, a list of [i, j]; read "
                "from cross-attention (transformer.inference.alignment says the rule)",
                group="translate"),
)
# each field's command-line flag and request field, for messages that speak to their users
FLAGS: Mapping[str, str] = {f.name: f.flag for f in FIELDS if f.flag is not None}
REQUEST_FIELDS: Mapping[str, str] = {f.name: f.request for f in FIELDS if f.request is not None}


def check_for_model(options: DecodeOptions, *, model_max_len: int) -> None:
    """OptionError naming the field of ``options`` that a model of ``model_max_len`` target
    positions cannot decode (``min_length`` above them); what the options alone can refuse,
    DecodeOptions refuses."""
    if options.min_length > model_max_len:
        raise OptionError("min_length", f"{options.min_length} is above the {model_max_len} tokens "
                          "this model decodes")
