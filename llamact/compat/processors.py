"""llama-cpp-python's logits processors, stopping criteria and saved state.

A logits processor is ``f(input_ids, scores) -> scores``: llamact runs the same callables before
sampling (``GenerationParams.logits_processors``; ``input_ids`` the prompt and the tokens so far, a
read-only int32 array, ``scores`` the float32 logits row). A stopping criterion is
``f(input_ids, scores) -> bool``, asked after each generated token with the logits that token was
sampled from; True ends the completion with finish reason "stop".
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

LogitsProcessor = Callable[[npt.NDArray[np.intc], npt.NDArray[np.single]], npt.NDArray[np.single]]
StoppingCriteria = Callable[[npt.NDArray[np.intc], npt.NDArray[np.single]], bool]


class LogitsProcessorList(list[LogitsProcessor]):
    """Processors run in order, each on the previous one's scores."""

    def __call__(self, input_ids: npt.NDArray[np.intc], scores: npt.NDArray[np.single]) -> npt.NDArray[np.single]:
        for processor in self:
            scores = processor(input_ids, scores)
        return scores


class StoppingCriteriaList(list[StoppingCriteria]):
    """Stop when any criterion says so."""

    def __call__(self, input_ids: npt.NDArray[np.intc], logits: npt.NDArray[np.single]) -> bool:
        return any(criterion(input_ids, logits) for criterion in self)


class LogitsRecorder:
    """A logits processor that keeps the last row it saw (a copy), for the stopping criteria."""

    def __init__(self) -> None:
        self.row: npt.NDArray[np.single] = np.zeros(0, dtype=np.single)

    def __call__(self, input_ids: npt.NDArray[np.intc], scores: npt.NDArray[np.single]) -> None:
        self.row = np.array(scores, copy=True)


class LlamaState:
    """What ``Llama.save_state()`` returns: the context's state file, in memory, and its tokens."""

    def __init__(self, data: bytes, input_ids: tuple[int, ...], n_tokens: int) -> None:
        self.llama_state = data
        self.llama_state_size = len(data)
        self.input_ids = np.array(input_ids, dtype=np.intc)
        self.n_tokens = n_tokens

    def __repr__(self) -> str:
        return f"LlamaState(n_tokens={self.n_tokens}, size={self.llama_state_size})"
