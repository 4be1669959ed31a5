"""A configuration can be copied and pickled, and its signature key stays out of ``vars()`` and of pickles."""

from __future__ import annotations

import copy
import pickle

from otel_loopguard.core.config import LoopGuardConfig, Prices, ToolSettings

KEY = b"0123456789abcdef"


def _config() -> LoopGuardConfig:
    return LoopGuardConfig(signature_key=KEY, window=12, prices={"model-a": Prices(input=1.0, output=2.0)},
                           tools={"poll": ToolSettings(exempt=True)}, versions={"prompt": "v3"},
                           conventions={"acme": {"when": {"acme.kind": "tool"}}})


def test_deepcopy_of_the_default_and_a_full_configuration() -> None:
    """copy.deepcopy works (it raised on the read-only mappings) and keeps every setting and the key."""
    assert copy.deepcopy(LoopGuardConfig()) == LoopGuardConfig()
    config = _config()
    copied = copy.deepcopy(config)
    assert copied == config and copied is not config
    assert copied.signature_key == KEY and copied.prices["model-a"].output == 2.0
    assert copy.copy(config) == config


def test_signature_key_is_not_in_vars() -> None:
    """The key is readable as an attribute but absent from the instance dictionary and its values."""
    config = _config()
    assert config.signature_key == KEY
    assert "signature_key" not in vars(config)
    assert KEY not in vars(config).values()


def test_a_pickle_holds_the_settings_but_not_the_key() -> None:
    """Unpickled, the configuration has every setting but no signature key; the key's bytes are not in the pickle."""
    config = _config()
    data = pickle.dumps(config)
    assert KEY not in data
    restored = pickle.loads(data)
    assert restored.signature_key is None
    assert restored.window == 12 and restored.versions == {"prompt": "v3"}
    assert restored.tools["poll"].exempt is True
    assert restored.conventions == {"acme": {"when": {"acme.kind": "tool"}}}
