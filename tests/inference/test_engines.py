"""The engines a translator decodes with: CTranslate2 decodes a model directory as ours does, its
conversion is cached beside the run and checked by the weights' hash, options it lacks run on
ours, and without CTranslate2 ``auto`` is ours and ``ctranslate2`` is one line saying how to
install it."""

from __future__ import annotations

import logging
import sys

import pytest
import torch
from torch.nn import functional as F

from transformer import ModelConfig, Transformer
from transformer.data.builtin_task import number_task_splits
from transformer.data.padding import pad_rows
from transformer.decoding import beam_search, greedy_decode
from transformer.decoding import greedy as greedy_module
from transformer.errors import InputError
from transformer.inference import engines
from transformer.inference import translator as translator_module
from transformer.inference.loader import load_translator
from transformer.model_dir import save_model_dir
from transformer.model_dir.cache import CACHE_DIR

BOS, EOS, PAD = 2, 3, 0


@pytest.fixture(scope="module")
def test_lines():
    return number_task_splits(0, train_size=300, valid_size=10, test_size=120, max_number=9999)["test"]


@pytest.fixture(scope="module")
def trained_dir(tmp_path_factory, tokenizer):
    """A tiny model trained for a few seconds on English -> German number words: it has learned
    most of the task, so its outputs are not near-ties of random weights."""
    torch.manual_seed(0)
    pairs = number_task_splits(1, train_size=2000, valid_size=10, test_size=10, max_number=9999)["train"]
    config = ModelConfig.tiny(tokenizer.vocab_size, d_model=32, d_ff=64, num_heads=4, dropout=0.0,
                              max_len=48, share_embeddings=True)
    model = Transformer(config)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    src_ids = [tokenizer.encode(s) for s in pairs.src]
    tgt_ids = [[BOS, *tokenizer.encode(t), EOS] for t in pairs.tgt]
    for step in range(150):
        rows = [(step * 32 + i) % len(src_ids) for i in range(32)]
        src = pad_rows([src_ids[i] for i in rows], pad_id=PAD)
        tgt = pad_rows([tgt_ids[i] for i in rows], pad_id=PAD)
        logits = model(src, tgt[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), tgt[:, 1:].reshape(-1),
                               ignore_index=PAD)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    path = tmp_path_factory.mktemp("engines") / "numbers"
    save_model_dir(path, model.eval(), config={"task": "translation", "training": {
        "decode_max_len_a": 1.0, "decode_max_len_b": 4, "src_lang": "en", "tgt_lang": "de"}},
        src_tokenizer=tokenizer, tgt_tokenizer=tokenizer)
    return path


def _not_ours(*args, **kwargs):
    raise AssertionError("ours decoded what CTranslate2 was to decode")


# --- without CTranslate2 (simulated: its import fails) -------------------------------------------


@pytest.fixture
def no_ctranslate2(monkeypatch):
    monkeypatch.setitem(sys.modules, "ctranslate2", None)  # import ctranslate2 -> ImportError
    engines.ctranslate2_compute_types.cache_clear()
    yield
    engines.ctranslate2_compute_types.cache_clear()


def test_without_ctranslate2_auto_is_ours(no_ctranslate2, trained_dir):
    translator = load_translator(trained_dir, engine="auto", precision="fp32")
    assert translator.engine == "torch"
    assert not (trained_dir / CACHE_DIR / "ctranslate2-fp32").exists()


def test_without_ctranslate2_asking_for_it_says_how_to_install(no_ctranslate2, trained_dir):
    with pytest.raises(InputError, match=r"not installed: pip install 'transformer\[convert\]'"):
        load_translator(trained_dir, engine="ctranslate2")


