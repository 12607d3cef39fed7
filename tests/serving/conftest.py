"""Tiny model directories (a random translator with a multi-label classifier beside it) and an
in-process client of the server over them."""

from __future__ import annotations

import pytest

from helpers import save_classifier, save_translator

pytest.importorskip("fastapi")


@pytest.fixture(scope="session")
def tokenizer():
    """Its own number tokenizer (1-299, not the suite's 1-399): with the suite's, the exact
    equality of test_score.py's server and library log-probabilities breaks in the last bits
    when the whole folder runs (not when the file runs alone)."""
    from transformer.data.builtin_task import english_number, german_number
    from transformer.data.tokenizer import Tokenizer

    texts = [english_number(n) for n in range(1, 300)] + [german_number(n) for n in range(1, 300)]
    return Tokenizer.train(texts, vocab_size=60, byte_fallback=False)


@pytest.fixture(scope="session")
def translation_dir(tmp_path_factory, tokenizer):
    return save_translator(tmp_path_factory.mktemp("translation") / "numbers", tokenizer,
                           num_encoder_layers=2, config={"training": {
                               "decode_max_len_a": 0.5, "decode_max_len_b": 3, "src_lang": "en",
                               "tgt_lang": "de"}})


@pytest.fixture(scope="session")
def classifier_dir(tmp_path_factory, tokenizer):
    return save_classifier(tmp_path_factory.mktemp("classifier") / "labels", tokenizer,
                           ["small", "round", "large"], seed=1, multi_label=True,
                           thresholds=[0.4, 0.5, 0.6])


@pytest.fixture(scope="session")
def served(translation_dir, classifier_dir):
    from transformer.serving.models import load_served

    return load_served({"numbers": str(translation_dir), "labels": str(classifier_dir)})


@pytest.fixture
def make_client(served):
    """``make_client(**settings)`` -> a started TestClient of the session's models, or of
    ``make_client(models, **settings)``'s (closed at the end of the test)."""
    from fastapi.testclient import TestClient

    from transformer.serving.app import ServeSettings, create_app

    clients = []

    def make(models=None, /, **settings):
        client = TestClient(create_app(served if models is None else models, settings=ServeSettings(**settings)))
        client.__enter__()
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.__exit__(None, None, None)


@pytest.fixture
def client(make_client):
    return make_client()


@pytest.fixture
def write_translator(tokenizer):
    """``write_translator(path, seed)`` -> path: a tiny random translator of ``seed`` written into
    ``path`` over what is there (as a retrained model would be)."""
    def write(path, seed):
        return save_translator(path, tokenizer, seed=seed, config={"training": {
            "decode_max_len_a": 0.5, "decode_max_len_b": 3}}, num_decoder_layers=1)

    return write


def greedy_alone(path, texts):
    """What the model in ``path`` translates ``texts`` to, greedily, by the library alone (the
    reference the server's answers are compared with)."""
    from transformer.config.decoding import DecodeOptions
    from transformer.inference.translator import Translator
    from transformer.model_dir import load_model_dir

    options = DecodeOptions(beam_size=1, max_len_a=0.5, max_len_b=3)
    return [t.text for t in Translator.from_loaded(load_model_dir(path), options=options).translate(texts)]


@pytest.fixture
def translate_alone():
    return greedy_alone
