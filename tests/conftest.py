"""Shared fixtures. Tests that need the shared corpora find them through ``$TRANSFORMER_DATA``,
falling back to ``../shared/data`` beside the checkout; under CI a missing folder is a failure."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from transformer import ModelConfig, Transformer

REPO = Path(__file__).resolve().parents[1]
if str(REPO / "tests") not in sys.path:  # tests/helpers.py, for ``from helpers import ...``
    sys.path.insert(0, str(REPO / "tests"))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The shared data folder (multi30k/, goemotions/, nsmc/)."""
    path = Path(os.environ.get("TRANSFORMER_DATA", REPO.parent / "shared" / "data"))
    if not path.is_dir():
        message = f"shared data folder not found: {path} (set TRANSFORMER_DATA)"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(message)
        pytest.skip(message)
    return path


@pytest.fixture(autouse=True)
def _seed_and_threads() -> None:
    """Every test starts from the same RNG state."""
    torch.manual_seed(0)


def _slow_bf16(*args, **kwargs):
    from transformer.precision import Probe

    return Probe(fp32_ms=1.0, bf16_ms=2.0, tokens=1, backward=False)


@pytest.fixture(scope="session", autouse=True)
def _steady_precision():
    """``precision="auto"`` without its timing probe: the probe reports bf16 slower, so auto runs
    fp32 on every machine and two calls in one test never choose differently by timing noise.
    Session-wide, so session fixtures (a served model) are steadied too. Tests of the probe itself
    are marked ``real_probe`` (tests/test_precision.py); a test that runs the command line in a
    subprocess pins ``--precision`` where it compares runs."""
    from transformer import precision

    real = {"probe_layer": precision.probe_layer, "probe_decoding": precision.probe_decoding}
    with pytest.MonkeyPatch.context() as patch:
        for name in real:
            patch.setattr(precision, name, _slow_bf16)
        yield real


@pytest.fixture(autouse=True)
def _real_probe_when_marked(request, monkeypatch, _steady_precision) -> None:
    if request.node.get_closest_marker("real_probe"):
        from transformer import precision

        for name, function in _steady_precision.items():
            monkeypatch.setattr(precision, name, function)


# --- skips under CI ------------------------------------------------------------------------------
# A test that imports an optional dependency with pytest.importorskip skips where it is missing,
# but CI installs the test extra, which has them all: there a missing one is a failure (the
# serving and convert suites would otherwise go green with every test skipped). Any other skip
# must be one the suite declares for this machine (SKIPPABLE); every pytest run prints how many
# it skipped and how many of those are declared, and .ci/run fails when the first is larger.


def _under_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def _skip_reason(report) -> str:
    longrepr = report.longrepr
    reason = str(longrepr[2]) if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    return reason.removeprefix("Skipped: ")  # a folder's or module's skip has the prefix


def _missing_import(report) -> str | None:
    if not report.skipped or hasattr(report, "wasxfail"):
        return None
    reason = _skip_reason(report)
    return reason if "could not import" in reason else None


def _failed_under_ci(report) -> None:
    reason = _missing_import(report)
    if reason is not None and _under_ci():
        report.outcome = "failed"
        report.longrepr = (f"CI=true: a dependency of the test extra is missing, so this fails "
                           f"instead of skipping: {reason}")


class _MissingImportsFailUnderCI:
    """Registered as a plugin rather than written as this conftest's hooks: a folder's collection
    (where its conftest's importorskip runs) sees only the conftests already loaded."""

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        _failed_under_ci(outcome.get_result())

    @pytest.hookimpl(hookwrapper=True)
    def pytest_make_collect_report(self, collector):
        outcome = yield  # a module, or a folder whose conftest importorskips at the top
        _failed_under_ci(outcome.get_result())


def pytest_configure(config):
    if not config.pluginmanager.has_plugin("transformer-missing-imports"):
        config.pluginmanager.register(_MissingImportsFailUnderCI(), "transformer-missing-imports")


def _cuda() -> bool:
    return torch.cuda.is_available()


def _no_cuda() -> bool:
    return not torch.cuda.is_available()


def _no_onednn() -> bool:
    from transformer.decoding.packing import packing_available

    return not packing_available()


def _no_int8_engine() -> bool:
    from transformer.decoding.packing import int8_engine

    return int8_engine() is None


def _no_qnnpack() -> bool:
    return "qnnpack" not in torch.backends.quantized.supported_engines


def _ct2_onednn_saturates() -> bool:
    from transformer.convert.ctranslate2 import onednn_int8_saturates

    return onednn_int8_saturates()


def _no_readable_x86_flags() -> bool:
    from transformer.convert.ctranslate2 import onednn_int8_saturates

    return not onednn_int8_saturates({"CT2_USE_MKL": "0", "ONEDNN_MAX_CPU_ISA": "AVX2"})


def _no_avx2() -> bool:
    from transformer import hardware

    return "avx2" not in hardware.detect_cpu().flags


# (the start of a skip's reason, whether this machine is one where that skip is expected)
SKIPPABLE = (
    ("this machine has CUDA", _cuda),
    ("no CUDA device here", _no_cuda),  # tests/gpu/ (make test deselects them)
    ("this PyTorch build has no oneDNN", _no_onednn),
    ("no oneDNN", _no_onednn),
    ("packing does not apply here", _no_onednn),
    ("no quantized engine", _no_int8_engine),
    ("this PyTorch build has no qnnpack", _no_qnnpack),
    ("CTranslate2 decodes int8 here with oneDNN without VNNI", _ct2_onednn_saturates),
    ("not an x86 CPU whose flags can be read", _no_readable_x86_flags),
    ("this CTranslate2 or CPU cannot run", _no_avx2),
)