def test_translate_without_ctranslate2_is_one_line_and_exit_2(no_ctranslate2, trained_dir, capsys):
    from transformer.cli import main

    code = main(["translate", "--model", str(trained_dir), "--engine", "ctranslate2", "seven"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert [line for line in err if "error" in line] == [
        f"transformer: error: {engines.INSTALL}"]


def test_an_unknown_engine_is_refused_before_the_model_is_read(tmp_path):
    with pytest.raises(InputError, match="--engine must be one of auto, torch, ctranslate2"):
        load_translator(tmp_path / "missing", engine="onnx")


# --- the rule auto follows ------------------------------------------------------------------------


def _cpu(capability: str = "AVX512", arch: str = "x86_64"):
    from transformer.hardware import CpuInfo

    return CpuInfo(arch=arch, model="test", capability=capability, flags=(), mkldnn_bf16=True,
                   quantized_engines=("x86",))


@pytest.mark.parametrize(("cpu", "precision", "d_model", "types", "expected"), [
    (_cpu(), "fp32", 256, {"float32", "int8"}, "ctranslate2"),
    (_cpu(), "int8", 128, {"float32", "int8"}, "ctranslate2"),
    (_cpu("AVX2"), "fp32", 128, {"float32", "int8"}, "ctranslate2"),
    (_cpu("AVX2"), "int8", 256, {"float32", "int8"}, "ctranslate2"),  # on its 7-bit weights
    (_cpu(), "bf16", 256, {"float32", "int8"}, "torch"),  # no bf16 in CTranslate2 here
    (_cpu(), "fp32", 32, {"float32", "int8"}, "torch"),  # narrower than measured
    (_cpu(), "fp32", 1024, {"float32", "int8"}, "torch"),  # wider than measured
    (_cpu("DEFAULT", "aarch64"), "fp32", 256, {"float32", "int8"}, "torch"),  # not measured
    (_cpu(), "fp32", 256, set(), "torch"),  # not installed
])
def test_auto_takes_ctranslate2_only_where_it_was_measured_faster(cpu, precision, d_model, types,
                                                                  expected):
    from transformer.inference.engine_choice import auto_engine

    engine, why = auto_engine(cpu, precision=precision, d_model=d_model, device="cpu",
                              ctranslate2_types=frozenset(types))
    assert engine == expected and why


def test_auto_on_a_gpu_is_ours():
    from transformer.inference.engine_choice import auto_engine

    assert auto_engine(_cpu(), precision="fp32", d_model=256, device="cuda",
                       ctranslate2_types=frozenset({"float32"}))[0] == "torch"


# --- with CTranslate2 -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ct2_module():
    return pytest.importorskip("ctranslate2")


def _ids(translator, lines):
    return [translator.src_tokenizer.encode(line) for line in lines]


def test_greedy_equals_ours_on_a_trained_model(ct2_module, trained_dir, test_lines):
    ours = load_translator(trained_dir, engine="torch", precision="fp32", beam_size=1)
    theirs = load_translator(trained_dir, engine="ctranslate2", precision="fp32", beam_size=1)
    assert theirs.engine == "ctranslate2" and ours.engine == "torch"
    a = [t.text for t in ours.translate(test_lines.src)]
    b = [t.text for t in theirs.translate(test_lines.src)]
    same = sum(x == y for x, y in zip(a, b, strict=True)) / len(a)
    assert same >= 0.99, f"CTranslate2 greedy equals ours on {same:.1%} of lines"
    assert len(set(a)) > len(a) // 2  # the model translates: outputs differ from line to line


def test_beam_translations_and_scores_match_ours(ct2_module, trained_dir, test_lines):
    """Beam 4 with the paper's length penalty and n-best 2: the same translations on nearly
    every line, and where they agree the same GNMT-penalised log-probability."""
    ours = load_translator(trained_dir, engine="torch", precision="fp32", beam_size=4, nbest=2)
    theirs = load_translator(trained_dir, engine="ctranslate2", precision="fp32", beam_size=4, nbest=2)
    a, b = ours.translate(test_lines.src), theirs.translate(test_lines.src)
    agree = [(x, y) for x, y in zip(a, b, strict=True) if x.text == y.text]
    assert len(agree) >= 0.95 * len(a)
    for x, y in agree:
        assert y.score == pytest.approx(x.score, abs=1e-3)
        assert len(y.nbest) == 2


def test_log_probabilities_match_ours_greedy_and_beam(ct2_module, trained_dir, test_lines):
    """Every answer's log-probability (its tokens and EOS) and token count: CTranslate2's, where
    the translations agree, equal ours; a sentence cut at its length limit too."""
    for kw in (dict(beam_size=1), dict(beam_size=4, nbest=2), dict(beam_size=1, max_len=4)):
        ours = load_translator(trained_dir, engine="torch", precision="fp32", **kw)
        theirs = load_translator(trained_dir, engine="ctranslate2", precision="fp32", **kw)
        a, b = ours.translate(test_lines.src[:40]), theirs.translate(test_lines.src[:40])
        agree = [(x, y) for x, y in zip(a, b, strict=True) if x.text == y.text]
        assert len(agree) >= 0.95 * len(a)
        for x, y in agree:
            assert y.tokens == x.tokens
            assert y.log_prob == pytest.approx(x.log_prob, abs=1e-3)


@pytest.fixture(scope="module")
def converted(ct2_module, trained_dir):
    """``trained_dir`` with its CTranslate2 conversion made (in the run's cache), so that a test
    that asserts our weights stay unread holds whichever test runs first."""
    load_translator(trained_dir, engine="ctranslate2", precision="fp32")
    return trained_dir


@pytest.mark.parametrize("beam", [1, 3])
def test_target_prefixes_run_on_ctranslate2_as_on_ours(converted, trained_dir, test_lines, beam,
                                                       monkeypatch):
    """CTranslate2 is given each sentence's prefix: every translation starts with it, and the same
    translations, log-probabilities and token counts (those of the tokens after the prefix) as
    ours; ours never runs. Beam search: the two searches stop by different rules (CTranslate2 goes
    on while a live beam may still win), so a few sentences may part ways, as in the tests above."""
    ours = load_translator(trained_dir, engine="torch", precision="fp32", beam_size=beam)
    theirs = load_translator(trained_dir, engine="ctranslate2", precision="fp32", beam_size=beam)
    prefixes = ["eins", "", "zwei hundert"] * 10
    want = ours.translate(test_lines.src[:30], prefixes=prefixes)
    monkeypatch.setattr(translator_module.Translator, "_decode", _not_ours)
    got = theirs.translate(test_lines.src[:30], prefixes=prefixes)
    assert all(t.text.startswith(p) for t, p in zip(got, prefixes, strict=True))
    agree = [(x, y) for x, y in zip(want, got, strict=True) if x.text == y.text]
    assert len(agree) == len(want) if beam == 1 else len(agree) >= 0.9 * len(want)
    assert [y.tokens for _, y in agree] == [x.tokens for x, _ in agree]
    assert [y.log_prob for _, y in agree] == pytest.approx([x.log_prob for x, _ in agree], abs=1e-4)
    assert not theirs.loaded.weights_read


def test_each_sentence_stops_at_its_own_length_limit(ct2_module, trained_dir, test_lines):
    """max_len_a 1, b -15: every sentence of a batch has its own limit (1 or 16, each cutting
    some translations short), greedy and beam."""
    from transformer.config.decoding import length_limit

    for beam in (1, 3):
        kw = dict(precision="fp32", beam_size=beam, max_len_a=1.0, max_len_b=-15)
        ours = load_translator(trained_dir, engine="torch", **kw)
        theirs = load_translator(trained_dir, engine="ctranslate2", **kw)
        ids = _ids(ours, test_lines.src[:40])
        mine, other = ours.translate_ids(ids), theirs.translate_ids(ids)
        limits = [max(length_limit(len(source), 1.0, -15), 1) for source in ids]
        for each in set(limits):  # two limits, and translations cut at each
            assert any(len(h) == each for h, limit in zip(other, limits, strict=True) if limit == each)
        assert len(set(limits)) == 2
        for hypothesis, limit in zip(other, limits, strict=True):
            assert len(hypothesis) <= limit
        assert sum(x == y for x, y in zip(mine, other, strict=True)) >= 0.95 * len(ids)


def test_ctranslate2_batches_many_batches_a_call(ct2_module, trained_dir, test_lines):
    """CTranslate2 is handed CALL_BATCHES batches a call and batches them itself
    (``max_batch_size``): 120 sentences at batch size 4 are a few calls, not 30 or more, and
    the translations are ours."""
    from transformer.inference.engines import CALL_BATCHES

    class Counted:
        def __init__(self, inner):
            self.inner, self.calls = inner, []

        def translate_batch(self, source, **kw):
            self.calls.append((len(source), kw["max_batch_size"]))
            return self.inner.translate_batch(source, **kw)

    for beam in (1, 3):
        ours = load_translator(trained_dir, engine="torch", precision="fp32", beam_size=beam)
        theirs = load_translator(trained_dir, engine="ctranslate2", precision="fp32", beam_size=beam,
                                 batch_size=4)
        theirs.ct2 = counted = Counted(theirs.ct2)
        ids = _ids(ours, test_lines.src)
        mine, other = ours.translate_ids(ids), theirs.translate_ids(ids)
        assert {size for _, size in counted.calls} == {4}
        assert max(n for n, _ in counted.calls) > 4 * (CALL_BATCHES // 2)
        assert len(counted.calls) < len(ids) // 4
        assert sum(x == y for x, y in zip(mine, other, strict=True)) >= 0.95 * len(ids)


def test_translate_ids_equals_greedy_decode(ct2_module, trained_dir, test_lines):
    """The engine against the decoding API itself, batch of mixed lengths, no length rule."""
    theirs = load_translator(trained_dir, engine="ctranslate2", precision="fp32", beam_size=1,
                             max_len_a=None, max_len=30)
    ids = _ids(theirs, test_lines.src[:30])
    expected = greedy_decode(theirs.model, pad_rows(ids, pad_id=PAD), bos_id=BOS, eos_id=EOS,
                             max_len=30)
    got = theirs.translate_ids(ids)
    assert sum(x == y for x, y in zip(got, expected, strict=True)) >= 0.95 * len(ids)
    beams = beam_search(theirs.model, pad_rows(ids, pad_id=PAD), bos_id=BOS, eos_id=EOS, max_len=30,
                        beam_size=2)
    assert len(beams) == len(got)


def test_the_conversion_is_cached_and_checked_by_the_weights_hash(ct2_module, trained_dir, tmp_path):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(trained_dir, run, ignore=shutil.ignore_patterns(CACHE_DIR))
    first = load_translator(run, engine="ctranslate2", precision="fp32")
    model_bin = first.model_path / "model.bin"
    stamp, before = model_bin.stat().st_mtime_ns, model_bin.read_bytes()
    assert first.model_path.parent == run / CACHE_DIR / "ctranslate2-fp32"
    again = load_translator(run, engine="ctranslate2", precision="fp32")
    assert (again.model_path / "model.bin").stat().st_mtime_ns == stamp  # reused, not converted
    # new weights in the run: the cached conversion no longer matches and is made again
    from transformer.model_dir import load_model_dir

    loaded = load_model_dir(run)
    with torch.no_grad():
        loaded.model.output_projection.bias.add_(1.0)
    save_model_dir(run, loaded.model, config={"task": "translation", "training": {
        "src_lang": "en", "tgt_lang": "de"}}, src_tokenizer=loaded.src_tokenizer,
        tgt_tokenizer=loaded.tgt_tokenizer)
    changed = load_translator(run, engine="ctranslate2", precision="fp32")
    assert (changed.model_path / "model.bin").read_bytes() != before
    assert not [p for p in (run / CACHE_DIR).iterdir() if p.name.startswith(".")]  # no leftovers


def test_a_run_whose_cache_cannot_be_written_caches_in_the_users_folder(ct2_module, trained_dir,
                                                                        tmp_path, monkeypatch):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(trained_dir, run, ignore=shutil.ignore_patterns(CACHE_DIR))
    (run / CACHE_DIR).write_text("not a folder")  # RUN_DIR/.cache cannot be made
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "user"))
    translator = load_translator(run, engine="ctranslate2", precision="int8")
    assert tmp_path / "user" / "transformer" in translator.model_path.parents
    assert translator.translate(["seven"])[0].text == load_translator(
        run, engine="ctranslate2", precision="int8").translate(["seven"])[0].text


def test_an_option_ctranslate2_is_not_given_runs_on_ours_with_one_log_line(
        ct2_module, trained_dir, test_lines, monkeypatch, caplog):
    """As a decoding option CTranslate2 lacks would: max_len taken out of the mapped options."""
    monkeypatch.setattr(engines, "MAPPED_OPTIONS", engines.MAPPED_OPTIONS - {"max_len"})
    ours = load_translator(trained_dir, engine="torch", precision="fp32", beam_size=1, max_len=3)
    theirs = load_translator(trained_dir, engine="ctranslate2", precision="fp32", beam_size=1,
                             max_len=3)
    assert theirs.engine == "torch"  # asked for at load: ours, with a warning
    auto = load_translator(trained_dir, engine="auto", precision="fp32", beam_size=1, max_len=3)
    assert auto.engine == "torch"
    served = load_translator(trained_dir, engine="ctranslate2", precision="fp32", beam_size=1)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="transformer.inference.engines"):
        got = served.translate(test_lines.src[:20], options=ours.options)  # a request's options
        served.translate(test_lines.src[:20], options=ours.options)
    assert [t.text for t in got] == [t.text for t in ours.translate(test_lines.src[:20])]
    lines = [r.message for r in caplog.records if "max_len" in r.message]
    assert len(lines) == 1 and "ours" in lines[0]


