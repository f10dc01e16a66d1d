"""Classifier models: typed questions answered with probabilities.

A port of AgentScope Python's ``agentscope.classifier`` interface. A classifier model
is not a chat model: it is given evidence (``state``: text, a JSON object or content
blocks) and named, typed questions, and answers each with probabilities instead of
text:

* :class:`BinaryQuestion` -> :class:`BinaryAnswer` (the probability of "true");
* :class:`ChoiceQuestion` -> :class:`ChoiceAnswer` (one of the named alternatives, its
  confidence and every alternative's probability);
* :class:`ScoreQuestion` -> :class:`ScoreAnswer` (the expected level on an ordered
  scale, with each level's probability);
* any of them may be refused (:class:`RefusalAnswer`), independently of the others.

Subclass :class:`ClassifierModelBase` and implement ``async __call__`` for a provider
(AgentScope ships a TypeSafe "Jev" and an OpenAI Decisions adapter; rx_agent ships
none). :class:`~rx_agent.ModelRouterMiddleware` takes a classifier model as its routing
model: the candidates become one :class:`ChoiceQuestion`.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import Field

from .._record import Record, new_id, now
from ..message import ChatUsage, ContentBlock

__all__ = [
    "BinaryAnswer",
    "BinaryCriteria",
    "BinaryQuestion",
    "ChoiceAnswer",
    "ChoiceQuestion",
    "ClassifierAnswer",
    "ClassifierModelBase",
    "ClassifierQuestion",
    "ClassifierResponse",
    "ClassifierState",
    "RefusalAnswer",
    "ScoreAnswer",
    "ScoreQuestion",
]

ClassifierState = str | dict[str, Any] | list[ContentBlock]
"""The evidence a classifier judges: text, a JSON object or text and image blocks."""

# -- questions ------------------------------------------------------------------------


class BinaryCriteria(Record):
    """What makes the answer to a binary question true, or false."""

    true: str | None = None
    false: str | None = None


class BinaryQuestion(Record):
    """A yes/no question; answered with the probability of yes."""

    type: Literal["binary"] = "binary"
    instructions: str | None = None
    criteria: BinaryCriteria | None = None


class ChoiceQuestion(Record):
    """Pick one of ``criteria``'s keys; each value says when to pick it."""

    type: Literal["choice"] = "choice"
    instructions: str | None = None
    criteria: dict[str, str] = Field(min_length=1)


class ScoreQuestion(Record):
    """A rating on an ordered scale: ``criteria`` labels the levels, lowest first
    (level ``i`` is ``criteria[i]``)."""

    type: Literal["score"] = "score"
    instructions: str | None = None
    criteria: list[str] = Field(min_length=2)


ClassifierQuestion = Annotated[
    BinaryQuestion | ChoiceQuestion | ScoreQuestion, Field(discriminator="type")
]

# -- answers --------------------------------------------------------------------------


class BinaryAnswer(Record):
    """The probability (0 to 1) that the answer is true."""

    type: Literal["binary_answer"] = "binary_answer"
    probability: float = Field(ge=0.0, le=1.0)


class ChoiceAnswer(Record):
    """The alternative with the highest probability, the provider's confidence in it,
    and every requested alternative's probability."""

    type: Literal["choice_answer"] = "choice_answer"
    choice: str
    confidence: float = Field(ge=0.0, le=1.0)
    probabilities: dict[str, float] = Field(default_factory=dict)


class ScoreAnswer(Record):
    """The probability-weighted expected level, the provider's confidence, each
    level's label (``legend``) and probability."""

    type: Literal["score_answer"] = "score_answer"
    score: float
    confidence: float = Field(ge=0.0, le=1.0)
    legend: dict[int, Any] = Field(default_factory=dict)
    probabilities: dict[int, float] = Field(default_factory=dict)


class RefusalAnswer(Record):
    """The classifier declined this question (the other answers stand)."""

    type: Literal["refusal_answer"] = "refusal_answer"


ClassifierAnswer = Annotated[
    BinaryAnswer | ChoiceAnswer | ScoreAnswer | RefusalAnswer, Field(discriminator="type")
]


class ClassifierResponse(Record):
    """A classifier's answers, keyed by question name (``content``; ``answers`` is
    the same mapping under AgentScope's older name)."""

    type: Literal["classifier_response"] = "classifier_response"
    model: str
    content: dict[str, ClassifierAnswer] = Field(default_factory=dict)
    usage: ChatUsage | None = None
    id: str = Field(default_factory=new_id)
    created_at: float = Field(default_factory=now)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @property
    def answers(self) -> dict[str, Any]:
        return self.content


# -- the model ------------------------------------------------------------------------


class ClassifierModelBase(abc.ABC):
    """A model that answers typed questions about evidence with probabilities.

    ``model`` names the concrete model (as ``ChatModel.name`` does); subclasses
    implement :meth:`__call__`.
    """

    def __init__(self, model: str) -> None:
        if not isinstance(model, str) or not model.strip():
            raise ValueError(f"a classifier model needs a non-blank model name, got {model!r}")
        self.model = model

    @property
    def name(self) -> str:
        return self.model

    @abc.abstractmethod
    async def __call__(
        self,
        state: ClassifierState,
        questions: Mapping[str, BinaryQuestion | ChoiceQuestion | ScoreQuestion],
        **kwargs: Any,
    ) -> ClassifierResponse:
        """Answer every question in ``questions`` about ``state``; ``kwargs`` are the
        provider's options."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r})"
