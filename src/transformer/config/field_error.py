"""A bad configuration value, naming its field: what the run configurations raise (what
:class:`~transformer.config.decoding.OptionError` is for decoding options).

The message is written as parts, the field names marked as such::

    raise ConfigError(Field("epochs"), f" must be at least 1, got {epochs}")
    raise ConfigError("give both ", Field("valid_src"), " and ", Field("valid_tgt"), ", or neither")

``str()`` reads with the fields' own names (``epochs must be at least 1, got 0``);
:meth:`ConfigError.named` puts other names in their place (the command line's flags), so nothing
guesses which words of a message are fields. A :class:`ChoiceError` also lists its choices and
the closest one.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence


class Field(str):
    """A configuration field's name inside a :class:`ConfigError`'s message (``model.d_model`` for
    a field of the nested model)."""


class ConfigError(ValueError):
    """A bad configuration value or combination; ``parts``: its one-line message, the field names
    as :class:`Field`."""

    def __init__(self, *parts: str) -> None:
        super().__init__("".join(parts))
        self.parts = parts

    @property
    def fields(self) -> tuple[str, ...]:
        """The fields the message names, in order."""
        return tuple(str(part) for part in self.parts if isinstance(part, Field))

    def named(self, names: Mapping[str, str]) -> str:
        """The message with each field as ``names`` calls it (a field of a nested section, such
        as ``model.d_model``, by its own name when only that is in ``names``); a flag's value
        follows it as on a command line (``--d-model 30`` for ``d_model=30``)."""
        out = []
        for i, part in enumerate(self.parts):
            if isinstance(part, Field):
                out.append(_name(part, names))
            elif i and isinstance(self.parts[i - 1], Field) and part.startswith("=") \
                    and out[-1].startswith("--"):
                out.append(" " + part[1:])
            else:
                out.append(part)
        return "".join(out)


def _name(field: str, names: Mapping[str, str]) -> str:
    return names.get(field) or names.get(field.rpartition(".")[2]) or field


class ChoiceError(ConfigError):
    """A value outside its field's closed set of ``choices``."""

    def __init__(self, field: str, value: object, choices: Sequence[str]) -> None:
        super().__init__(Field(field), f" must be one of {tuple(choices)}, got {value!r}")
        self.value = value
        self.choices = tuple(choices)

    def named(self, names: Mapping[str, str]) -> str:
        """The choices in one line, with the closest to the value when one is close."""
        close = difflib.get_close_matches(str(self.value), [str(c) for c in self.choices], n=1)
        return (f"{_name(self.fields[0], names)} must be one of {', '.join(self.choices)}, got "
                f"{self.value!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
