"""What every config section shares: the one error a bad config raises, numbers that are numbers
(never booleans, NaN or infinity), and a base that forbids unknown keys and refuses a field the
chosen setting would ignore."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, Strict

from distillscope.safeyaml import quote


class ConfigError(ValueError):
    """A config file or override is invalid; the message names the field and what is allowed."""


def _not_bool(value: Any) -> Any:
    # YAML reads `true` as a bool and pydantic would read it as 1.0; a number must be a number.
    if isinstance(value, bool):
        raise ValueError("must be a number, not a boolean")
    return value


#: Integers are strict (``optim.steps: true`` is an error, not 1); floats accept numeric strings
#: (YAML 1.1 reads ``5e-5`` as a string) but never booleans, NaN or infinity.
Int = Annotated[int, Strict()]
Float = Annotated[float, BeforeValidator(_not_bool), Field(allow_inf_nan=False)]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    def _ignored(self, section: str, reads: dict[str, bool], setting: str) -> None:
        """Refuse fields the chosen ``setting`` ignores when set explicitly to a non-default."""
        for name, used in reads.items():
            if used or name not in self.model_fields_set:
                continue
            value = getattr(self, name)
            if value != type(self).model_fields[name].default:
                raise ValueError(
                    f"{section}.{name}={quote(value, 40)} is ignored under {setting}; remove it"
                )
