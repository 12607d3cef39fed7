"""``train --init-from RUN_DIR`` and ``classify train --init-from RUN_DIR``: fine-tuning starts
from the run's weights and tokenizer (its first loss is the run's own on the same batch), keeps its
shape (a flag that contradicts it is one line, exit 2, nothing written), records the origin, and a
classifier's encoder starts as the translation model's."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from transformer.cli import main
from transformer.model_dir import load_model_dir
from transformer.training.loss import label_smoothed_cross_entropy
from transformer.training.translation_task import TranslationTask

# the flags of a fine-tuning run: no shape, no tokenizer (they are the origin's)
RUN = ["--max-tokens", "256", "--bleu-sample", "8", "--threads", "1", "--no-progress",
       "--precision", "fp32", "--log-every", "1"]


def fine_tune(cli, number_files, origin, out, *extra: str) -> list[str]:
    return ["train", *cli.data_flags(number_files), "--init-from", str(origin), *RUN,
            "--out", str(out), *extra]


def test_the_first_loss_is_the_runs_own_on_the_same_batch(cli, trained_run, number_files,
                                                          tmp_path, monkeypatch):
    """Dropout 0 makes the training forward the evaluation forward, so the first update's loss
    is exactly what the origin model (loaded on its own, in eval mode) gives that batch."""
    seen = []
    loss = TranslationTask.loss

    def record(self, model, batch):
        value = loss(self, model, batch)
        seen.append((batch, value.detach().clone(), self.label_smoothing))
        return value

    monkeypatch.setattr(TranslationTask, "loss", record)
    assert main(fine_tune(cli, number_files, trained_run, tmp_path / "ft", "--dropout", "0",
                          "--max-steps", "1", "--eval-every", "1")) == 0
    batch, first, smoothing = seen[0]
    origin = load_model_dir(trained_run).model
    with torch.no_grad():
        expected = label_smoothed_cross_entropy(origin(batch.src, batch.tgt_in), batch.tgt_out,
                                                smoothing=smoothing, ignore_index=0)
    torch.testing.assert_close(first, expected, rtol=1e-6, atol=0)
    # and a random start would not have matched: the run's model is not the initial one
    fresh = load_model_dir(tmp_path / "ft")
    assert fresh.record.model == load_model_dir(trained_run).record.model.replace(dropout=0.0)


def test_fine_tuning_on_the_validation_split_starts_at_the_runs_validation_loss(
        cli, trained_run, number_files, tmp_path):
    """The issue's check that fine-tuning continues: trained on the origin's validation split (one
    batch, dropout 0), the first logged loss is the origin's recorded best validation loss."""
    out = tmp_path / "ft"
    assert main(["train", "--train-src", number_files["valid_src"], "--train-tgt",
                 number_files["valid_tgt"], "--init-from", str(trained_run), *RUN, "--dropout",
                 "0", "--max-tokens", "4096", "--max-steps", "1", "--out", str(out)]) == 0
    first = json.loads((out / "metrics.jsonl").read_text().splitlines()[0])
    assert (first["kind"], first["step"]) == ("train", 1)
    recorded = json.loads((trained_run / "config.json").read_text())["best_validation"]["loss"]
    assert first["loss"] == pytest.approx(recorded, rel=1e-9)


def test_the_run_keeps_the_origins_tokenizer_and_records_it(cli, trained_run, number_files,
                                                              tmp_path):
    out = tmp_path / "ft"
    assert main(fine_tune(cli, number_files, trained_run, out, "--max-steps", "2",
                          "--eval-every", "2", "--seed", "7")) == 0
    for name in sorted(p.name for p in (trained_run / "tokenizer").iterdir()):
        assert (out / "tokenizer" / name).read_bytes() == (trained_run / "tokenizer" / name).read_bytes()
    config = json.loads((out / "config.json").read_text())
    origin = json.loads((trained_run / "config.json").read_text())
    assert config["model"] == origin["model"]
    assert config["init_from"]["path"] == str(trained_run.resolve())
    import hashlib

    digest = hashlib.sha256((trained_run / "model.safetensors").read_bytes()).hexdigest()
    assert config["init_from"]["sha256"] == digest
    assert config["training"]["seed"] == 7  # the run's own settings are taken
    assert config["tokenizer"] == origin["tokenizer"]


