"""What test folders share, imported by name: ``from helpers import assert_same``. The import mode
is importlib, so tests/conftest.py puts this folder on ``sys.path`` for it. Fixtures built on these
(the number tokenizer, tiny model directories) are in tests/conftest.py."""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import torch


def assert_same(a, b, where: str = "") -> None:
    """Equal to the last bit: tensors, and dicts, lists and tuples holding them (and plain values);
    ``where`` names the first place that differs (``.optimizer.state[0]``)."""
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and torch.equal(a, b), where
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for key in a:
            assert_same(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, list | tuple):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same(x, y, f"{where}[{i}]")
    else:
        assert a == b, where


def logged_step(run: Path) -> int:
    """The last update a run has logged to its metrics.jsonl; 0 before the first (or before the
    file exists). Safe while the run writes: a line being written is passed over."""
    path = run / "metrics.jsonl"
    steps = [0]
    for line in path.read_text().splitlines() if path.is_file() else []:
        try:
            steps.append(json.loads(line)["step"])
        except (json.JSONDecodeError, KeyError):
            continue
    return max(steps)


def model_of(run: Path):
    """A fresh model of the run's configuration, to load its checkpoint into."""
    from transformer.model_dir import build_model, read_config

    return build_model(read_config(run))


class CharTokenizer:
    """A tokenizer of letters for a ``Translator`` over the copy model: a..l (either case) are
    ids 4..15; everything else is dropped."""

    vocab_size = 16

    def encode(self, text: str) -> list[int]:
        return [4 + "abcdefghijkl".index(c) for c in text.lower() if c in "abcdefghijkl"]

    def decode(self, ids) -> str:
        return "".join("abcdefghijkl"[i - 4] for i in ids if i >= 4)


# --- tiny model directories ----------------------------------------------------------------------

TRANSLATOR_SHAPE = dict(d_model=32, d_ff=64, num_heads=4, num_encoder_layers=1,
                        num_decoder_layers=2, dropout=0.0, max_len=48)
CLASSIFIER_SHAPE = dict(d_model=16, d_ff=32, num_heads=2, num_encoder_layers=1, max_len=32)


def save_translator(path: Path, tokenizer, *, seed: int = 0, config: dict | None = None,
                    **shape) -> Path:
    """A model directory at ``path`` holding a random tiny Transformer of ``seed`` (its outputs are
    arbitrary but depend on the input, which is all order, batching and serving tests need), the
    one ``tokenizer`` on both sides and ``config`` as config.json's extra keys; ``shape`` overrides
    :data:`TRANSLATOR_SHAPE`."""
    from transformer import ModelConfig, Transformer
    from transformer.model_dir import save_model_dir

    torch.manual_seed(seed)
    model = Transformer(ModelConfig.tiny(tokenizer.vocab_size, **{**TRANSLATOR_SHAPE, **shape}))
    save_model_dir(path, model, config={"task": "translation", **(config or {})},
                   src_tokenizer=tokenizer, tgt_tokenizer=tokenizer)
    return path


def save_classifier(path: Path, tokenizer, labels: list[str], *, seed: int = 0,
                    multi_label: bool = False, thresholds: list[float] | None = None,
                    pooling: str = "cls", **shape) -> Path:
    """A model directory at ``path`` holding a random tiny classifier of ``seed`` over ``labels``
    (with ``thresholds`` in config.json where given); ``shape`` overrides :data:`CLASSIFIER_SHAPE`."""
    from transformer import ModelConfig, TransformerClassifier
    from transformer.model_dir import save_model_dir

    torch.manual_seed(seed)
    config = ModelConfig.tiny(tokenizer.vocab_size, **{**CLASSIFIER_SHAPE, **shape})
    model = TransformerClassifier(config, num_labels=len(labels), pooling=pooling,
                                  multi_label=multi_label)
    extra = {"thresholds": thresholds} if thresholds is not None else {}
    save_model_dir(path, model, config={
        "task": "classification", "labels": labels, **extra,
        "classifier": {"num_labels": len(labels), "pooling": pooling, "multi_label": multi_label}},
        src_tokenizer=tokenizer, tgt_tokenizer=None)
    return path


# --- MarianMT checkpoints, as Hugging Face saves OPUS-MT models ----------------------------------

def spm_model(texts: list[str], size: int) -> bytes:
    """A SentencePiece unigram model of ``size`` pieces trained on ``texts``, serialized."""
    import sentencepiece as spm

    out = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(texts), model_writer=out,
                                   vocab_size=size, model_type="unigram", minloglevel=2)
    return out.getvalue()


def spm_pieces(proto: bytes) -> list[str]:
    """The pieces of a serialized SentencePiece model, in id order."""
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor()
    sp.LoadFromSerializedProto(proto)
    return [sp.id_to_piece(i) for i in range(sp.get_piece_size())]


