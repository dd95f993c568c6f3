"""A configuration given to Python, in the library's JSON form."""

from __future__ import annotations

import json
import numbers
import os
import sys
from typing import Any, Mapping, Optional, Union

from ._errors import ConfigError

#: A configuration: a dict (the JSON schema as Python values), or a JSON string.
ConfigLike = Union[Mapping[str, Any], str, bytes]

def _json_value(value: Any) -> Any:
    """What ``json.dumps`` cannot write by itself: paths, numpy scalars and
    dtypes."""
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, bool):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        try:
            return numpy.dtype(value).name
        except TypeError:
            pass
    raise TypeError(f"a {type(value).__name__} is not a configuration value")


def _config_json(config: Optional[ConfigLike], kwargs: Mapping[str, Any]) -> str:
    """The configuration in the library's JSON form."""
    if config is None:
        if not kwargs:
            raise ConfigError(
                "config: no configuration given: pass a dict, a JSON string or keyword "
                "arguments (dtype=..., dimensions=[...], store={...})"
            )
        config = dict(kwargs)
    elif kwargs:
        raise ConfigError(
            f"config: give the configuration as one dict or JSON string, or as keyword "
            f"arguments, not both (keywords: {', '.join(sorted(kwargs))})"
        )
    if isinstance(config, bytes):
        config = config.decode("utf-8", errors="replace")
    if isinstance(config, str):
        return config
    if not isinstance(config, Mapping):
        raise ConfigError(
            f"config: expected a dict, a JSON string or keyword arguments, not "
            f"{type(config).__name__}"
        )
    try:
        return json.dumps(dict(config), default=_json_value)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"config: {e}") from None
