"""Cost of model usage from a price table kept in configuration.

Two token-accounting conventions exist. Anthropic-style usage
reports cache reads and writes *beside* the input tokens; the OpenTelemetry
GenAI conventions count cached tokens *inside* ``gen_ai.usage.input_tokens``.
:class:`Usage` says which one it holds, so no token is priced twice.
"""

from __future__ import annotations

from collections.abc import Mapping

from msgspec import Struct

from .config import Prices

#: The largest token count read from one model call (a trillion): no real call comes near it, and a bound keeps a
#: hostile or broken count (1e308) from making a trace's cost infinite. Larger counts are read as this one, so such
#: a call still exceeds any cost budget.
MAX_TOKENS = 10**12


class Usage(Struct, frozen=True, gc=False):
    """Token counts of one model call.

    Attributes:
        input_tokens: input tokens as reported.
        output_tokens: output tokens.
        cache_read_tokens: input tokens served from the prompt cache.
        cache_write_tokens: input tokens written to the prompt cache.
        cache_included_in_input: True when ``input_tokens`` already counts the cached tokens (GenAI conventions).
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cache_included_in_input: bool = False

    @classmethod
    def from_anthropic(cls, usage: Mapping[str, int]) -> Usage:
        """Read a usage dict in the Anthropic API's spelling, cache tokens beside the input."""
        return cls(
            input_tokens=usage.get("input_tokens", 0),
            output_tokens=usage.get("output_tokens", 0),
            cache_read_tokens=usage.get("cache_read_input_tokens", 0),
            cache_write_tokens=usage.get("cache_creation_input_tokens", 0),
        )

    @property
    def uncached_input_tokens(self) -> int:
        """Input tokens billed at the plain input price."""
        if self.cache_included_in_input:
            return max(0, self.input_tokens - self.cache_read_tokens - self.cache_write_tokens)
        return self.input_tokens

    @property
    def total_tokens(self) -> int:
        """Every token of the call, each counted once."""
        return self.uncached_input_tokens + self.cache_read_tokens + self.cache_write_tokens + self.output_tokens


def cost_usd(usage: Usage, prices: Prices) -> float:
    """The USD cost of ``usage`` at ``prices`` (USD per million tokens)."""
    return (
        usage.uncached_input_tokens * prices.input
        + usage.output_tokens * prices.output
        + usage.cache_read_tokens * prices.cache_read
        + usage.cache_write_tokens * prices.cache_write
    ) / 1_000_000


class CostTotal(Struct, frozen=True, gc=False):
    """Running cost of a trace: priced USD, and tokens that no price covered.

    An unknown model is never priced as zero; its tokens are kept apart so a
    report can say the cost is incomplete.
    """

    usd: float = 0.0
    unpriced_tokens: int = 0
    unpriced_models: frozenset[str] = frozenset()

    def add(self, model: str | None, usage: Usage, prices: Mapping[str, Prices]) -> CostTotal:
        """Return the total after one more model call."""
        table = prices.get(model) if model else None
        if table is None:
            name = model or "<unknown>"
            models = self.unpriced_models
            # The same few models recur in every call of a trace: keep the set rather than copy it.
            return CostTotal(self.usd, self.unpriced_tokens + usage.total_tokens,
                             models if name in models else models | {name})
        return CostTotal(self.usd + cost_usd(usage, table), self.unpriced_tokens, self.unpriced_models)

