"""Help that is true: every flag a verb's help names is a flag of that verb (or a listed exception),
and every closed flag shows its choices."""

from __future__ import annotations

import argparse
import re
import shlex

import pytest

from transformer.cli import build_parser

FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")

# (verb, flag): why a help text may name a flag the verb does not have
ELSEWHERE = {
    ("average", "--average-last"): "names train's flag as such: (train --average-last)",
    ("train", "--nproc-per-node"): "torchrun's flag, in the example of a distributed run",
    ("classify train", "--nproc-per-node"): "torchrun's flag, in the example of a distributed run",
    ("config show", "--preset"): "names the command it shows: train --preset PRESET FLAGS",
    ("config show", "--d-model"): "train's flag, in the example (config show passes it to train)",
}


def _parsers() -> dict[str, argparse.ArgumentParser]:
    """Every verb's parser by its command (``classify train``), found through the subparsers."""
    found: dict[str, argparse.ArgumentParser] = {}

    def walk(parser: argparse.ArgumentParser, name: str) -> None:
        found[name] = parser
        for action in parser._actions:  # noqa: SLF001
            if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
                for verb, sub in action.choices.items():
                    walk(sub, f"{name} {verb}".strip())

    walk(build_parser(), "")
    return found


PARSERS = _parsers()


def _texts(parser: argparse.ArgumentParser) -> list[str]:
    texts = [parser.description or "", parser.epilog or ""]
    texts += [group.description or "" for group in parser._action_groups]  # noqa: SLF001
    return texts + [action.help or "" for action in parser._actions  # noqa: SLF001
                    if action.help is not argparse.SUPPRESS]


@pytest.mark.parametrize("verb", sorted(name for name in PARSERS if name))
def test_help_names_only_the_verbs_own_flags(verb):
    parser = PARSERS[verb]
    named = {flag for text in _texts(parser) for flag in FLAG.findall(text)}
    foreign = sorted(flag for flag in named - set(parser._option_string_actions)  # noqa: SLF001
                     if (verb, flag) not in ELSEWHERE)
    assert not foreign, f"`transformer {verb} --help` names flags it does not have: {foreign}"


CLOSED = {
    "train": ("--precision", "--schedule", "--metric", "--on-long", "--tokenizer", "--data",
              "--preset", "--activation", "--positional"),
    "classify train": ("--precision", "--schedule", "--tokenizer", "--pooling", "--pos-weight",
                       "--data", "--preset", "--format"),
    "memory": ("--preset", "--precision", "--pooling", "--device"),
}


@pytest.mark.parametrize("verb, flag", [(verb, flag) for verb, flags in CLOSED.items()
                                        for flag in flags])
def test_a_closed_flag_shows_its_choices(verb, flag):
    parser = PARSERS[verb]
    action = parser._option_string_actions[flag]  # noqa: SLF001
    assert action.choices, f"{verb} {flag} takes any value"
    shown = "{" + ",".join(map(str, action.choices)) + "}"
    assert f"{flag} {shown}" in parser.format_help()


def test_every_choice_flag_shows_its_choices():
    for verb, parser in PARSERS.items():
        text = parser.format_help()
        for action in parser._actions:  # noqa: SLF001
            if action.choices and action.option_strings and action.metavar is None:
                shown = "{" + ",".join(map(str, action.choices)) + "}"
                assert shown in text, (verb, action.option_strings)


def test_classify_train_gives_each_preset_its_own_time():
    text = PARSERS["classify train"].description
    assert "tiny (a smoke test" in text and "each 30 minutes" not in text


WORKFLOWS = {"train": ("demo", "prepare", "train", "classify", "average", "memory", "config"),
             "use": ("translate", "evaluate", "score"), "look inside": ("attention", "plot"),
             "serve": ("serve",), "convert": ("import", "export")}


def test_top_level_help_lists_the_verbs_by_workflow_with_an_example_each():
    parser = PARSERS[""]
    verbs = list(next(action for action in parser._actions  # noqa: SLF001
                      if isinstance(action, argparse._SubParsersAction)).choices)  # noqa: SLF001
    in_order = [verb for group in WORKFLOWS.values() for verb in group]
    assert verbs[:len(in_order)] == in_order and set(verbs) - set(in_order) == {"version"}
    text = parser.format_help()
    examples = re.findall(r"^  (\S+(?: \S+)?) +(transformer .+)$", text, re.MULTILINE)
    assert [group for group, _ in examples] == list(WORKFLOWS)
    for group, example in examples:
        args = parser.parse_args(shlex.split(example)[1:])  # a usage error exits: the test fails
        assert args.verb in WORKFLOWS[group], example