def test_bf16_where_ctranslate2_has_none_runs_on_ours(ct2_module, trained_dir, caplog):
    if "bfloat16" in engines.ctranslate2_compute_types():
        pytest.skip("this CTranslate2 runs bf16 on this CPU")
    with caplog.at_level(logging.WARNING):
        translator = load_translator(trained_dir, engine="ctranslate2", precision="bf16")
    assert translator.engine == "torch"
    assert any("no bf16" in r.message for r in caplog.records)


def test_translate_json_and_the_log_say_which_engine_ran(ct2_module, trained_dir, capsys, caplog):
    import json

    from transformer.cli import main

    for engine in ("torch", "ctranslate2"):
        with caplog.at_level(logging.INFO):
            code = main(["translate", "--model", str(trained_dir), "--engine", engine,
                         "--precision", "fp32", "--json", "seven", "forty-two"])
        assert code == 0
        items = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        assert [item["engine"] for item in items] == [engine, engine]
        assert any(r.message.startswith(f"engine: {engine} (fp32") for r in caplog.records)
        caplog.clear()


def test_a_sentence_ctranslate2_answers_with_pad_is_decoded_by_ours(ct2_module, trained_dir,
                                                                    test_lines, tmp_path):
    """Ours never produces PAD; CTranslate2 does when the model favours it (here: its output
    bias raised): those sentences come from ours, so the engine still equals ours."""
    from transformer.model_dir import load_model_dir

    loaded = load_model_dir(trained_dir)
    with torch.no_grad():
        loaded.model.output_projection.bias[PAD] += 6.0
    run = tmp_path / "pad"
    save_model_dir(run, loaded.model, config={"task": "translation", "training": {
        "src_lang": "en", "tgt_lang": "de"}}, src_tokenizer=loaded.src_tokenizer,
        tgt_tokenizer=loaded.tgt_tokenizer)
    for beam in (1, 3):
        ours = load_translator(run, engine="torch", precision="fp32", beam_size=beam)
        theirs = load_translator(run, engine="ctranslate2", precision="fp32", beam_size=beam)
        ids = _ids(ours, test_lines.src[:30])
        raw = theirs._search([[theirs.src_pieces[i] for i in row] for row in ids], [None] * len(ids),
                             beam=1, count=1, limit=20)
        assert any(PAD in found[0][0] for found in raw)  # CTranslate2 itself does produce PAD
        got = theirs.translate_ids(ids)
        assert all(PAD not in row for row in got)
        assert sum(x == y for x, y in zip(got, ours.translate_ids(ids), strict=True)) >= 0.95 * len(ids)


