"""The ``variants:`` section: each named configuration family, its ``matrix`` of values, the ``include`` and
``exclude`` entries that add and drop combinations, and its template fields (the service templates' values).
What the variants must agree with elsewhere (templates, baselines, sizes) is checked in ``checks``."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from orchestrator.experiment.common import Scalar

__all__ = ["Variant"]


class Variant(BaseModel):
    """A named configuration family. Keys other than matrix/include/exclude are template fields."""

    model_config = ConfigDict(extra="allow")

    matrix: dict[str, list[Scalar]] = Field(default_factory=dict)
    include: list[dict[str, Scalar]] = Field(default_factory=list)
    exclude: list[dict[str, Scalar]] = Field(default_factory=list)
    #: This variant's deployment size in GPUs (a drafter that needs more memory), over the experiment's.
    gpus_per_deployment: int | None = Field(None, ge=1, le=64)

    @field_validator("matrix")
    @classmethod
    def _non_empty(cls, value: dict[str, list[Scalar]]) -> dict[str, list[Scalar]]:
        for key, values in value.items():
            if not values:
                raise ValueError(f"matrix key {key!r} has an empty list: it would expand to no deployment")
            if len({repr(v) for v in values}) != len(values):
                raise ValueError(f"matrix key {key!r} lists a value twice")
        return value

    @model_validator(mode="after")
    def _field_values(self) -> Variant:
        for key, value in (self.model_extra or {}).items():
            if value is None:
                self.model_extra[key] = ""  # type: ignore[index]
            elif isinstance(value, dict | list):
                raise ValueError(f"template field {key!r} must be a string or number, got a {type(value).__name__}")
        return self

    @property
    def template_fields(self) -> dict[str, str]:
        return {k: v if isinstance(v, str) else _scalar_text(v) for k, v in (self.model_extra or {}).items()}


def _scalar_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
