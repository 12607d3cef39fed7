"""Errors to exit statuses: how the entry runs a verb's handler and reports what it raises.

0 success; 2 bad input (:class:`~transformer.errors.InputError`: one line on stderr, its flags
named as typed); a stopped run's own status (:class:`~transformer.errors.RunStopped`); 1 a failed
write (:class:`~transformer.errors.WriteError`); 130 an interrupt; 0 for a closed pipe (``| head``).
Any other exception is a bug: it propagates with its traceback, and Python exits 1.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from transformer.cli.parser import as_typed
from transformer.errors import InputError, RunStopped, WriteError


def run_handler(args: argparse.Namespace, *, typed: Sequence[str] = (),
                parser: argparse.ArgumentParser | None = None) -> int:
    """The exit status of the parsed verb ``args``: its handler's, or the one its error calls for.
    ``typed`` (the words of the command line) and ``parser`` name an InputError's flags as typed."""
    try:
        return int(args.handler(args) or 0)
    except InputError as err:
        message = str(err) if parser is None else as_typed(str(err), typed, parser)
        print(f"transformer: error: {message}", file=sys.stderr)
        return 2
    except RunStopped as err:  # a signal or a diverged run: the checkpoint on disk is good
        print(f"transformer: {err}", file=sys.stderr)
        return err.exit_status
    except WriteError as err:
        print(f"transformer: error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("transformer: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