def test_our_weights_are_read_only_when_ours_decodes(ct2_module, trained_dir, test_lines):
    """The CTranslate2 engine decodes from its own conversion: our model is built and its
    weights read only for what runs on ours (here constraints), and then equal the run's."""
    from transformer.model_dir import load_model_dir

    load_translator(trained_dir, engine="ctranslate2", precision="fp32")  # converted (reads ours)
    # each sentence its own limit: those of a batch that ran past theirs are searched again by it
    theirs = load_translator(trained_dir, engine="ctranslate2", precision="fp32", beam_size=1,
                             max_len_a=0.5, max_len_b=1)
    assert not theirs.loaded.weights_read  # the conversion found in the cache
    theirs.translate(test_lines.src[:20])
    assert not theirs.loaded.weights_read
    theirs.translate(test_lines.src[:2], prefixes=["eins", "zwei"])  # CTranslate2's too
    assert not theirs.loaded.weights_read
    theirs.translate(test_lines.src[:2], constraints=[["hundert"], []])
    assert theirs.loaded.weights_read
    want = load_model_dir(trained_dir).model.state_dict()
    got = theirs.model.state_dict()
    assert all(torch.equal(got[name], tensor) for name, tensor in want.items())


def test_auto_on_a_measured_width_decodes_as_the_rule_says_in_float32(ct2_module, tokenizer,
                                                                      tmp_path, monkeypatch):
    """A model of the measured widths (d_model 128), precision and engine left to auto, on a
    machine whose bf16 probe finds ours faster in bf16: the engine is the rule's for this
    machine, and where it is CTranslate2 the precision is float32 (the bf16 probe times ours;
    CTranslate2 has no bf16 on a CPU)."""
    from transformer import precision
    from transformer.hardware import detect_cpu
    from transformer.inference.engine_choice import auto_engine

    monkeypatch.setattr(precision, "probe_decoding", lambda *a, **k: precision.Probe(
        fp32_ms=2.0, bf16_ms=1.0, tokens=1, backward=False))

    torch.manual_seed(0)
    model = Transformer(ModelConfig.tiny(tokenizer.vocab_size, d_model=128, d_ff=256, num_heads=4,
                                         dropout=0.0, max_len=32))
    save_model_dir(tmp_path / "d128", model, config={"task": "translation"},
                   src_tokenizer=tokenizer, tgt_tokenizer=tokenizer)
    translator = load_translator(tmp_path / "d128", beam_size=1)
    expected, _ = auto_engine(detect_cpu(), precision="fp32", d_model=128, device="cpu",
                              ctranslate2_types=engines.ctranslate2_compute_types())
    assert translator.engine == expected
    if expected == "ctranslate2":
        assert translator.precision == "fp32"
    asked = load_translator(tmp_path / "d128", engine="ctranslate2", beam_size=1)
    assert (asked.engine, asked.precision) == ("ctranslate2", "fp32")
    ours = load_translator(tmp_path / "d128", engine="torch", beam_size=1)
    assert ours.precision == ("bf16" if detect_cpu().native_bf16 else "fp32")