def test_a_fine_tuned_run_serves_as_an_origin_and_a_precision_auto_resolves(
        cli, trained_run, number_files, tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    assert main(fine_tune(cli, number_files, trained_run, first, "--max-steps", "1",
                          "--eval-every", "1")) == 0
    args = fine_tune(cli, number_files, first, second, "--max-steps", "1", "--eval-every", "1")
    args[args.index("--precision") + 1] = "auto"
    assert main(args) == 0
    config = json.loads((second / "config.json").read_text())
    assert config["precision"]["requested"] == "auto"
    assert config["init_from"]["init_from"]["path"] == str(trained_run.resolve())


def test_the_languages_are_the_origins_unless_given(trained_run, tmp_path):
    from transformer.training.init_from import translation_config_from

    origin = tmp_path / "de-en"
    shutil.copytree(trained_run, origin)
    config = json.loads((origin / "config.json").read_text())
    config["training"].update(src_lang="de", tgt_lang="en")
    (origin / "config.json").write_text(json.dumps(config))
    cfg = translation_config_from(origin)
    assert (cfg.src_lang, cfg.tgt_lang) == ("de", "en")
    cfg = translation_config_from(origin, overrides={"src_lang": "fr"})
    assert (cfg.src_lang, cfg.tgt_lang) == ("fr", "en")


@pytest.mark.parametrize("flags, named, stored", [
    (["--d-model", "32"], "--d-model 32", "d_model 16"),
    (["--layers", "2"], "--layers 2", "num_encoder_layers 1"),
    (["--decoder-layers", "3"], "--decoder-layers 3", "num_decoder_layers 1"),
    (["--preset", "small"], "--preset small", "16"),
    (["--vocab-size", "100"], "--vocab-size 100", "60 pieces"),
    (["--separate"], "--separate", "joint"),
    (["--tokenizer", "unigram"], "--tokenizer unigram", "bpe"),
    (["--max-len", "64"], "--max-len 64", "max_len"),
    (["--tie-embeddings"], "--tie-embeddings", "tie_embeddings False"),
])
def test_a_flag_that_contradicts_the_origin_is_one_line(cli, trained_run, number_files, tmp_path,
                                                        capsys, flags, named, stored):
    out = tmp_path / "ft"
    assert main(fine_tune(cli, number_files, trained_run, out, "--max-steps", "1", *flags)) == 2
    err = cli.one_line_error(capsys)
    assert named in err and stored in err and str(trained_run) in err
    assert not out.exists()


def test_flags_that_agree_with_the_origin_are_taken(cli, trained_run, number_files, tmp_path):
    out = tmp_path / "ft"
    assert main(fine_tune(cli, number_files, trained_run, out, "--max-steps", "1",
                          "--eval-every", "1", "--d-model", "16", "--layers", "1",
                          "--vocab-size", "60", "--joint", "--dropout", "0.3")) == 0
    assert json.loads((out / "config.json").read_text())["model"]["dropout"] == 0.3


def test_bad_origins_are_one_line(cli, trained_run, number_files, tmp_path, capsys):
    classifier = tmp_path / "classifier"
    shutil.copytree(trained_run, classifier)
    config = json.loads((classifier / "config.json").read_text())
    (classifier / "config.json").write_text(json.dumps({
        **config, "task": "classification", "classifier": {"num_labels": 2}, "labels": ["a", "b"]}))
    cases = [(tmp_path / "nowhere", "no such model directory"),
             (classifier, "a classification model")]
    for origin, message in cases:
        assert main(fine_tune(cli, number_files, origin, tmp_path / "ft", "--max-steps", "1")) == 2
        err = cli.one_line_error(capsys)
        assert message in err and str(origin) in err
    same = cli.copy_run(trained_run, tmp_path)
    assert main(fine_tune(cli, number_files, same, same, "--max-steps", "1", "--overwrite")) == 2
    assert "same directory" in cli.one_line_error(capsys)
    assert main(["train", "--resume", str(same), "--init-from", str(trained_run)]) == 2
    assert "--init-from cannot change" in cli.one_line_error(capsys)
    assert not (tmp_path / "ft").exists()


def test_resume_auto_continues_a_fine_tuned_run_and_refuses_another_origin(
        cli, trained_run, number_files, tmp_path, capsys):
    out = tmp_path / "ft"
    args = fine_tune(cli, number_files, trained_run, out, "--eval-every", "2", "--resume", "auto")
    assert main([*args, "--max-steps", "2"]) == 0
    assert main([*args, "--max-steps", "4"]) == 0
    steps = [json.loads(line)["step"] for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert steps[0] == 1 and max(steps) == 4 and steps.count(1) == 1  # continued, not restarted
    other = cli.copy_run(trained_run, tmp_path)
    again = fine_tune(cli, number_files, other, out, "--eval-every", "2", "--resume", "auto")
    assert main([*again, "--max-steps", "6"]) == 2
    assert "started from" in cli.one_line_error(capsys)


# --- classify train --init-from ----------------------------------------------------------------


def _texts(cli, tmp_path) -> str:
    """A labelled file of number words: 'small' below 1000, 'large' from it."""
    import random

    from transformer.data.builtin_task import english_number

    rng = random.Random(0)
    rows = [(english_number(n), "small" if n < 1000 else "large")
            for n in (rng.randrange(1, 5000) for _ in range(80))]
    path = tmp_path / "numbers.tsv"
    path.write_text("text\tlabel\n" + "".join(f"{t}\t{lab}\n" for t, lab in rows), encoding="utf-8")
    return str(path)


CLASSIFY = ["--max-steps", "2", "--eval-every", "1", "--threads", "1", "--precision", "fp32",
            "--json"]


def test_classify_takes_the_source_tokenizer_and_records_the_origin(cli, trained_run, tmp_path,
                                                                   capsys):
    out = tmp_path / "clf"
    assert main(["classify", "train", "--train", _texts(cli, tmp_path), "--init-from",
                 str(trained_run), "--out", str(out), *CLASSIFY]) == 0
    summary = json.loads(capsys.readouterr().out)
    origin = load_model_dir(trained_run)
    model = load_model_dir(out)
    assert summary["vocab_size"] == origin.src_tokenizer.vocab_size
    assert model.src_tokenizer == origin.src_tokenizer
    assert model.record.init_from["path"] == str(trained_run.resolve())
    shape = ("d_model", "num_heads", "d_ff", "num_encoder_layers", "activation")
    assert ({k: getattr(model.record.model, k) for k in shape}
            == {k: getattr(origin.record.model, k) for k in shape})
    assert model.record.model.num_decoder_layers == 0


@pytest.mark.parametrize("flags, named, stored", [
    (["--d-model", "32"], "--d-model 32", "d_model 16"),
    (["--layers", "2"], "--layers 2", "num_encoder_layers 1"),
    (["--preset", "nsmc-cpu"], "--preset nsmc-cpu", "16"),
    (["--vocab-size", "300"], "--vocab-size 300", "60 pieces"),
])
def test_classify_refuses_a_flag_that_contradicts_the_encoder(cli, trained_run, tmp_path, capsys,
                                                              flags, named, stored):
    out = tmp_path / "clf"
    assert main(["classify", "train", "--train", _texts(cli, tmp_path), "--init-from",
                 str(trained_run), "--out", str(out), *CLASSIFY, *flags]) == 2
    err = cli.one_line_error(capsys)
    assert named in err and stored in err
    assert not out.exists()


def test_classify_refuses_a_classifier_as_origin(cli, trained_run, tmp_path, capsys):
    first = tmp_path / "clf"
    assert main(["classify", "train", "--train", _texts(cli, tmp_path), "--init-from",
                 str(trained_run), "--out", str(first), *CLASSIFY]) == 0
    capsys.readouterr()
    assert main(["classify", "train", "--train", _texts(cli, tmp_path), "--init-from", str(first),
                 "--out", str(tmp_path / "again"), *CLASSIFY]) == 2
    err = cli.one_line_error(capsys)
    assert "a classification model" in err and "translation model" in err


def test_the_classifier_encoder_starts_as_the_translation_encoder(trained_run):
    """Every embedding and encoder tensor equal to the origin's; the head is new."""
    from transformer.model import TransformerClassifier
    from transformer.training.init_from import classifier_config_from, init_encoder, read_origin

    origin = read_origin(trained_run)
    cfg = classifier_config_from(origin, defaults="tiny")
    assert cfg.model.max_len == 64  # the preset's: sinusoids allow any length
    torch.manual_seed(1)
    clf = TransformerClassifier(cfg.model_config(src_vocab_size=origin.src_tokenizer.vocab_size),
                                num_labels=3, pooling="cls")
    before = {k: v.clone() for k, v in clf.state_dict().items()}
    copied = init_encoder(clf, origin)
    theirs = load_model_dir(trained_run).model.state_dict()
    ours = clf.state_dict()
    assert "embed.token.weight" in copied and any(k.startswith("encoder.layers.0.") for k in copied)
    for name in copied:
        source = name.replace("embed.", "src_embed.", 1) if name.startswith("embed.") else name
        assert torch.equal(ours[name], theirs[source]), name
    for name in ("head.weight", "head.bias", "cls"):
        assert name not in copied and torch.equal(ours[name], before[name])


def test_a_shallower_classifier_copies_the_first_layers_and_a_deeper_one_is_refused(
        tmp_path, number_tokenizer_run):
    from transformer.errors import InputError
    from transformer.model import TransformerClassifier
    from transformer.training.init_from import classifier_config_from, init_encoder, read_origin

    origin = read_origin(number_tokenizer_run)
    reference = load_model_dir(number_tokenizer_run).model.state_dict()
    cfg = classifier_config_from(origin, defaults="tiny", overrides={"model.layers": 1,
                                                                    "model.max_len": 16})
    clf = TransformerClassifier(cfg.model_config(src_vocab_size=origin.src_tokenizer.vocab_size),
                                num_labels=2)
    copied = init_encoder(clf, origin)
    assert not any(k.startswith("encoder.layers.1.") for k in copied)
    for name in copied:
        source = name.replace("embed.", "src_embed.", 1) if name.startswith("embed.") else name
        assert torch.equal(clf.state_dict()[name], reference[source][: clf.state_dict()[name].shape[0]])
    assert clf.state_dict()["embed.position.embedding.weight"].shape[0] == 16
    assert classifier_config_from(origin, defaults="tiny").model.max_len == 48  # not tiny's 64
    with pytest.raises(InputError, match="num_encoder_layers 2"):
        classifier_config_from(origin, defaults="tiny", overrides={"model.layers": 3})
    with pytest.raises(InputError, match="max_len 48"):
        classifier_config_from(origin, defaults="tiny", overrides={"model.max_len": 64})
    deeper = TransformerClassifier(cfg.model_config(src_vocab_size=origin.src_tokenizer.vocab_size)
                                   .replace(num_encoder_layers=3), num_labels=2)
    with pytest.raises(InputError, match="more than"):
        init_encoder(deeper, origin)


@pytest.fixture
def number_tokenizer_run(cli, tokenizer, tmp_path):
    """A random two-layer model with learned positions (max_len 48) and the number tokenizer."""
    return cli.make_run(tmp_path / "learned", tokenizer, num_encoder_layers=2,
                        positional="learned")


def test_the_python_api_refuses_a_configuration_of_another_shape(trained_run, number_files,
                                                                tmp_path):
    """``train_translation(cfg, init_from=...)`` with a cfg not built by translation_config_from:
    the shapes are compared before any weight is loaded or file written."""
    from transformer.config import translation_config
    from transformer.errors import InputError
    from transformer.training.init_from import translation_config_from
    from transformer.training.train_translation import train_translation

    files = {k: number_files[k] for k in ("train_src", "train_tgt")}
    cfg = translation_config("tiny", {**files, "max_steps": 1, "precision": "fp32"})
    with pytest.raises(InputError, match=f"d_model 32 contradicts {trained_run}: its model has 16"):
        train_translation(cfg, run_dir=tmp_path / "bad", init_from=trained_run)
    assert not (tmp_path / "bad").exists()
    cfg = translation_config_from(trained_run, overrides={**files, "max_steps": 1,
                                                          "precision": "fp32", "eval_every": 1})
    summary = train_translation(cfg, run_dir=tmp_path / "good", init_from=trained_run)
    assert summary["steps"] == 1
