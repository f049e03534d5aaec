"""The synthetic LongMemEval-format sample shipped with the package, and the code that makes it.

``data/longmemeval_sample.json`` is exactly ``sample_text()`` (a test checks it); ``python -m
jupyter_agent_memory.evaluation.sample [PATH]`` rewrites (or prints) it. Six questions cover
extraction (user, assistant), updates, temporal reasoning and abstention; seeded, so the same
on every machine.
"""

from __future__ import annotations

import json
import random
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

__all__ = ["build_sample", "sample_text"]

_FILLERS = [
    [("Can you give me a quick tip for cooking rice?",
      "Rinse it first, then use about 1.5 cups of water per cup of rice."),
     ("Thanks, I will try that tonight.", "Enjoy your dinner!")],
    [("What is a good stretch after running?",
      "A standing quad stretch: hold each side for thirty seconds.")],
    [("Suggest a name for a book club.", "How about 'Chapter and Verse'?"),
     ("Nice, a bit formal though.", "Then 'Page Turners' might fit better.")],
    [("How do I keep basil alive on a windowsill?",
      "Give it plenty of light, water when the soil is dry, and pinch off the flowers.")],
    [("Explain what a haiku is in one sentence.",
      "A three-line poem of five, seven and five syllables.")],
    [("Any idea for a rainy Sunday?", "A museum visit, or a long film you have put off.")],
]


def _date(moment: datetime) -> str:
    return f"{moment:%Y/%m/%d} ({moment:%a}) {moment:%H:%M}"


# Each question, with its evidence sessions as (user, assistant) pairs, the first pair being the
# evidence turn; they go, in order, between two filler sessions.
_QUESTIONS: list[dict[str, Any]] = [
    {"question_id": "sample_user_01", "question_type": "single-session-user",
     "question": "What is the name of my cat?", "answer": "Miso", "evidence": [
         [("I adopted a cat last month, her name is Miso.",
           "Miso is a lovely name! How is she settling in?"),
          ("She sleeps on my keyboard all day.", "Classic cat behaviour.")]]},
    {"question_id": "sample_assistant_01", "question_type": "single-session-assistant",
     "question": "Which wine did you recommend for my mushroom risotto?",
     "answer": "Pinot Noir", "evidence": [
         [("I am cooking a mushroom risotto for friends on Saturday.",
           "Sounds great. A light Pinot Noir goes well with mushroom risotto."),
          ("Perfect, thank you.", "Have a nice dinner!")]]},
    {"question_id": "sample_update_01", "question_type": "knowledge-update",
     "question": "Which city do I live in now?", "answer": "Lyon", "evidence": [
         [("I live in Paris, close to the Canal Saint-Martin.", "A beautiful part of the city.")],
         [("Big news: I moved to Lyon last week for my new job.",
           "Congratulations on the move and the job!")]]},
    {"question_id": "sample_update_02", "question_type": "knowledge-update",
     "question": "Which units do I prefer for recipes?", "answer": "imperial", "evidence": [
         [("I prefer metric units for recipes, grams and litres please.",
           "Noted, I will use grams and litres.")],
         [("I changed my mind: I now prefer imperial units for recipes, cups and ounces.",
           "Understood, cups and ounces from now on.")]]},
    {"question_id": "sample_temporal_01", "question_type": "temporal-reasoning",
     "question": "On which date did I renew my passport?", "answer": "{date0}", "evidence": [
         [("Renewed my passport at the town hall this morning.",
           "Good to have that done before travelling.")]]},
    {"question_id": "sample_cat_02_abs", "question_type": "single-session-user",
     "question": "What is the name of my dog?", "answer": "You never mentioned a dog.",
     "evidence": [[("My cat Miso knocked a glass off the table again.",
                    "Cats do love gravity experiments.")]]},
]


def build_sample(seed: int = 0) -> list[dict[str, Any]]:
    """The sample's items in LongMemEval's format (deterministic for a given ``seed``)."""
    rng = random.Random(seed)
    items = []
    for spec in _QUESTIONS:
        first, last = rng.sample(range(len(_FILLERS)), 2)
        # Fillers first and last; evidence sessions in order in between, so an update always
        # comes after what it replaces.
        plan = [(_FILLERS[first], False), *((pairs, True) for pairs in spec["evidence"]),
                (_FILLERS[last], False)]
        moment = datetime(2023, 3, 1, 9, 0) + timedelta(days=rng.randrange(0, 20))
        ids, dates, gold, evidence_dates = [], [], [], []
        sessions: list[list[dict[str, Any]]] = []
        for number, (pairs, evidence) in enumerate(plan, 1):
            moment += timedelta(days=rng.randrange(2, 9), minutes=rng.randrange(0, 600))
            ids.append(f"{spec['question_id']}_s{number}")
            dates.append(_date(moment))
            sessions.append([{"role": role, "content": text} for pair in pairs
                             for role, text in zip(("user", "assistant"), pair, strict=True)])
            if evidence:
                sessions[-1][0]["has_answer"] = True  # the first pair is the evidence turn
                gold.append(ids[-1])
                evidence_dates.append(moment)
        question_moment = moment + timedelta(days=rng.randrange(3, 12), hours=2)
        date0 = f"{evidence_dates[0]:%Y-%m-%d}" if evidence_dates else ""
        item = {key: spec[key] for key in ("question_id", "question_type", "question")}
        item.update(answer=spec["answer"].format(date0=date0), question_date=_date(question_moment),
                    haystack_session_ids=ids, haystack_dates=dates, haystack_sessions=sessions,
                    # LongMemEval lists no evidence for abstention questions.
                    answer_session_ids=[] if spec["question_id"].endswith("_abs") else gold)
        items.append(item)
    return items


def sample_text(seed: int = 0) -> str:
    """``build_sample(seed)`` as the JSON text shipped with the package."""
    return json.dumps(build_sample(seed), ensure_ascii=False, indent=1) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Write the sample to the path given, or print it."""
    args = sys.argv[1:] if argv is None else argv
    if args:
        Path(args[0]).write_text(sample_text(), encoding="utf-8")
    else:
        sys.stdout.write(sample_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
