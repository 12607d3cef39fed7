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


WORKFLOWS = {"train": ("demo", "prepare", "train", "classify", "average", "memory"),
             "use": ("translate", "evaluate"), "look inside": ("attention", "plot"),
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