def test_constraints_run_on_ours(ct2_module, trained_dir, test_lines):
    """CTranslate2 is not given constraints: a batch with some decodes on ours, as ours does."""
    ours = load_translator(trained_dir, engine="torch", precision="fp32", beam_size=3)
    theirs = load_translator(trained_dir, engine="ctranslate2", precision="fp32", beam_size=3)
    phrases = [["hundert"] if i % 2 == 0 else [] for i in range(12)]
    got = theirs.translate(test_lines.src[:12], constraints=phrases)
    assert [t.text for t in got] == [t.text for t in ours.translate(test_lines.src[:12], constraints=phrases)]
    assert all("hundert" in t.text for t, own in zip(got, phrases, strict=True) if own)


def test_length_limit_rounds_up_to_its_step():
    """floor(a * n + b), then up to a multiple of 16: sentences of similar length share a limit."""
    from transformer.config.decoding import MAX_LEN_STEP, length_limit

    assert MAX_LEN_STEP == 16
    assert [length_limit(n, 1.5, 10) for n in (0, 3, 4, 14, 15, 25)] == [16, 16, 16, 32, 32, 48]
    assert [length_limit(0, 0.0, b) for b in (-3, 0, 1, 16, 17)] == [0, 0, 16, 16, 32]


def test_length_limits_equal_the_decoders_own():
    """The engine's limits in plain Python equal output_limits over the padded batch, for random
    sources (PAD inside included) and every kind of length rule."""
    import random

    from transformer.config.decoding import DecodeOptions
    from transformer.decoding.bounds import output_limits

    rng = random.Random(0)
    for _ in range(300):
        sources = [[rng.choice([PAD, 5, 6, 7]) for _ in range(rng.randint(0, 30))]
                   for _ in range(rng.randint(1, 6))]
        options = DecodeOptions(beam_size=1, max_len_a=rng.choice([None, 0.0, 0.5, 1.3, 2.0]),
                                max_len_b=rng.randint(0, 12), max_len=rng.choice([None, 1, 9, 40]))
        model_max_len = rng.choice([8, 24, 64])
        want = output_limits(pad_rows(sources, pad_id=PAD), pad_id=PAD, max_len=options.max_len,
                             max_len_a=options.max_len_a, max_len_b=options.max_len_b,
                             model_max_len=model_max_len).tolist()
        assert engines.length_limits(sources, options, pad_id=PAD,
                                     model_max_len=model_max_len) == want