# A flag that several verbs share has one default and one meaning (its help text): the signature
# most of them share. A verb may differ only for a reason listed here, keyed (flag, verb).
PRESET_OR_RUN = "a training verb's None is 'the preset's' (which the verb resolves); elsewhere a value"
DIFFERS = {
    ("--threads", "demo"): "the demo's model is too small to gain from more, and a shared CPU hurts",
    ("--threads", "train"): "adds what a --resume does with the count",
    ("--device", "memory"): "the device an estimate is for (cpu or cuda only), not one to run on",
    ("--precision", "memory"): "an estimate is for one precision; auto is decided by a probe",
    ("--precision", "train"): PRESET_OR_RUN,
    ("--precision", "classify train"): PRESET_OR_RUN,
    ("--precision", "serve"): "the same choices and default as translate, worded for a server",
    ("--model", "translate"): "repeatable: several runs decode together as an ensemble",
    ("--model", "evaluate"): "repeatable: several runs decode together as an ensemble",
    ("--json", "translate"): "translate prints one JSON object per input line",
    ("--format", "translate"): "the input's markup (text or HTML), where classify's is a file format",
    ("--json", "score"): "score prints one JSON object per input line, as translate",
    ("--precision", "score"): "translate's choices; int8, a decoding path, scores in float32",
    ("--max-tokens", "score"): "a scoring batch's padded positions, not a preset's training batch",
    ("--batch-size", "memory"): "rows of the batch an estimate is for",
    ("--batch-tokens", "serve"): "the server's dynamic batch, not a training batch",
    ("--d-model", "plot positional"): "the width of the plotted encoding, no model",
    ("--max-len", "translate"): "in a decoding verb: the longest translation",
    ("--max-len", "evaluate"): "in a decoding verb: the longest translation",
    ("--max-len", "attention"): "in a decoding verb: the longest translation",
    ("--max-len", "plot positional"): "the positions plotted, no model",
    ("--seed", "translate"): "in a decoding verb: the seed of sampling's draws, not of training",
    ("--seed", "evaluate"): "in a decoding verb: the seed of sampling's draws, not of training",
    ("--data", "classify train"): "classification corpora, not translation ones",
    ("--data", "classify evaluate"): "classification corpora, not translation ones",
    ("--data", "evaluate"): "defaults to the corpus the run trained on",
    ("--data-dir", "classify train"): "refused in one line: prepare makes parallel text, no labels",
    ("--resume", "classify train"): "a run directory only (no auto); names the flags that may change",
    ("--resume", "translate"): "continues a file's translations (a switch), not a training run",
    ("--output", "classify predict"): "the predictions of --file, where translate's are translations",
    ("--resume", "classify predict"): "continues a file's predictions, as translate's its translations",
    ("--file", "classify evaluate"): "a labelled file, where predict reads texts",
    ("--init-from", "classify train"): "takes the encoder only",
    ("--label-column", "classify evaluate"): "defaults to the column the model trained on",
    ("--text-column", "classify evaluate"): "defaults to the column the model trained on",
    ("--label-separator", "classify evaluate"): "defaults to the separator the model trained on",
    ("--label-smoothing", "memory"): "memory reads only a preset's shape; the loss is the paper's",
    ("--pooling", "memory"): "memory reads only a preset's shape; pooling is the paper's mean",
    ("--layers", "classify train"): "a classifier has only an encoder",
    ("--lr", "classify train"): "the classifier's schedules have no noam",
    ("--schedule", "classify train"): "the classifier's own schedules",
    ("--max-steps", "demo"): "the demo's own budget",
    ("--minutes", "demo"): "the demo's own budget",
    ("--max-tokens", "memory"): "a batch size for an estimate, instead of --batch-size",
    ("--model", "serve"): "names the model in requests and repeats",
    ("--model", "export ctranslate2"): "only our own directory converts",
    ("--model", "export huggingface"): "only our own directory converts",
    ("--preset", "classify train"): "the classifier's presets",
    ("--preset", "memory"): "memory estimates every preset of both training verbs",
    ("--split", "classify evaluate"): "the classification corpora's splits",
    ("--src", "evaluate"): "defaults to the run's language",
    ("--tgt", "evaluate"): "defaults to the run's language",
    ("--seed", "prepare"): "prepare's only randomness is the tokenizer's sample",
    ("--tokenizer", "classify train"): "the classifier's presets choose it",
    ("--vocab-size", "memory"): "an estimate's vocabulary",
    ("--vocab-size", "prepare"): "prepare has no preset: the value is its own",
    ("--no-byte-fallback", "prepare"): "prepare has no preset: the value is its own",
    ("--separate", "prepare"): "prepare has no preset: the value is its own",
    ("--tokenizer", "prepare"): "prepare has no preset: the value is its own",
}
# what --out names differs by nature (a run, a picture, a directory): its meaning is the verb's
OWN_MEANING = {"--out", "--train-src", "--train-tgt", "--valid-src", "--valid-tgt"}