def save_random_marian(directory: Path, source: bytes, target: bytes, *, tags: tuple[str, ...] = ()):
    """A random MarianMT checkpoint written into ``directory`` as OPUS-MT's are (config.json,
    model.safetensors, source.spm, target.spm, vocab.json): one vocabulary of ``</s>``, ``<unk>``,
    the ``tags``, both models' pieces and ``<pad>`` last; embeddings shared and tied; weights moved
    away from the init and a logits bias that matters. Returns (the Hugging Face model, vocab)."""
    import transformers

    pieces = ["</s>", "<unk>", *tags]
    for p in spm_pieces(source) + spm_pieces(target):
        if p not in pieces and p not in ("<s>", "</s>", "<unk>", "<pad>"):
            pieces.append(p)
    pieces.append("<pad>")
    vocab = {p: i for i, p in enumerate(pieces)}
    config = transformers.MarianConfig(
        vocab_size=len(vocab), decoder_vocab_size=len(vocab), d_model=32, encoder_layers=2,
        decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
        encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=64,
        pad_token_id=vocab["<pad>"], eos_token_id=vocab["</s>"],
        decoder_start_token_id=vocab["<pad>"], scale_embedding=True, activation_function="swish",
        share_encoder_decoder_embeddings=True, tie_word_embeddings=True)
    torch.manual_seed(0)
    model = transformers.MarianMTModel(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "embed_positions" not in name:  # the fixed sinusoids stay what they are
                p.add_(torch.randn_like(p) * 0.2)
        model.final_logits_bias.normal_(0, 1.0)
    model.save_pretrained(directory)
    (directory / "source.spm").write_bytes(source)
    (directory / "target.spm").write_bytes(target)
    (directory / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    return model, vocab


def stop_with_sigterm(proc, ready, *, timeout: float) -> str:
    """Wait until ``ready()`` (failing if the process ``proc`` ends first, with its stderr's end,
    or ``timeout`` seconds pass), send it SIGTERM and return its stderr once it has exited 143 (a
    run's exit on a signal)."""
    import signal
    import time

    deadline = time.monotonic() + timeout
    while not ready():
        assert proc.poll() is None, proc.communicate()[1][-2000:]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err[-2000:]
    return err


LOADED_S = 120.0  # a margin for a loaded machine: starting a server takes seconds


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(tmp_path, *flags: str) -> tuple[subprocess.Popen, str]:
    """``transformer serve FLAGS`` on a free port (its stderr to a file); once /health answers."""
    import httpx

    port = free_port()
    err = open(tmp_path / "serve.err", "w", encoding="utf-8")  # noqa: SIM115  # closed with the process
    proc = subprocess.Popen([sys.executable, "-m", "transformer", "serve", "--port", str(port),
                             "--threads", "1", "--precision", "fp32", *flags],
                            stdout=subprocess.DEVNULL, stderr=err, env=dict(os.environ))
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + LOADED_S
    while time.monotonic() < deadline:
        assert proc.poll() is None, (tmp_path / "serve.err").read_text()
        try:
            if httpx.get(url + "/health", timeout=5).status_code == 200:
                return proc, url
        except httpx.TransportError:
            time.sleep(0.2)
    proc.kill()
    raise AssertionError("the server never answered /health")


def html_balance(markup: str) -> list[str]:
    """What is wrong with the nesting of ``markup``'s elements, read by the standard library's
    parser (independently of transformer.inference.html_parse): every end tag must close the
    innermost open element and every non-void element must be closed; [] when well-formed."""
    from html.parser import HTMLParser

    void = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param",
            "source", "track", "wbr"}
    problems: list[str] = []
    stack: list[str] = []

    class Check(HTMLParser):
        def handle_starttag(self, tag, attrs):
            if tag not in void:
                stack.append(tag)

        def handle_endtag(self, tag):
            if not stack or stack[-1] != tag:
                problems.append(f"</{tag}> closes {stack[-1] if stack else 'nothing'}")
            else:
                stack.pop()

    parser = Check(convert_charrefs=True)
    parser.feed(markup)
    parser.close()
    problems.extend(f"<{tag}> never closed" for tag in stack)
    return problems


def html_start_tags(markup: str) -> list[tuple[str, tuple[tuple[str, str | None], ...]]]:
    """Every start tag of ``markup`` as (name, attributes), in order."""
    from html.parser import HTMLParser

    found: list[tuple[str, tuple[tuple[str, str | None], ...]]] = []

    class Tags(HTMLParser):
        def handle_starttag(self, tag, attrs):
            found.append((tag, tuple(attrs)))

        handle_startendtag = handle_starttag

    parser = Tags(convert_charrefs=True)
    parser.feed(markup)
    parser.close()
    return found


def html_text(markup: str, *, blocks: frozenset[str]) -> str:
    """The text of ``markup`` as a reader sees it: entities decoded, no script or style, a space
    at every tag not in the inline set (``blocks`` says which are blocks), whitespace collapsed."""
    from html.parser import HTMLParser

    out: list[str] = []
    hidden = {"script", "style"}
    inside: list[str] = []

    class Text(HTMLParser):
        def handle_starttag(self, tag, attrs):
            if tag in hidden:
                inside.append(tag)
            if tag in blocks or tag == "br":
                out.append(" ")

        def handle_endtag(self, tag):
            if tag in hidden and inside:
                inside.pop()
            if tag in blocks:
                out.append(" ")

        def handle_data(self, data):
            if not inside:
                out.append(data)

    parser = Text(convert_charrefs=True)
    parser.feed(markup)
    parser.close()
    return " ".join("".join(out).split())
