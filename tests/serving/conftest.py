"""Tiny model directories (a random translator with a multi-label classifier beside it) and an
in-process client of the server over them."""

from __future__ import annotations

import pytest
import torch

from transformer import ModelConfig, Transformer, TransformerClassifier
from transformer.data.builtin_task import english_number, german_number

pytest.importorskip("fastapi")


@pytest.fixture(scope="session")
def tokenizer():
    from transformer.data.tokenizer import Tokenizer

    texts = [english_number(n) for n in range(1, 300)] + [german_number(n) for n in range(1, 300)]
    return Tokenizer.train(texts, vocab_size=60, byte_fallback=False)


@pytest.fixture(scope="session")
def translation_dir(tmp_path_factory, tokenizer):
    from transformer.model_dir import save_model_dir

    torch.manual_seed(0)
    config = ModelConfig.tiny(vocab_size=tokenizer.vocab_size, d_model=32, d_ff=64, num_heads=4,
                              num_encoder_layers=2, num_decoder_layers=2, max_len=48, dropout=0.0)
    path = tmp_path_factory.mktemp("translation") / "numbers"
    save_model_dir(path, Transformer(config), config={"task": "translation", "training": {
        "decode_max_len_a": 0.5, "decode_max_len_b": 3, "src_lang": "en", "tgt_lang": "de"}},
        src_tokenizer=tokenizer, tgt_tokenizer=tokenizer)
    return path


@pytest.fixture(scope="session")
def classifier_dir(tmp_path_factory, tokenizer):
    from transformer.model_dir import save_model_dir

    torch.manual_seed(1)
    config = ModelConfig.tiny(vocab_size=tokenizer.vocab_size, d_model=16, d_ff=32, num_heads=2,
                              num_encoder_layers=1, max_len=32)
    model = TransformerClassifier(config, num_labels=3, pooling="cls", multi_label=True)
    path = tmp_path_factory.mktemp("classifier") / "labels"
    save_model_dir(path, model, config={
        "task": "classification", "labels": ["small", "round", "large"], "thresholds": [0.4, 0.5, 0.6],
        "classifier": {"num_labels": 3, "pooling": "cls", "multi_label": True}},
        src_tokenizer=tokenizer, tgt_tokenizer=None)
    return path


@pytest.fixture(scope="session")
def served(translation_dir, classifier_dir):
    from transformer.serving.models import load_served

    return load_served({"numbers": str(translation_dir), "labels": str(classifier_dir)})


@pytest.fixture
def make_client(served):
    """``make_client(**settings)`` -> a started TestClient (closed at the end of the test)."""
    from fastapi.testclient import TestClient

    from transformer.serving.app import ServeSettings, create_app

    clients = []

    def make(**settings):
        client = TestClient(create_app(served, settings=ServeSettings(**settings)))
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
    from transformer.model_dir import save_model_dir

    def write(path, seed):
        torch.manual_seed(seed)
        config = ModelConfig.tiny(vocab_size=tokenizer.vocab_size, d_model=32, d_ff=64, num_heads=4,
                                  num_encoder_layers=1, num_decoder_layers=1, max_len=48, dropout=0.0)
        save_model_dir(path, Transformer(config), config={"task": "translation", "training": {
            "decode_max_len_a": 0.5, "decode_max_len_b": 3}}, src_tokenizer=tokenizer,
            tgt_tokenizer=tokenizer)
        return path

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