@pytest.mark.parametrize("engine", ["torch", "ctranslate2"])
def test_greedy_without_log_probabilities_skips_them_and_translates_the_same(
        ct2_module, trained_dir, test_lines, engine, monkeypatch):
    """translate(log_probs=False) (plain-text output): the same translations, no log_prob, and
    the search is asked for no scores (ours: no hypotheses; CTranslate2: return_scores off)."""
    scored = load_translator(trained_dir, engine=engine, precision="fp32", beam_size=1)
    plain = load_translator(trained_dir, engine=engine, precision="fp32", beam_size=1)
    want = scored.translate(test_lines.src[:40])
    asked: list[bool] = []
    if engine == "torch":
        real = greedy_module.greedy_decode  # imported by the translator where ours decodes
        monkeypatch.setattr(greedy_module, "greedy_decode", lambda *a, **k: (
            asked.append(bool(k.get("hypotheses"))), real(*a, **k))[1])
    else:
        real_search = plain._search
        monkeypatch.setattr(plain, "_search", lambda *a, **k: (
            asked.append(bool(k.get("scores"))), real_search(*a, **k))[1])
    got = plain.translate(test_lines.src[:40], log_probs=False)
    assert [t.text for t in got] == [t.text for t in want]
    assert all(t.log_prob is None for t in got) and all(t.log_prob is not None for t in want if t.text)
    assert asked and not any(asked)


