"""llama.cpp's own GBNF parser and matcher, asked through the native binding (for cross-checks).

What enters: GBNF text and a loaded model (a vocab-only load is enough: grammars need the
vocabulary for ``<text>`` token references and for matching token pieces).

What leaves: :func:`llama_cpp_accepts_grammar` says whether llama.cpp builds a grammar sampler from
the text, with its reason when it does not; :func:`llama_cpp_grammar_decisions` feeds a string to
llama.cpp's matcher as the model's tokens and reports (viable prefix, accepted).

What is raised: nothing for a grammar llama.cpp refuses (that is the answer); LlamaException
subclasses for a model that cannot be used.

Do not pass grammars llama.cpp cannot finish building: ``{m,n}`` with m > n (its parser then loops
about 2**64 times) or left recursion hidden behind a rule that is empty only through another rule
(its stack builder then never ends). ``parse_gbnf`` and ``GbnfAcceptor`` reject both.
"""

from __future__ import annotations

from llamact.errors import LlamaInferenceException
from llamact.native.model import Model
from llamact.native.sampler import Grammar, Greedy, SamplerChain

__all__ = ["llama_cpp_accepts_grammar", "llama_cpp_grammar_decisions"]


def llama_cpp_accepts_grammar(grammar_text: str, model: Model, root: str = "root") -> tuple[bool, str]:
    """``(True, "")`` when llama.cpp builds a grammar sampler for ``grammar_text``, else
    ``(False, reason)`` with the reason llama.cpp printed or logged."""
    try:
        chain = SamplerChain(model, [Grammar(grammar_text, root=root, front_end_check=False), Greedy()])
    except LlamaInferenceException as exc:
        return False, exc.message
    chain.close()
    return True, ""


def llama_cpp_grammar_decisions(grammar_text: str, model: Model, text: str, root: str = "root") -> tuple[bool, bool]:
    """``(viable, accepted)`` for ``text`` under llama.cpp's matcher: ``viable`` when every token of
    ``text`` (tokenized without special tokens) is allowed in turn, ``accepted`` when end of
    generation is then allowed too. Raises LlamaInferenceException if the grammar is refused or
    ``text`` does not survive tokenization (detokenizing its tokens gives other text)."""
    vocab = model.vocab
    tokens = vocab.tokenize(text, add_special=False, parse_special=False)
    if vocab.detokenize(tokens) != text:
        # e.g. SmolLM2's vocabulary has no token for the UTF-8 lead bytes F1 and F2: llama.cpp's
        # tokenizer drops them, and the matcher would be judging different text
        raise LlamaInferenceException("the text does not survive tokenization with this model's vocabulary",
                                      {"text": text})
    chain = SamplerChain(model, [Grammar(grammar_text, root=root, front_end_check=False), Greedy()])
    try:
        for token in tokens:
            try:
                chain.accept(token)
            except LlamaInferenceException:
                return False, False
        eog = vocab.eos if vocab.eos is not None else vocab.eot
        if eog is None:  # pragma: no cover - every model llamact tests with has one
            raise LlamaInferenceException("the model has no end-of-generation token to test acceptance with")
        try:
            chain.accept(eog)
        except LlamaInferenceException:
            return True, False
        return True, True
    finally:
        chain.close()
