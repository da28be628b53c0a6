"""The transformers releases read for `generate`'s memory, and the model types each one gives a cache object or a
`num_logits_to_keep` argument (`profiles/transformers.py` turns them into rules).

Every list was read from the release's wheel (`pip download transformers==X --no-deps`, models/*/modeling_*.py and the
`model_type` of the configuration_*.py beside it):

- `CACHE_CLASS_*`: the models whose PreTrainedModel sets `_supports_cache_class = True`. From 4.42 `generate` gives
  them a `DynamicCache` it keeps from step to step ("Use DynamicCache() instance by default. This will avoid back and
  forth from legacy format that keeps copying the cache thus using much more memory": generation/utils.py:1775-1777
  at 4.42.0, :1852-1854 at 4.44.2, :1602 at 4.45.0, :1767 at 4.46.0); jamba and zamba are kept out of that default
  (`_supports_default_dynamic_cache`, :1446-1454 at 4.42.0, :1646-1658 at 4.46.0) but carry their own hybrid cache
  object across steps, so they keep one cache too. Every other model gets the legacy tuple cache.
- `LOGITS_TO_KEEP_*`: the models whose forward takes `num_logits_to_keep` (the signature `num_logits_to_keep: int =
  0`, and jamba's `Optional[Union[int, None]]`); from 4.45 `generate` sets it to 1 for them (generation/utils.py:
  1900-1904 at 4.45.0, :2062-2066 at 4.46.0), so the prefill computes the last position's logits only. 4.42.0 and
  4.44.2 have no such model (nothing in `generate` sets it).

The lists grow from release to release (each is a subset of the next); a model type absent from a list gets the legacy
rule of that release. They are data (`transformers_releases.json`), as model type names belong to the HF adapter
(tests/engine/test_adapter_boundary.py): the profile only compares a spec's model_type with them.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

DATA = Path(__file__).with_name("transformers_releases.json")


@cache
def _releases() -> dict[str, dict[str, list[str]]]:
    data: dict[str, dict[str, list[str]]] = json.loads(DATA.read_text())["releases"]
    return data


def cache_class(release: str) -> frozenset[str]:
    """The model types a read release's generate keeps one cache object for."""
    return frozenset(_releases()[release].get("cache_class", ()))


def logits_to_keep(release: str) -> frozenset[str]:
    """The model types whose forward takes num_logits_to_keep in a read release."""
    return frozenset(_releases()[release].get("logits_to_keep", ()))