# --- the options CTranslate2 is given ---------------------------------------------------------


@pytest.mark.parametrize("options", [dict(min_length=12), dict(repetition_penalty=1.5),
                                     dict(no_repeat_ngram=2), dict(forbid=("acht", "neun")),
                                     dict(min_length=9, forbid=("sieben", "drei"))])
def test_greedy_text_options_run_on_ctranslate2_as_on_ours(converted, trained_dir, test_lines,
                                                           options, monkeypatch):
    """A greedy call without log-probabilities: CTranslate2 is given the guards, the least
    length and the forbidden phrases, and translates as ours (which never runs)."""
    ours = load_translator(trained_dir, engine="torch", precision="fp32", beam_size=1, **options)
    theirs = load_translator(trained_dir, engine="ctranslate2", precision="fp32", beam_size=1,
                             **options)
    assert theirs.engine == "ctranslate2"
    plain = ours.translate(test_lines.src[:30], options=ours.record.decode_options(beam_size=1),
                           log_probs=False)
    want = ours.translate(test_lines.src[:30], log_probs=False)
    assert [t.text for t in want] != [t.text for t in plain]  # the option does change the output
    monkeypatch.setattr(translator_module.Translator, "_decode", _not_ours)
    got = theirs.translate(test_lines.src[:30], log_probs=False)
    assert [t.text for t in got] == [t.text for t in want]
    assert not theirs.loaded.weights_read


