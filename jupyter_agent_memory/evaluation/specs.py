"""Models and judges rebuilt from the plain data an export keeps (``model_spec``,
``judge_spec``), for ``rerun`` and ``Scenario.from_dict``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .expectations import ABSTENTION_JUDGE_PROMPT, JUDGE_PROMPT, LongMemEvalJudge, ModelJudge
from .models import OpenAIChatModel
from .policies import FactsPolicy, JournalPolicy

__all__ = ["judge_from_spec", "model_from_spec"]


def model_from_spec(spec: dict[str, Any], *, api_key: str | None = None) -> Any:
    """The model ``model_spec`` described, or None when it cannot be rebuilt from data. An
    ``OpenAIChatModel`` gets ``api_key`` (keys are never exported; default: ``OPENAI_API_KEY``).
    """
    if not spec.get("rebuild"):
        return None
    kind = spec.get("kind")
    if kind == "openai":
        return OpenAIChatModel(
            spec["base_url"], api_key, spec["model"], timeout=spec["timeout"],
            max_retries=spec["max_retries"], retry_wait=spec["retry_wait"],
            tool_choice=spec["tool_choice"], **spec.get("create_kwargs", {}),
        )
    if kind == "facts-policy":
        return FactsPolicy(spec["name"])
    if kind == "journal-policy":
        return JournalPolicy(spec["name"], limit=spec["limit"])
    return None


def judge_from_spec(spec: dict[str, Any], judges: Mapping[str, Any] | None = None) -> Any:
    """The judge ``judge_spec`` described: rebuilt from its model's spec, or looked up by
    name (its model's name, or the function's) in ``judges``; ``ValueError`` otherwise."""
    judges = judges or {}
    kind = spec.get("kind")
    if kind == "function":
        name = str(spec.get("name"))
        if name not in judges:
            raise ValueError(f"the judge function {name!r} must be given again: judges={{...}}")
        return judges[name]
    model_data = spec.get("model") or {}
    model = judges.get(str(model_data.get("name")))
    if model is None:
        model = model_from_spec(model_data)
    if model is None:
        raise ValueError(f"the judge model {model_data.get('name')!r} cannot be rebuilt from "
                         "the export: give it again with judges={name: model}")
    if kind == LongMemEvalJudge.kind:
        return LongMemEvalJudge(model)
    return ModelJudge(model, spec.get("prompt", JUDGE_PROMPT),
                      spec.get("abstention_prompt", ABSTENTION_JUDGE_PROMPT))