def _shared_flags() -> dict[str, dict[str, argparse.Action]]:
    shared: dict[str, dict[str, argparse.Action]] = {}
    for verb, parser in PARSERS.items():
        for action in parser._actions:  # noqa: SLF001
            for flag in action.option_strings:
                if flag.startswith("--") and flag != "--help":
                    shared.setdefault(flag, {})[verb] = action
    return {flag: verbs for flag, verbs in shared.items()
            if len(verbs) > 1 and flag not in OWN_MEANING}


def _signature(action: argparse.Action) -> tuple:
    return (repr(action.default), action.help, repr(action.choices), type(action).__name__)


def test_a_flag_shared_by_verbs_has_one_default_and_meaning_or_a_listed_reason():
    unexplained = []
    for flag, verbs in sorted(_shared_flags().items()):
        counts: dict[tuple, list[str]] = {}
        for verb, action in verbs.items():
            if (flag, verb) not in DIFFERS:
                counts.setdefault(_signature(action), []).append(verb)
        if len(counts) > 1:
            unexplained.append(f"{flag}: " + " / ".join(
                f"{verbs} default {sig[0]} help {sig[1]!r}" for sig, verbs in counts.items()))
    assert not unexplained, "\n".join(unexplained)


def test_every_listed_difference_is_still_a_difference():
    shared = _shared_flags()
    stale = [key for key in DIFFERS if key[0] not in shared or key[1] not in shared[key[0]]]
    assert not stale, f"listed reasons for flags the verbs no longer share: {stale}"


LONG_RUNNING = ("demo", "train", "classify train", "prepare", "translate", "evaluate", "score")


@pytest.mark.parametrize("verb", LONG_RUNNING)
def test_a_long_running_verb_has_the_progress_flags(verb):
    options = PARSERS[verb]._option_string_actions  # noqa: SLF001
    assert "--progress" in options and "--no-progress" in options
    assert options["--progress"].default is None  # default: when stderr is a terminal


@pytest.mark.parametrize("verb", ["classify train", "classify predict", "classify evaluate",
                                  "attention", "serve", "translate", "evaluate", "train", "demo",
                                  "score"])
def test_device_is_auto_in_every_verb_that_runs_a_model(verb):
    assert PARSERS[verb]._option_string_actions["--device"].default == "auto"  # noqa: SLF001


def test_every_default_of_the_presets_points_to_config_show():
    for verb, parser in PARSERS.items():
        for text in _texts(parser):
            if "preset's" in text:
                assert "config show" in text, (verb, text)


@pytest.mark.parametrize("argv, task", [
    (["multi30k-cpu", "--d-model", "256", "--warmup", "100"], "translation"),
    (["nsmc-cpu", "--lr", "1e-4"], "classification"),
    (["tiny", "--data", "nsmc", "--task", "classification"], "classification"),
])
def test_config_show_prints_what_the_training_verb_would_run(capsys, argv, task):
    import json

    from transformer.cli import classify, main, train

    assert main(["config", "show", *argv]) == 0
    shown = json.loads(capsys.readouterr().out)
    flags = [flag for flag in argv[1:] if flag not in ("--task", "classification")]
    verb = ["train"] if task == "translation" else ["classify", "train"]
    args = PARSERS[""].parse_args([*verb, "--preset", argv[0], *flags])
    config = train.config_of(args) if task == "translation" else classify.config_of(args)[0]
    assert shown == {"task": task, "training": json.loads(json.dumps(config.to_dict()))}
    if argv[0] == "multi30k-cpu":  # the flags are applied over the recipe
        assert shown["training"]["model"]["d_model"] == 256 and shown["training"]["warmup"] == 100
        assert shown["training"]["minutes"] == 60


@pytest.mark.parametrize("argv, message", [
    (["multi30k-cpu", "--task", "classification"], "multi30k-cpu is not a classification preset"),
    (["small", "--warmup", "0"], "--warmup must be at least 1"),
    (["small", "--task", "summary"], "--task 'summary': choose from translation, classification"),
])
def test_config_show_refuses_in_one_line(capsys, argv, message):
    from transformer.cli import main

    assert main(["config", "show", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_the_verbs_table_lists_what_each_verb_declares():
    """`transformer --help` lists the verbs from a light table (no verb module imported): its
    names, order and summaries are those the verbs' own parsers declare."""
    from transformer.cli import VERBS

    sub = build_parser()._subparsers._group_actions[0]  # noqa: SLF001
    declared = [(action.dest, action.help) for action in sub._choices_actions]  # noqa: SLF001
    assert declared == [(verb.name, verb.summary) for verb in VERBS]


@pytest.mark.parametrize("argv", [["translate", "--help"], ["-v", "version"], ["nope"], []])
def test_a_command_builds_only_its_own_verbs_parser(argv):
    from transformer.cli import VERBS, verb_in

    parser = build_parser(verb_in(argv) or "")
    sub = parser._subparsers._group_actions[0]  # noqa: SLF001
    built = sorted(name for name, p in sub.choices.items() if len(p._actions) > 0)  # noqa: SLF001
    assert built == sorted({verb_in(argv)} & {verb.name for verb in VERBS})