def test_with_log_probabilities_or_beams_those_options_run_on_ours(ct2_module, trained_dir,
                                                                  test_lines, caplog):
    """CTranslate2 renormalises after its logits processors, where ours keeps the model's own
    log-probabilities and ranks beams by them: a call that wants log-probabilities runs on ours
    (logged once), and a beam search with a guard is ours from the start."""
    ours = load_translator(trained_dir, engine="torch", precision="fp32", beam_size=1, min_length=9)
    theirs = load_translator(trained_dir, engine="ctranslate2", precision="fp32", beam_size=1,
                             min_length=9)
    with caplog.at_level(logging.INFO, logger="transformer.inference.engines"):
        got = theirs.translate(test_lines.src[:10])
        theirs.translate(test_lines.src[:10])
    want = ours.translate(test_lines.src[:10])
    assert [(t.text, t.log_prob) for t in got] == [(t.text, t.log_prob) for t in want]
    lines = [r.message for r in caplog.records if "min_length" in r.message]
    assert len(lines) == 1 and "log-probabilities" in lines[0]
    beam = load_translator(trained_dir, engine="ctranslate2", precision="fp32", beam_size=3,
                           repetition_penalty=1.3)
    assert beam.engine == "torch"


def test_the_engine_is_chosen_once_and_the_probe_times_the_engine_that_decodes(
        ct2_module, trained_dir, monkeypatch):
    """On a machine with native bf16 whose probe favours bf16, and a rule that picks CTranslate2:
    --sampling --engine auto --precision auto runs on ours, in the bf16 that --engine torch
    --precision auto takes (the probe ran for ours); without sampling, CTranslate2 in fp32."""
    import dataclasses

    from transformer import hardware, precision

    real = hardware.detect()
    cpu = dataclasses.replace(real.cpu, flags=(*real.cpu.flags, "avx512_bf16"), mkldnn_bf16=True,
                              arch="x86_64", capability="AVX512")
    assert cpu.native_bf16
    monkeypatch.setattr(hardware, "detect", lambda: dataclasses.replace(real, cpu=cpu))
    monkeypatch.setattr(precision, "probe_decoding", lambda *a, **k: precision.Probe(
        fp32_ms=2.0, bf16_ms=1.0, tokens=1, backward=False))
    monkeypatch.setattr(engines, "auto_engine", lambda *a, **k: ("ctranslate2", "measured faster"))
    torch_auto = load_translator(trained_dir, engine="torch", precision="auto", sampling=True, seed=1)
    sampled = load_translator(trained_dir, engine="auto", precision="auto", sampling=True, seed=1)
    assert (torch_auto.engine, torch_auto.precision) == ("torch", "bf16")
    assert (sampled.engine, sampled.precision) == ("torch", "bf16")
    plain = load_translator(trained_dir, engine="auto", precision="auto", beam_size=1)
    assert (plain.engine, plain.precision) == ("ctranslate2", "fp32")
