"""``train --subword-sampling ALPHA``: the training side sampled anew each epoch, validation as
without; a run killed and resumed ends as an uninterrupted one, bit for bit; a prepared data
directory is refused in one line."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

from transformer.cli import main
from transformer.data.tokenizer import Tokenizer

sys.path.insert(0, str(Path(__file__).parent))
from test_reliability import end_state, logged_step, start, train_args, wait_for  # noqa: E402


def test_only_the_training_side_is_sampled(number_files):
    from transformer.config.runs import TranslationTrainConfig
    from transformer.data.parallel import read_parallel
    from transformer.training.text_inputs import text_inputs

    splits = {"train": read_parallel(number_files["train_src"], number_files["train_tgt"]),
              "valid": read_parallel(number_files["valid_src"], number_files["valid_tgt"])}
    tok = Tokenizer.train(splits["train"].src + splits["train"].tgt, vocab_size=60, byte_fallback=False,
                          model_type="unigram")

    def inputs(alpha):
        cfg = TranslationTrainConfig(train_src=number_files["train_src"], train_tgt=number_files["train_tgt"],
                                     subword_sampling=alpha, model_type="unigram", max_tokens=256, bleu_sample=5,
                                     max_steps=1)
        return text_inputs(splits, cfg, src_tokenizer=tok, tgt_tokenizer=tok, max_len=48, rank=0,
                           world_size=1, validation=True)

    plain, sampled = inputs(0.0), inputs(0.2)
    assert sampled.bleu_sources == plain.bleu_sources
    assert [b.src.tolist() for b in sampled.valid_batches] == [b.src.tolist() for b in plain.valid_batches]
    assert [b.tgt_out.tolist() for b in sampled.valid_batches] == [b.tgt_out.tolist() for b in plain.valid_batches]
    assert [b.src.tolist() for b in sampled.data.for_epoch(0)] != [b.src.tolist() for b in plain.data.for_epoch(0)]
    assert [b.tgt_out.tolist() for b in sampled.data.for_epoch(1)] != \
        [b.tgt_out.tolist() for b in sampled.data.for_epoch(2)]



def test_a_killed_sampled_run_resumes_to_the_straight_run(cli, number_files, tmp_path):
    args = ("--max-steps", "20", "--subword-sampling", "0.1", "--tokenizer", "unigram")
    straight, plain, run = tmp_path / "straight", tmp_path / "plain", tmp_path / "run"
    assert main(train_args(cli, number_files, straight, *args, eval_every=8)) == 0
    assert main(train_args(cli, number_files, plain, "--max-steps", "20", "--tokenizer", "unigram", eval_every=8)) == 0
    proc = start(train_args(cli, number_files, run, *args, "--save-every", "1", eval_every=8))
    wait_for(lambda: logged_step(run) >= 9, proc)  # past an epoch's end (6 batches an epoch)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=120)
    assert main(["train", "--resume", str(run), "--no-progress"]) == 0
    want = end_state(straight)
    assert_same_state = __import__("helpers").assert_same
    assert_same_state(want, end_state(run))
    assert end_state(plain)["metrics"] != want["metrics"]  # sampling changed what was learnt


def test_a_prepared_directory_is_refused(cli, tmp_path, capsys):
    assert main(["train", "--data-dir", str(tmp_path), *cli.TINY, "--subword-sampling", "0.1", "--tokenizer", "unigram",
                 "--out", str(tmp_path / "run")]) == 2
    assert "--subword-sampling: a prepared --data-dir holds its pairs encoded once" in cli.one_line_error(capsys)


def test_classify_train_samples_the_training_texts_alike_every_run(tmp_path):
    from safetensors.torch import load_file
    from test_classify_resume import classify_args

    def weights(name, *extra):
        assert main(classify_args(tmp_path / name, "--max-steps", "8", "--tokenizer", "unigram", *extra)) == 0
        return load_file(str(tmp_path / name / "checkpoint" / "model.safetensors"))

    first, again = weights("a", "--subword-sampling", "0.2"), weights("b", "--subword-sampling", "0.2")
    plain = weights("plain")
    assert all(first[k].equal(again[k]) for k in first)
    assert not all(first[k].equal(plain[k]) for k in first)