def declared_skippable(reason: str) -> bool:
    """Whether a skip with ``reason`` is one the suite declares for this machine."""
    return any(reason.startswith(start) and expected() for start, expected in SKIPPABLE)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    skipped = [r for r in terminalreporter.stats.get("skipped", []) if not hasattr(r, "wasxfail")]
    declared = [r for r in skipped if declared_skippable(_skip_reason(r))]
    undeclared = sorted({_skip_reason(r) for r in skipped} - {_skip_reason(r) for r in declared})
    # one line .ci/run reads after each pytest run
    terminalreporter.write_line(f"skips: {len(skipped)} skipped, {len(declared)} declared skippable "
                                "on this machine")
    for reason in undeclared:
        terminalreporter.write_line(f"skips: not declared for this machine: {reason}")


# --- models and tokenizers shared by the decoding, inference, model directory and training tests --

COPY_PAD, COPY_BOS, COPY_EOS = 0, 2, 3
COPY_VOCAB = 16  # ids 4 .. 15 are words


def padded_sources(seed: int, count: int, *, min_len: int = 1, max_len: int = 8) -> torch.Tensor:
    """``count`` random sentences of words, right-padded: (count, max_len) with at least one row
    of every length between ``min_len`` and ``max_len`` when ``count`` allows it."""
    g = torch.Generator().manual_seed(seed)
    src = torch.full((count, max_len), COPY_PAD, dtype=torch.long)
    for i in range(count):
        length = min_len + (i % (max_len - min_len + 1))
        src[i, :length] = torch.randint(4, COPY_VOCAB, (length,), generator=g)
    return src[torch.randperm(count, generator=g)]


@pytest.fixture(scope="session")
def sources() -> Callable[..., torch.Tensor]:
    return padded_sources


@pytest.fixture(scope="session")
def copy_model() -> Transformer:
    """A tiny model trained for a few dozen steps to copy its source: it has learned to stop, but
    not perfectly, so outputs vary in length and beam search differs from greedy."""
    torch.manual_seed(1234)
    config = ModelConfig.tiny(vocab_size=COPY_VOCAB, dropout=0.0, max_len=32)
    model = Transformer(config)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    for step in range(50):
        src = padded_sources(10_000 + step, 32, min_len=2)
        lengths = (src != COPY_PAD).sum(dim=1)
        tgt = torch.full((32, src.size(1) + 2), COPY_PAD, dtype=torch.long)
        tgt[:, 0] = COPY_BOS
        tgt[:, 1 : 1 + src.size(1)] = src
        tgt[torch.arange(32), lengths + 1] = COPY_EOS
        logits = model(src, tgt[:, :-1])
        loss = torch.nn.functional.cross_entropy(
            logits.reshape(-1, COPY_VOCAB), tgt[:, 1:].reshape(-1), ignore_index=COPY_PAD
        )
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model.eval()


@pytest.fixture(scope="session")
def number_tokenizer():
    """A small joint SentencePiece tokenizer (vocabulary 60) trained on number words."""
    from transformer.data.builtin_task import english_number, german_number
    from transformer.data.tokenizer import Tokenizer

    numbers = range(1, 400)
    texts = [english_number(n) for n in numbers] + [german_number(n) for n in numbers]
    return Tokenizer.train(texts, vocab_size=60, byte_fallback=False)


@pytest.fixture(scope="session")
def tokenizer(number_tokenizer):
    """The number tokenizer, under the name the folders' tests use; a folder whose tests need
    another one (visualization/: sentences, BPE) defines its own."""
    return number_tokenizer


# what a metrics.jsonl record says about where it is rather than about the model: not a curve
_PLACE = {"kind", "step", "epoch", "lr", "elapsed_s", "eta_s", "snapshots", "kept"}


def _expected_curves(run_dir: Path) -> dict[str, list[tuple[int, float]]]:
    """The curves of the run's metrics.jsonl as TensorBoard stores them (32-bit floats): the
    training loss, learning rate and tokens/s of each logged update; every figure of each
    evaluation (and of an average's)."""
    import numpy as np

    curves: dict[str, list[tuple[int, float]]] = {}
    for line in (run_dir / "metrics.jsonl").read_text().splitlines():
        record = json.loads(line)
        kind = record["kind"]
        names = (["loss", "lr", "tokens_per_s"] if kind == "train" else
                 [n for n in record if n not in _PLACE] if kind in ("valid", "average") else [])
        for name in names:
            curves.setdefault(f"{kind}/{name}", []).append((record["step"], float(np.float32(record[name]))))
    return curves


def _read_events(run_dir: Path) -> tuple[dict[str, list[tuple[int, float]]], dict[str, str]]:
    """(scalars by tag as (step, value) in file order, the latest text by tag), as TensorBoard's
    own reader (``EventAccumulator``) gives them."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.util import tensor_util

    reader = EventAccumulator(str(run_dir / "tensorboard"), size_guidance={"scalars": 0})
    reader.Reload()
    scalars = {tag: [(e.step, e.value) for e in reader.Scalars(tag)]
               for tag in reader.Tags()["scalars"]}
    texts = {tag.removesuffix("/text_summary"):
             tensor_util.make_ndarray(reader.Tensors(tag)[-1].tensor_proto).item().decode()
             for tag in reader.Tags()["tensors"] if tag.endswith("/text_summary")}
    return scalars, texts


@pytest.fixture(scope="session")
def tb_events():
    """A run's TensorBoard events: ``read(run_dir)`` what TensorBoard's reader finds,
    ``expected(run_dir)`` the curves its metrics.jsonl says they hold."""
    pytest.importorskip("tensorboard")
    return SimpleNamespace(read=_read_events, expected=_expected_curves)
