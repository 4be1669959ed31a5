"""Cost from the price table: the worked price example's numbers, the GenAI token convention and unknown models."""

from __future__ import annotations

import pytest

from otel_loopguard.core.config import Prices
from otel_loopguard.core.cost import CostTotal, Usage, cost_usd

LISTED_PRICES = Prices(input=5.00, output=25.00, cache_read=0.50, cache_write=6.25)


def test_price_example_first_call_with_cache_write() -> None:
    """300 in, 400 out and 20,000 cache-write tokens cost $0.1365."""
    first = Usage.from_anthropic({"input_tokens": 300, "output_tokens": 400, "cache_creation_input_tokens": 20_000})
    assert f"${cost_usd(first, LISTED_PRICES):.4f}" == "$0.1365"
    assert cost_usd(first, LISTED_PRICES) == pytest.approx(0.1365, abs=1e-12)


def test_price_example_later_call_with_cache_read() -> None:
    """300 in, 400 out and 20,000 cache-read tokens cost $0.0215."""
    later = Usage.from_anthropic({"input_tokens": 300, "output_tokens": 400, "cache_read_input_tokens": 20_000})
    assert f"${cost_usd(later, LISTED_PRICES):.4f}" == "$0.0215"


def test_price_example_plain_prices() -> None:
    """2,000 in and 1,000 out at $3/$15 per million round to 0.021."""
    usage = Usage.from_anthropic({"input_tokens": 2000, "output_tokens": 1000})
    assert round(cost_usd(usage, Prices(input=3.0, output=15.0)), 3) == 0.021


def test_genai_convention_counts_cache_inside_input() -> None:
    """With the GenAI convention cached tokens are part of input_tokens and are not priced twice."""
    genai = Usage(input_tokens=20_300, output_tokens=400, cache_read_tokens=20_000, cache_included_in_input=True)
    anthropic = Usage(input_tokens=300, output_tokens=400, cache_read_tokens=20_000)
    assert genai.uncached_input_tokens == 300
    assert cost_usd(genai, LISTED_PRICES) == pytest.approx(cost_usd(anthropic, LISTED_PRICES))
    assert genai.total_tokens == anthropic.total_tokens == 20_700


def test_genai_convention_never_goes_negative() -> None:
    """Inconsistent counts (cache larger than input) price the uncached input at zero, not below."""
    odd = Usage(input_tokens=100, cache_read_tokens=500, cache_included_in_input=True)
    assert odd.uncached_input_tokens == 0
    assert cost_usd(odd, LISTED_PRICES) == pytest.approx(500 * 0.5 / 1e6)


def test_unknown_model_is_unpriced_not_free() -> None:
    """Tokens of a model without a price are kept apart as unpriced, never priced at zero silently."""
    total = CostTotal()
    total = total.add("known", Usage(input_tokens=1000, output_tokens=1000), {"known": Prices(1.0, 2.0)})
    total = total.add("mystery-model", Usage(input_tokens=700, output_tokens=300), {"known": Prices(1.0, 2.0)})
    total = total.add(None, Usage(input_tokens=5), {"known": Prices(1.0, 2.0)})
    assert total.usd == pytest.approx(0.003)
    assert total.unpriced_tokens == 1005
    assert total.unpriced_models == frozenset({"mystery-model", "<unknown>"})


def test_cost_total_is_immutable() -> None:
    """Adding usage returns a new total and leaves the old one unchanged."""
    start = CostTotal()
    after = start.add("m", Usage(input_tokens=1_000_000), {"m": Prices(1.0, 1.0)})
    assert (start.usd, after.usd) == (0.0, 1.0)
