"""Which language a text is in, among the languages a caller names: what the server's
LibreTranslate routes use for ``source: "auto"`` and ``POST /detect``.

    identify = LanguageIdentifier()                  # loads the model once (about a second)
    identify.rank("Ein Hund läuft.", among=["en", "de", "fr"])   # [("de", 99.9), ("en", 0.1), ...]

The model is py3langid's naive Bayes model (the one of langid.py, 97 languages, shipped inside its
wheel, nothing downloaded): on test_2016_flickr's English, German, French and Czech sides it names
every one of the 4,000 sentences right among those four, at about 50 µs a sentence on one core
(``benchmarks/langid.py``, against lingua-language-detector). Ranking among a subset is the
model restricted to it (py3langid's ``set_languages``), the probabilities over those alone. This
keeps the model loaded once: each subset asked for gets its own view of it (its columns, a
few milliseconds to make, kept), so a subset is ranked exactly as a model restricted to it.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any

from transformer.errors import InputError

PACKAGE = "py3langid"
INSTALL_HINT = "pip install 'transformer[serve]' (or pip install py3langid)"


class LanguageIdentifier:
    """py3langid's model, loaded once; :meth:`rank` among any subset of :attr:`languages`.
    InputError (naming the package and how to install it) when py3langid is not installed."""

    def __init__(self) -> None:
        try:
            from py3langid.langid import MODEL_FILE
            from py3langid.langid import LanguageIdentifier as Model
        except ImportError:
            raise InputError(f"language detection needs {PACKAGE}: {INSTALL_HINT}") from None
        self._model: Any = Model.from_model_file(MODEL_FILE, norm_probs=True)
        self.languages: frozenset[str] = frozenset(self._model.labels)
        self._views: dict[frozenset[str], Any] = {}  # a subset's restricted copy of the model

    def known(self, languages: Iterable[str]) -> list[str]:
        """Those of ``languages`` the model can tell apart, in their order, each once."""
        return [lang for lang in dict.fromkeys(languages) if lang in self.languages]

    def rank(self, text: str, *, among: Iterable[str]) -> list[tuple[str, float]]:
        """``(language, confidence)`` for each of ``among`` the model knows, most likely first;
        confidences are percentages (0-100) that sum to 100 over them. An empty list when it
        knows none of them. A text with nothing to go on (empty, digits only) gets equal
        confidences, in ``among``'s order."""
        wanted = self.known(among)
        if not wanted:
            return []
        key = frozenset(wanted)
        view = self._views.get(key)
        if view is None:  # a shallow copy: the full tables stay shared, the subset's are sliced
            view = copy.copy(self._model)
            view.set_languages(sorted(key))
            self._views[key] = view
        scores = dict(view.rank(text))
        order = {lang: i for i, lang in enumerate(wanted)}
        ranked = sorted(wanted, key=lambda lang: (-scores[lang], order[lang]))
        return [(lang, round(100.0 * float(scores[lang]), 2)) for lang in ranked]
